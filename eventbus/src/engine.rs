//! The engine under the [`Bus`](crate::Bus) facade: a bus's topics, its subscriptions and
//! their workers, publishing, subscribing and unsubscribing, closing (through `lifecycle.rs`),
//! stats and close reports.
//!
//! # Locks, and why they cannot deadlock
//!
//! `topics` takes no lock on the publish path (`directory.rs`). `subscriptions` is held only
//! to read or edit the list, never while waiting and never with another lock wanted. A
//! topic's order lock is described in `topic.rs`, the lifecycle's locks in `lifecycle.rs`, the
//! wait-graph records in `deadlock.rs` (one at a time, never nested). An unsubscribe waits for
//! the subscription's worker with no lock held.

use std::any::TypeId;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::dead_letter::{DeadLetterStore, Hook};
use crate::deadlock::{self, TopicWaits, RECHECK};
use crate::directory::Directory;
use crate::group::{self, SharedRun};
use crate::lifecycle::{Closed, Lifecycle};
use crate::mailbox::{mailbox, shared_mailbox};
use crate::message::AnyMessage;
use crate::numbering::Numberings;
use crate::observe;
use crate::observer::{Inlet, Pattern, Turn};
use crate::state::States;
use crate::stats::{BusStats, CloseReport, SubscriptionStats, TopicStats};
use crate::subscriber::{Consumer, SubscriptionCore};
use crate::topic::{AnyTopic, Redelivery, Refused, Topic, TopicState, Wait};
use crate::worker::thread::Run;
use crate::worker::{self, Context, Source};
use crate::{DeadLetter, Message, Options, RedeliverError, Retention, SubscribeError};
use crate::{Overflow, Start as From};

/// The size of one mailbox slot: a pointer to the shared message and the channel's stamp.
type Slot = [usize; 2];

pub(crate) struct Engine {
    /// Tells this bus's workers from others' (see `worker::current`).
    pub(crate) id: u64,
    pub(crate) lifecycle: Arc<Lifecycle>,
    pub(crate) dead_letters: Arc<DeadLetterStore>,
    /// Given to the builder; never changed after.
    pub(crate) states: States,
    /// A topic, once made, stays.
    topics: Arc<Directory>,
    /// The mailbox topics' numberings, by topic type index: a publish no one has ever heard
    /// needs no more (`numbering.rs`).
    numberings: Numberings,
    /// Subscriptions not unsubscribed, in the order they started.
    subscriptions: Mutex<Vec<Entry>>,
    /// Observers not unsubscribed, in the order they were added; held while a topic is
    /// made (see `observer.rs`). Never held with `subscriptions`.
    observers: Mutex<Vec<Arc<Inlet>>>,
    /// Whether the close has been announced (`tracing`).
    announced: AtomicBool,
    next_subscription: AtomicU64,
    /// Where task workers run.
    #[cfg(feature = "tokio")]
    runtime: std::sync::OnceLock<tokio::runtime::Handle>,
}

/// Hands a new subscription's source (its mailbox, or its place in the topic's log) to its
/// consumer: a worker it starts, or the caller.
trait Start<T>: FnOnce(Source<T>, Arc<SubscriptionCore>, Context) -> std::io::Result<()> {}

impl<T, F> Start<T> for F where
    F: FnOnce(Source<T>, Arc<SubscriptionCore>, Context) -> std::io::Result<()>
{
}

/// Whether the options ask for a consumer group: more workers than one, or a key.
fn is_group(options: &Options) -> bool {
    options.workers != 1 || options.key.is_some()
}

/// A subscription's name: the one given, else `subscription-N`.
fn subscription_name(options: &Options, id: u64) -> String {
    match &options.name {
        Some(name) => name.clone(),
        None => format!("subscription-{id}"),
    }
}

struct Entry {
    core: Arc<SubscriptionCore>,
    /// Its topic; `None` for an observer, which may be on many.
    topic: Option<Arc<dyn AnyTopic>>,
}

/// A pattern's text, kept for the life of the process (stats name an observer's "topic" by
/// it): one copy per distinct pattern.
fn interned(pattern: &str) -> &'static str {
    static PATTERNS: std::sync::OnceLock<Mutex<std::collections::HashSet<&'static str>>> =
        std::sync::OnceLock::new();
    let mut patterns = PATTERNS.get_or_init(Default::default).lock();
    match patterns.get(pattern) {
        Some(kept) => kept,
        None => {
            let kept: &'static str = Box::leak(pattern.to_owned().into_boxed_str());
            patterns.insert(kept);
            kept
        }
    }
}

impl Engine {
    pub(crate) fn new(
        dead_letter_capacity: usize,
        states: States,
        hook: Option<Hook>,
    ) -> std::io::Result<Arc<Engine>> {
        static NEXT_BUS: AtomicU64 = AtomicU64::new(1);
        let dead_letters = Arc::new(DeadLetterStore::new(dead_letter_capacity, hook)?);
        let topics = Arc::new(Directory::new());
        Ok(Arc::new(Engine {
            id: NEXT_BUS.fetch_add(1, Relaxed),
            lifecycle: Arc::new(Lifecycle::new(Arc::clone(&topics) as _)),
            dead_letters,
            states,
            topics,
            numberings: Numberings::new(),
            subscriptions: Mutex::new(Vec::new()),
            observers: Mutex::new(Vec::new()),
            announced: AtomicBool::new(false),
            next_subscription: AtomicU64::new(1),
            #[cfg(feature = "tokio")]
            runtime: std::sync::OnceLock::new(),
        }))
    }

    /// Publishes `payload` to its topic, waiting as `wait` allows; its seq.
    #[inline(always)]
    pub(crate) fn publish<T: Topic>(&self, payload: T, wait: Wait) -> Result<u64, (T, Refused)> {
        // A topic no one has ever heard, found by its type's index: a number, and nothing
        // else (`numbering.rs`).
        let is_open = || self.lifecycle.is_open();
        if let Some(seq) = self.numberings.take_unheard(T::__index(), is_open) {
            return Ok(seq);
        }
        self.publish_heard(payload, wait)
    }

    /// [`publish`](Self::publish), every case but the one above.
    #[inline(always)]
    fn publish_heard<T: Topic>(&self, payload: T, wait: Wait) -> Result<u64, (T, Refused)> {
        self.with_topic::<T, _>(|topic| {
            // No subscribers, the bus open and the order lock free: nothing to hand out and
            // nothing for a close to wait for, so nothing is counted or allocated.
            if topic.subscriber_count() == 0 && self.lifecycle.is_open() {
                if let Some(seq) = topic.number_unheard(&self.lifecycle) {
                    // This publish held the order lock, which a closing bus may have found
                    // taken: look again.
                    self.lifecycle.poke();
                    return Ok(seq);
                }
            }
            let publisher = worker::current(self.id);
            let published = topic.publish(payload, wait, &self.lifecycle, publisher.as_ref());
            self.lifecycle.poke();
            published
        })
    }

    /// Runs `f` on the topic's state, made on first use, found without a lock or a
    /// read-modify-write (see `directory.rs`), so publishers of different topics never wait
    /// on each other.
    #[inline]
    fn with_topic<T: Topic, R>(&self, f: impl FnOnce(&TopicState<T>) -> R) -> R {
        // `f` called in one place only, so that it is inlined here.
        let made;
        let topic = match self.topics.find(TypeId::of::<T>()) {
            Some(topic) => topic,
            None => {
                made = self.topic::<T>();
                &made
            }
        };
        f(typed::<T>(&**topic))
    }

    /// The topic's state, made on first use with the observers that match it: under their
    /// lock, so an observer being added either finds the topic made or is given to it (see
    /// `observer.rs`).
    fn topic<T: Topic>(&self) -> Arc<dyn AnyTopic> {
        if let Some(topic) = self.topics.get(TypeId::of::<T>()) {
            return topic;
        }
        let observers = self.observers.lock();
        let topic = self.topics.get_or_make(TypeId::of::<T>(), || {
            let topic = TopicState::<T>::new();
            for observer in observers.iter().filter(|o| o.matches(T::name())) {
                topic.attach(Arc::clone(observer));
            }
            Arc::new(topic)
        });
        drop(observers);
        if let (Some(numbering), Some(index)) = (typed::<T>(&*topic).numbering(), T::__index()) {
            // In the directory now. A closing bus's first drain look fences, then makes every
            // topic in the directory number under its order lock: either it finds this one,
            // or this sees the state it fenced after (`numbering.rs`). Before the table, so
            // that no publish numbers this topic without the lock once a look has passed.
            fence(SeqCst);
            if !self.lifecycle.is_open() {
                numbering.lock();
            }
            self.numberings.insert(index, numbering);
        }
        topic
    }

    /// Starts an observer of the topics whose names match `pattern` (`observer.rs`): a
    /// mailbox of `AnyMessage`s, and a thread worker running `handler`.
    pub(crate) fn observe(
        &self,
        pattern: &str,
        options: Options,
        handler: impl Run<AnyMessage>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        let name = || subscription_name(&options, self.next_subscription.load(Relaxed));
        let parsed = Pattern::parse(pattern).map_err(|why| SubscribeError::Pattern {
            name: name(),
            pattern: pattern.to_owned(),
            why,
        })?;
        let topic = interned(pattern);
        if is_group(&options) {
            return Err(SubscribeError::Group {
                name: name(),
                topic,
                why: "an observer has one worker, which sees each topic's messages in order",
            });
        }
        if options.start != From::Now {
            return Err(SubscribeError::NoLog {
                name: name(),
                topic,
            });
        }
        self.subscribe_checked::<AnyMessage, _>(topic, None, options, 1, |this, id, options| {
            let name: Arc<str> = subscription_name(&options, id).into();
            this.start_observer(id, name, parsed, topic, options, handler)
        })
    }

    fn start_observer(
        &self,
        id: u64,
        name: Arc<str>,
        pattern: Pattern,
        topic: &'static str,
        options: Options,
        handler: impl Run<AnyMessage>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        let context = Context {
            bus: self.id,
            lifecycle: Arc::clone(&self.lifecycle),
            dead_letters: Arc::clone(&self.dead_letters),
        };
        let (turn, waits) = (Arc::new(Turn::default()), Arc::new(TopicWaits::default()));
        let handouts = Inlet::handouts(&turn, &waits);
        let (outbox, inbox) = mailbox(options.capacity, handouts, false, |retirer| {
            SubscriptionCore::new(
                id,
                Arc::clone(&name),
                topic,
                options,
                Consumer::Worker,
                retirer,
            )
        });
        let core = Arc::clone(&outbox.core);
        self.lifecycle.started(Arc::clone(&core));
        let spawned =
            worker::thread::spawn(Source::Mailbox(inbox), Arc::clone(&core), context, handler);
        if let Err(source) = spawned {
            self.lifecycle.finished(&core);
            return Err(SubscribeError::Spawn {
                name: name.to_string(),
                source,
            });
        }
        let inlet = Arc::new(Inlet::new(pattern, turn, waits, outbox));
        {
            let mut observers = self.observers.lock();
            observers.push(Arc::clone(&inlet));
            for topic in self.topics.all() {
                if inlet.matches(topic.name()) {
                    topic.attach(Arc::clone(&inlet));
                }
            }
        }
        self.subscriptions.lock().push(Entry {
            core: Arc::clone(&core),
            topic: None,
        });
        Ok(core)
    }

    /// Starts a subscription of `T`: a mailbox, and a thread worker running `handler`. A
    /// group's workers take turns at `handler`, which is `FnMut`.
    pub(crate) fn subscribe<T: Topic>(
        &self,
        options: Options,
        handler: impl Run<T>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        if is_group(&options) {
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

    /// Starts a consumer group of `T` (`group.rs`): `options.workers` thread workers running
    /// `handler`, with a mailbox each (a key) or one they share (no key).
    fn subscribe_group<T: Topic>(
        &self,
        options: Options,
        handler: SharedRun<T>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        let name: Arc<str> =
            subscription_name(&options, self.next_subscription.load(Relaxed)).into();
        let group = |why| SubscribeError::Group {
            name: name.to_string(),
            topic: T::name(),
            why,
        };
        if T::retention().is_some() {
            return Err(group(
                "a log topic's subscription reads its log at one position, which a group's \
                 workers cannot share",
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
            this.start_group(id, name, options, handler)
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

    /// The runtime task workers run on: the builder's, or the one current at `build()`.
    #[cfg(feature = "tokio")]
    pub(crate) fn set_runtime(&self, runtime: Option<tokio::runtime::Handle>) {
        if let Some(runtime) = runtime {
            let _ = self.runtime.set(runtime);
        }
    }

    /// Publishes like [`publish`](Self::publish) with `Wait::Forever`, awaiting instead of
    /// blocking (see `TopicState::publish_async`).
    #[cfg(feature = "tokio")]
    pub(crate) async fn publish_async<T: Topic>(&self, payload: T) -> Result<u64, (T, Refused)> {
        let topic = self.topic::<T>();
        let publisher = worker::current(self.id);
        let published = typed::<T>(&*topic)
            .publish_async(payload, &self.lifecycle, publisher)
            .await;
        self.lifecycle.poke();
        published
    }

    /// Keeps a dead letter no subscriber made (feature `nats`: an import that could not be
    /// decoded), shown to the hook like any other.
    #[cfg(feature = "nats")]
    pub(crate) fn record_dead_letter(&self, letter: crate::DeadLetter) {
        self.dead_letters.push(letter);
    }

    /// Takes a subscription off its topic and retires it, without waiting for anything:
    /// for a stream, whose consumer is the caller.
    #[cfg(feature = "tokio")]
    pub(crate) fn detach(&self, core: &Arc<SubscriptionCore>) {
        self.leave(core);
        core.retire();
    }

    /// Starts a subscription of `T` whose mailbox `start` hands to its consumer.
    fn subscribe_with<T: Topic>(
        &self,
        options: Options,
        consumer: Consumer,
        start: impl Start<T>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        if is_group(&options) {
            // Only thread workers make groups (see `subscribe_group`).
            return Err(SubscribeError::Group {
                name: subscription_name(&options, self.next_subscription.load(Relaxed)),
                topic: T::name(),
                why: "async subscribers and streams cannot be groups yet: subscribe a sync \
                      handler, or one async subscriber",
            });
        }
        let (topic, retention) = (T::name(), T::retention());
        self.subscribe_checked::<T, _>(topic, retention, options, 1, |this, id, options| {
            let name: Arc<str> = subscription_name(&options, id).into();
            this.start(id, name, options, consumer, start)
        })
    }

    /// Checks `options` for a subscription of `T` (named `topic`, keeping a log if
    /// `retention`) with `mailboxes` mailboxes, then runs `start` with the subscription's id,
    /// counted as a subscribe a close waits for.
    fn subscribe_checked<T: 'static, S>(
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
            None if options.start != From::Now => {
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

    /// Starts a group's workers and puts its mailboxes on the topic, all in one edit.
    fn start_group<T: Topic>(
        &self,
        id: u64,
        name: Arc<str>,
        options: Options,
        handler: SharedRun<T>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        let topic = self.topic::<T>();
        let typed = typed::<T>(&*topic);
        let context = Context {
            bus: self.id,
            lifecycle: Arc::clone(&self.lifecycle),
            dead_letters: Arc::clone(&self.dead_letters),
        };
        let of = options.workers;
        let new_core = |retirer| {
            let id = self.next_subscription.fetch_add(1, Relaxed);
            let topic = T::name();
            SubscriptionCore::new(
                id,
                Arc::clone(&name),
                topic,
                options.clone(),
                Consumer::Worker,
                retirer,
            )
        };
        let mut workers: Vec<Arc<SubscriptionCore>> = Vec::with_capacity(of);
        let mut outboxes = Vec::new();
        // Starts one worker; on failure, retires those started (none is on the topic yet).
        let spawn =
            |workers: &mut Vec<Arc<SubscriptionCore>>, core: Arc<SubscriptionCore>, inbox| {
                self.lifecycle.started(Arc::clone(&core));
                let handler = Arc::clone(&handler);
                let run = move |m: &Message<T>| handler(m);
                match worker::thread::spawn(
                    Source::Mailbox(inbox),
                    Arc::clone(&core),
                    context.clone(),
                    run,
                ) {
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
        let shared = if options.key.is_some() {
            for index in 0..of {
                let (mut outbox, inbox) =
                    mailbox(options.capacity, typed.handouts(), false, new_core);
                outbox.route(index, of);
                spawn(&mut workers, Arc::clone(&outbox.core), inbox)?;
                outboxes.push(Arc::new(outbox));
            }
            None
        } else {
            let (outbox, inbox) = shared_mailbox(options.capacity, typed.handouts(), new_core);
            let shared = Arc::clone(&outbox.core);
            for _ in 0..of {
                let mut core = new_core(Box::new(group::Shared(Arc::clone(&shared))));
                core.shares_mailbox = true;
                if let Err(error) = spawn(&mut workers, Arc::new(core), inbox.clone()) {
                    shared.retire();
                    return Err(error);
                }
            }
            outboxes.push(Arc::new(outbox));
            Some(shared)
        };
        let delivery = Box::new(group::Group::new(workers, shared));
        let core = SubscriptionCore::new(id, name, T::name(), options, Consumer::Worker, delivery);
        let core = Arc::new(core);
        typed.add_all(outboxes);
        self.subscriptions.lock().push(Entry {
            core: Arc::clone(&core),
            topic: Some(topic),
        });
        Ok(core)
    }

    fn start<T: Topic>(
        &self,
        id: u64,
        name: Arc<str>,
        options: Options,
        consumer: Consumer,
        start: impl Start<T>,
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
            let closing = crate::log::Closing {
                stop: self.lifecycle.stop_signal().clone(),
                poke: Box::new(move || lifecycle.poke()),
            };
            let by_task = consumer != Consumer::Worker;
            let reader =
                crate::log::reader(log, id, capacity, overflow, by_task, closing, |retirer| {
                    SubscriptionCore::new(
                        id,
                        Arc::clone(&name),
                        T::name(),
                        options,
                        consumer,
                        retirer,
                    )
                });
            let core = Arc::clone(reader.core());
            self.lifecycle.started(Arc::clone(&core));
            // Joined before its worker starts, which then finds its start position set.
            reader.join(from);
            if let Err(source) = start(Source::Log(reader), Arc::clone(&core), context) {
                log.remove(id);
                core.retire();
                return Err(spawn_failed(&core, source));
            }
            core
        } else {
            // A task's mailbox announces every arrival (see `mailbox.rs`).
            let by_task = consumer != Consumer::Worker;
            let (outbox, inbox) = mailbox(options.capacity, typed.handouts(), by_task, |retirer| {
                SubscriptionCore::new(id, Arc::clone(&name), T::name(), options, consumer, retirer)
            });
            let core = Arc::clone(&outbox.core);
            self.lifecycle.started(Arc::clone(&core));
            if let Err(source) = start(Source::Mailbox(inbox), Arc::clone(&core), context) {
                return Err(spawn_failed(&core, source));
            }
            typed.add(Arc::new(outbox));
            core
        };
        self.subscriptions.lock().push(Entry {
            core: Arc::clone(&core),
            topic: Some(topic),
        });
        Ok(core)
    }

    /// Retires a subscription: nothing published after this arrives, what is queued is
    /// delivered. Waits for its worker to finish, except where it cannot: from the
    /// subscription's own handler, or from another handler whose worker the subscription's
    /// worker waits for (directly or through others: see `deadlock.rs`); there it returns at
    /// once and the worker finishes later, which a close waits for.
    pub(crate) fn unsubscribe(&self, core: &Arc<SubscriptionCore>) {
        self.leave(core);
        core.retire();
        match worker::current(self.id) {
            None => {
                self.lifecycle.wait_until(None, None, || core.is_finished());
            }
            // Its own subscription (or group) cannot wait for itself.
            Some(me) if core.is_or_holds(me.id) => {}
            Some(me) => {
                let Ok(recorded) = deadlock::record(&me.node, core.nodes()) else {
                    return;
                };
                self.lifecycle.wait_until(None, Some(RECHECK), || {
                    core.is_finished() || recorded.leads_back()
                });
            }
        }
    }

    /// Hands a dead letter's message back to the subscription that gave up on it, and takes
    /// the letter out of the store. The letter is claimed first, so two redeliveries of one
    /// letter cannot both go ahead; one that is refused puts it back in its place.
    pub(crate) fn redeliver(&self, letter: &DeadLetter) -> Result<(), RedeliverError> {
        let (at, letter) = self
            .dead_letters
            .claim(letter)
            .ok_or(RedeliverError::NotFound)?;
        let refused = |why| match why {
            Redelivery::Log => RedeliverError::LogTopic {
                topic: letter.topic(),
            },
            Redelivery::Unsubscribed => RedeliverError::Unsubscribed {
                subscriber: letter.subscriber().to_owned(),
                topic: letter.topic(),
            },
            Redelivery::Full => RedeliverError::Full {
                subscriber: letter.subscriber().to_owned(),
            },
            Redelivery::Closed => RedeliverError::Closed,
            Redelivery::Rejected => RedeliverError::Rejected {
                subscriber: letter.subscriber().to_owned(),
            },
        };
        // `get`, not `find`: the topic may be in the directory's overflow map.
        let redelivered = match self.topics.get(letter.topic_type()) {
            Some(topic) => {
                let publisher = worker::current(self.id);
                topic.redeliver(
                    letter.any_message(),
                    letter.subscription(),
                    &self.lifecycle,
                    publisher.as_ref(),
                )
            }
            None => Err(Redelivery::Unsubscribed),
        };
        self.lifecycle.poke();
        match redelivered {
            Ok(()) => {
                crate::unwind::drop_quietly(letter);
                Ok(())
            }
            Err(why) => {
                let error = refused(why);
                self.dead_letters.restore(at, letter);
                Err(error)
            }
        }
    }

    /// Takes a subscription off the bus's list and its topic's.
    fn leave(&self, core: &SubscriptionCore) {
        let entry = {
            let mut subscriptions = self.subscriptions.lock();
            let at = subscriptions.iter().position(|e| e.core.id == core.id);
            at.map(|at| subscriptions.remove(at))
        };
        match entry {
            Some(Entry {
                topic: Some(topic), ..
            }) => topic.remove(&core.mailbox_ids()),
            Some(Entry { topic: None, .. }) => {
                let mut observers = self.observers.lock();
                observers.retain(|observer| observer.id() != core.id);
                for topic in self.topics.all() {
                    topic.remove(&[core.id]);
                }
            }
            None => {}
        }
    }

    /// Whether the caller is one of this bus's workers, or a dead-letter hook: neither can
    /// wait for a close, which waits for them.
    pub(crate) fn inside(&self) -> bool {
        worker::current(self.id).is_some() || crate::dead_letter::in_hook()
    }

    /// Closes the bus (see `lifecycle.rs`) and reports what it left.
    pub(crate) fn close(&self, deadline: Option<Instant>) -> CloseReport {
        self.close_from(deadline, self.inside())
    }

    /// Closes the bus; `inside` says whether the caller is one of its workers (which cannot
    /// wait for itself).
    pub(crate) fn close_from(&self, deadline: Option<Instant>, inside: bool) -> CloseReport {
        let closed = self.lifecycle.close(deadline, inside);
        // What was left, read before a forced stop makes the workers let go of it.
        let subscriptions = self.every_subscription();
        if closed == Closed::TimedOut {
            self.lifecycle.stop();
        }
        let hook_finished = match closed {
            // Workers may still make dead letters.
            Closed::Begun => true,
            Closed::Completed => self.dead_letters.close_hook(deadline),
            Closed::TimedOut | Closed::Stopped => {
                self.dead_letters.close_hook(Some(Instant::now()))
            }
        };
        if !hook_finished {
            // Left to finish on its own thread; a later close must not wait for it.
            self.lifecycle.stop();
        }
        if closed != Closed::Begun && !self.announced.swap(true, SeqCst) {
            observe::closed(|| self.stats(), closed == Closed::Completed);
        }
        CloseReport {
            completed: closed == Closed::Completed && hook_finished,
            subscriptions,
            hook_running: !hook_finished,
        }
    }

    /// Every subscription not unsubscribed, then every unsubscribed one still running.
    fn every_subscription(&self) -> Vec<SubscriptionStats> {
        let mut cores: Vec<_> = {
            let subscriptions = self.subscriptions.lock();
            subscriptions.iter().map(|e| Arc::clone(&e.core)).collect()
        };
        for core in self.lifecycle.running() {
            if !cores.iter().any(|c| c.is_or_holds(core.id)) {
                cores.push(core);
            }
        }
        cores.iter().map(|core| core.stats()).collect()
    }

    pub(crate) fn stats(&self) -> BusStats {
        let topics = self.topics.all();
        let (subscriptions, mut topics) = {
            let entries = self.subscriptions.lock();
            let subscriptions = entries.iter().map(|e| e.core.stats()).collect();
            let topics: Vec<_> = topics
                .iter()
                .map(|topic| TopicStats {
                    name: topic.name(),
                    published: topic.published(),
                    subscribers: entries
                        .iter()
                        .filter(|e| e.topic.as_ref().is_some_and(|t| Arc::ptr_eq(t, topic)))
                        .count(),
                    retained: topic.log_extent().map(|(retained, _)| retained),
                    oldest: topic.log_extent().map(|(_, oldest)| oldest),
                })
                .collect();
            (subscriptions, topics)
        };
        topics.sort_by_key(|topic| topic.name);
        BusStats {
            topics,
            subscriptions,
            dead_letters: self.dead_letters.len(),
            dead_letter_hook_skipped: self.dead_letters.hook_skipped(),
            dead_letters_discarded: self.dead_letters.discarded(),
        }
    }
}

/// A topic's typed state. The directory is keyed by `TypeId::of::<T>()` and only ever holds a
/// `TopicState<T>` under that key, so the downcast cannot fail.
fn typed<T: Topic>(topic: &dyn AnyTopic) -> &TopicState<T> {
    match topic.as_any().downcast_ref::<TopicState<T>>() {
        Some(topic) => topic,
        None => unreachable!("the directory holds a TopicState<T> under TypeId::of::<T>()"),
    }
}
