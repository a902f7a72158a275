//! Model-based test: random programs of subscribe, unsubscribe, publish (from 1-4 threads),
//! stall and release a handler, handlers that fail or panic on chosen messages, and a close
//! or close_timeout, run against the bus and checked against a simple model.
//!
//! With feature `tokio`, a subscriber is as often an async one (a task worker) as a thread.
//!
//! Topic `DISP` has a dispatcher (`#[topic(dispatcher, queue = DISP_QUEUE)]`): a publish
//! returns once its message is in the topic's small queue (waiting while it is full), and the
//! dispatcher hands it to the mailboxes later. Its subscribers are checked as a mailbox
//! topic's, with the same expectations: before an operation whose outcome depends on what the
//! mailboxes hold (a subscribe, an unsubscribe, a stall, a release, a forced close) the model
//! waits until `TopicStats::handed_out` reaches what was published, so every message is in
//! its mailboxes, exactly. Nothing waits before a plain close: that drains the queue itself.
//!
//! A subscriber is sometimes an inline one (`subscribe_inline`), on any topic: its handler
//! runs in the publish and refuses some values (an `Err` or a panic), which rejects the
//! publish whole (no seq used, no other subscriber sees it), so the model knows which
//! publishes are rejected. It sees every accepted message published while subscribed, in seq
//! order, and is never stalled.
//!
//! The last topic is a log topic (`#[topic(retain = LOG_RETAIN)]`): its subscribers read one
//! shared log, `DropNewest` becomes `DropOldest` there (it is refused on a log), and a
//! stalled `DropOldest` subscriber keeps what the log keeps, not what its capacity says.
//! A subscriber of the log topic is sometimes a consumer group (`subscribe_group`, or with
//! feature `tokio` `subscribe_group_async`) of 2 or 3 workers, keyed (one key's messages in
//! order) or not (sharing one position in the log; no order): each message once across its
//! workers, and counts that add up. Groups are never stalled (their other workers go on).
//!
//! A subscriber of a topic without a log is sometimes a priority one (`Options::priority`,
//! thread or task, any overflow policy): its level is `value % 3`, higher first. Its worker
//! takes the most urgent message queued first, and within one level topic order: the model
//! checks each level's seqs rise. A stall is where the model knows what its mailbox holds:
//! the messages published while stalled arrive in seq order at a mailbox of its capacity,
//! which makes room at the least urgent level (`DropOldest` dropping the oldest message
//! there, `DropNewest` the newest, the arriving one when nothing queued is less urgent;
//! never a more urgent one for a less urgent one), and once released its worker takes what
//! was kept most urgent first; after a forced close what was kept is its dead letters.
//!
//! `EVENTBUS_MODEL_CASES` sets the number of programs (default 256).

// The helpers of the `it` binary's modules.
#[path = "it/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eventbus::{
    Bus, Message, Options, Overflow, PublishError, Subscription, SubscriptionStats, Topic,
};
use proptest::prelude::*;
use support::{Latch, Signal, PATIENCE};

#[derive(Topic, Debug)]
struct Ev<const T: usize> {
    value: u64,
}

/// How many messages the dispatcher topic's queue holds.
const DISP_QUEUE: usize = 3;

#[derive(Topic, Debug)]
#[topic(dispatcher, queue = 3)]
struct DispEv {
    value: u64,
}

/// How many messages the log topic keeps.
const LOG_RETAIN: usize = 6;

#[derive(Topic, Debug)]
#[topic(retain = 6)]
struct LogEv {
    value: u64,
}

/// A topic of the model: its message's value.
trait Valued: Topic {
    fn value(&self) -> u64;
}

impl<const T: usize> Valued for Ev<T> {
    fn value(&self) -> u64 {
        self.value
    }
}

impl Valued for DispEv {
    fn value(&self) -> u64 {
        self.value
    }
}

impl Valued for LogEv {
    fn value(&self) -> u64 {
        self.value
    }
}

/// Topics 0 and 1 are mailbox topics, `DISP` the dispatcher topic, `LOG` the log topic.
const TOPICS: usize = 4;
const DISP: usize = 2;
const LOG: usize = 3;

/// Messages whose value is 3 mod 7 always fail; 5 mod 11 always panic.
fn fails(value: u64) -> bool {
    value % 7 == 3 || value % 11 == 5
}

/// What an inline subscriber refuses: 6 mod 13 with an `Err`, 9 mod 17 with a panic.
fn refuses(value: u64) -> bool {
    value % 13 == 6 || value % 17 == 9
}

/// Publishes `message`; its seq, or `None` if an inline subscriber rejected it.
fn publish_one<E: Topic + std::fmt::Debug>(bus: &Bus, message: E) -> Option<u64> {
    match bus.publish(message) {
        Ok(seq) => Some(seq),
        Err(PublishError::Rejected { .. }) => None,
        Err(error) => panic!("publish failed: {error}"),
    }
}

#[derive(Debug, Clone)]
enum Op {
    Subscribe {
        topic: usize,
        capacity: usize,
        overflow: Overflow,
        retries: u32,
        /// An async subscriber (feature `tokio`).
        task: bool,
        /// On the log topic: a group of this many workers, if more than 1.
        workers: usize,
        /// A group's key (`value % 3`), or none.
        keyed: bool,
        /// An inline subscriber (then the rest but `topic` is unused).
        inline: bool,
        /// A priority mailbox (not on the log, not inline).
        priority: bool,
    },
    Unsubscribe {
        which: usize,
    },
    Publish {
        topic: usize,
        count: u64,
        threads: u64,
    },
    /// Stall a `DropOldest`/`DropNewest` subscriber exactly: idle, then stuck on one message.
    Stall {
        which: usize,
    },
    Release {
        which: usize,
    },
}

#[derive(Debug, Clone, Copy)]
enum Ending {
    Close,
    CloseTimeout,
    /// close_timeout while stalled handlers still hold their mailboxes.
    ForcedWhileStalled,
}

fn op() -> impl Strategy<Value = Op> {
    let overflow = prop_oneof![
        Just(Overflow::Block),
        Just(Overflow::DropOldest),
        Just(Overflow::DropNewest)
    ];
    prop_oneof![
        3 => (0..TOPICS, 1..=8usize, overflow, 0..=2u32, any::<bool>(), prop_oneof![2 => Just(1usize), 1 => Just(2), 1 => Just(3)], any::<bool>(), prop::bool::weighted(0.2), prop::bool::weighted(0.35)).prop_map(|(topic, capacity, overflow, retries, task, workers, keyed, inline, priority)| {
            let task = task && cfg!(feature = "tokio");
            let workers = if topic == LOG && !inline { workers } else { 1 };
            let priority = priority && topic != LOG && !inline;
            Op::Subscribe { topic, capacity, overflow, retries, task, workers, keyed, inline, priority }
        }),
        1 => any::<usize>().prop_map(|which| Op::Unsubscribe { which }),
        4 => (0..TOPICS, 1..=12u64, 1..=4u64).prop_map(|(topic, count, threads)| Op::Publish { topic, count, threads }),
        2 => any::<usize>().prop_map(|which| Op::Stall { which }),
        2 => any::<usize>().prop_map(|which| Op::Release { which }),
    ]
}

fn ending() -> impl Strategy<Value = Ending> {
    prop_oneof![
        Just(Ending::Close),
        Just(Ending::CloseTimeout),
        Just(Ending::ForcedWhileStalled)
    ]
}

/// What a subscriber's handler saw, and the stall it may be asked to do.
#[derive(Default)]
struct Probe {
    /// (seq, value) at each message's first attempt, in order.
    seen: Mutex<Vec<(u64, u64)>>,
    /// Attempts by seq: a message handed to two workers of a group shows here.
    attempts: Mutex<HashMap<u64, u32>>,
    stall: Mutex<Option<(Signal, Latch)>>,
    /// An inline subscriber's refusals: (seq, value).
    refused: Mutex<Vec<(u64, u64)>>,
}

/// A group's key.
fn key(value: u64) -> u64 {
    value % 3
}

/// A priority subscriber's level of a message: higher first.
fn level(value: u64) -> u8 {
    (value % 3) as u8
}

/// The model of a stalled priority mailbox of `capacity`: `arrivals` (seq, level) come in
/// seq order while its worker is stuck; what it keeps, in the order its worker takes them
/// once released (most urgent first, within one level oldest first).
fn priority_window(arrivals: &[(u64, u8)], capacity: usize, overflow: Overflow) -> Vec<u64> {
    let mut queued: BTreeMap<u8, VecDeque<u64>> = BTreeMap::new();
    for &(seq, level) in arrivals {
        let len: usize = queued.values().map(VecDeque::len).sum();
        if len >= capacity {
            let least = *queued
                .keys()
                .next()
                .expect("a full mailbox holds something");
            let at = queued.get_mut(&least).unwrap();
            match overflow {
                // The arriving one is the newest: it goes unless it is more urgent.
                Overflow::DropNewest if level <= least => continue,
                Overflow::DropNewest => at.pop_back(),
                // Never a queued one for a less urgent arriving one.
                Overflow::DropOldest if level < least => continue,
                Overflow::DropOldest => at.pop_front(),
                _ => unreachable!("a Block subscriber is never stalled"),
            };
            if at.is_empty() {
                queued.remove(&least);
            }
        }
        queued.entry(level).or_default().push_back(seq);
    }
    queued.into_values().rev().flatten().collect()
}

fn handler<E: Valued>(
    probe: Arc<Probe>,
) -> impl Fn(&Message<E>) -> Result<(), String> + Send + Sync + 'static {
    move |m: &Message<E>| {
        let first = {
            let mut seen = probe.seen.lock().unwrap();
            let mut attempts = probe.attempts.lock().unwrap();
            let attempt = attempts.entry(m.seq()).or_insert(0);
            *attempt += 1;
            let first = *attempt == 1;
            if first {
                seen.push((m.seq(), m.value()));
            }
            first
        };
        if first {
            let stall = probe.stall.lock().unwrap().take();
            if let Some((started, release)) = stall {
                started.send(m.seq());
                release.wait();
            }
        }
        if m.value() % 11 == 5 {
            panic!("boom {}", m.value());
        }
        if m.value() % 7 == 3 {
            return Err(format!("fail {}", m.value()));
        }
        Ok(())
    }
}

/// An inline subscriber's handler: (seq, value) of each message it accepts in `seen`, of
/// each it refuses in `refused`.
fn inline_handler<E: Valued>(
    probe: Arc<Probe>,
) -> impl FnMut(&Message<E>) -> Result<(), String> + Send + 'static {
    move |m: &Message<E>| {
        let value = m.value();
        if !refuses(value) {
            probe.seen.lock().unwrap().push((m.seq(), value));
            return Ok(());
        }
        probe.refused.lock().unwrap().push((m.seq(), value));
        if value % 17 == 9 {
            panic!("boom {value}");
        }
        Err(format!("refused {value}"))
    }
}

#[cfg(feature = "tokio")]
type Attempt = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>;

/// The same handler for a task worker: the message by value, a future that yields once. A
/// stall blocks in `block_in_place`, so the runtime's other tasks go on.
#[cfg(feature = "tokio")]
fn async_handler<E: Valued>(
    probe: Arc<Probe>,
) -> impl Fn(Message<E>) -> Attempt + Send + Sync + 'static {
    let handler = handler::<E>(probe);
    move |m: Message<E>| {
        let outcome = tokio::task::block_in_place(|| handler(&m));
        Box::pin(async move {
            tokio::task::yield_now().await;
            outcome
        })
    }
}

struct Sub {
    name: String,
    topic: usize,
    overflow: Overflow,
    capacity: usize,
    retries: u32,
    /// A group's workers (1: not a group), and whether it has a key.
    workers: usize,
    keyed: bool,
    inline: bool,
    /// A priority mailbox, by [`level`].
    priority: bool,
    probe: Arc<Probe>,
    handle: Option<Subscription>,
    /// The topic's seqs from `start` to `end` (exclusive) were published while subscribed.
    start: u64,
    end: Option<u64>,
    /// An open stall: its latch and the first seq published while stalled.
    stalled: Option<(Latch, u64)>,
    /// Closed stall windows: [from, to).
    windows: Vec<(u64, u64)>,
    /// A window still stalled when the bus was force-closed.
    abandoned: Option<(u64, u64)>,
    final_stats: Option<SubscriptionStats>,
}

impl Sub {
    /// How many of the messages published while it was stalled it gets: its mailbox's, or
    /// on the log what the log keeps.
    fn keeps(&self) -> usize {
        if self.topic == LOG {
            LOG_RETAIN
        } else {
            self.capacity
        }
    }

    fn live(&self) -> bool {
        self.handle.is_some()
    }

    fn wait_idle(&self) {
        support::until_idle(self.handle.as_ref().unwrap());
    }
}

struct World {
    bus: Bus,
    #[cfg(feature = "tokio")]
    _runtime: tokio::runtime::Runtime,
    subs: Vec<Sub>,
    next_seq: [u64; TOPICS],
    values: [HashMap<u64, u64>; TOPICS],
    next_value: u64,
}

impl World {
    fn publish(&mut self, topic: usize, count: u64, threads: u64) {
        let first_value = self.next_value;
        self.next_value += count;
        let refusing = self
            .subs
            .iter()
            .any(|s| s.live() && s.inline && s.topic == topic);
        let published: Vec<(Option<u64>, u64)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads.min(count))
                .map(|t| {
                    let bus = self.bus.clone();
                    scope.spawn(move || {
                        let mut out = Vec::new();
                        let mut value = first_value + t;
                        while value < first_value + count {
                            let seq = match topic {
                                0 => publish_one(&bus, Ev::<0> { value }),
                                1 => publish_one(&bus, Ev::<1> { value }),
                                DISP => publish_one(&bus, DispEv { value }),
                                _ => publish_one(&bus, LogEv { value }),
                            };
                            out.push((seq, value));
                            value += threads.min(count);
                        }
                        out
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap())
                .collect()
        });
        let mut accepted = 0;
        for (seq, value) in published {
            // Rejected exactly when a live inline subscriber refuses it.
            let rejected = refusing && refuses(value);
            assert_eq!(seq.is_none(), rejected, "value {value}: {seq:?}");
            let Some(seq) = seq else { continue };
            accepted += 1;
            assert!(
                self.values[topic].insert(seq, value).is_none(),
                "seq {seq} given twice"
            );
        }
        self.next_seq[topic] += accepted;
        let mut seqs: Vec<_> = self.values[topic].keys().copied().collect();
        seqs.sort_unstable();
        assert_eq!(
            seqs,
            (0..self.next_seq[topic]).collect::<Vec<_>>(),
            "seqs have gaps"
        );
    }

    fn pick(&self, which: usize, fit: impl Fn(&Sub) -> bool) -> Option<usize> {
        let fits: Vec<_> = (0..self.subs.len())
            .filter(|&i| fit(&self.subs[i]))
            .collect();
        (!fits.is_empty()).then(|| fits[which % fits.len()])
    }

    /// On the dispatcher topic: waits until the dispatcher has handed out every message
    /// published, so each is in its mailboxes (dropped there or queued) as on a mailbox topic.
    /// Exact: `handed_out` never reads high.
    fn settle(&self, topic: usize) {
        if topic != DISP {
            return;
        }
        let published = self.next_seq[DISP];
        support::until("the dispatcher handed out every message", || {
            let stats = self.bus.stats();
            let disp = stats.topics.iter().find(|t| t.name == DispEv::name());
            // Not in the stats yet: nothing was ever published or subscribed.
            disp.map_or(published == 0, |t| {
                assert_eq!(t.queue_capacity, Some(DISP_QUEUE));
                t.handed_out == Some(published)
            })
        });
    }

    fn release(&mut self, i: usize) {
        let topic = self.subs[i].topic;
        // Every message of the window in the mailbox before the handler goes on.
        self.settle(topic);
        let (latch, from) = self.subs[i].stalled.take().unwrap();
        self.subs[i].windows.push((from, self.next_seq[topic]));
        latch.open();
        // Drained before anything else is published, so the window's outcome is exact.
        self.subs[i].wait_idle();
    }

    fn run(&mut self, op: &Op) {
        match *op {
            Op::Subscribe {
                topic,
                capacity,
                overflow,
                retries,
                task,
                workers,
                keyed,
                inline,
                priority,
            } => {
                // Its first message is the next one published.
                self.settle(topic);
                let name = format!("s{}", self.subs.len());
                let probe = Arc::new(Probe::default());
                // On the log: no `DropNewest`, and `Block` capacity within what the log keeps.
                let (overflow, capacity) = match (topic, overflow) {
                    (LOG, Overflow::DropNewest) => (Overflow::DropOldest, capacity),
                    (LOG, overflow) => (overflow, capacity.min(LOG_RETAIN)),
                    _ => (overflow, capacity),
                };
                let keyed = keyed && workers > 1;
                // A keyed group on a log is refused `DropOldest` (its workers could not count
                // their laps): `Block` instead.
                let overflow = match overflow {
                    Overflow::DropOldest if keyed => Overflow::Block,
                    overflow => overflow,
                };
                let mut options = Options::default()
                    .name(name.clone())
                    .capacity(capacity)
                    .overflow(overflow)
                    .retries(retries)
                    .backoff(Duration::ZERO)
                    .workers(workers);
                if keyed {
                    options = options.key(|m: &LogEv| key(m.value));
                }
                if priority {
                    options = match topic {
                        0 => options.priority(|m: &Ev<0>| level(m.value)),
                        1 => options.priority(|m: &Ev<1>| level(m.value)),
                        _ => options.priority(|m: &DispEv| level(m.value)),
                    };
                }
                let handle = match (topic, task) {
                    _ if inline => {
                        let options = Options::default().name(name.clone());
                        let probe = probe.clone();
                        match topic {
                            0 => self
                                .bus
                                .subscribe_inline(options, inline_handler::<Ev<0>>(probe)),
                            1 => self
                                .bus
                                .subscribe_inline(options, inline_handler::<Ev<1>>(probe)),
                            DISP => self
                                .bus
                                .subscribe_inline(options, inline_handler::<DispEv>(probe)),
                            _ => self
                                .bus
                                .subscribe_inline(options, inline_handler::<LogEv>(probe)),
                        }
                    }
                    #[cfg(feature = "tokio")]
                    (LOG, true) if workers > 1 => self
                        .bus
                        .subscribe_group_async(options, async_handler::<LogEv>(probe.clone())),
                    (LOG, _) if workers > 1 => self
                        .bus
                        .subscribe_group::<LogEv>(options, handler::<LogEv>(probe.clone())),
                    #[cfg(feature = "tokio")]
                    (0, true) => self
                        .bus
                        .subscribe_async(options, async_handler::<Ev<0>>(probe.clone())),
                    #[cfg(feature = "tokio")]
                    (1, true) => self
                        .bus
                        .subscribe_async(options, async_handler::<Ev<1>>(probe.clone())),
                    #[cfg(feature = "tokio")]
                    (DISP, true) => self
                        .bus
                        .subscribe_async(options, async_handler::<DispEv>(probe.clone())),
                    #[cfg(feature = "tokio")]
                    (_, true) => self
                        .bus
                        .subscribe_async(options, async_handler::<LogEv>(probe.clone())),
                    (0, _) => self
                        .bus
                        .subscribe::<Ev<0>>(options, handler::<Ev<0>>(probe.clone())),
                    (1, _) => self
                        .bus
                        .subscribe::<Ev<1>>(options, handler::<Ev<1>>(probe.clone())),
                    (DISP, _) => self
                        .bus
                        .subscribe::<DispEv>(options, handler::<DispEv>(probe.clone())),
                    _ => self
                        .bus
                        .subscribe::<LogEv>(options, handler::<LogEv>(probe.clone())),
                };
                self.subs.push(Sub {
                    name,
                    topic,
                    overflow,
                    capacity,
                    retries,
                    workers,
                    keyed,
                    inline,
                    priority,
                    probe,
                    handle: Some(handle),
                    start: self.next_seq[topic],
                    end: None,
                    stalled: None,
                    windows: Vec::new(),
                    abandoned: None,
                    final_stats: None,
                });
            }
            Op::Unsubscribe { which } => {
                if let Some(i) = self.pick(which, Sub::live) {
                    // It has had every message published before its unsubscribe.
                    self.settle(self.subs[i].topic);
                    if self.subs[i].stalled.is_some() {
                        self.release(i);
                    }
                    let sub = &mut self.subs[i];
                    sub.final_stats = Some(sub.handle.take().unwrap().unsubscribe());
                    sub.end = Some(self.next_seq[sub.topic]);
                }
            }
            Op::Publish {
                topic,
                count,
                threads,
            } => self.publish(topic, count, threads),
            Op::Stall { which } => {
                let fit = |s: &Sub| {
                    s.live()
                        && s.stalled.is_none()
                        && s.overflow != Overflow::Block
                        && s.workers == 1
                        && !s.inline
                };
                if let Some(i) = self.pick(which, fit) {
                    // The next message it takes is the one published below.
                    self.settle(self.subs[i].topic);
                    self.subs[i].wait_idle();
                    let (started, latch) = (Signal::new(), Latch::new());
                    *self.subs[i].probe.stall.lock().unwrap() =
                        Some((started.clone(), latch.clone()));
                    let topic = self.subs[i].topic;
                    // A value no inline subscriber refuses: it is published.
                    while refuses(self.next_value) {
                        self.next_value += 1;
                    }
                    self.publish(topic, 1, 1);
                    assert_eq!(started.next(), self.next_seq[topic] - 1);
                    self.subs[i].stalled = Some((latch, self.next_seq[topic]));
                }
            }
            Op::Release { which } => {
                if let Some(i) = self.pick(which, |s| s.stalled.is_some()) {
                    self.release(i);
                }
            }
        }
    }

    fn end(&mut self, ending: Ending) {
        let stalled: Vec<usize> = (0..self.subs.len())
            .filter(|&i| self.subs[i].stalled.is_some())
            .collect();
        match ending {
            Ending::ForcedWhileStalled if !stalled.is_empty() => {
                // What each stalled mailbox holds is known only once all is handed out.
                self.settle(DISP);
                for sub in self.subs.iter().filter(|s| s.live() && s.stalled.is_none()) {
                    sub.wait_idle();
                }
                let report = self.bus.close_timeout(Duration::from_millis(30));
                assert!(!report.completed);
                for &i in &stalled {
                    let sub = &mut self.subs[i];
                    let (latch, from) = sub.stalled.take().unwrap();
                    let window = (from, self.next_seq[sub.topic]);
                    // What it holds, within its capacity: on the log, what lies past its
                    // window is lag, not queued (issue 31).
                    let held = (window.1 - window.0) as usize;
                    let held = held.min(sub.keeps()).min(sub.capacity) as u64;
                    let unfinished = report
                        .subscriptions
                        .iter()
                        .find(|u| u.name == sub.name)
                        .unwrap();
                    assert_eq!((unfinished.queued, unfinished.in_handler), (held, 1));
                    sub.abandoned = Some(window);
                    latch.open();
                }
            }
            _ => {
                for i in stalled {
                    self.release(i);
                }
                let bus = self.bus.clone();
                let (done_tx, done_rx) = crossbeam_channel::bounded(1);
                std::thread::spawn(move || {
                    let completed = match ending {
                        Ending::CloseTimeout => bus.close_timeout(PATIENCE).completed,
                        _ => {
                            bus.close();
                            true
                        }
                    };
                    let _ = done_tx.send(completed);
                });
                assert!(done_rx.recv_timeout(PATIENCE * 2).expect("close froze"));
            }
        }
        // Every worker has stopped once its unsubscribe returns (after close it only joins).
        for sub in &mut self.subs {
            if let Some(handle) = sub.handle.take() {
                sub.final_stats = Some(handle.unsubscribe());
                sub.end = Some(self.next_seq[sub.topic]);
            }
        }
        assert!(
            self.bus.publish(Ev::<0> { value: 0 }).is_err(),
            "publish after close"
        );
    }

    fn check(&self) {
        let letters = self.bus.dead_letters();
        for sub in &self.subs {
            let seen = sub.probe.seen.lock().unwrap().clone();
            let stats = sub.final_stats.as_ref().unwrap();
            let (start, end) = (sub.start, sub.end.unwrap());
            let name = &sub.name;
            if sub.inline {
                // Every message published while it was subscribed, in seq order, each with
                // its value; its refusals took no seq (the next accepted one has it).
                let expected: Vec<(u64, u64)> = (start..end)
                    .map(|seq| (seq, self.values[sub.topic][&seq]))
                    .collect();
                assert_eq!(seen, expected, "{name}: inline");
                let refused = sub.probe.refused.lock().unwrap().clone();
                for (seq, value) in &refused {
                    assert!(
                        refuses(*value) && (start..=end).contains(seq),
                        "{name}: {refused:?}"
                    );
                }
                let (got, no) = (seen.len() as u64, refused.len() as u64);
                assert_eq!(stats.received, got + no, "{name}: {stats:?}");
                assert_eq!(
                    (stats.delivered, stats.failed),
                    (got, no),
                    "{name}: {stats:?}"
                );
                // A refusal is counted as dropped: the publisher has the message back.
                assert_eq!(
                    (
                        stats.queued,
                        stats.dropped,
                        stats.dead_lettered,
                        stats.in_handler
                    ),
                    (0, no, 0, 0),
                    "{name}: {stats:?}"
                );
                continue;
            }
            // One order: seqs strictly increase (a keyed group: one key's; a group without a
            // key promises none), and each seq is the message published as it.
            match (sub.workers, sub.keyed) {
                // A priority mailbox: one level's messages in topic order.
                (1, _) if sub.priority => {
                    let mut by_level: BTreeMap<u8, Vec<u64>> = BTreeMap::new();
                    for (seq, value) in &seen {
                        by_level.entry(level(*value)).or_default().push(*seq);
                    }
                    for (level, seqs) in by_level {
                        assert!(
                            seqs.windows(2).all(|w| w[0] < w[1]),
                            "{name}: level {level} out of order: {seqs:?}"
                        );
                    }
                }
                (1, _) => assert!(
                    seen.windows(2).all(|w| w[0].0 < w[1].0),
                    "{name}: order broken: {seen:?}"
                ),
                (_, true) => {
                    let mut by_key: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
                    for (seq, value) in &seen {
                        by_key.entry(key(*value)).or_default().push(*seq);
                    }
                    for (key, seqs) in by_key {
                        assert!(
                            seqs.windows(2).all(|w| w[0] < w[1]),
                            "{name}: key {key} out of order: {seqs:?}"
                        );
                    }
                }
                (_, false) => {}
            }
            // Each message handed to one worker once: a success is attempted once, a
            // failure at most its retries more.
            for (seq, attempts) in sub.probe.attempts.lock().unwrap().iter() {
                let most = if fails(self.values[sub.topic][seq]) {
                    sub.retries + 1
                } else {
                    1
                };
                assert!(
                    (1..=most).contains(attempts),
                    "{name}: seq {seq} attempted {attempts} times"
                );
            }
            for (seq, value) in &seen {
                assert_eq!(
                    self.values[sub.topic].get(seq),
                    Some(value),
                    "{name}: seq {seq}"
                );
                assert!(
                    (start..end).contains(seq),
                    "{name}: seq {seq} outside [{start}, {end})"
                );
            }
            let mut seqs: Vec<u64> = seen.iter().map(|s| s.0).collect();
            seqs.sort_unstable();
            let in_window = |(from, to): (u64, u64)| -> Vec<u64> {
                seqs.iter()
                    .copied()
                    .filter(|s| (from..to).contains(s))
                    .collect()
            };
            // A priority mailbox's stall: what it kept, in the order its worker took them.
            let prioritised = |(from, to): (u64, u64)| -> Vec<u64> {
                let arrivals: Vec<(u64, u8)> = (from..to)
                    .map(|seq| (seq, level(self.values[sub.topic][&seq])))
                    .collect();
                priority_window(&arrivals, sub.capacity, sub.overflow)
            };
            for &(from, to) in sub.windows.iter().filter(|_| sub.priority) {
                let taken: Vec<u64> = seen
                    .iter()
                    .map(|s| s.0)
                    .filter(|s| (from..to).contains(s))
                    .collect();
                assert_eq!(
                    taken,
                    prioritised((from, to)),
                    "{name}: priority stall window [{from}, {to})"
                );
            }
            for &(from, to) in sub.windows.iter().filter(|_| !sub.priority) {
                let all: Vec<u64> = (from..to).collect();
                let keep = all.len().min(sub.keeps());
                let expected = match sub.overflow {
                    Overflow::DropNewest => all[..keep].to_vec(),
                    _ => all[all.len() - keep..].to_vec(),
                };
                assert_eq!(
                    in_window((from, to)),
                    expected,
                    "{name}: stall window [{from}, {to})"
                );
            }
            // What a forced close left queued is kept as dead letters, never attempted; on
            // the log, what was unread stays there (its `queued`), within the stall window.
            let queued = match (sub.topic == LOG, sub.abandoned) {
                (true, Some((from, to))) => {
                    assert!(stats.queued <= to - from, "{name}: {stats:?}");
                    stats.queued
                }
                _ => 0,
            };
            let closed: Vec<u64> = letters
                .iter()
                .filter(|l| l.subscriber() == name && l.attempts() == 0)
                .map(|l| l.seq())
                .collect();
            match sub.abandoned {
                Some(window) => {
                    assert_eq!(
                        in_window(window),
                        Vec::<u64>::new(),
                        "{name}: delivered after close"
                    );
                    for seq in &closed {
                        assert!(
                            (window.0..window.1).contains(seq) && !seqs.contains(seq),
                            "{name}: closed out {seq}, outside {window:?} or seen"
                        );
                    }
                    if sub.priority {
                        // Exactly what its mailbox kept.
                        let mut kept = prioritised(window);
                        kept.sort_unstable();
                        let mut closed = closed.clone();
                        closed.sort_unstable();
                        assert_eq!(closed, kept, "{name}: closed out, window {window:?}");
                    }
                }
                None => assert_eq!(closed, Vec::<u64>::new(), "{name}: closed out"),
            }
            let closed = closed.len() as u64;
            if sub.overflow == Overflow::Block {
                assert_eq!(
                    seqs,
                    (start..end).collect::<Vec<_>>(),
                    "{name}: Block lost messages"
                );
            }
            let dead = seen.iter().filter(|(_, value)| fails(*value)).count() as u64;
            let got = seen.len() as u64;
            if sub.topic == LOG && sub.abandoned.is_some() {
                // Left unread in the log by a forced close: received as far as its window
                // reaches, the rest is its lag, up to the end.
                assert!(stats.received <= end - start, "{name}: {stats:?}");
                let (position, lag) = (stats.position.unwrap(), stats.lag.unwrap());
                assert_eq!(position + lag, end, "{name}: {stats:?}");
            } else {
                assert_eq!(stats.received, end - start, "{name}: {stats:?}");
            }
            assert_eq!(stats.queued, queued, "{name}: {stats:?}");
            assert_eq!(stats.dead_lettered, dead + closed, "{name}: {stats:?}");
            assert_eq!(stats.delivered, got - dead, "{name}: {stats:?}");
            assert_eq!(
                stats.dropped,
                stats.received - got - queued - closed,
                "{name}: {stats:?}"
            );
            let letters = letters.iter().filter(|l| l.subscriber() == name).count() as u64;
            assert_eq!(letters, dead + closed, "{name}: dead letters");
        }
    }
}

/// A failed check unwinds through here: the stalled handlers are let go first, so that the
/// bus's drop (a close) does not wait for them forever and the failure is reported.
impl Drop for World {
    fn drop(&mut self) {
        for sub in &mut self.subs {
            if let Some((latch, _)) = sub.stalled.take() {
                latch.open();
            }
        }
    }
}

fn run_program(ops: &[Op], ending: Ending) {
    #[cfg(feature = "tokio")]
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let builder = Bus::builder();
    #[cfg(feature = "tokio")]
    let builder = builder.runtime(runtime.handle().clone());
    let mut world = World {
        bus: builder.build(),
        #[cfg(feature = "tokio")]
        _runtime: runtime,
        subs: Vec::new(),
        next_seq: [0; TOPICS],
        values: Default::default(),
        next_value: 0,
    };
    for op in ops {
        world.run(op);
    }
    world.end(ending);
    world.check();
}

fn cases() -> u32 {
    std::env::var("EVENTBUS_MODEL_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256)
}

fn quiet_expected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let boom = info
                .payload()
                .downcast_ref::<String>()
                .is_some_and(|s| s.starts_with("boom"));
            if !boom {
                default(info);
            }
        }));
    });
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_bus_behaves_like_the_model(ops in prop::collection::vec(op(), 1..24), ending in ending()) {
        quiet_expected_panics();
        run_program(&ops, ending);
    }
}
