//! The engine under the [`Bus`](crate::Bus) facade: a bus's topics, its subscriptions and
//! their workers, publishing, subscribing and unsubscribing, closing (through `lifecycle.rs`),
//! stats and close reports.
//!
//! # Lock order
//!
//! Every lock of a bus, outermost first. A thread that holds a lock waits only for locks
//! further down this table, so no two threads wait for each other; `try_lock` waits for
//! nothing and may be used anywhere. Each place a lock is taken names its row.
//!
//! | row | lock | module | held while | takes inside |
//! |---|---|---|---|---|
//! | 0 | a group's turns at an `FnMut` handler (`Bus::subscribe` with `workers`) | `engine/subscribe.rs` | its handler runs | any: user code (the wait graph does not see a wait for it) |
//! | 1 | `Engine::observers` | `engine` | a topic is made with its observers; an observer joins or leaves | 3, 6 (a log topic's leave), 9 (a generic topic's name) |
//! | 2 | `Engine::subscriptions` | `engine` | the list is read or edited | — |
//! | 3 | a topic's `edit` | `topics/state.rs` | its subscriber or observer list is swapped | — |
//! | 4 | a topic's order lock | `topics/state.rs` | one message is numbered and handed out, or its publisher waits for room (through `deadlock::lock_order`) | 4a, 5, 6, 7a, 8, channel locks |
//! | 4 | a dispatcher topic's queue lock (`sender`), beside its order lock, never held with it | `topics/dispatcher.rs` | one message is numbered, seen by the topic's inline subscribers and added to the queue, or its publisher waits for room there | 4a, 7a, 8, 9 (its `room_lock`), channel locks |
//! | 4a | an inline subscriber's handler | `delivery/inline.rs` | its handler runs, inside a publish | any: user code, which may publish to other topics (a publish to a topic whose handlers the thread runs is refused, never waited for) |
//! | 4b | a dispatcher queue's `taking` | `topics/dispatcher.rs` | its dispatcher takes its next message (and, after a stop, abandons it), or a forced close takes and abandons what is left; nothing else held when taken | 9 (`last`, the dead-letter store), user code (the subscriptions' filters) |
//! | 5 | an observer's turn | `delivery/observer.rs` | a publisher holding 4 hands out to it (turns in the order the observers were added); an all-or-nothing or a handler's publish takes them first and holds them through the rest of it (its other turns, its waits for room, its append, its inline handlers) | 4a, 5 (a later turn), 6, 7a, 8, channel locks |
//! | 5a | a keyless log group's shared reader | `delivery/log/shared.rs` | one of its workers takes its next message (never while waiting), or asks whether any is left | 6, 7 (a drain look, after its filter skipped messages) |
//! | 6 | a log's ring | `delivery/log/` | an append (under 4), a reader's move, a join, a leave | 7a, 8 |
//! | 7 | the lifecycle's `looking` or `changed_lock`, then `running` | `lifecycle.rs` | a drain look (order locks only with `try_lock`); a wait for a change, whose `done` may look at the wait graph (an unsubscribe's) | 7a, 8 |
//! | 7a | the wait graph's `REFUSING` | `deadlock.rs` | a waiter whose walk found a cycle walks again and clears its own record | 8 |
//! | 8 | the wait graph's records: a node's `waits`, a topic's `holder` | `deadlock.rs` | a record is read or written, one at a time, never nested | — |
//! | 9 | leaves: `Engine::bridges` (the bridges' looks run after it is let go, each taking its own leaves), the lifecycle's `stop_tx`, a mailbox's `closing`, the dead-letter store's `hook` and `letters` (one, then the other, never nested), a dispatcher queue's `last` and `room_lock`, the process's interned names (`topic.rs`, `engine/mod.rs`) | — | a read or a swap | — |
//!
//! The directory of topics takes no lock (`topics/directory.rs`).
//! An unsubscribe waits for the subscription's worker with no lock held.

mod close;
mod group;
mod inline;
mod observer;
mod publish;
mod redeliver;
mod subscribe;

use std::any::TypeId;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::dead_letter::{DeadLetterStore, Hook};
use crate::delivery::core::SubscriptionCore;
use crate::delivery::observer::Inlet;
use crate::lifecycle::Lifecycle;
use crate::numbering::Numberings;
use crate::options::Options;
use crate::state::States;
use crate::stats::{BusStats, SubscriptionStats, TopicStats};
use crate::topic::Topic;
use crate::topics::any::AnyTopic;
use crate::topics::directory::Directory;
use crate::topics::state::TopicState;
use crate::worker::{self, Context, Source};

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
    /// The NATS bridges connected to this bus, asked for their stats by `stats()`; a bridge
    /// dropped is pruned at the next look.
    #[cfg(feature = "nats")]
    bridges: Mutex<Vec<std::sync::Weak<crate::stats::bridge::BridgeLook>>>,
}

/// Hands a new subscription's source (its mailbox, or its place in the topic's log) to its
/// consumer: a worker it starts, or the caller.
pub(super) trait Launch<T>:
    FnOnce(Source<T>, Arc<SubscriptionCore>, Context) -> std::io::Result<()>
{
}

impl<T, F> Launch<T> for F where
    F: FnOnce(Source<T>, Arc<SubscriptionCore>, Context) -> std::io::Result<()>
{
}

/// Whether the options ask for a consumer group: more workers than one, or a key.
fn is_group(options: &Options) -> bool {
    options.workers != 1 || options.key.is_some()
}

/// Refuses a `retry_if` written for another type than the handler's error (`error`: its
/// type, if the handler can fail at all).
pub(crate) fn check_retry_if<T: Topic>(
    engine: &Engine,
    options: &Options,
    error: Option<(std::any::TypeId, &'static str)>,
) -> Result<(), crate::error::SubscribeError> {
    check_retry_if_of(engine, T::name, options, error)
}

/// As [`check_retry_if`], for a subscription whose topic is `topic()` (an observer's
/// pattern).
pub(crate) fn check_retry_if_of(
    engine: &Engine,
    topic: impl FnOnce() -> &'static str,
    options: &Options,
    error: Option<(std::any::TypeId, &'static str)>,
) -> Result<(), crate::error::SubscribeError> {
    let Some(retry_if) = &options.retry_if else {
        return Ok(());
    };
    let error = match error {
        None => "()",
        Some((type_id, _)) if retry_if.written_for_type() == type_id => return Ok(()),
        Some((_, name)) => name,
    };
    let id = engine.next_subscription.load(Relaxed);
    Err(crate::error::SubscribeError::RetryIf {
        name: subscription_name(options, id),
        topic: topic(),
        written_for: retry_if.written_for(),
        error,
    })
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
    // Lock order: row 9 (the interned patterns), a leaf; see the module docs.
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
            #[cfg(feature = "nats")]
            bridges: Mutex::new(Vec::new()),
            next_subscription: AtomicU64::new(1),
            #[cfg(feature = "tokio")]
            runtime: std::sync::OnceLock::new(),
        }))
    }

    /// Runs `f` on the topic's state, made on first use, found without a lock or a
    /// read-modify-write (see `directory.rs`), so publishers of different topics never wait
    /// on each other.
    #[inline]
    fn with_topic<T: Topic, R>(&self, f: impl FnOnce(&TopicState<T>) -> R) -> R {
        // `f` called in one place only, so that it is inlined here.
        let made;
        let topic = match self.topics.find_indexed(T::__index()) {
            Some(topic) => match topic.downcast_ref::<TopicState<T>>() {
                Some(topic) => topic,
                None => unreachable!("a topic index is one topic type's"),
            },
            None => match self.topics.find(TypeId::of::<T>()) {
                Some(topic) => typed::<T>(&**topic),
                None => {
                    made = self.topic::<T>();
                    typed::<T>(&*made)
                }
            },
        };
        f(topic)
    }

    /// The topic's state, made on first use with the observers that match it: under their
    /// lock, so an observer being added either finds the topic made or is given to it (see
    /// `observer.rs`).
    fn topic<T: Topic>(&self) -> Arc<dyn AnyTopic> {
        if let Some(topic) = self.topics.get(TypeId::of::<T>()) {
            return topic;
        }
        // Lock order: row 1 (`observers`); row 3 (a match's `edit`) inside, and row 9
        // if `T::name()` interns a generic topic's name; see the module docs.
        let observers = self.observers.lock();
        let topic = self.topics.get_or_make(TypeId::of::<T>(), || {
            let topic = TopicState::<T>::new();
            for observer in observers.iter().filter(|o| o.matches(T::name())) {
                topic.attach(Arc::clone(observer));
            }
            let topic = Arc::new(topic);
            crate::topics::dispatcher::start(&topic, &self.lifecycle, &self.dead_letters);
            topic
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
        if let Some(index) = T::__index() {
            self.topics.index(index, &topic);
        }
        topic
    }

    /// The runtime task workers run on: the builder's, or the one current at `build()`.
    #[cfg(feature = "tokio")]
    pub(crate) fn set_runtime(&self, runtime: Option<tokio::runtime::Handle>) {
        if let Some(runtime) = runtime {
            let _ = self.runtime.set(runtime);
        }
    }

    /// Whether the caller is one of this bus's workers, a dead-letter hook or an inline handler:
    /// none can wait for a close, which waits for them (or, for an inline handler, for the
    /// publish it runs in).
    pub(crate) fn inside(&self) -> bool {
        worker::current(self.id).is_some()
            || crate::dead_letter::in_hook()
            || crate::delivery::inline::inside()
    }

    /// Every subscription not unsubscribed, then every unsubscribed one still running.
    fn every_subscription(&self) -> Vec<SubscriptionStats> {
        self.every_core().iter().map(|core| core.stats()).collect()
    }

    /// Every subscription on the bus's list, and every one whose worker still runs after it
    /// left the list (an unsubscribe still draining).
    fn every_core(&self) -> Vec<Arc<SubscriptionCore>> {
        let mut cores: Vec<_> = {
            // Lock order: row 2 (`subscriptions`), nothing inside; see the module docs.
            let subscriptions = self.subscriptions.lock();
            subscriptions.iter().map(|e| Arc::clone(&e.core)).collect()
        };
        for core in self.lifecycle.running() {
            if !cores.iter().any(|c| c.is_or_holds(core.id)) {
                cores.push(core);
            }
        }
        cores
    }

    pub(crate) fn stats(&self) -> BusStats {
        let topics = self.topics.all();
        let (subscriptions, mut topics) = {
            // Lock order: row 2, nothing inside (the stats read atomics); see the module docs.
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
                    queue_depth: topic.queue_depth().map(|(depth, _)| depth),
                    queue_capacity: topic.queue_depth().map(|(_, capacity)| capacity),
                    handed_out: topic.handed_out(),
                })
                .collect();
            (subscriptions, topics)
        };
        topics.sort_by_key(|topic| topic.name);
        BusStats {
            #[cfg(feature = "nats")]
            bridges: self.bridge_stats(),
            topics,
            subscriptions,
            dead_letters: self.dead_letters.len(),
            dead_letter_hook_skipped: self.dead_letters.hook_skipped(),
            dead_letters_discarded: self.dead_letters.discarded(),
        }
    }

    /// Starts asking `look` for a bridge's stats in [`stats`](Engine::stats), for as long as
    /// the bridge keeps it.
    #[cfg(feature = "nats")]
    pub(crate) fn add_bridge(&self, look: std::sync::Weak<crate::stats::bridge::BridgeLook>) {
        // Lock order: row 9 (`bridges`), nothing inside; see the module docs.
        let mut bridges = self.bridges.lock();
        bridges.retain(|b| b.strong_count() > 0);
        bridges.push(look);
    }

    /// The live bridges' stats, in the order they connected.
    #[cfg(feature = "nats")]
    fn bridge_stats(&self) -> Vec<crate::stats::bridge::BridgeStats> {
        // Lock order: row 9 (`bridges`); each look takes its bridge's own leaf inside.
        let looks: Vec<_> = self
            .bridges
            .lock()
            .iter()
            .filter_map(|b| b.upgrade())
            .collect();
        looks.iter().map(|look| look()).collect()
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
