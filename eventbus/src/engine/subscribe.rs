//! Subscribing one subscriber: options checked, a mailbox or a place in the topic's log, and
//! the consumer that takes from it (a thread worker, a task worker or a stream). Groups are
//! `group.rs`, observers `observer.rs`.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::delivery::core::{Consumer, SubscriptionCore};
use crate::delivery::group::SharedRun;
use crate::delivery::mailbox::mailbox;
use crate::delivery::priority;
use crate::error::SubscribeError;
use crate::message::Message;
use crate::options::Options;
use crate::options::Overflow;
use crate::options::Retention;
use crate::options::Start;
use crate::topic::Topic;
use crate::worker::thread::Run;
use crate::worker::{self, Context, Source};

use super::{is_group, subscription_name, typed, Engine, Entry, Launch, Slot};

/// Why `options` cannot have their priority on a subscription of `T` (named `topic`, keeping
/// a log if `retention`), if they cannot.
fn priority_refused<T: 'static>(
    options: &Options,
    topic: &'static str,
    retention: Option<Retention>,
) -> Option<String> {
    let priority = options.priority.as_ref()?;
    if let Err(written_for) = priority.check::<T>() {
        return Some(format!(
            "its priority takes `&{written_for}`, but it subscribes to `{topic}`: a priority \
             function takes a reference to the subscription's own topic"
        ));
    }
    if retention.is_some() {
        return Some(
            "it is a log topic (`#[topic(retain = ..)]`): its subscriptions read the one log \
             in topic order, and there is no mailbox to reorder; drop the priority, or the \
             topic's `retain`"
                .to_owned(),
        );
    }
    if is_group(options) {
        return Some(
            "`workers` and `key` make a consumer group, whose workers share a mailbox or keep \
             one order per key; a priority reorders one worker's mailbox: drop `workers` and \
             `key`, or the priority"
                .to_owned(),
        );
    }
    None
}

impl Engine {
    /// Starts a subscription of `T`: a mailbox, and a thread worker running `handler`. A
    /// group's workers take turns at `handler`, which is `FnMut`.
    pub(crate) fn subscribe<T: Topic>(
        &self,
        options: Options,
        handler: impl Run<T>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        if is_group(&options) {
            // Lock order: row 0, held across the handler; see engine/mod.rs.
            let turns = Mutex::new(handler);
            return self
                .subscribe_group(options, Arc::new(move |m: &Message<T>| (turns.lock())(m)));
        }
        self.subscribe_with(options, Consumer::Worker, |inbox, core, context| {
            worker::thread::spawn(inbox, core, context, handler)
        })
    }

    /// Starts a subscription of `T` whose handler its workers may call at once: a group if
    /// the options ask for one.
    pub(crate) fn subscribe_shared<T: Topic>(
        &self,
        options: Options,
        handler: SharedRun<T>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        if is_group(&options) {
            return self.subscribe_group(options, handler);
        }
        self.subscribe_with(options, Consumer::Worker, |inbox, core, context| {
            worker::thread::spawn(inbox, core, context, move |m: &Message<T>| handler(m))
        })
    }

    /// Starts a subscription of `T`: a mailbox, and a task worker running `handler` on the
    /// bus's runtime.
    #[cfg(feature = "tokio")]
    pub(crate) fn subscribe_task<T: Topic>(
        &self,
        options: Options,
        handler: impl worker::task::RunAsync<T>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        let Some(runtime) = self.runtime.get().cloned() else {
            return Err(SubscribeError::NoRuntime {
                name: subscription_name(&options, self.next_subscription.load(Relaxed)),
            });
        };
        self.subscribe_with(options, Consumer::Task, move |source, core, context| {
            worker::task::spawn(&runtime, source, core, context, handler);
            Ok(())
        })
    }

    /// Starts a subscription of `T` whose mailbox the caller consumes itself (a stream).
    #[cfg(feature = "tokio")]
    pub(crate) fn subscribe_stream<T: Topic>(
        &self,
        options: Options,
    ) -> Result<(Arc<SubscriptionCore>, Source<T>), SubscribeError> {
        let mut taken = None;
        let core = self.subscribe_with(options, Consumer::Caller, |source, _, _| {
            taken = Some(source);
            Ok(())
        })?;
        match taken {
            Some(source) => Ok((core, source)),
            None => unreachable!("a started subscription handed its mailbox over"),
        }
    }

    /// Starts a subscription of `T` whose mailbox `launch` hands to its consumer.
    pub(super) fn subscribe_with<T: Topic>(
        &self,
        options: Options,
        consumer: Consumer,
        launch: impl Launch<T>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        if is_group(&options) {
            // Groups are started by `group.rs`, with an `Fn` handler its workers share.
            return Err(SubscribeError::Group {
                name: subscription_name(&options, self.next_subscription.load(Relaxed)),
                topic: T::name(),
                why: "a stream cannot be a group, and an async group's workers run one `Fn` \
                      handler at once: use `subscribe_group_async`",
            });
        }
        let (topic, retention) = (T::name(), T::retention());
        self.subscribe_checked::<T, _>(topic, retention, options, 1, |this, id, options| {
            let name: Arc<str> = subscription_name(&options, id).into();
            this.start(id, name, options, consumer, launch)
        })
    }

    /// Checks `options` for a subscription of `T` (named `topic`, keeping a log if
    /// `retention`) with `mailboxes` mailboxes, then runs `start` with the subscription's id,
    /// counted as a subscribe a close waits for.
    pub(super) fn subscribe_checked<T: 'static, S>(
        &self,
        topic: &'static str,
        retention: Option<Retention>,
        mut options: Options,
        mailboxes: usize,
        start: S,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError>
    where
        S: FnOnce(&Self, u64, Options) -> Result<Arc<SubscriptionCore>, SubscribeError>,
    {
        let id = self.next_subscription.fetch_add(1, Relaxed);
        let name: Arc<str> = subscription_name(&options, id).into();
        if options.workers == 0 || options.workers > Options::MAX_WORKERS {
            return Err(SubscribeError::Workers {
                name: name.to_string(),
                workers: options.workers,
            });
        }
        if let Some(Err(written_for)) = options.key.as_ref().map(|k| k.check::<T>()) {
            return Err(SubscribeError::Key {
                name: name.to_string(),
                topic,
                written_for,
            });
        }
        if let Some(why) = priority_refused::<T>(&options, topic, retention) {
            return Err(SubscribeError::Priority {
                name: name.to_string(),
                topic,
                why,
            });
        }
        if options.capacity == 0 || options.capacity > Options::MAX_CAPACITY {
            return Err(SubscribeError::Capacity {
                name: name.to_string(),
                capacity: options.capacity,
            });
        }
        if let Some(Err(written_for)) = options.filter.as_ref().map(|f| f.check::<T>()) {
            return Err(SubscribeError::Filter {
                name: name.to_string(),
                topic,
                written_for,
            });
        }
        match retention {
            None if options.start != Start::Now => {
                return Err(SubscribeError::NoLog {
                    name: name.to_string(),
                    topic,
                })
            }
            Some(_) if options.overflow == Overflow::DropNewest => {
                return Err(SubscribeError::DropNewestOnLog {
                    name: name.to_string(),
                    topic,
                })
            }
            // A `Block` subscription on a log is at most the log behind: it is never lapped.
            Some(retention) => options.capacity = options.capacity.min(retention.messages),
            None => {}
        }
        // A mailbox allocates every slot up front; an allocation that fails would abort the
        // process, so make sure now that it can succeed.
        if Vec::<Slot>::new()
            .try_reserve_exact(options.capacity.saturating_mul(mailboxes))
            .is_err()
        {
            return Err(SubscribeError::OutOfMemory {
                name: name.to_string(),
                capacity: options.capacity,
            });
        }
        // Counted, so that a close cannot finish half-way through a subscribe.
        if !self.lifecycle.begin_subscribe() {
            return Err(SubscribeError::Closed {
                name: name.to_string(),
            });
        }
        let started = start(self, id, options);
        self.lifecycle.end_subscribe();
        started
    }

    pub(super) fn start<T: Topic>(
        &self,
        id: u64,
        name: Arc<str>,
        options: Options,
        consumer: Consumer,
        launch: impl Launch<T>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        let topic = self.topic::<T>();
        let typed = typed::<T>(&*topic);
        let context = Context {
            bus: self.id,
            lifecycle: Arc::clone(&self.lifecycle),
            dead_letters: Arc::clone(&self.dead_letters),
        };
        let spawn_failed = |core: &SubscriptionCore, source| {
            self.lifecycle.finished(core);
            SubscribeError::Spawn {
                name: name.to_string(),
                source,
            }
        };
        let core = if let Some(log) = typed.log() {
            let (capacity, overflow, from) = (options.capacity, options.overflow, options.start);
            let lifecycle = Arc::clone(&self.lifecycle);
            let closing = crate::delivery::log::Closing {
                stop: self.lifecycle.stop_signal().clone(),
                poke: Box::new(move || lifecycle.poke()),
            };
            let by_task = consumer != Consumer::Worker;
            let reader = crate::delivery::log::reader(
                log,
                id,
                capacity,
                overflow,
                by_task,
                closing,
                |retirer| {
                    SubscriptionCore::new(
                        id,
                        Arc::clone(&name),
                        T::name(),
                        options,
                        consumer,
                        retirer,
                    )
                },
            );
            let core = Arc::clone(reader.core());
            self.lifecycle.started(Arc::clone(&core));
            // Joined before its worker starts, which then finds its start position set.
            reader.join(from);
            if let Err(source) = launch(Source::Log(reader), Arc::clone(&core), context) {
                log.remove(id);
                core.retire();
                return Err(spawn_failed(&core, source));
            }
            core
        } else {
            // A task's mailbox announces every arrival (see `mailbox.rs`).
            let by_task = consumer != Consumer::Worker;
            let (capacity, handouts) = (options.capacity, typed.handouts());
            let priority = options.priority.clone();
            let new_core = |retirer| {
                SubscriptionCore::new(id, Arc::clone(&name), T::name(), options, consumer, retirer)
            };
            let (outbox, source) = match priority {
                None => {
                    let (outbox, inbox) = mailbox(capacity, handouts, by_task, new_core);
                    (outbox, Source::Mailbox(inbox))
                }
                Some(priority) => {
                    let (outbox, inbox) =
                        priority::mailbox(capacity, priority, handouts, by_task, new_core);
                    (outbox, Source::Priority(inbox))
                }
            };
            let core = Arc::clone(&outbox.core);
            self.lifecycle.started(Arc::clone(&core));
            if let Err(source) = launch(source, Arc::clone(&core), context) {
                return Err(spawn_failed(&core, source));
            }
            typed.add(Arc::new(outbox));
            core
        };
        // Lock order: row 2 (`subscriptions`), nothing else held; see engine/mod.rs.
        self.subscriptions.lock().push(Entry {
            core: Arc::clone(&core),
            topic: Some(topic),
        });
        Ok(core)
    }
}
