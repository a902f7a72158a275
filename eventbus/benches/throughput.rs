//! `cargo bench -p eventbus --bench throughput`: the bus against the channels a Rust user
//! would otherwise pick, in one process, alternating, several rounds; medians and ratios to a
//! hand-made baseline measured in the same run. The contenders: the baseline, eventbus (a
//! mailbox topic), `tokio::sync::broadcast`, the `bus` crate, `flume`, `std`'s `sync_channel`
//! and an eventbus log topic (`#[topic(retain = 1024)]`, every subscriber `Block`).
//!
//! - `EVENTBUS_BENCH_MESSAGES` (default 1,000,000): messages per throughput scenario.
//! - `EVENTBUS_BENCH_ROUNDS` (default 5): rounds per scenario; the median is reported.
//! - `EVENTBUS_BENCH_SCALE` (default 10,000): subscribers in the scale scenario.
//! - `EVENTBUS_BENCH_CHART` (a path): also write an SVG chart of ns/delivery by subscribers.
//! - `EVENTBUS_BENCH_QUICK=1`: only the baseline and eventbus, for quick comparisons.
//! - `EVENTBUS_BENCH_ONLY` (text): only the measurements whose title contains it, such as
//!   `topics`, `16 subscriber`, `no subscribers`, `latency`, `memory` or `scale`.
//! - `EVENTBUS_BENCH_PIN=apart`: in the throughput scenarios, every publisher thread on the
//!   first core and every subscriber thread (eventbus's workers too) on the last;
//!   `EVENTBUS_BENCH_PIN=together`: all of them on the first core. The scheduler otherwise
//!   moves 1 → 1's two threads between these placements, whose times can differ by 2-3×.
//!
//! Figures from a shared machine are noisy: read the ratios, not the absolute numbers.

#[path = "common/measure.rs"]
mod measure;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};
use eventbus::{Bus, Message, Options, Overflow, Topic};
use hdrhistogram::Histogram;
use parking_lot::Mutex;

/// Mailbox / ring size for every contender.
const CAP: usize = 1024;

#[derive(Topic, Clone)]
struct Msg<const T: usize, const N: usize> {
    bytes: [u8; N],
}

/// The same on a log topic (issue 29, item 1), its ring as large as the others' mailboxes
/// (`CAP`).
#[derive(Topic, Clone)]
#[topic(retain = 1024)]
struct Logged<const T: usize, const N: usize> {
    bytes: [u8; N],
}

/// Which kind of eventbus topic a run publishes to: a mailbox per subscriber (`Msg`) or one
/// log its subscribers share (`Logged`, every subscriber `Block`, so nothing is lapped).
trait Kind {
    type Of<const T: usize, const N: usize>: Topic;
    fn make<const T: usize, const N: usize>() -> Self::Of<T, N>;
    fn bytes<const T: usize, const N: usize>(message: &Self::Of<T, N>) -> &[u8; N];
    fn options() -> Options;
}

struct Mailboxes;

impl Kind for Mailboxes {
    type Of<const T: usize, const N: usize> = Msg<T, N>;
    fn make<const T: usize, const N: usize>() -> Msg<T, N> {
        Msg::new()
    }
    fn bytes<const T: usize, const N: usize>(message: &Msg<T, N>) -> &[u8; N] {
        &message.bytes
    }
    fn options() -> Options {
        Options::default().capacity(CAP)
    }
}

struct Logs;

impl Kind for Logs {
    type Of<const T: usize, const N: usize> = Logged<T, N>;
    fn make<const T: usize, const N: usize>() -> Logged<T, N> {
        Logged { bytes: [7; N] }
    }
    fn bytes<const T: usize, const N: usize>(message: &Logged<T, N>) -> &[u8; N] {
        &message.bytes
    }
    fn options() -> Options {
        Options::default().capacity(CAP).overflow(Overflow::Block)
    }
}

impl<const T: usize, const N: usize> Msg<T, N> {
    fn new() -> Self {
        Msg { bytes: [7; N] }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Contender {
    Baseline,
    Eventbus,
    EventbusLog,
    TokioBroadcast,
    BusCrate,
    Flume,
    StdSync,
}

use Contender::*;

/// The first two are the quick run's (`EVENTBUS_BENCH_QUICK`).
const ALL: [Contender; 7] = [
    Baseline,
    Eventbus,
    TokioBroadcast,
    BusCrate,
    Flume,
    StdSync,
    EventbusLog,
];

impl Contender {
    fn name(self) -> &'static str {
        match self {
            Baseline => "baseline (Mutex + crossbeam)",
            Eventbus => "eventbus",
            EventbusLog => "eventbus log topic",
            TokioBroadcast => "tokio::broadcast",
            BusCrate => "bus crate",
            Flume => "flume bounded",
            StdSync => "std sync_channel",
        }
    }
}

/// One measured run: wall time from the first publish until every subscriber had every
/// message it was going to get.
#[derive(Clone, Copy)]
struct Run {
    elapsed: Duration,
    deliveries: u64,
    lost: u64,
}

impl Run {
    fn ns_per_delivery(&self) -> f64 {
        self.elapsed.as_nanos() as f64 / self.deliveries.max(1) as f64
    }
}

/// A scenario: `publishers` threads publish `messages` in all to each of `topics` topics;
/// each topic has `subscribers` subscribers.
#[derive(Clone, Copy)]
struct Shape {
    publishers: u64,
    subscribers: usize,
    topics: usize,
    messages: u64,
}

/// Where `EVENTBUS_BENCH_PIN` puts threads: the publishers' core and the subscribers'.
fn pinned_cores() -> Option<(core_affinity::CoreId, core_affinity::CoreId)> {
    static CORES: std::sync::OnceLock<Option<(core_affinity::CoreId, core_affinity::CoreId)>> =
        std::sync::OnceLock::new();
    *CORES.get_or_init(|| {
        let placement = std::env::var("EVENTBUS_BENCH_PIN").ok()?;
        let apart = match placement.as_str() {
            "" => return None,
            "apart" => true,
            "together" => false,
            other => panic!("EVENTBUS_BENCH_PIN is `apart` or `together`, not `{other}`"),
        };
        let cores = core_affinity::get_core_ids().filter(|c| c.len() >= 2);
        let cores = cores.expect("EVENTBUS_BENCH_PIN needs two cores it can pin threads to");
        let last = if apart { cores.len() - 1 } else { 0 };
        Some((cores[0], cores[last]))
    })
}

/// Which side of a topic a thread is on, for `pin`.
#[derive(Clone, Copy, Debug)]
enum Side {
    Publisher,
    Subscriber,
}

/// Pins the calling thread to its side's core, when `EVENTBUS_BENCH_PIN` asks for it.
fn pin(side: Side) {
    if let Some((publishers, subscribers)) = pinned_cores() {
        let core = match side {
            Side::Publisher => publishers,
            Side::Subscriber => subscribers,
        };
        assert!(
            core_affinity::set_for_current(core),
            "could not pin a {side:?}"
        );
    }
}

/// Waits until `count` subscribers said they are done.
fn wait_done(done: &Receiver<u64>, count: usize) -> u64 {
    (0..count).map(|_| done.recv().unwrap()).sum()
}

fn split(messages: u64, publishers: u64, p: u64) -> u64 {
    messages / publishers + u64::from(p < messages % publishers)
}

// ---------------------------------------------------------------- eventbus

fn run_eventbus<K: Kind, const N: usize>(shape: Shape) -> Run {
    let bus = Bus::builder().build();
    let (done_tx, done_rx) = bounded(shape.subscribers * shape.topics);
    fn subscribe<K: Kind, const T: usize, const N: usize>(
        bus: &Bus,
        n: usize,
        msgs: u64,
        done: &Sender<u64>,
    ) {
        for _ in 0..n {
            let done = done.clone();
            let mut got = 0;
            bus.subscribe::<K::Of<T, N>>(K::options(), move |m: &Message<K::Of<T, N>>| {
                if got == 0 {
                    // The worker is the bus's own thread: pinned from inside, once.
                    pin(Side::Subscriber);
                }
                std::hint::black_box(K::bytes(m.payload()));
                got += 1;
                if got == msgs {
                    done.send(0).unwrap();
                }
            });
        }
    }
    let per_topic = shape.messages;
    subscribe::<K, 0, N>(&bus, shape.subscribers, per_topic, &done_tx);
    if shape.topics > 1 {
        subscribe::<K, 1, N>(&bus, shape.subscribers, per_topic, &done_tx);
        subscribe::<K, 2, N>(&bus, shape.subscribers, per_topic, &done_tx);
        subscribe::<K, 3, N>(&bus, shape.subscribers, per_topic, &done_tx);
    }
    let start = Instant::now();
    thread::scope(|scope| {
        for p in 0..shape.publishers {
            let bus = &bus;
            scope.spawn(move || {
                pin(Side::Publisher);
                if shape.topics > 1 {
                    // One publisher per topic.
                    let count = shape.messages;
                    for _ in 0..count {
                        let _ = match p {
                            0 => bus.publish(K::make::<0, N>()).map(|_| ()).map_err(|_| ()),
                            1 => bus.publish(K::make::<1, N>()).map(|_| ()).map_err(|_| ()),
                            2 => bus.publish(K::make::<2, N>()).map(|_| ()).map_err(|_| ()),
                            _ => bus.publish(K::make::<3, N>()).map(|_| ()).map_err(|_| ()),
                        };
                    }
                } else {
                    for _ in 0..split(shape.messages, shape.publishers, p) {
                        bus.publish(K::make::<0, N>()).map_err(|_| ()).unwrap();
                    }
                }
            });
        }
    });
    wait_done(&done_rx, shape.subscribers * shape.topics);
    let elapsed = start.elapsed();
    bus.close();
    Run {
        elapsed,
        deliveries: per_topic * (shape.subscribers * shape.topics) as u64,
        lost: 0,
    }
}

// ---------------------------------------------------------------- the hand-made baseline

/// The seed's design by hand: a per-topic lock around numbering and hand-out, a bounded
/// crossbeam mailbox per subscriber carrying an `Arc` of the message, a thread each.
struct HandTopic<T> {
    order: Mutex<u64>,
    mailboxes: Vec<Sender<Arc<T>>>,
}

impl<T> HandTopic<T> {
    fn publish(&self, message: T) -> u64 {
        let mut seq = self.order.lock();
        let current = *seq;
        *seq += 1;
        if !self.mailboxes.is_empty() {
            let message = Arc::new(message);
            for mailbox in &self.mailboxes {
                mailbox.send(Arc::clone(&message)).unwrap();
            }
        }
        current
    }
}

/// A per-subscriber channel kind for the "one channel per subscriber" contenders.
trait Fanout<T>: Send + Sync {
    fn send_all(&self, message: T);
}

/// A subscriber thread's loop: takes `messages` messages, then says so on `done`.
fn consume<M>(received: impl IntoIterator<Item = M>, messages: u64, done: &Sender<u64>) {
    pin(Side::Subscriber);
    let mut got = 0;
    for m in received {
        std::hint::black_box(&m);
        got += 1;
        if got == messages {
            done.send(0).unwrap();
        }
    }
}

fn hand_topic<T: Send + Sync + 'static>(
    subscribers: usize,
    messages: u64,
    done: &Sender<u64>,
) -> HandTopic<T> {
    let mailboxes = (0..subscribers)
        .map(|_| {
            let (tx, rx) = bounded::<Arc<T>>(CAP);
            let done = done.clone();
            thread::spawn(move || consume(rx, messages, &done));
            tx
        })
        .collect();
    HandTopic {
        order: Mutex::new(0),
        mailboxes,
    }
}

impl<T: Send + Sync> Fanout<T> for HandTopic<T> {
    fn send_all(&self, message: T) {
        self.publish(message);
    }
}

// ---------------------------------------------------------------- peers

/// One channel per subscriber, fanned out under a lock (for one order per topic), like the
/// baseline but with another channel: `flume` or `std`.
struct LockedFanout<S> {
    order: Mutex<()>,
    mailboxes: Vec<S>,
}

/// A bounded sender that blocks while its channel is full.
trait Put<T>: Send + Sync {
    fn put(&self, message: Arc<T>);
}

impl<T: Send + Sync> Put<T> for flume::Sender<Arc<T>> {
    fn put(&self, message: Arc<T>) {
        self.send(message).unwrap();
    }
}

impl<T: Send + Sync> Put<T> for mpsc::SyncSender<Arc<T>> {
    fn put(&self, message: Arc<T>) {
        self.send(message).unwrap();
    }
}

impl<T: Send + Sync, S: Put<T>> Fanout<T> for LockedFanout<S> {
    fn send_all(&self, message: T) {
        let _order = self.order.lock();
        let message = Arc::new(message);
        for mailbox in &self.mailboxes {
            mailbox.put(Arc::clone(&message));
        }
    }
}

fn locked_fanout<S, R>(
    subscribers: usize,
    messages: u64,
    done: &Sender<u64>,
    channel: impl Fn() -> (S, R),
) -> LockedFanout<S>
where
    R: IntoIterator + Send + 'static,
{
    let mailboxes = (0..subscribers)
        .map(|_| {
            let (tx, rx) = channel();
            let done = done.clone();
            thread::spawn(move || consume(rx, messages, &done));
            tx
        })
        .collect();
    LockedFanout {
        order: Mutex::new(()),
        mailboxes,
    }
}

/// The `bus` crate: one lock-free ring shared by all readers; `broadcast` needs `&mut`, so
/// several publishers share it behind a lock.
struct BusCrateTopic<T> {
    ring: Mutex<bus::Bus<T>>,
}

impl<T: Clone + Send + Sync> Fanout<T> for BusCrateTopic<T> {
    fn send_all(&self, message: T) {
        self.ring.lock().broadcast(message);
    }
}

fn bus_crate_topic<T: Clone + Send + Sync + 'static>(
    subscribers: usize,
    messages: u64,
    done: &Sender<u64>,
) -> BusCrateTopic<T> {
    let mut ring = bus::Bus::new(CAP);
    for _ in 0..subscribers {
        let mut rx = ring.add_rx();
        let done = done.clone();
        thread::spawn(move || consume(std::iter::from_fn(|| rx.recv().ok()), messages, &done));
    }
    BusCrateTopic {
        ring: Mutex::new(ring),
    }
}

/// `tokio::sync::broadcast`: lossy; a lagging receiver loses messages (reported).
fn run_tokio<T: Clone + Send + Sync + 'static>(shape: Shape, make: fn() -> T) -> Run {
    let (done_tx, done_rx) = bounded(shape.subscribers * shape.topics);
    let senders: Vec<_> = (0..shape.topics)
        .map(|_| {
            let (tx, _) = tokio::sync::broadcast::channel::<T>(CAP);
            for _ in 0..shape.subscribers {
                let mut rx = tx.subscribe();
                let done = done_tx.clone();
                let messages = shape.messages;
                thread::spawn(move || {
                    pin(Side::Subscriber);
                    let (mut got, mut lost) = (0, 0);
                    loop {
                        match rx.blocking_recv() {
                            Ok(m) => {
                                std::hint::black_box(&m);
                                got += 1;
                            }
                            Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => lost += n,
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                        }
                        if got + lost == messages {
                            break;
                        }
                    }
                    done.send(lost).unwrap();
                });
            }
            tx
        })
        .collect();
    let start = Instant::now();
    thread::scope(|scope| {
        for p in 0..shape.publishers {
            let tx = senders[if shape.topics > 1 { p as usize } else { 0 }].clone();
            let count = if shape.topics > 1 {
                shape.messages
            } else {
                split(shape.messages, shape.publishers, p)
            };
            scope.spawn(move || {
                pin(Side::Publisher);
                for _ in 0..count {
                    let _ = tx.send(make());
                }
            });
        }
    });
    drop(senders);
    let lost = wait_done(&done_rx, shape.subscribers * shape.topics);
    let elapsed = start.elapsed();
    let all = shape.messages * (shape.subscribers * shape.topics) as u64;
    Run {
        elapsed,
        deliveries: all - lost,
        lost,
    }
}

fn run_fanout<T: Clone + Send + Sync + 'static>(
    contender: Contender,
    shape: Shape,
    make: fn() -> T,
) -> Run {
    let (done_tx, done_rx) = bounded(shape.subscribers * shape.topics);
    let topics: Vec<Box<dyn Fanout<T>>> = (0..shape.topics)
        .map(|_| -> Box<dyn Fanout<T>> {
            let (n, m) = (shape.subscribers, shape.messages);
            match contender {
                Baseline => Box::new(hand_topic::<T>(n, m, &done_tx)),
                Flume => Box::new(locked_fanout(n, m, &done_tx, || {
                    flume::bounded::<Arc<T>>(CAP)
                })),
                StdSync => Box::new(locked_fanout(n, m, &done_tx, || {
                    mpsc::sync_channel::<Arc<T>>(CAP)
                })),
                BusCrate => Box::new(bus_crate_topic::<T>(n, m, &done_tx)),
                Eventbus | EventbusLog | TokioBroadcast => unreachable!(),
            }
        })
        .collect();
    let start = Instant::now();
    thread::scope(|scope| {
        for p in 0..shape.publishers {
            let (topic, count) = if shape.topics > 1 {
                (&topics[p as usize], shape.messages)
            } else {
                (&topics[0], split(shape.messages, shape.publishers, p))
            };
            scope.spawn(move || {
                pin(Side::Publisher);
                for _ in 0..count {
                    topic.send_all(make());
                }
            });
        }
    });
    wait_done(&done_rx, shape.subscribers * shape.topics);
    let elapsed = start.elapsed();
    drop(topics);
    Run {
        elapsed,
        deliveries: shape.messages * (shape.subscribers * shape.topics) as u64,
        lost: 0,
    }
}

fn run<const N: usize>(contender: Contender, shape: Shape) -> Run {
    match contender {
        Eventbus => run_eventbus::<Mailboxes, N>(shape),
        EventbusLog => run_eventbus::<Logs, N>(shape),
        TokioBroadcast => run_tokio(shape, Msg::<0, N>::new),
        other => run_fanout(other, shape, Msg::<0, N>::new),
    }
}

/// Runs every contender `rounds` times, alternating, and prints the medians.
fn scenario<const N: usize>(
    title: &str,
    shape: Shape,
    rounds: u64,
    contenders: &[Contender],
) -> Vec<(Contender, f64)> {
    if !measure::wanted("EVENTBUS_BENCH_ONLY", title) {
        return Vec::new();
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
    let mut lost = vec![0u64; contenders.len()];
    for _ in 0..rounds {
        for (i, &contender) in contenders.iter().enumerate() {
            let run = run::<N>(contender, shape);
            times[i].push(run.ns_per_delivery());
            lost[i] += run.lost;
        }
    }
    let medians: Vec<(Contender, f64)> = contenders
        .iter()
        .zip(&times)
        .map(|(&c, t)| (c, measure::median(t.clone())))
        .collect();
    let baseline = medians[0].1;
    let bus_crate = medians.iter().find(|(c, _)| *c == BusCrate).map(|m| m.1);
    println!("\n{title}");
    println!(
        "  {:<30} {:>10} {:>9} {:>12}",
        "contender", "ns/deliv", "ratio", "lost"
    );
    for (i, (contender, ns)) in medians.iter().enumerate() {
        let loss = if lost[i] > 0 {
            format!(
                "{} ({:.1}%)",
                lost[i],
                100.0 * lost[i] as f64
                    / (rounds * shape.messages * (shape.subscribers * shape.topics) as u64) as f64
            )
        } else {
            "0".into()
        };
        println!(
            "  {:<30} {:>10.1} {:>8.2}x {:>12}",
            contender.name(),
            ns,
            ns / baseline,
            loss
        );
    }
    if let Some(eventbus) = medians.iter().find(|(c, _)| *c == Eventbus).map(|m| m.1) {
        let mut targets = format!(
            "  target: eventbus ≤ 1.1 × baseline (issue 16): {:.2}x",
            eventbus / baseline
        );
        if let (Some(bus), true) = (bus_crate, shape.subscribers >= 4) {
            targets += &format!("; ≤ 2 × bus crate: {:.2}x", eventbus / bus);
        }
        println!("{targets}");
    }
    // Issue 29, item 1: a log topic ≤ 1.2 × the `bus` crate at 1 → 1 and with several
    // publishers, ≤ 1.0 × at 4 and 16 subscribers.
    let log = medians.iter().find(|(c, _)| *c == EventbusLog).map(|m| m.1);
    if let (Some(log), Some(bus)) = (log, bus_crate) {
        let most = if shape.subscribers >= 4 && shape.publishers == 1 {
            1.0
        } else {
            1.2
        };
        println!(
            "  target: log topic ≤ {most:.1} × bus crate (issue 29): {:.2}x",
            log / bus
        );
    }
    medians
}

// ---------------------------------------------------------------- the other measurements

/// A topic type without generic parameters, as most are: `#[derive(Topic)]` gives it an index,
/// and a publish that no one hears takes the quick way (`numbering.rs`). `Msg` is generic, so
/// it shows the usual way.
#[derive(Topic)]
struct Plain(#[allow(dead_code)] u64);

fn no_subscribers(rounds: u64, messages: u64) {
    let mut plain_ns = Vec::new();
    let mut generic_ns = Vec::new();
    let mut base_ns = Vec::new();
    for _ in 0..rounds {
        let bus = Bus::builder().build();
        let start = Instant::now();
        for i in 0..messages {
            std::hint::black_box(bus.publish(Plain(i)).map_err(|_| ()).unwrap());
        }
        plain_ns.push(start.elapsed().as_nanos() as f64 / messages as f64);
        let start = Instant::now();
        for _ in 0..messages {
            std::hint::black_box(bus.publish(Msg::<0, 8>::new()).map_err(|_| ()).unwrap());
        }
        generic_ns.push(start.elapsed().as_nanos() as f64 / messages as f64);
        bus.close();
        let (done, _) = bounded(1);
        let hand = hand_topic::<Msg<0, 8>>(0, 0, &done);
        let start = Instant::now();
        for _ in 0..messages {
            std::hint::black_box(hand.publish(Msg::<0, 8>::new()));
        }
        base_ns.push(start.elapsed().as_nanos() as f64 / messages as f64);
    }
    let (plain, generic, base) = (
        measure::median(plain_ns),
        measure::median(generic_ns),
        measure::median(base_ns),
    );
    println!("\npublish to a topic with no subscribers (1 thread)");
    println!(
        "  eventbus {plain:.1} ns/publish, baseline {base:.1} ns/publish ({:.2}x); target ≤ 30 ns",
        plain / base
    );
    println!(
        "  a generic topic (no index: found the usual way): {generic:.1} ns/publish ({:.2}x)",
        generic / base
    );
}

/// What one publish costs the publishing thread alone: every mailbox is full and refuses
/// the message (`DropNewest`; the baseline's `try_send`), so no worker runs while it is timed.
fn full_mailboxes(subscribers: usize, rounds: u64, messages: u64) {
    let (mut bus_ns, mut base_ns) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let bus = Bus::builder().build();
        let (gate_tx, gate_rx) = bounded::<()>(0);
        for _ in 0..subscribers {
            let gate = gate_rx.clone();
            let mut first = true;
            let options = Options::default()
                .capacity(1)
                .overflow(Overflow::DropNewest);
            bus.subscribe::<Msg<0, 8>>(options, move |_: &Message<Msg<0, 8>>| {
                // The worker holds its first message until the round is over.
                if std::mem::take(&mut first) {
                    let _ = gate.recv();
                }
            });
        }
        // One message for each handler to hold, one to fill each mailbox (either way every
        // mailbox holds one: a worker that has not taken the first yet refuses the second).
        for _ in 0..2 {
            bus.publish(Msg::<0, 8>::new()).map_err(|_| ()).unwrap();
        }
        let start = Instant::now();
        for _ in 0..messages {
            std::hint::black_box(bus.publish(Msg::<0, 8>::new()).map_err(|_| ()).unwrap());
        }
        bus_ns.push(start.elapsed().as_nanos() as f64 / messages as f64);
        drop(gate_tx);
        bus.close();

        let full: Vec<_> = (0..subscribers)
            .map(|_| {
                let (tx, rx) = bounded::<Arc<Msg<0, 8>>>(1);
                tx.send(Arc::new(Msg::new())).unwrap();
                (tx, rx)
            })
            .collect();
        let order = Mutex::new(0u64);
        let start = Instant::now();
        for _ in 0..messages {
            let mut seq = order.lock();
            *seq += 1;
            let message = Arc::new(Msg::<0, 8>::new());
            for (tx, _) in &full {
                std::hint::black_box(tx.try_send(Arc::clone(&message)).is_err());
            }
        }
        base_ns.push(start.elapsed().as_nanos() as f64 / messages as f64);
    }
    let (bus, base) = (measure::median(bus_ns), measure::median(base_ns));
    println!(
        "  {subscribers:>2} subscribers: eventbus {bus:.1} ns/publish, baseline {base:.1} ns/publish ({:.2}x)",
        bus / base
    );
}

fn latency(messages: u64, rate_per_sec: u64) {
    println!("\nlatency, publish → handler start, 1 publisher → 1 subscriber at {rate_per_sec}/s");
    println!(
        "  {:<30} {:>9} {:>9} {:>9}",
        "contender", "p50 µs", "p99 µs", "p99.9 µs"
    );
    let interval = Duration::from_nanos(1_000_000_000 / rate_per_sec);
    for contender in [Baseline, Eventbus] {
        let histogram = Arc::new(Mutex::new(Histogram::<u64>::new(3).unwrap()));
        let record = histogram.clone();
        let (done_tx, done_rx) = bounded::<u64>(1);
        let publish: Box<dyn Fn(Instant)> = match contender {
            Eventbus => {
                let bus = Bus::builder().build();
                let mut got = 0;
                bus.subscribe::<Stamp>(
                    Options::default().capacity(CAP),
                    move |m: &Message<Stamp>| {
                        let _ = record.lock().record(m.0.elapsed().as_nanos() as u64);
                        got += 1;
                        if got == messages {
                            done_tx.send(0).unwrap();
                        }
                    },
                );
                Box::new(move |now| {
                    bus.publish(Stamp(now)).map_err(|_| ()).unwrap();
                })
            }
            _ => {
                let (tx, rx) = bounded::<Arc<Stamp>>(CAP);
                thread::spawn(move || {
                    let mut got = 0;
                    for m in rx {
                        let _ = record.lock().record(m.0.elapsed().as_nanos() as u64);
                        got += 1;
                        if got == messages {
                            done_tx.send(0).unwrap();
                        }
                    }
                });
                let topic = HandTopic {
                    order: Mutex::new(0),
                    mailboxes: vec![tx],
                };
                Box::new(move |now| {
                    topic.publish(Stamp(now));
                })
            }
        };
        let mut next = Instant::now();
        for _ in 0..messages {
            next += interval;
            while Instant::now() < next {
                std::hint::spin_loop();
            }
            publish(Instant::now());
        }
        done_rx.recv().unwrap();
        drop(publish);
        let h = histogram.lock();
        let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        println!(
            "  {:<30} {:>9.1} {:>9.1} {:>9.1}",
            contender.name(),
            us(0.5),
            us(0.99),
            us(0.999)
        );
    }
}

#[derive(Topic)]
struct Stamp(Instant);

fn memory(messages: u64) {
    const SIZE: usize = 64;
    let bus = Bus::builder().build();
    let (release_tx, release_rx) = bounded::<()>(0);
    let (started_tx, started_rx) = bounded::<()>(1);
    bus.subscribe::<Msg<9, SIZE>>(
        Options::default()
            .capacity(CAP)
            .overflow(Overflow::DropOldest),
        move |_: &Message<Msg<9, SIZE>>| {
            let _ = started_tx.try_send(());
            let _ = release_rx.recv();
        },
    );
    bus.publish(Msg::<9, SIZE>::new()).map_err(|_| ()).unwrap();
    started_rx.recv().unwrap();
    let before = measure::resident_bytes();
    for _ in 0..messages {
        bus.publish(Msg::<9, SIZE>::new()).map_err(|_| ()).unwrap();
    }
    let after = measure::resident_bytes();
    let dropped = bus.stats().subscriptions[0].dropped;
    drop(release_tx);
    bus.close();
    // One mailbox slot (16 B) plus one shared message (Arc header 16 B + seq, topic, payload).
    let per_message = 16 + 16 + 8 + 16 + SIZE as u64;
    println!("\nmemory: one stalled DropOldest subscriber (capacity {CAP}), {messages} messages of {SIZE} B");
    println!(
        "  resident set grew by {} KiB; capacity × message ≈ {} KiB; {dropped} dropped",
        after.saturating_sub(before) / 1024,
        CAP as u64 * per_message / 1024
    );
}

fn scale(subscribers: usize, messages: u64) {
    let before = measure::resident_bytes();
    let bus = Bus::builder().build();
    let delivered = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    for _ in 0..subscribers {
        let delivered = delivered.clone();
        bus.subscribe::<Msg<8, 8>>(
            Options::default().capacity(64),
            move |_: &Message<Msg<8, 8>>| {
                delivered.fetch_add(1, Ordering::Relaxed);
            },
        );
    }
    let started = start.elapsed();
    let running = measure::resident_bytes();
    let start = Instant::now();
    for _ in 0..messages {
        bus.publish(Msg::<8, 8>::new()).map_err(|_| ()).unwrap();
    }
    bus.close();
    let elapsed = start.elapsed();
    let deliveries = delivered.load(Ordering::Relaxed);
    assert_eq!(deliveries, messages * subscribers as u64);
    println!(
        "\nscale: {subscribers} subscribers (threads) on one topic, {messages} messages, close"
    );
    println!(
        "  start-up {:.0} ms ({:.1} µs per subscriber); {:.0} ns per delivery (publish to close); \
         resident set +{} MiB while running",
        started.as_secs_f64() * 1000.0,
        started.as_secs_f64() * 1e6 / subscribers as f64,
        elapsed.as_nanos() as f64 / deliveries as f64,
        running.saturating_sub(before) >> 20
    );
}

/// A small SVG line chart: ns/delivery (log scale) by subscriber count, a line per contender.
fn chart(path: &str, series: &[(Contender, Vec<(usize, f64)>)]) {
    // The plot spans `left..right`; the legend sits to its right, titles are centred on
    // `middle`, and the canvas is `w` wide.
    let (w, h, left, bottom, top) = (760.0, 420.0, 70.0, 50.0, 30.0);
    let (plot, middle) = (410.0, 330.0);
    let right = left + plot;
    let values = || {
        series
            .iter()
            .flat_map(|(_, points)| points.iter().map(|p| p.1))
    };
    let low = values().fold(f64::MAX, f64::min).max(1.0).log10().floor();
    let high = values().fold(1.0f64, f64::max).log10().ceil();
    let xs = [1usize, 4, 16];
    let x = |n: usize| {
        left + (w - left - 180.0) * xs.iter().position(|&v| v == n).unwrap_or(0) as f64 / 2.0
    };
    let y = |v: f64| {
        (h - bottom) - (h - bottom - top) * (v.max(1.0).log10() - low) / (high - low).max(1.0)
    };
    let colours = [
        "#000000", "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b",
    ];
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"16\" text-anchor=\"middle\">ns per delivery by subscribers, 1 publisher (median, log scale; lower is better)</text>\n\
         <line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/>\n<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{}\" stroke=\"#888\"/>\n",
        middle, h - bottom, right, h - bottom, h - bottom
    );
    for n in xs {
        svg += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{n}</text>\n",
            x(n),
            h - bottom + 16.0
        );
    }
    svg += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">subscribers</text>\n",
        (left + right) / 2.0,
        h - 12.0
    );
    let mut decade = low;
    while decade <= high {
        for m in [1.0, 3.0] {
            let v = m * 10f64.powf(decade);
            if v.log10() <= high {
                svg += &format!(
                    "<line x1=\"{left}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"#eee\"/><text x=\"{2}\" y=\"{3}\" text-anchor=\"end\">{v:.0}</text>\n",
                    y(v), right, left - 6.0, y(v) + 4.0
                );
            }
        }
        decade += 1.0;
    }
    for (k, (contender, points)) in series.iter().enumerate() {
        let colour = colours[k % colours.len()];
        let line: Vec<String> = points
            .iter()
            .map(|(n, v)| format!("{:.1},{:.1}", x(*n), y(*v)))
            .collect();
        svg += &format!(
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>\n",
            line.join(" ")
        );
        for (n, v) in points {
            svg += &format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{colour}\"/>\n",
                x(*n),
                y(*v)
            );
        }
        svg += &format!(
            "<text x=\"{}\" y=\"{}\" fill=\"{colour}\">{}</text>\n",
            right + 10.0,
            top + 20.0 + 16.0 * k as f64,
            contender.name()
        );
    }
    svg += "</svg>\n";
    std::fs::write(path, svg).expect("write the chart");
    println!("\nchart written to {path}");
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run tiny then.
    let quick = !std::env::args().any(|a| a == "--bench");
    let messages = measure::env(
        "EVENTBUS_BENCH_MESSAGES",
        if quick { 2_000 } else { 1_000_000 },
    );
    let rounds = measure::env("EVENTBUS_BENCH_ROUNDS", if quick { 1 } else { 5 });
    let scale_subscribers =
        measure::env("EVENTBUS_BENCH_SCALE", if quick { 50 } else { 10_000 }) as usize;
    println!("eventbus throughput: {messages} messages per scenario, {rounds} rounds, medians; mailbox/ring {CAP}");
    println!(
        "machine: {} cores; figures are noisy, compare the ratios",
        thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "load average at start: {} (distrust a run that starts above 2)",
        measure::load_average()
    );
    if let Some((publishers, subscribers)) = pinned_cores() {
        println!(
            "threads pinned: publishers on core {}, subscribers on core {}",
            publishers.id, subscribers.id
        );
    }

    let only_two = std::env::var_os("EVENTBUS_BENCH_QUICK").is_some();
    let contenders: &[Contender] = if only_two { &ALL[..2] } else { &ALL };
    let mut by_subscribers: Vec<(Contender, Vec<(usize, f64)>)> =
        contenders.iter().map(|&c| (c, Vec::new())).collect();
    for subscribers in [1, 4, 16] {
        let shape = Shape {
            publishers: 1,
            subscribers,
            topics: 1,
            messages,
        };
        let medians = scenario::<8>(
            &format!("1 publisher → {subscribers} subscriber(s), 8 B messages"),
            shape,
            rounds,
            contenders,
        );
        for (contender, ns) in medians {
            let series = by_subscribers
                .iter_mut()
                .find(|(c, _)| *c == contender)
                .unwrap();
            series.1.push((subscribers, ns));
        }
    }
    let shape = Shape {
        publishers: 4,
        subscribers: 4,
        topics: 1,
        messages,
    };
    scenario::<8>(
        "4 publishers → 4 subscribers, one topic",
        shape,
        rounds,
        contenders,
    );
    let shape = Shape {
        publishers: 4,
        subscribers: 1,
        topics: 4,
        messages: messages / 4,
    };
    scenario::<8>(
        "4 publishers on 4 topics, 1 subscriber each",
        shape,
        rounds,
        contenders,
    );
    let shape = Shape {
        publishers: 1,
        subscribers: 4,
        topics: 1,
        messages,
    };
    scenario::<1024>(
        "1 publisher → 4 subscribers, 1 KiB messages",
        shape,
        rounds,
        contenders,
    );
    if measure::wanted(
        "EVENTBUS_BENCH_ONLY",
        "publish to a topic with no subscribers",
    ) {
        no_subscribers(rounds, messages.max(100_000));
    }
    if measure::wanted("EVENTBUS_BENCH_ONLY", "publisher's own cost") {
        println!("\npublisher's own cost, every mailbox full and refusing (DropNewest / try_send)");
        for subscribers in [4, 16] {
            full_mailboxes(subscribers, rounds, messages.max(100_000));
        }
    }
    if measure::wanted("EVENTBUS_BENCH_ONLY", "latency") {
        latency(messages.min(50_000), 50_000);
    }
    if measure::wanted("EVENTBUS_BENCH_ONLY", "memory") {
        memory(messages);
    }
    if measure::wanted("EVENTBUS_BENCH_ONLY", "scale") {
        scale(scale_subscribers, if quick { 10 } else { 1_000 });
    }
    if let Ok(path) = std::env::var("EVENTBUS_BENCH_CHART") {
        chart(&path, &by_subscribers);
    }
    println!("\nload average at end: {}", measure::load_average());
}
