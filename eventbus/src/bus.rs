//! The bus: topics by type, publishing, subscribing, closing, and the bookkeeping that ties
//! them together.
//!
//! Locks, and why they cannot deadlock: `topics` takes no lock on the publish path
//! (`directory.rs`). `subscriptions` (the registry) is held while nothing waits, with at most
//! `retiring` taken inside it, and never while a topic's order lock is wanted. A topic's
//! order lock is described in `topic.rs`; others take it only with `try_lock` (a closing bus
//! looking whether it has drained, a worker whose mailbox was shut: `lifecycle.rs`,
//! `mailbox.rs`); the wait-graph records of `deadlock.rs` are taken one at a time, never
//! nested.

use std::any::TypeId;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::dead_letter::{DeadLetterStore, Hook};
use crate::directory::Directory;
use crate::mailbox::mailbox;
use crate::observe;
use crate::state::States;
use crate::subscription::SubscriptionCore;
use crate::topic::{AnyTopic, Refused, TopicState};
use crate::{
    worker, BusBuilder, BusStats, DeadLetter, Handler, Message, Options, PublishError, State,
    SubscribeError, Subscription, Topic, TopicStats, MAX_CAPACITY,
};

/// A handle to an event bus.
///
/// `Bus` is a cheap handle: clone it to publish from many threads; any clone may close the bus,
/// and dropping the last clone closes it (waiting, as [`close`](Bus::close) does). The `&Bus`
/// a handler receives, and its clones, do not keep the bus open; but a clone of the
/// application's `Bus` captured by a [`subscribe`](Bus::subscribe) closure does, until
/// `close` is called explicitly.
///
/// # Examples
///
/// ```
/// use eventbus::{Bus, Message, Options, Topic};
///
/// #[derive(Topic)]
/// struct OrderPlaced { id: u64 }
///
/// let bus = Bus::builder().build();
/// let (tx, rx) = std::sync::mpsc::channel();
/// bus.subscribe::<OrderPlaced, _>(Options::default(), move |m: &Message<OrderPlaced>| {
///     tx.send(m.id).unwrap();
/// });
///
/// let publisher = bus.clone();
/// std::thread::spawn(move || publisher.publish(OrderPlaced { id: 41 }).unwrap())
///     .join()
///     .unwrap();
/// bus.close();
/// assert_eq!(rx.try_iter().collect::<Vec<_>>(), [41]);
/// ```
#[derive(Clone)]
pub struct Bus {
    pub(crate) inner: Arc<Inner>,
    /// Shared by the application's handles; the last one dropped closes the bus. Handlers'
    /// handles have none, so a worker never keeps its own bus open.
    owner: Option<Arc<Owner>>,
}

struct Owner(Arc<Inner>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.close(None);
    }
}

pub(crate) struct Inner {
    /// Tells this bus's worker threads from others (see `worker::current_subscription`).
    pub(crate) id: u64,
    pub(crate) lifecycle: crate::lifecycle::Lifecycle,
    pub(crate) dead_letters: DeadLetterStore,
    /// Given to the builder; never changed after.
    pub(crate) states: States,
    /// A topic, once made, stays.
    topics: Directory,
    subscriptions: Mutex<Vec<Entry>>,
    /// Subscriptions unsubscribed by their own handler whose worker is still emptying its
    /// mailbox: a close waits for them too. Locked after `subscriptions`, never before.
    retiring: Mutex<Vec<Arc<SubscriptionCore>>>,
    /// Where a closing bus last found a subscription busy (see `drained`).
    drain_hint: AtomicUsize,
    /// Held while joining workers, so a second `close` returns only once they have stopped.
    joining: Mutex<()>,
    /// Whether the close has been announced (`tracing`).
    announced: AtomicBool,
    next_subscription: AtomicU64,
}

/// The size of one mailbox slot: a pointer to the shared message and the channel's stamp.
type Slot = [usize; 2];

struct Entry {
    core: Arc<SubscriptionCore>,
    topic: Arc<dyn AnyTopic>,
    worker: Option<JoinHandle<()>>,
}

/// What [`Bus::close_timeout`] left undone.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct CloseReport {
    /// Whether everything accepted was delivered and every worker stopped in time.
    pub completed: bool,
    /// Every subscription, with what it still held at the deadline.
    pub subscriptions: Vec<Unfinished>,
}

/// One subscription's part of a [`CloseReport`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Unfinished {
    /// The subscriber's name.
    pub name: String,
    /// Its topic's name.
    pub topic: &'static str,
    /// Messages it had not finished: those in its mailbox and the one in its handler.
    pub queued: u64,
    /// Whether its handler was still running.
    pub in_handler: bool,
}

impl CloseReport {
    /// The subscriptions that still held something.
    pub fn unfinished(&self) -> impl Iterator<Item = &Unfinished> {
        self.subscriptions.iter().filter(|s| s.queued > 0)
    }
}

impl Bus {
    /// A bus running every `#[subscriber]` in the program.
    ///
    /// # Panics
    ///
    /// If a subscriber's worker thread cannot be started.
    pub fn new() -> Bus {
        Bus::builder().registered().build()
    }

    /// A builder, which starts no registered subscriber unless told to.
    pub fn builder() -> BusBuilder {
        BusBuilder::new()
    }

    pub(crate) fn with_parts(
        dead_letter_capacity: usize,
        states: States,
        hook: Option<Hook>,
    ) -> std::io::Result<Bus> {
        let dead_letters = DeadLetterStore::new(dead_letter_capacity, hook)?;
        static NEXT_BUS: AtomicU64 = AtomicU64::new(1);
        let inner = Arc::new(Inner {
            id: NEXT_BUS.fetch_add(1, Relaxed),
            lifecycle: crate::lifecycle::Lifecycle::new(),
            dead_letters,
            states,
            topics: Directory::new(),
            subscriptions: Mutex::new(Vec::new()),
            retiring: Mutex::new(Vec::new()),
            drain_hint: AtomicUsize::new(0),
            joining: Mutex::new(()),
            announced: AtomicBool::new(false),
            next_subscription: AtomicU64::new(1),
        });
        Ok(Bus {
            owner: Some(Arc::new(Owner(Arc::clone(&inner)))),
            inner,
        })
    }

    /// Publishes a message to its topic and returns its seq.
    ///
    /// Returns once the message is in every subscriber's mailbox (or dropped by a full one's
    /// policy); with `Block` subscribers it waits for room.
    ///
    /// # Errors
    ///
    /// [`PublishError::Closed`], with the message, once the bus is closing; handlers of this
    /// bus may still publish while it drains.
    ///
    /// [`PublishError::WouldDeadlock`], with the message, when a handler publishes into a
    /// full `Block` mailbox whose worker is waiting, directly or through other handlers'
    /// publishes, for this handler's own subscription: its own full mailbox, or a cycle such
    /// as A → B → A. Waiting there could never end, so nothing is published.
    pub fn publish<T: Topic>(&self, message: T) -> Result<u64, PublishError<T>> {
        self.inner.publish(message, None)
    }

    /// Publishes like [`publish`](Bus::publish), waiting at most `timeout` for room in `Block`
    /// mailboxes. Publishers of one topic take turns, so the wait for this publish's turn
    /// behind another that is itself waiting for room is not bounded by `timeout`.
    ///
    /// # Errors
    ///
    /// [`PublishError::Timeout`] when some subscribers had no room in time: the message went
    /// to the others and counts as dropped for those; [`PublishError::Closed`] as for
    /// `publish`.
    pub fn publish_timeout<T: Topic>(
        &self,
        message: T,
        timeout: Duration,
    ) -> Result<u64, PublishError<T>> {
        self.inner
            .publish(message, Instant::now().checked_add(timeout))
    }

    /// Starts a subscription of `T` with a handler of its own.
    ///
    /// The handler is `FnMut(&Message<T>) -> R` where `R` is `()` or `Result<(), E>` with
    /// `E: Display`; name the message type on the closure's parameter.
    ///
    /// # Panics
    ///
    /// If the options are refused (a capacity of 0 or above [`MAX_CAPACITY`]), the bus is
    /// closed, or the worker thread cannot start: see [`try_subscribe`](Bus::try_subscribe).
    ///
    /// # Examples
    ///
    /// ```
    /// use eventbus::{Bus, Message, Options, Overflow, Topic};
    ///
    /// #[derive(Topic)]
    /// struct Price(f64);
    ///
    /// let bus = Bus::builder().build();
    /// let ticker = bus.subscribe::<Price, _>(
    ///     Options::default().capacity(1).overflow(Overflow::DropOldest).name("ticker"),
    ///     |m: &Message<Price>| println!("{}", m.0),
    /// );
    /// bus.publish(Price(1.5)).unwrap();
    /// ticker.unsubscribe();
    /// ```
    ///
    /// ```should_panic
    /// # use eventbus::{Bus, Message, Options, Topic};
    /// # #[derive(Topic)] struct Price(f64);
    /// let bus = Bus::builder().build();
    /// bus.subscribe::<Price, _>(Options::default().capacity(0), |_: &Message<Price>| {});
    /// ```
    pub fn subscribe<T: Topic, H>(&self, options: Options, handler: H) -> Subscription
    where
        H: Handler<T>,
    {
        self.try_subscribe(options, handler)
            .unwrap_or_else(|error| panic!("{error}"))
    }

    /// Starts a subscription like [`subscribe`](Bus::subscribe), saying why it cannot.
    ///
    /// # Errors
    ///
    /// [`SubscribeError`]: a refused capacity, a closed bus, or a worker that could not start.
    pub fn try_subscribe<T: Topic, H>(
        &self,
        options: Options,
        mut handler: H,
    ) -> Result<Subscription, SubscribeError>
    where
        H: Handler<T>,
    {
        self.inner
            .subscribe(options, move |message: &Message<T>, _: &Bus| {
                handler.call(message)
            })
    }

    /// Closes the bus: refuses new publishes from outside it, delivers everything already
    /// accepted (and what handlers publish meanwhile), and returns when every mailbox is empty
    /// and every worker has stopped.
    ///
    /// Called from inside one of this bus's handlers, it starts the close and returns at once,
    /// since it cannot wait for its own handler.
    pub fn close(&self) {
        self.inner.close(None);
    }

    /// Closes like [`close`](Bus::close), waiting at most `timeout`.
    ///
    /// If the deadline passes, the bus stops where it is: workers take no more messages,
    /// retries end (their messages become dead letters), publishers waiting for room give up;
    /// the report lists, per subscription, what was still queued. A handler still running is
    /// left to finish on its own thread.
    pub fn close_timeout(&self, timeout: Duration) -> CloseReport {
        self.inner.close(Instant::now().checked_add(timeout))
    }

    /// Whether the bus has stopped accepting publishes from outside its handlers.
    pub fn is_closed(&self) -> bool {
        !self.inner.lifecycle.is_open()
    }

    /// A snapshot of every topic and subscription.
    pub fn stats(&self) -> BusStats {
        self.inner.stats()
    }

    /// The value of type `T` the bus was built with ([`BusBuilder::state`]), if any.
    pub fn state<T: Send + Sync + 'static>(&self) -> Option<State<T>> {
        self.inner.states.get::<T>()
    }

    /// The dead letters held now, oldest first.
    pub fn dead_letters(&self) -> Vec<DeadLetter> {
        self.inner.dead_letters.snapshot()
    }

    /// Takes the dead letters out of the store, oldest first (to republish them, say).
    pub fn take_dead_letters(&self) -> Vec<DeadLetter> {
        self.inner.dead_letters.take()
    }

    /// A handle for a worker: it does not keep the bus open.
    fn worker_handle(inner: &Arc<Inner>) -> Bus {
        Bus {
            inner: Arc::clone(inner),
            owner: None,
        }
    }
}

impl Default for Bus {
    /// The same as [`Bus::new`].
    fn default() -> Self {
        Bus::new()
    }
}

impl fmt::Debug for Bus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bus")
            .field("id", &self.inner.id)
            .field("open", &self.inner.lifecycle.is_open())
            .field("keeps_open", &self.owner.is_some())
            .finish()
    }
}

impl Inner {
    fn publish<T: Topic>(
        &self,
        payload: T,
        deadline: Option<Instant>,
    ) -> Result<u64, PublishError<T>> {
        self.with_topic::<T, _>(|topic| {
            // No subscribers, the bus open and the order lock free: nothing to hand out and
            // nothing for a close to wait for, so nothing is counted or allocated. This
            // publish held the order lock, which a closing bus may have found taken: look
            // again.
            if topic.subscriber_count() == 0 && self.lifecycle.is_open() {
                if let Some(seq) = topic.number_unheard() {
                    self.poke_if_closing();
                    return Ok(seq);
                }
            }
            let publisher = worker::current(self.id);
            let published = topic.publish(payload, deadline, &self.lifecycle, publisher.as_ref());
            // This publish held the topic's order lock, which a closing bus may have found
            // taken: look again now it is free.
            self.poke_if_closing();
            let hand_out = match published {
                Ok(hand_out) => hand_out,
                Err((payload, Refused::Closed)) => return Err(PublishError::Closed(payload)),
                Err((payload, Refused::WouldDeadlock)) => {
                    return Err(PublishError::WouldDeadlock(payload))
                }
            };
            let seq = hand_out.seq;
            if hand_out.abandoned > 0 {
                let missed = hand_out.abandoned + hand_out.timed_out;
                Err(PublishError::Abandoned { seq, missed })
            } else if hand_out.timed_out > 0 {
                let missed = hand_out.timed_out;
                Err(PublishError::Timeout { seq, missed })
            } else {
                Ok(seq)
            }
        })
    }

    /// Runs `f` on the topic's state, made on first use, found without a lock or a
    /// read-modify-write (see `directory.rs`), so publishers of different topics never wait
    /// on each other.
    #[inline]
    fn with_topic<T: Topic, R>(&self, f: impl FnOnce(&TopicState<T>) -> R) -> R {
        match self.topics.find(TypeId::of::<T>()) {
            Some(topic) => f(typed::<T>(&**topic)),
            None => f(typed::<T>(&*self.topic::<T>())),
        }
    }

    /// The topic's state, made on first use.
    fn topic<T: Topic>(&self) -> Arc<dyn AnyTopic> {
        self.topics
            .get_or_make(TypeId::of::<T>(), || Arc::new(TopicState::<T>::new()))
    }

    /// A closing bus looks whether it has drained, and if so finishes the close (see
    /// `lifecycle.rs`). Called by whoever may have made the last move.
    #[inline]
    pub(crate) fn poke_if_closing(&self) {
        if self.lifecycle.is_draining() {
            self.finish_if_drained();
        }
    }

    #[cold]
    fn finish_if_drained(&self) {
        if self.drained() {
            self.finish_close();
        }
    }

    /// Whether nothing is under way, in two looks that saw the same (see `lifecycle.rs`).
    fn drained(&self) -> bool {
        // A cheap look first, from where the last one found something busy: while a
        // thousand workers empty their mailboxes, each that runs dry stops at the first
        // busy one instead of reading all.
        if !self.idle_from_hint() {
            return false;
        }
        match self.activity() {
            Some(first) => self.activity() == Some(first),
            None => false,
        }
    }

    fn idle_from_hint(&self) -> bool {
        let cores = self.subscriptions.lock();
        let start = self.drain_hint.load(Relaxed).min(cores.len());
        let busy = (start..cores.len())
            .chain(0..start)
            .find(|&at| cores[at].core.queued() > 0);
        match busy {
            Some(at) => {
                self.drain_hint.store(at, Relaxed);
                false
            }
            None => true,
        }
    }

    /// What a closing bus reads to tell whether it has drained: every topic's count of
    /// numbered messages and every subscription's count of received ones; `None` while a
    /// publish or subscribe is under way or a subscription has something unfinished.
    fn activity(&self) -> Option<Vec<u64>> {
        if self.lifecycle.subscribing() {
            return None;
        }
        let mut seen = Vec::new();
        for topic in self.topics.all() {
            seen.push(topic.quiet_published()?);
        }
        let subscriptions = self.subscriptions.lock();
        let mut retiring = self.retiring.lock();
        retiring.retain(|core| !core.stopped());
        for core in subscriptions.iter().map(|e| &e.core).chain(retiring.iter()) {
            let (received, unfinished) = core.received_unfinished();
            if unfinished > 0 {
                return None;
            }
            seen.push(received);
        }
        Some(seen)
    }

    pub(crate) fn subscribe<T, H>(
        self: &Arc<Self>,
        options: Options,
        handler: H,
    ) -> Result<Subscription, SubscribeError>
    where
        T: Topic,
        H: FnMut(&Message<T>, &Bus) -> Result<(), String> + Send + 'static,
    {
        let id = self.next_subscription.fetch_add(1, Relaxed);
        let name: Arc<str> = match &options.name {
            Some(name) => name.as_str().into(),
            None => format!("subscription-{id}").into(),
        };
        if options.capacity == 0 || options.capacity > MAX_CAPACITY {
            return Err(SubscribeError::Capacity {
                name: name.to_string(),
                capacity: options.capacity,
            });
        }
        // A mailbox allocates every slot up front; an allocation that fails would abort the
        // process, so make sure now that it can succeed.
        if Vec::<Slot>::new()
            .try_reserve_exact(options.capacity)
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
        let started = self.start(id, name, options, handler);
        self.lifecycle.end_subscribe();
        self.poke_if_closing();
        started
    }

    fn start<T, H>(
        self: &Arc<Self>,
        id: u64,
        name: Arc<str>,
        options: Options,
        handler: H,
    ) -> Result<Subscription, SubscribeError>
    where
        T: Topic,
        H: FnMut(&Message<T>, &Bus) -> Result<(), String> + Send + 'static,
    {
        let topic = self.topic::<T>();
        let handouts = typed::<T>(&*topic).handouts();
        let (outbox, inbox) = mailbox(options.capacity, handouts, |mailbox| {
            SubscriptionCore::new(id, Arc::clone(&name), T::name(), options, mailbox)
        });
        let core = Arc::clone(&outbox.core);
        let worker_core = Arc::clone(&core);
        let bus = Bus::worker_handle(self);
        let worker = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || worker::run(inbox, worker_core, bus, handler))
            .map_err(|source| SubscribeError::Spawn {
                name: name.to_string(),
                source,
            })?;
        typed::<T>(&*topic).add(Arc::new(outbox));
        self.subscriptions.lock().push(Entry {
            core: Arc::clone(&core),
            topic,
            worker: Some(worker),
        });
        Ok(Subscription::new(Arc::clone(self), core))
    }

    pub(crate) fn unsubscribe(&self, core: &Arc<SubscriptionCore>) {
        let entry = {
            let mut subscriptions = self.subscriptions.lock();
            let at = subscriptions.iter().position(|e| e.core.id == core.id);
            at.map(|at| subscriptions.remove(at))
        };
        let Some(entry) = entry else { return };
        entry.topic.remove(core.id);
        let own = worker::current_subscription(self.id) == Some(core.id);
        core.retire(!own);
        if own {
            // Its own handler: the worker goes on until its mailbox is empty, and a close
            // must wait for that (see `activity`).
            // Pruned here too, not only when a close looks: on an open bus the list would
            // otherwise grow with every such unsubscribe.
            let mut retiring = self.retiring.lock();
            retiring.retain(|core| !core.stopped());
            retiring.push(Arc::clone(core));
        } else if let Some(worker) = entry.worker {
            let _ = worker.join();
        }
    }

    fn cores(&self) -> Vec<Arc<SubscriptionCore>> {
        let subscriptions = self.subscriptions.lock();
        subscriptions.iter().map(|e| Arc::clone(&e.core)).collect()
    }

    /// Closes a bus that has drained: nothing is in flight, so every mailbox is empty and
    /// every worker idle. Retiring the subscriptions lets the workers stop.
    fn finish_close(&self) {
        if self.lifecycle.mark_closed() {
            self.shut_mailboxes(true);
            self.lifecycle.notify_closed();
        }
    }

    /// `wake` as for `Shut::shut`: a drained bus's mailboxes are empty, so waking their
    /// workers cannot wait; after a forced stop it must not.
    fn shut_mailboxes(&self, wake: bool) {
        for core in self.cores() {
            core.retire(wake);
        }
        for topic in self.topics.all() {
            topic.clear();
        }
    }

    fn close(&self, deadline: Option<Instant>) -> CloseReport {
        self.lifecycle.begin_close();
        self.poke_if_closing();
        if worker::current_subscription(self.id).is_some() {
            return self.report(self.lifecycle.is_closed());
        }
        let completed = self.lifecycle.wait_closed(deadline);
        if !completed {
            self.lifecycle.stop();
            // Read before the mailboxes are shut: a wake-up signal in one is no message.
            let report = self.report(false);
            self.shut_mailboxes(false);
            // A handler still running may yet make a dead letter; the hook gets it, unwaited.
            self.dead_letters.close_hook(false);
            self.announce_closed(false);
            return report;
        }
        let _joining = self.joining.lock();
        let workers: Vec<_> = {
            let mut subscriptions = self.subscriptions.lock();
            subscriptions
                .iter_mut()
                .filter_map(|e| e.worker.take())
                .collect()
        };
        for worker in workers {
            let _ = worker.join();
        }
        // Every worker has stopped: no more dead letters. Wait until the hook has seen them.
        self.dead_letters.close_hook(true);
        self.announce_closed(true);
        self.report(true)
    }

    /// The `tracing` event for the close, once per bus.
    fn announce_closed(&self, completed: bool) {
        if !self.announced.swap(true, SeqCst) {
            observe::closed(|| self.stats(), completed);
        }
    }

    fn stats(&self) -> BusStats {
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
                        .filter(|e| Arc::ptr_eq(&e.topic, topic))
                        .count(),
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

    fn report(&self, completed: bool) -> CloseReport {
        let subscriptions = self
            .cores()
            .iter()
            .map(|core| Unfinished {
                name: core.name.to_string(),
                topic: core.topic,
                queued: core.queued(),
                in_handler: core.in_handler(),
            })
            .collect();
        CloseReport {
            completed,
            subscriptions,
        }
    }
}

/// A topic's typed state. The map is keyed by `TypeId::of::<T>()` and only ever holds a
/// `TopicState<T>` under that key, so the downcast cannot fail.
fn typed<T: Topic>(topic: &dyn AnyTopic) -> &TopicState<T> {
    match topic.as_any().downcast_ref::<TopicState<T>>() {
        Some(topic) => topic,
        None => unreachable!("the topic map holds a TopicState<T> under TypeId::of::<T>()"),
    }
}
