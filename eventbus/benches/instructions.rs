//! One scenario, one message count, nothing else: the program `benches/callgrind.sh` runs
//! under `valgrind --tool=callgrind` to count instructions per delivery.
//!
//! `instructions SCENARIO MESSAGES` (or `EVENTBUS_SCENARIO`, `EVENTBUS_MESSAGES`):
//!
//! - `eventbus-1`, `eventbus-4`: 1 publisher → 1 or 4 subscribers, `Block`, default
//!   capacity, 8-byte messages; the handler only counts.
//! - `hand-1`, `hand-4`: the same by hand, as `throughput.rs`'s baseline: a
//!   `parking_lot::Mutex` around numbering and fan-out, one bounded crossbeam channel
//!   (capacity 1024) per subscriber carrying an `Arc` of the message, a thread each.
//! - `priority-1`, `priority-4`: as `eventbus-1`, `eventbus-4`, each subscriber with a
//!   priority mailbox (`Options::priority`, four levels: `seq % 4`).
//! - `eventbus-0`: publishes to a topic with no subscriber.
//! - `lock-0`: a bare `parking_lot::Mutex` lock, increment, unlock per "publish".
//! - `async-0` (built with feature `tokio`: `FEATURES=tokio callgrind.sh async-0
//!   eventbus-0`): `publish_async(..).await` to a topic with no subscriber, in one task on a
//!   `current_thread` runtime; compare with `eventbus-0` in the same build. `async-1`: the
//!   same task publishing to one thread subscriber (`Block`, default capacity); compare with
//!   `eventbus-1` in the same build (`callgrind.sh --publisher async-1 eventbus-1` for the
//!   publishing thread alone).
//! - `ready-0` (feature `tokio`): the harness of `async-0` around a sync `publish`: the same
//!   task on the same runtime awaits, per message, a future whose one poll is
//!   `bus.publish(..)` to a topic with no subscriber (built, polled once, dropped, as
//!   `publish_async`'s). `async-0` less `ready-0` is `publish_async`'s own cost; `ready-0`
//!   less `eventbus-0` is the `.await`'s.
//! - `task-1`, `task-4` (feature `tokio`): `async.rs`'s throughput on one thread: a task
//!   `publish_async`es to 1 or 4 async subscribers (`subscribe_async`, `Block`, default
//!   capacity), all on one `current_thread` runtime. `tokio-hand-1`, `tokio-hand-4`: the
//!   hand-made tokio fan-out `async.rs` measures them against (a `tokio::sync::Mutex`
//!   around the order, one bounded `tokio::sync::mpsc` channel of the default capacity per
//!   subscriber carrying an `Arc` of the message, a consumer task each), on the same
//!   runtime. On one thread the count is the CPU each design spends a delivery.
//! - `log-1`, `log-4`, `log-16`, `log-64`: the same publisher on a log topic (`retain =
//!   1024`), its subscribers `Block` with the default capacity; `eventbus-16`,
//!   `eventbus-64`: a mailbox topic with as many. `callgrind.sh --publisher` counts the
//!   publishing thread alone, to show whether its cost grows with the subscribers.
//! - `bus-1`, `bus-4`, `bus-16`: the `bus` crate's ring (1024 seats), one writer, as many
//!   readers, each on a thread of its own with the same counting handler: the contender
//!   `log_topics.rs` measures log topics against, counted the same way. With a core kept
//!   busy a run is bound by the CPU each delivery takes, which this count follows.
//!
//! The set-up (bus or channels, subscriber threads, close and join) is the same whatever the
//! count, so `Ir(N) − Ir(0)` is the cost of the `N` messages alone. Every subscriber has
//! seen every message before the program exits (checked).
//!
//! Without a scenario (as `cargo test --benches` runs it) every scenario runs with 1,000
//! messages, as a smoke test.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use crossbeam_channel::bounded;
use eventbus::{Bus, Message, Options, Topic};
use parking_lot::Mutex;

/// The hand-made channels' capacity: the bus's default mailbox size.
const CAP: usize = eventbus::Options::DEFAULT_CAPACITY;

const SCENARIOS: [&str; 17] = [
    "eventbus-0",
    "eventbus-1",
    "eventbus-4",
    "priority-1",
    "priority-4",
    "eventbus-16",
    "eventbus-64",
    "hand-1",
    "hand-4",
    "lock-0",
    "log-1",
    "log-4",
    "log-16",
    "log-64",
    "bus-1",
    "bus-4",
    "bus-16",
];

/// An 8-byte message.
#[derive(Topic)]
struct Tick(u64);

/// `Tick` for `ready-0`: a type of its own, so `Bus::publish::<Tick>` keeps one call site
/// (a second one changes whether it is inlined, and so `eventbus-0`'s count).
#[cfg(feature = "tokio")]
#[derive(Topic)]
#[allow(dead_code)] // carried, never read: no one subscribes
struct ReadyTick(u64);

/// An 8-byte message on a log topic: one ring shared by its subscribers.
#[derive(Topic)]
#[topic(retain = 1024)]
struct LogTick(u64);

/// The one place the bench subscribes, so a change to `Bus::subscribe`'s signature is a
/// one-line change here.
fn subscribe(bus: &Bus, count: Arc<AtomicU64>) {
    bus.subscribe::<Tick>(Options::default(), move |m: &Message<Tick>| {
        std::hint::black_box(&m.0);
        count.fetch_add(1, Ordering::Relaxed);
    });
}

/// As [`subscribe`], with a priority mailbox of four levels.
fn subscribe_by_priority(bus: &Bus, count: Arc<AtomicU64>) {
    let options = Options::default().priority(|t: &Tick| (t.0 % 4) as u8);
    bus.subscribe::<Tick>(options, move |m: &Message<Tick>| {
        std::hint::black_box(&m.0);
        count.fetch_add(1, Ordering::Relaxed);
    });
}

fn counters(subscribers: usize) -> Vec<Arc<AtomicU64>> {
    (0..subscribers)
        .map(|_| Arc::new(AtomicU64::new(0)))
        .collect()
}

fn check(counts: &[Arc<AtomicU64>], messages: u64) {
    for (i, count) in counts.iter().enumerate() {
        let got = count.load(Ordering::Relaxed);
        assert_eq!(got, messages, "subscriber {i} saw {got} of {messages}");
    }
}

fn eventbus(subscribers: usize, messages: u64, by_priority: bool) {
    let bus = Bus::builder().build();
    let counts = counters(subscribers);
    for count in &counts {
        match by_priority {
            false => subscribe(&bus, count.clone()),
            true => subscribe_by_priority(&bus, count.clone()),
        }
    }
    for i in 0..messages {
        if bus.publish(Tick(i)).is_err() {
            panic!("publish {i} refused");
        }
    }
    // Returns once every mailbox is empty and every worker has stopped.
    bus.close();
    check(&counts, messages);
}

fn log(subscribers: usize, messages: u64) {
    let bus = Bus::builder().build();
    let counts = counters(subscribers);
    for count in &counts {
        let count = count.clone();
        bus.subscribe::<LogTick>(Options::default(), move |m: &Message<LogTick>| {
            std::hint::black_box(&m.0);
            count.fetch_add(1, Ordering::Relaxed);
        });
    }
    for i in 0..messages {
        if bus.publish(LogTick(i)).is_err() {
            panic!("publish {i} refused");
        }
    }
    bus.close();
    check(&counts, messages);
}

/// The `bus` crate's broadcast ring, as `log_topics.rs` runs it: a reader thread each.
fn bus_crate(subscribers: usize, messages: u64) {
    let counts = counters(subscribers);
    let mut ring = bus::Bus::<u64>::new(1024);
    let readers: Vec<_> = counts
        .iter()
        .map(|count| {
            let count = count.clone();
            let mut reader = ring.add_rx();
            thread::spawn(move || {
                for _ in 0..messages {
                    std::hint::black_box(reader.recv().unwrap());
                    count.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for i in 0..messages {
        ring.broadcast(i);
    }
    for reader in readers {
        reader.join().unwrap();
    }
    check(&counts, messages);
}

/// `throughput.rs`'s baseline: numbering and fan-out under one lock.
struct HandTopic<T> {
    order: Mutex<u64>,
    mailboxes: Vec<crossbeam_channel::Sender<Arc<T>>>,
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

fn hand(subscribers: usize, messages: u64) {
    let counts = counters(subscribers);
    let mut threads = Vec::new();
    let mailboxes = counts
        .iter()
        .map(|count| {
            let (tx, rx) = bounded::<Arc<Tick>>(CAP);
            let count = count.clone();
            threads.push(thread::spawn(move || {
                for m in rx {
                    std::hint::black_box(&m.0);
                    count.fetch_add(1, Ordering::Relaxed);
                }
            }));
            tx
        })
        .collect();
    let topic = HandTopic {
        order: Mutex::new(0),
        mailboxes,
    };
    for i in 0..messages {
        std::hint::black_box(topic.publish(Tick(i)));
    }
    // Closing the channels ends the consumers once they have taken everything.
    drop(topic);
    for thread in threads {
        thread.join().unwrap();
    }
    check(&counts, messages);
}

#[cfg(feature = "tokio")]
fn asynchronous(subscribers: usize, messages: u64) {
    let runtime = runtime();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let counts = counters(subscribers);
    for count in &counts {
        subscribe(&bus, count.clone());
    }
    runtime.block_on(async {
        for i in 0..messages {
            if bus.publish_async(Tick(i)).await.is_err() {
                panic!("publish {i} refused");
            }
        }
    });
    bus.close();
    check(&counts, messages);
}

/// The runtime of the `async-*` and `ready-*` scenarios. Waits need no time driver any more;
/// it is enabled as it was, so the numbers compare with earlier runs.
#[cfg(feature = "tokio")]
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// A future whose one poll runs `f`: the `.await` of a future that is ready at once.
#[cfg(feature = "tokio")]
struct Ready<F>(Option<F>);

#[cfg(feature = "tokio")]
impl<F: FnOnce() -> R + Unpin, R> std::future::Future for Ready<F> {
    type Output = R;

    // In line, as `publish_async`'s poll is.
    #[inline(always)]
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<R> {
        let f = self.0.take().expect("polled once");
        std::task::Poll::Ready(f())
    }
}

/// `task-*`: a publishing task and async subscribers, every task on one thread.
#[cfg(feature = "tokio")]
fn tasks(subscribers: usize, messages: u64) {
    let runtime = runtime();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let counts = counters(subscribers);
    for count in &counts {
        let count = count.clone();
        bus.subscribe_async::<Tick, _, _, _>(Options::default(), move |m: Message<Tick>| {
            count.fetch_add(1, Ordering::Relaxed);
            async move {
                std::hint::black_box(&m.0);
            }
        });
    }
    runtime.block_on(async {
        for i in 0..messages {
            if bus.publish_async(Tick(i)).await.is_err() {
                panic!("publish {i} refused");
            }
        }
        bus.close_async().await;
    });
    check(&counts, messages);
}

/// `tokio-hand-*`: `async.rs`'s hand-made fan-out, every task on one thread.
#[cfg(feature = "tokio")]
fn tokio_hand(subscribers: usize, messages: u64) {
    let runtime = runtime();
    let counts = counters(subscribers);
    runtime.block_on(async {
        let mut consumers = Vec::new();
        let senders: Vec<_> = counts
            .iter()
            .map(|count| {
                let (tx, mut rx) = tokio::sync::mpsc::channel::<Arc<Tick>>(CAP);
                let count = count.clone();
                consumers.push(tokio::spawn(async move {
                    while let Some(m) = rx.recv().await {
                        std::hint::black_box(&m.0);
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                }));
                tx
            })
            .collect();
        let topic = tokio::sync::Mutex::new((0u64, senders));
        for i in 0..messages {
            let mut order = topic.lock().await;
            order.0 += 1;
            let message = Arc::new(Tick(i));
            for tx in &order.1 {
                tx.send(Arc::clone(&message)).await.unwrap();
            }
        }
        // Closing the channels ends the consumers once they have taken everything.
        drop(topic);
        for consumer in consumers {
            consumer.await.unwrap();
        }
    });
    check(&counts, messages);
}

/// `async-0`'s harness around a sync `publish` to a topic with no subscriber.
#[cfg(feature = "tokio")]
fn ready(messages: u64) {
    let runtime = runtime();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    runtime.block_on(async {
        for i in 0..messages {
            if Ready(Some(|| bus.publish(ReadyTick(i)))).await.is_err() {
                panic!("publish {i} refused");
            }
        }
    });
    bus.close();
}

fn lock(messages: u64) {
    let order = Mutex::new(0u64);
    for _ in 0..messages {
        let mut seq = order.lock();
        std::hint::black_box(*seq);
        *seq += 1;
    }
    assert_eq!(*order.lock(), messages);
}

fn run(scenario: &str, messages: u64) {
    match scenario {
        "eventbus-0" => eventbus(0, messages, false),
        "eventbus-1" => eventbus(1, messages, false),
        "eventbus-4" => eventbus(4, messages, false),
        "eventbus-16" => eventbus(16, messages, false),
        "eventbus-64" => eventbus(64, messages, false),
        "priority-1" => eventbus(1, messages, true),
        "priority-4" => eventbus(4, messages, true),
        "log-1" => log(1, messages),
        "log-4" => log(4, messages),
        "log-16" => log(16, messages),
        "log-64" => log(64, messages),
        "bus-1" => bus_crate(1, messages),
        "bus-4" => bus_crate(4, messages),
        "bus-16" => bus_crate(16, messages),
        "hand-1" => hand(1, messages),
        "hand-4" => hand(4, messages),
        "lock-0" => lock(messages),
        #[cfg(feature = "tokio")]
        "async-0" => asynchronous(0, messages),
        #[cfg(feature = "tokio")]
        "async-1" => asynchronous(1, messages),
        #[cfg(feature = "tokio")]
        "ready-0" => ready(messages),
        #[cfg(feature = "tokio")]
        "task-1" => tasks(1, messages),
        #[cfg(feature = "tokio")]
        "task-4" => tasks(4, messages),
        #[cfg(feature = "tokio")]
        "tokio-hand-1" => tokio_hand(1, messages),
        #[cfg(feature = "tokio")]
        "tokio-hand-4" => tokio_hand(4, messages),
        other => {
            eprintln!(
                "unknown scenario {other:?}; expected one of: {}",
                SCENARIOS.join(", ")
            );
            std::process::exit(2);
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`: skip flags.
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let scenario = args
        .next()
        .or_else(|| std::env::var("EVENTBUS_SCENARIO").ok());
    let messages = args
        .next()
        .or_else(|| std::env::var("EVENTBUS_MESSAGES").ok())
        .map(|m| {
            m.replace('_', "").parse::<u64>().unwrap_or_else(|_| {
                eprintln!("the message count must be a number, not {m:?}");
                std::process::exit(2);
            })
        });
    match scenario {
        Some(scenario) => run(&scenario, messages.unwrap_or(50_000)),
        None => {
            for scenario in SCENARIOS {
                run(scenario, messages.unwrap_or(1_000));
            }
            println!("instructions: every scenario ran; usage: instructions SCENARIO MESSAGES");
        }
    }
}
