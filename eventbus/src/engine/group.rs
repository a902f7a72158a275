//! Subscribing a consumer group: several workers over one subscription, with a mailbox each
//! (keyed) or one they share (keyless); see `delivery/group.rs`. On a log topic, a reader of
//! the log each (keyed: `delivery/log/reader.rs`) or one they share (keyless:
//! `delivery/log/shared.rs`). The workers are threads
//! running an `Fn` handler, or (feature `tokio`) tasks running an async one: the same
//! mailboxes either way, each worker a consumer of its own.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::delivery::core::{Consumer, Retire, SubscriptionCore};
use crate::delivery::group::{Group, Shared, SharedRun};
use crate::delivery::log;
use crate::delivery::mailbox::{mailbox, shared_mailbox};
use crate::error::SubscribeError;
use crate::message::Message;
use crate::options::{Options, Overflow};
use crate::topic::Topic;
use crate::worker::{self, Context, Source};

use super::{subscription_name, typed, Engine, Entry};

/// Starts one worker of a group on its source (its mailbox, or the one its group shares),
/// with its own core; called once per worker.
pub(super) trait LaunchEach<T>:
    Fn(Source<T>, Arc<SubscriptionCore>, Context) -> std::io::Result<()>
{
}

impl<T, F> LaunchEach<T> for F where
    F: Fn(Source<T>, Arc<SubscriptionCore>, Context) -> std::io::Result<()>
{
}

impl Engine {
    /// Starts a consumer group of `T` (`group.rs`): `options.workers` thread workers running
    /// `handler`, with a mailbox each (a key) or one they share (no key).
    pub(super) fn subscribe_group<T: Topic>(
        &self,
        options: Options,
        handler: SharedRun<T>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        self.subscribe_group_with(options, Consumer::Worker, move |source, core, context| {
            let handler = Arc::clone(&handler);
            let run = move |m: &Message<T>| handler(m);
            worker::thread::spawn(source, core, context, run)
        })
    }

    /// Starts a subscription of `T` whose async handler its workers may run at once: a group
    /// of task workers on the bus's runtime if the options ask for one, else one task worker.
    #[cfg(feature = "tokio")]
    pub(crate) fn subscribe_shared_task<T, F, A>(
        &self,
        options: Options,
        handler: F,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError>
    where
        T: Topic,
        F: Fn(Message<T>) -> A + Send + Sync + 'static,
        A: std::future::Future<Output = Result<(), crate::handler::Failure>> + Send + 'static,
    {
        if !super::is_group(&options) {
            return self.subscribe_task(options, handler);
        }
        let Some(runtime) = self.runtime.get().cloned() else {
            return Err(SubscribeError::NoRuntime {
                name: subscription_name(&options, self.next_subscription.load(Relaxed)),
            });
        };
        let handler = Arc::new(handler);
        self.subscribe_group_with(options, Consumer::Task, move |source, core, context| {
            let handler = Arc::clone(&handler);
            let run = move |m: Message<T>| handler(m);
            worker::task::spawn(&runtime, source, core, context, run);
            Ok(())
        })
    }

    /// Starts a consumer group of `T` whose workers `launch` starts, one call each.
    fn subscribe_group_with<T: Topic>(
        &self,
        options: Options,
        consumer: Consumer,
        launch: impl LaunchEach<T>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        let name: Arc<str> =
            subscription_name(&options, self.next_subscription.load(Relaxed)).into();
        let group = |why| SubscribeError::Group {
            name: name.to_string(),
            topic: T::name(),
            why,
        };
        if T::retention().is_some()
            && options.key.is_some()
            && options.overflow == Overflow::DropOldest
        {
            return Err(group(
                "on a log topic, `DropOldest` loses what the trim takes before a worker reads \
                 it, and a keyed group's worker cannot tell which of those were its own, so \
                 its drops could not be counted; use `Block`, whose workers are never \
                 lapped, or a group without a key, which shares one position in the log",
            ));
        }
        if options.key.is_some() && options.workers == 1 {
            return Err(group(
                "a key picks one of a group's workers: ask for `workers(n)` with n > 1",
            ));
        }
        let mailboxes = if options.key.is_some() {
            options.workers
        } else {
            1
        };
        let (topic, retention) = (T::name(), T::retention());
        self.subscribe_checked::<T, _>(topic, retention, options, mailboxes, |this, id, options| {
            this.start_group(id, name, options, consumer, launch)
        })
    }

    /// Starts a group's workers and puts its mailboxes on the topic, all in one edit.
    fn start_group<T: Topic>(
        &self,
        id: u64,
        name: Arc<str>,
        options: Options,
        consumer: Consumer,
        launch: impl LaunchEach<T>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        let topic = self.topic::<T>();
        let typed = typed::<T>(&*topic);
        let context = Context {
            bus: self.id,
            lifecycle: Arc::clone(&self.lifecycle),
            dead_letters: Arc::clone(&self.dead_letters),
        };
        // A task's mailbox announces every arrival (see `mailbox.rs`).
        let by_task = consumer != Consumer::Worker;
        let of = options.workers;
        let new_core = |retirer| {
            let id = self.next_subscription.fetch_add(1, Relaxed);
            let topic = T::name();
            SubscriptionCore::new(
                id,
                Arc::clone(&name),
                topic,
                options.clone(),
                consumer,
                retirer,
            )
        };
        let mut workers: Vec<Arc<SubscriptionCore>> = Vec::with_capacity(of);
        let mut outboxes = Vec::new();
        // Starts one worker; on failure, retires those started (none is on the topic yet).
        let spawn =
            |workers: &mut Vec<Arc<SubscriptionCore>>, core: Arc<SubscriptionCore>, source| {
                self.lifecycle.started(Arc::clone(&core));
                match launch(source, Arc::clone(&core), context.clone()) {
                    Ok(()) => {
                        workers.push(core);
                        Ok(())
                    }
                    Err(source) => {
                        self.lifecycle.finished(&core);
                        core.retire();
                        for worker in workers.iter() {
                            worker.retire();
                        }
                        Err(SubscribeError::Spawn {
                            name: name.to_string(),
                            source,
                        })
                    }
                }
            };
        // A reader of the group's log topic, with a subscription id and core of its own;
        // `retirer` wraps what retiring that core does.
        let group_reader = |history, retirer: fn(Box<dyn Retire>) -> Box<dyn Retire>| {
            let id = self.next_subscription.fetch_add(1, Relaxed);
            let lifecycle = Arc::clone(&self.lifecycle);
            let closing = log::Closing {
                stop: self.lifecycle.stop_signal().clone(),
                poke: Box::new(move || lifecycle.poke()),
            };
            let (capacity, overflow) = (options.capacity, options.overflow);
            log::reader(history, id, capacity, overflow, by_task, closing, |core| {
                SubscriptionCore::new(
                    id,
                    Arc::clone(&name),
                    T::name(),
                    options.clone(),
                    consumer,
                    retirer(core),
                )
            })
        };
        let shared = if let (Some(history), None) = (typed.log(), &options.key) {
            // A group without a key on a log topic: one reader at one position, which its
            // workers take turns at (`delivery/log/shared.rs`).
            let reader = group_reader(history, log::unread);
            let (shared, id) = (Arc::clone(reader.core()), reader.core().id);
            // Joined before any worker starts, which then finds the position set.
            reader.join(options.start);
            let reader = Arc::new(log::SharedReader::new(reader));
            for _ in 0..of {
                let mut core = new_core(Box::new(Shared(Arc::clone(&shared))));
                core.shares_mailbox = true;
                let source = Source::SharedLog(Arc::clone(&reader));
                if let Err(error) = spawn(&mut workers, Arc::new(core), source) {
                    shared.retire();
                    history.remove(id);
                    return Err(error);
                }
            }
            Some(shared)
        } else if let Some(history) = typed.log() {
            // A keyed group on a log topic: a reader per worker, each at its own position,
            // taking the messages its lane's key picks (`delivery/log/reader.rs`).
            let mut readers = Vec::with_capacity(of);
            for index in 0..of {
                let mut reader = group_reader(history, std::convert::identity);
                reader.route(index, of);
                readers.push(reader);
            }
            // All at one position, before any worker starts: no message falls between two.
            log::Reader::join_group(&readers, options.start);
            let ids: Vec<u64> = readers.iter().map(|r| r.core().id).collect();
            for reader in readers {
                let core = Arc::clone(reader.core());
                self.lifecycle.started(Arc::clone(&core));
                if let Err(source) = launch(Source::Log(reader), Arc::clone(&core), context.clone())
                {
                    // Every reader of the group leaves the log, launched or not.
                    self.lifecycle.finished(&core);
                    core.retire();
                    for worker in &workers {
                        worker.retire();
                    }
                    for id in &ids {
                        history.remove(*id);
                    }
                    return Err(SubscribeError::Spawn {
                        name: name.to_string(),
                        source,
                    });
                }
                workers.push(core);
            }
            None
        } else if options.key.is_some() {
            for index in 0..of {
                let (mut outbox, inbox) =
                    mailbox(options.capacity, typed.handouts(), by_task, new_core);
                outbox.route(index, of);
                spawn(
                    &mut workers,
                    Arc::clone(&outbox.core),
                    Source::Mailbox(inbox),
                )?;
                outboxes.push(Arc::new(outbox));
            }
            None
        } else {
            let (outbox, inbox) =
                shared_mailbox(options.capacity, typed.handouts(), by_task, new_core);
            let shared = Arc::clone(&outbox.core);
            for _ in 0..of {
                let mut core = new_core(Box::new(Shared(Arc::clone(&shared))));
                core.shares_mailbox = true;
                let source = Source::Mailbox(inbox.clone());
                if let Err(error) = spawn(&mut workers, Arc::new(core), source) {
                    shared.retire();
                    return Err(error);
                }
            }
            outboxes.push(Arc::new(outbox));
            Some(shared)
        };
        let delivery = Box::new(Group::new(workers, shared));
        let core = SubscriptionCore::new(id, name, T::name(), options, consumer, delivery);
        let core = Arc::new(core);
        typed.add_all(outboxes);
        // Lock order: row 2 (`subscriptions`), nothing else held; see engine/mod.rs.
        self.subscriptions.lock().push(Entry {
            core: Arc::clone(&core),
            topic: Some(topic),
        });
        Ok(core)
    }
}
