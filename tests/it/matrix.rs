//! What works with what (issue 26, item 6): every kind of subscriber against both kinds of
//! topic and the options that change a delivery. One body runs over every cell. A cell that
//! works is checked the same way whatever its kind: the order its kind promises, counts that
//! add up (`delivered + dropped + filtered` is what was published to it), and a close that
//! delivers everything accepted. A cell that is refused must be refused with the error that
//! [`expected`] states. `Kind`, `On` and `Opt` are matched exhaustively there, so a new kind of
//! subscriber cannot skip a cell. GUARANTEES.md's table of what works with what is [`expected`].

use crate::support::{Latch, PATIENCE};

use std::collections::{BTreeMap, BTreeSet};
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use eventbus::{
    AnyMessage, Bus, Message, MessageStream, Options, Overflow, Start, SubscribeError,
    Subscription, SubscriptionStats, Topic,
};
use futures_core::Stream;

/// A kind of subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `subscribe`: a thread worker.
    Thread,
    /// `subscribe_async`: a task worker.
    Task,
    /// `stream`: the caller consumes the mailbox.
    Stream,
    /// `subscribe_group` with 3 workers and no key.
    Group,
    /// `subscribe_group` with 3 workers and a key.
    KeyedGroup,
    /// `observe`: a thread worker over every matching topic.
    Observer,
    /// `observe_async`: a task worker over every matching topic.
    AsyncObserver,
}

const KINDS: [Kind; 7] = [
    Kind::Thread,
    Kind::Task,
    Kind::Stream,
    Kind::Group,
    Kind::KeyedGroup,
    Kind::Observer,
    Kind::AsyncObserver,
];

/// A kind of topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum On {
    Mailbox,
    Log,
}

/// An option that changes a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt {
    Block,
    DropOldest,
    DropNewest,
    /// A filter that keeps even values.
    Filter,
    /// A key (`value % 3`): for a group, which worker; refused elsewhere.
    Key,
    /// `Start::Earliest`, after some history was published.
    Start,
}

const OPTS: [Opt; 6] = [
    Opt::Block,
    Opt::DropOldest,
    Opt::DropNewest,
    Opt::Filter,
    Opt::Key,
    Opt::Start,
];

/// What a cell does: works, or is refused with the `SubscribeError` variant named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    Works,
    Refused(&'static str),
}

/// The table: what each kind of subscriber does on each kind of topic with each option.
pub fn expected(kind: Kind, on: On, opt: Opt) -> Expect {
    use Expect::{Refused, Works};
    match (kind, on, opt) {
        // A key picks one of a group's workers; anything else has one.
        (
            Kind::Thread | Kind::Task | Kind::Stream | Kind::Observer | Kind::AsyncObserver,
            _,
            Opt::Key,
        ) => Refused("Group"),
        // A mailbox topic keeps nothing to start from.
        (_, On::Mailbox, Opt::Start) => Refused("NoLog"),
        (Kind::Thread | Kind::Task | Kind::Stream | Kind::Group | Kind::KeyedGroup, _, _)
            if on == On::Mailbox =>
        {
            Works
        }
        (Kind::Observer | Kind::AsyncObserver, On::Mailbox, _) => Works,
        // An observer has its own mailbox on every topic, a log topic's too; it starts now.
        (Kind::Observer | Kind::AsyncObserver, On::Log, Opt::Start) => Refused("NoLog"),
        (Kind::Observer | Kind::AsyncObserver, On::Log, _) => Works,
        // A keyed group's worker lapped by the trim cannot tell which of the messages it
        // lost were its own (a group without a key shares one position, lapped as one).
        (Kind::KeyedGroup, On::Log, Opt::DropOldest) => Refused("Group"),
        // A log subscription reads the log at its position: there is no newest to refuse.
        (_, On::Log, Opt::DropNewest) => Refused("DropNewestOnLog"),
        // A keyed group's workers each read the log at their own position; a group without
        // a key shares one.
        (Kind::Thread | Kind::Task | Kind::Stream | Kind::Group | Kind::KeyedGroup, On::Log, _) => {
            Works
        }
        (_, On::Mailbox, _) => unreachable!("every mailbox cell is matched above"),
    }
}

/// Messages published live in each cell, after `HISTORY` ones for `Opt::Start`. On the log
/// topic, which keeps 16, a `DropOldest` reader held at its first message is lapped by the
/// trim (a log's `DropOldest` drops by the trim, not by `capacity`).
const LIVE: u64 = 40;
const HISTORY: u64 = 10;
/// The mailboxes' capacity where an option drops.
const SMALL: usize = 4;
const WORKERS: usize = 3;

#[derive(Topic, Debug, Clone, Copy)]
#[topic(name = "matrix.mailbox")]
pub struct M(u64);

#[derive(Topic, Debug, Clone, Copy)]
#[topic(name = "matrix.log", retain = 16)]
pub struct L(u64);

/// The two topic types, alike.
pub trait Value: Topic + Copy {
    fn new(value: u64) -> Self;
    fn value(&self) -> u64;
}

impl Value for M {
    fn new(value: u64) -> Self {
        M(value)
    }
    fn value(&self) -> u64 {
        self.0
    }
}

impl Value for L {
    fn new(value: u64) -> Self {
        L(value)
    }
    fn value(&self) -> u64 {
        self.0
    }
}

fn key(value: u64) -> u64 {
    value % 3
}

/// What handlers saw: (the worker or task that handled it, seq, value).
#[derive(Clone, Default)]
struct Record(Arc<Mutex<Vec<(String, u64, u64)>>>);

impl Record {
    fn push(&self, seq: u64, value: u64) {
        let worker = match tokio::task::try_id() {
            Some(task) => format!("task {task}"),
            None => format!("{:?}", std::thread::current().id()),
        };
        self.0.lock().unwrap().push((worker, seq, value));
    }

    fn get(&self) -> Vec<(String, u64, u64)> {
        self.0.lock().unwrap().clone()
    }
}

/// Holds every handler at its first message until the test has published everything, so a
/// small mailbox really overflows. Open from the start where nothing should drop.
#[derive(Clone)]
struct Gate {
    latch: Latch,
    open: tokio::sync::watch::Sender<bool>,
}

impl Gate {
    fn new(open: bool) -> Self {
        let gate = Gate {
            latch: Latch::new(),
            open: tokio::sync::watch::channel(false).0,
        };
        if open {
            gate.open();
        }
        gate
    }

    fn open(&self) {
        self.latch.open();
        self.open.send_replace(true);
    }

    fn wait(&self) {
        self.latch.wait();
    }

    async fn passed(&self) {
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|open| *open).await;
    }
}

fn options(kind: Kind, opt: Opt) -> Options {
    let mut options = Options::default().name(format!("{kind:?}"));
    options = match opt {
        Opt::Block | Opt::Filter | Opt::Key | Opt::Start => options,
        Opt::DropOldest => options.capacity(SMALL).overflow(Overflow::DropOldest),
        Opt::DropNewest => options.capacity(SMALL).overflow(Overflow::DropNewest),
    };
    if opt == Opt::Start {
        options = options.start(Start::Earliest);
    }
    match kind {
        Kind::Group => options.workers(WORKERS),
        Kind::KeyedGroup => options.workers(WORKERS),
        Kind::Thread | Kind::Task | Kind::Stream | Kind::Observer | Kind::AsyncObserver => options,
    }
}

/// A subscription the test holds, and for a stream, the task that reads it.
struct Subscribed {
    subscription: Option<Subscription>,
    reader: Option<tokio::task::JoinHandle<SubscriptionStats>>,
}

fn subscribe<T: Value>(
    bus: &Bus,
    runtime: &tokio::runtime::Runtime,
    kind: Kind,
    opt: Opt,
    record: &Record,
    gate: &Gate,
) -> Result<Subscribed, SubscribeError> {
    let mut options = options(kind, opt);
    if opt == Opt::Filter {
        options = match kind {
            Kind::Observer | Kind::AsyncObserver => options.filter(|m: &AnyMessage| {
                let value = m
                    .downcast_ref::<T>()
                    .map(Value::value)
                    .expect("only T here");
                value % 2 == 0
            }),
            _ => options.filter(|m: &T| m.value() % 2 == 0),
        };
    }
    if kind == Kind::KeyedGroup || opt == Opt::Key {
        options = options.key(|m: &T| key(m.value()));
    }
    let (record, gate) = (record.clone(), gate.clone());
    let subscription = match kind {
        Kind::Thread => bus.try_subscribe::<T>(options, move |m: &Message<T>| {
            gate.wait();
            record.push(m.seq(), m.value());
        })?,
        Kind::Task => bus.try_subscribe_async::<T, _, _, _>(options, move |m: Message<T>| {
            let (record, gate) = (record.clone(), gate.clone());
            async move {
                gate.passed().await;
                record.push(m.seq(), m.value());
            }
        })?,
        Kind::Group | Kind::KeyedGroup => {
            bus.try_subscribe_group::<T>(options, move |m: &Message<T>| {
                gate.wait();
                record.push(m.seq(), m.value());
            })?
        }
        Kind::Observer => bus.observe("matrix.*", options, move |m: &AnyMessage| {
            gate.wait();
            let value = m
                .downcast_ref::<T>()
                .map(Value::value)
                .expect("only T here");
            record.push(m.seq(), value);
        })?,
        Kind::AsyncObserver => bus.observe_async("matrix.*", options, move |m: AnyMessage| {
            let (record, gate) = (record.clone(), gate.clone());
            async move {
                gate.passed().await;
                let value = m
                    .downcast_ref::<T>()
                    .map(Value::value)
                    .expect("only T here");
                record.push(m.seq(), value);
            }
        })?,
        Kind::Stream => {
            let mut stream: MessageStream<T> = bus.try_stream::<T>(options)?;
            let reader = runtime.spawn(async move {
                gate.passed().await;
                while let Some(m) = next(&mut stream).await {
                    record.push(m.seq(), m.value());
                }
                stream.stats()
            });
            return Ok(Subscribed {
                subscription: None,
                reader: Some(reader),
            });
        }
    };
    Ok(Subscribed {
        subscription: Some(subscription),
        reader: None,
    })
}

async fn next<T: Send + Sync + 'static>(stream: &mut MessageStream<T>) -> Option<Message<T>> {
    poll_fn(|cx| Pin::new(&mut *stream).poll_next(cx)).await
}

/// Runs one cell; panics with the cell's name on any broken promise.
fn cell<T: Value>(runtime: &tokio::runtime::Runtime, kind: Kind, on: On, opt: Opt) {
    let at = format!("cell ({kind:?}, {on:?}, {opt:?})");
    let bus = {
        let _inside = runtime.enter();
        Bus::builder().build()
    };
    let history = if opt == Opt::Start && on == On::Log {
        HISTORY
    } else {
        0
    };
    for value in 0..history {
        bus.publish(T::new(value)).unwrap();
    }
    let drops = matches!(opt, Opt::DropOldest | Opt::DropNewest);
    let (record, gate) = (Record::default(), Gate::new(!drops));
    let subscribed = subscribe::<T>(&bus, runtime, kind, opt, &record, &gate);
    match (expected(kind, on, opt), subscribed) {
        (Expect::Refused(variant), Err(error)) => {
            let debug = format!("{error:?}");
            assert!(
                debug.starts_with(variant),
                "{at}: refused with {debug}, not {variant}"
            );
            assert!(!error.to_string().is_empty(), "{at}");
            bus.close();
        }
        (Expect::Refused(variant), Ok(_)) => panic!("{at}: works, but the table says {variant}"),
        (Expect::Works, Err(error)) => panic!("{at}: refused: {error}"),
        (Expect::Works, Ok(subscribed)) => {
            let total = history + LIVE;
            for value in history..total {
                bus.publish(T::new(value)).unwrap();
            }
            gate.open();
            bus.close_timeout(PATIENCE);
            let stats = match (subscribed.subscription, subscribed.reader) {
                (_, Some(reader)) => runtime.block_on(reader).unwrap(),
                (Some(subscription), None) => subscription.stats(),
                (None, None) => unreachable!(),
            };
            check(&at, kind, opt, total, history, &record.get(), &stats);
        }
    }
}

/// The promises of a cell that works.
fn check(
    at: &str,
    kind: Kind,
    opt: Opt,
    total: u64,
    history: u64,
    seen: &[(String, u64, u64)],
    stats: &SubscriptionStats,
) {
    // Each message handled at most once, with the payload published under its seq.
    let mut seqs = BTreeSet::new();
    for (_, seq, value) in seen {
        assert_eq!(seq, value, "{at}: seq {seq} carried {value}");
        assert!(seqs.insert(*seq), "{at}: seq {seq} handled twice");
    }
    // The order the kind promises: the topic's, per key for a keyed group (one worker per
    // key), none for a keyless group.
    match kind {
        Kind::Group if opt != Opt::Key => {}
        Kind::Group | Kind::KeyedGroup => {
            let mut by_key: BTreeMap<u64, (String, Vec<u64>)> = BTreeMap::new();
            for (worker, seq, value) in seen {
                let entry = by_key
                    .entry(key(*value))
                    .or_insert_with(|| (worker.clone(), Vec::new()));
                assert_eq!(&entry.0, worker, "{at}: key {} on two workers", key(*value));
                entry.1.push(*seq);
            }
            for (key, (_, seqs)) in by_key {
                assert!(sorted(&seqs), "{at}: key {key} out of order: {seqs:?}");
            }
        }
        Kind::Thread | Kind::Task | Kind::Stream | Kind::Observer | Kind::AsyncObserver => {
            let order: Vec<u64> = seen.iter().map(|(_, seq, _)| *seq).collect();
            assert!(sorted(&order), "{at}: out of the topic's order: {order:?}");
        }
    }
    // What each option promises.
    let from = if opt == Opt::Start { 0 } else { history };
    let all: BTreeSet<u64> = (from..total).collect();
    let published = total - from;
    match opt {
        Opt::Block | Opt::Key | Opt::Start => {
            assert_eq!(seqs, all, "{at}: not everything was handled")
        }
        Opt::Filter => {
            let even: BTreeSet<u64> = all.iter().copied().filter(|s| s % 2 == 0).collect();
            assert_eq!(seqs, even, "{at}: the filter's messages");
            assert_eq!(stats.filtered, published / 2, "{at}: filtered");
        }
        Opt::DropOldest => {
            assert!(stats.dropped > 0, "{at}: nothing dropped: {stats:?}");
            assert!(seqs.contains(&(total - 1)), "{at}: the newest was dropped");
        }
        Opt::DropNewest => {
            assert!(stats.dropped > 0, "{at}: nothing dropped: {stats:?}");
            assert!(seqs.contains(&from), "{at}: the oldest was dropped");
            // A full mailbox refuses what comes: once one of its messages was dropped, a
            // later one got in only where a handler took one out meanwhile, and behind the
            // closed gate each handler holds at most one. (Which publish a take falls
            // before is the scheduler's: the newest itself may get in that way.) A keyed
            // group's mailboxes are one per worker, and one key's messages share one.
            let lane = |seq: u64| {
                if kind == Kind::KeyedGroup {
                    key(seq)
                } else {
                    0
                }
            };
            let lanes: BTreeSet<u64> = (from..total).map(lane).collect();
            for l in lanes {
                let Some(dropped) = (from..total).find(|s| lane(*s) == l && !seqs.contains(s))
                else {
                    continue;
                };
                let later: Vec<u64> = (dropped + 1..total)
                    .filter(|s| lane(*s) == l && seqs.contains(s))
                    .collect();
                assert!(
                    later.len() <= in_hand(kind),
                    "{at}: {later:?} got in after {dropped} was dropped as the newest"
                );
            }
        }
    }
    // Counts that add up, after a close that delivered everything accepted.
    assert_eq!(
        stats.delivered,
        seen.len() as u64,
        "{at}: delivered: {stats:?}"
    );
    assert_eq!(
        stats.delivered + stats.dropped + stats.filtered,
        published,
        "{at}: counts: {stats:?}"
    );
    assert_eq!(
        (stats.queued, stats.in_handler, stats.failed),
        (0, 0, 0),
        "{at}: {stats:?}"
    );
}

/// How many messages a kind's handlers can take out of their mailbox (one each, the one
/// each holds behind the closed gate; a stream's reader waits at the gate before it reads):
/// per mailbox, so a keyed group's worker holds one of its own.
fn in_hand(kind: Kind) -> usize {
    match kind {
        Kind::Stream => 0,
        Kind::Thread | Kind::Task | Kind::Observer | Kind::AsyncObserver | Kind::KeyedGroup => 1,
        Kind::Group => WORKERS,
    }
}

fn sorted(seqs: &[u64]) -> bool {
    seqs.windows(2).all(|pair| pair[0] < pair[1])
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Every cell of one kind of subscriber.
fn kind(kind: Kind) {
    let runtime = runtime();
    for on in [On::Mailbox, On::Log] {
        for opt in OPTS {
            match on {
                On::Mailbox => cell::<M>(&runtime, kind, on, opt),
                On::Log => cell::<L>(&runtime, kind, on, opt),
            }
        }
    }
}

#[test]
fn thread() {
    kind(Kind::Thread);
}

#[test]
fn task() {
    kind(Kind::Task);
}

#[test]
fn stream() {
    kind(Kind::Stream);
}

#[test]
fn group() {
    kind(Kind::Group);
}

#[test]
fn keyed_group() {
    kind(Kind::KeyedGroup);
}

#[test]
fn observer() {
    kind(Kind::Observer);
}

#[test]
fn async_observer() {
    kind(Kind::AsyncObserver);
}

/// Each kind has its test above: a kind added to `KINDS` without one fails here.
#[test]
fn every_kind_has_its_test() {
    let tested = [
        "thread",
        "task",
        "stream",
        "group",
        "keyed_group",
        "observer",
        "async_observer",
    ];
    assert_eq!(KINDS.len(), tested.len());
    for kind in KINDS {
        for on in [On::Mailbox, On::Log] {
            for opt in OPTS {
                // Every cell has an answer (the match in `expected` is exhaustive).
                let _ = expected(kind, on, opt);
            }
        }
    }
}
