//! `cargo bench -p eventbus --features tokio --bench async`: async subscribers (tokio tasks)
//! at scale and in throughput, against what a tokio user would otherwise write, in one
//! process, alternating, several rounds; medians and ratios to a hand-made tokio fan-out
//! measured in the same run (issue 12).
//!
//! - Throughput: one publisher task (`publish_async`) → 1, 4, 16 async subscribers, then 4
//!   publisher tasks on the one topic → 4, 16 (each a quarter of the messages; every
//!   subscriber sees them all, in one order), `Block`,
//!   `EVENTBUS_ASYNC_MESSAGES` (default 1,000,000) 8-byte messages, mailbox/channel capacity
//!   `EVENTBUS_ASYNC_CAPACITY` (default 1024), `EVENTBUS_ROUNDS` (default 5) rounds, on a
//!   multi-thread runtime with 2 workers (a new one per run).
//! - Scale, last (10,000 threads lift the load average for minutes): `EVENTBUS_SCALE_TASKS`
//!   (default 100,000) async subscribers, capacity 8, on one topic start, receive
//!   `EVENTBUS_SCALE_MESSAGES` (default 100) messages each from a `publish_async` task, then
//!   the bus closes; the same with `EVENTBUS_SCALE_THREADS` (default 10,000) thread
//!   subscribers and `publish` for comparison. Start-up per subscriber, resident set per
//!   subscriber (`/proc/self/statm`), ns per delivery, close.
//! - `EVENTBUS_ASYNC_CURRENT_THREAD=1`: the throughput section on a current-thread runtime
//!   instead: every task on one thread, so ns/delivery is the CPU each design spends per
//!   delivery, without the cross-core effects (steadier, but not the set-up).
//! - `EVENTBUS_ASYNC_QUICK=1`: only the hand-made fan-out and eventbus in the throughput
//!   section, for quick comparisons.
//! - `EVENTBUS_ASYNC_ONLY` (text): only the measurements whose title contains it, such as
//!   `scale`, `async subscribers (capacity`, `thread subscribers` or `16 async`.
//! - `EVENTBUS_ASYNC_CONTENDER` (text): only the throughput contenders whose name contains
//!   it (`hand-made`, `eventbus`, `broadcast`): one contender alone, to count its context
//!   switches with `perf stat`. Ratios need the hand-made fan-out in the run.
//!
//! - `EVENTBUS_BENCH_BUSY=1`: the contended regime, one core kept busy by a process the bench
//!   starts and stops (`common/contention.rs`).
//!
//! Contenders in the throughput section:
//!
//! - **hand-made**: a `tokio::sync::Mutex` around the order (a counter) and one bounded
//!   `tokio::sync::mpsc` channel per subscriber carrying an `Arc` of the message, one
//!   consumer task each; the publisher holds the lock while it awaits room, channel by
//!   channel. None of the bus's promises beyond order and no loss.
//! - **eventbus**: `Bus::subscribe_async`, `Options::default().capacity(..)` (`Block`),
//!   `publish_async` (all or nothing per message: it waits for room with no lock held).
//! - **tokio::broadcast**: one ring, never waits; a lagging receiver loses messages (the
//!   `lost` column counts them; ns/delivery counts only messages received).
//!
//! Figures from a shared machine are noisy: read the ratios, not the absolute numbers.

#[path = "common/contention.rs"]
mod contention;
#[path = "common/measure.rs"]
mod measure;

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eventbus::{Bus, Message, Options, Topic};

/// An 8-byte message.
#[derive(Topic, Clone)]
struct Tick(u64);

/// The runtime every measurement uses: multi-thread, 2 workers, timers on (the bus needs
/// them); or a current-thread one (`EVENTBUS_ASYNC_CURRENT_THREAD`).
fn runtime(current_thread: bool) -> tokio::runtime::Runtime {
    let mut builder = if current_thread {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(2);
        builder
    };
    builder.enable_all().build().expect("a tokio runtime")
}

// ---------------------------------------------------------------- scale

/// The mailbox size in the scale scenarios, and what one slot costs (a pointer to the shared
/// message and the channel's stamp).
const SCALE_CAPACITY: usize = 8;
const SLOT: u64 = 16;

/// What one subscriber's handler shares with the bench: how many subscribers have had every
/// message, and a signal for the last.
#[derive(Clone)]
struct Finish {
    finished: Arc<AtomicUsize>,
    subscribers: usize,
    messages: u64,
    done: crossbeam_channel::Sender<()>,
}

impl Finish {
    /// Counts one delivery on the subscriber's own counter; the last subscriber to have had
    /// every message signals.
    fn delivered(&self, got: &mut u64) {
        *got += 1;
        if *got == self.messages
            && self.finished.fetch_add(1, Ordering::Relaxed) + 1 == self.subscribers
        {
            let _ = self.done.try_send(());
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Tasks,
    Threads,
}

/// What one scale run measured.
struct Scale {
    startup: Duration,
    after_startup: u64,
    after_delivery: u64,
    delivery: Duration,
    close: Duration,
}

fn scale(kind: Kind, subscribers: usize, messages: u64) {
    let what = match kind {
        Kind::Tasks => "async subscribers (capacity 8), publish_async from a task",
        Kind::Threads => "thread subscribers (capacity 8), publish from a thread",
    };
    let title = format!("scale: {subscribers} {what}, {messages} messages, close");
    if !measure::wanted("EVENTBUS_ASYNC_ONLY", &title) {
        return;
    }
    let (done_tx, done_rx) = crossbeam_channel::bounded(1);
    let finish = Finish {
        finished: Arc::new(AtomicUsize::new(0)),
        subscribers,
        messages,
        done: done_tx,
    };
    // Made first, so its threads are in `before`.
    let runtime = runtime(false);
    let before = measure::resident_bytes();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let options = Options::default().capacity(SCALE_CAPACITY);
    let start = Instant::now();
    for _ in 0..subscribers {
        let (finish, mut got) = (finish.clone(), 0);
        match kind {
            Kind::Tasks => {
                bus.subscribe_async::<Tick, _, _, _>(options.clone(), move |m: Message<Tick>| {
                    finish.delivered(&mut got);
                    async move {
                        black_box(&m.0);
                    }
                });
            }
            Kind::Threads => {
                bus.subscribe::<Tick>(options.clone(), move |m: &Message<Tick>| {
                    black_box(&m.0);
                    finish.delivered(&mut got);
                });
            }
        }
    }
    let startup = start.elapsed();
    let after_startup = measure::resident_bytes();
    let start = Instant::now();
    match kind {
        Kind::Tasks => {
            let publisher = bus.clone();
            let task = runtime.spawn(async move {
                for i in 0..messages {
                    publisher
                        .publish_async(Tick(i))
                        .await
                        .map_err(|_| ())
                        .unwrap();
                }
            });
            runtime.block_on(task).unwrap();
        }
        Kind::Threads => {
            for i in 0..messages {
                bus.publish(Tick(i)).map_err(|_| ()).unwrap();
            }
        }
    }
    if subscribers > 0 && messages > 0 {
        done_rx.recv().unwrap();
    }
    let delivery = start.elapsed();
    let after_delivery = measure::resident_bytes();
    let start = Instant::now();
    match kind {
        Kind::Tasks => runtime.block_on(bus.close_async()),
        Kind::Threads => bus.close(),
    }
    let close = start.elapsed();
    let stats = bus.stats();
    let delivered: u64 = stats.subscriptions.iter().map(|s| s.delivered).sum();
    assert_eq!(delivered, messages * subscribers as u64);
    drop(stats);
    drop(runtime);
    let run = Scale {
        startup,
        after_startup: after_startup.saturating_sub(before),
        after_delivery: after_delivery.saturating_sub(before),
        delivery,
        close,
    };
    print_scale(&title, subscribers, messages, &run);
}

fn print_scale(title: &str, subscribers: usize, messages: u64, run: &Scale) {
    let n = subscribers.max(1) as f64;
    let kib = |bytes: u64| bytes as f64 / 1024.0 / n;
    let slots = SCALE_CAPACITY as u64 * SLOT;
    println!("\n{title}");
    println!(
        "  start-up        {:>9.0} ms   {:>8.1} µs per subscriber",
        run.startup.as_secs_f64() * 1e3,
        run.startup.as_secs_f64() * 1e6 / n
    );
    println!(
        "  resident        {:>9.1} MiB  {:>8.2} KiB per subscriber after start-up",
        run.after_startup as f64 / 1048576.0,
        kib(run.after_startup)
    );
    println!(
        "                  {:>9.1} MiB  {:>8.2} KiB per subscriber after delivery \
         (slots: {SCALE_CAPACITY} × {SLOT} B = {slots} B; goal ≤ 4 KiB beyond them)",
        run.after_delivery as f64 / 1048576.0,
        kib(run.after_delivery)
    );
    let deliveries = (messages * subscribers as u64).max(1) as f64;
    println!(
        "  delivery        {:>9.0} ms   {:>8.1} ns per delivery (first publish to last delivery)",
        run.delivery.as_secs_f64() * 1e3,
        run.delivery.as_nanos() as f64 / deliveries
    );
    println!(
        "  close           {:>9.0} ms   {:>8.1} µs per subscriber",
        run.close.as_secs_f64() * 1e3,
        run.close.as_secs_f64() * 1e6 / n
    );
}

// ---------------------------------------------------------------- throughput

#[derive(Clone, Copy, Debug, PartialEq)]
enum Contender {
    HandMade,
    Eventbus,
    Broadcast,
}

use Contender::*;

const CONTENDERS: [Contender; 3] = [HandMade, Eventbus, Broadcast];

impl Contender {
    fn name(self) -> &'static str {
        match self {
            HandMade => "hand-made (tokio Mutex + mpsc)",
            Eventbus => "eventbus (subscribe_async)",
            Broadcast => "tokio::broadcast",
        }
    }
}

/// One measured run: wall time from the publisher task's spawn until every subscriber had
/// every message it was going to get.
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

#[derive(Clone, Copy)]
struct Shape {
    publishers: u64,
    subscribers: usize,
    messages: u64,
    capacity: usize,
    current_thread: bool,
}

type Done = tokio::sync::mpsc::UnboundedSender<u64>;

/// Spawns the publishers, waits for `subscribers` reports on `done` (each its lost count);
/// the time between.
async fn timed<F: std::future::Future<Output = ()> + Send + 'static>(
    subscribers: usize,
    done: &mut tokio::sync::mpsc::UnboundedReceiver<u64>,
    publishers: impl IntoIterator<Item = F>,
) -> (Duration, u64) {
    let start = Instant::now();
    let publishers: Vec<_> = publishers.into_iter().map(tokio::spawn).collect();
    let mut lost = 0;
    for _ in 0..subscribers {
        lost += done.recv().await.expect("every subscriber reports");
    }
    let elapsed = start.elapsed();
    for publisher in publishers {
        publisher.await.expect("the publisher finishes");
    }
    (elapsed, lost)
}

impl Shape {
    /// The messages of publisher `p`: its share of the run's, numbered apart from the
    /// others'.
    fn share(&self, p: u64) -> std::ops::Range<u64> {
        let each = self.messages / self.publishers;
        p * each..(p + 1) * each
    }

    /// Every message of the run (the shares add up to it).
    fn all(&self) -> u64 {
        self.messages / self.publishers * self.publishers
    }
}

fn run_eventbus(shape: Shape) -> Run {
    let runtime = runtime(shape.current_thread);
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..shape.subscribers {
        let (done, mut got): (Done, u64) = (done_tx.clone(), 0);
        let messages = shape.all();
        bus.subscribe_async::<Tick, _, _, _>(
            Options::default().capacity(shape.capacity),
            move |m: Message<Tick>| {
                got += 1;
                if got == messages {
                    let _ = done.send(0);
                }
                async move {
                    black_box(&m.0);
                }
            },
        );
    }
    let publishers = (0..shape.publishers).map(|p| {
        let (publisher, share) = (bus.clone(), shape.share(p));
        async move {
            for i in share {
                publisher
                    .publish_async(Tick(i))
                    .await
                    .map_err(|_| ())
                    .unwrap();
            }
        }
    });
    let (elapsed, _) = runtime.block_on(async {
        let run = timed(shape.subscribers, &mut done_rx, publishers).await;
        bus.close_async().await;
        run
    });
    Run {
        elapsed,
        deliveries: shape.all() * shape.subscribers as u64,
        lost: 0,
    }
}

/// The hand-made fan-out: the order and the channels behind one `tokio::sync::Mutex`.
type HandTopic = tokio::sync::Mutex<(u64, Vec<tokio::sync::mpsc::Sender<Arc<Tick>>>)>;

fn run_hand_made(shape: Shape) -> Run {
    let runtime = runtime(shape.current_thread);
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    let messages = shape.all();
    let (elapsed, _) = runtime.block_on(async {
        let senders = (0..shape.subscribers)
            .map(|_| {
                let (tx, mut rx) = tokio::sync::mpsc::channel::<Arc<Tick>>(shape.capacity);
                let done: Done = done_tx.clone();
                tokio::spawn(async move {
                    let mut got = 0;
                    while let Some(m) = rx.recv().await {
                        black_box(&m.0);
                        got += 1;
                        if got == messages {
                            let _ = done.send(0);
                        }
                    }
                });
                tx
            })
            .collect();
        let topic: Arc<HandTopic> = Arc::new(tokio::sync::Mutex::new((0, senders)));
        let publishers = (0..shape.publishers).map(|p| {
            let (topic, share) = (topic.clone(), shape.share(p));
            async move {
                for i in share {
                    let mut order = topic.lock().await;
                    order.0 += 1;
                    let message = Arc::new(Tick(i));
                    for tx in &order.1 {
                        tx.send(Arc::clone(&message)).await.unwrap();
                    }
                }
            }
        });
        let publishers: Vec<_> = publishers.collect();
        // The channels go with the last publisher, so the consumers end.
        drop(topic);
        timed(shape.subscribers, &mut done_rx, publishers).await
    });
    Run {
        elapsed,
        deliveries: shape.all() * shape.subscribers as u64,
        lost: 0,
    }
}

fn run_broadcast(shape: Shape) -> Run {
    use tokio::sync::broadcast::error::RecvError;
    let runtime = runtime(shape.current_thread);
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    let messages = shape.all();
    let (elapsed, lost) = runtime.block_on(async {
        let (tx, _) = tokio::sync::broadcast::channel::<Tick>(shape.capacity);
        for _ in 0..shape.subscribers {
            let mut rx = tx.subscribe();
            let done: Done = done_tx.clone();
            tokio::spawn(async move {
                let (mut got, mut lost) = (0, 0);
                while got + lost < messages {
                    match rx.recv().await {
                        Ok(m) => {
                            black_box(&m.0);
                            got += 1;
                        }
                        Err(RecvError::Lagged(n)) => lost += n,
                        Err(RecvError::Closed) => break,
                    }
                }
                let _ = done.send(lost);
            });
        }
        let publishers = (0..shape.publishers).map(|p| {
            let (tx, share) = (tx.clone(), shape.share(p));
            async move {
                for i in share {
                    let _ = tx.send(Tick(i));
                }
            }
        });
        let publishers: Vec<_> = publishers.collect();
        // The sender goes with the last publisher, so the receivers end.
        drop(tx);
        timed(shape.subscribers, &mut done_rx, publishers).await
    });
    let all = shape.all() * shape.subscribers as u64;
    Run {
        elapsed,
        deliveries: all - lost,
        lost,
    }
}

fn run(contender: Contender, shape: Shape) -> Run {
    match contender {
        HandMade => run_hand_made(shape),
        Eventbus => run_eventbus(shape),
        Broadcast => run_broadcast(shape),
    }
}

/// Runs every contender `rounds` times, alternating, and prints the medians.
fn throughput(shape: Shape, rounds: u64, contenders: &[Contender]) {
    let title = match shape.publishers {
        1 => format!(
            "throughput: 1 publisher task → {} async subscriber(s), Block, 8 B messages",
            shape.subscribers
        ),
        publishers => format!(
            "throughput: {publishers} publisher tasks on one topic → {} async subscriber(s), \
             Block, 8 B messages",
            shape.subscribers
        ),
    };
    if !measure::wanted("EVENTBUS_ASYNC_ONLY", &title) {
        return;
    }
    let contenders: Vec<Contender> = contenders
        .iter()
        .copied()
        .filter(|c| measure::wanted("EVENTBUS_ASYNC_CONTENDER", c.name()))
        .collect();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
    let mut lost = vec![0u64; contenders.len()];
    for _ in 0..rounds {
        for (i, &contender) in contenders.iter().enumerate() {
            let run = run(contender, shape);
            times[i].push(run.ns_per_delivery());
            lost[i] += run.lost;
        }
    }
    println!("\n{title}");
    println!(
        "  {:<32} {:>9} {:>17} {:>7} {:>7} {:>18}",
        "contender", "ns/deliv", "(min–max)", "spread", "ratio", "lost"
    );
    let medians: Vec<f64> = times.iter().map(|t| measure::median(t.clone())).collect();
    let hand_made = contenders
        .iter()
        .position(|&c| c == HandMade)
        .map_or(f64::NAN, |i| medians[i]);
    let all = rounds * shape.all() * shape.subscribers as u64;
    for (i, contender) in contenders.iter().enumerate() {
        let (low, high) = times[i]
            .iter()
            .fold((f64::MAX, 0.0f64), |(l, h), &t| (l.min(t), h.max(t)));
        let loss = match lost[i] {
            0 => "0".to_string(),
            n => format!("{n} ({:.1}%)", 100.0 * n as f64 / all.max(1) as f64),
        };
        println!(
            "  {:<32} {:>9.1} {:>17} {:>6.2}x {:>6.2}x {:>18}",
            contender.name(),
            medians[i],
            format!("({low:.1}–{high:.1})"),
            contention::spread(&times[i]),
            medians[i] / hand_made,
            loss
        );
    }
    if let Some(i) = contenders.iter().position(|&c| c == Eventbus) {
        println!(
            "  goal: eventbus ≤ 1.2 × hand-made: {:.2}x",
            medians[i] / hand_made
        );
    }
}

fn main() {
    contention::spin_if_child();
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run tiny then.
    let quick = !std::env::args().any(|a| a == "--bench");
    let tasks = measure::env("EVENTBUS_SCALE_TASKS", if quick { 200 } else { 100_000 }) as usize;
    let threads = measure::env("EVENTBUS_SCALE_THREADS", if quick { 20 } else { 10_000 }) as usize;
    let scale_messages = measure::env("EVENTBUS_SCALE_MESSAGES", if quick { 10 } else { 100 });
    let messages = measure::env(
        "EVENTBUS_ASYNC_MESSAGES",
        if quick { 2_000 } else { 1_000_000 },
    );
    let capacity =
        measure::env("EVENTBUS_ASYNC_CAPACITY", Options::DEFAULT_CAPACITY as u64) as usize;
    let rounds = measure::env("EVENTBUS_ROUNDS", if quick { 1 } else { 5 }).max(1);
    let current_thread = std::env::var_os("EVENTBUS_ASYNC_CURRENT_THREAD").is_some();
    println!(
        "eventbus async: tokio multi-thread runtime, 2 workers; {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "throughput: {messages} messages per run, {rounds} rounds, medians; capacity {capacity}{}",
        if current_thread {
            "; on a current-thread runtime"
        } else {
            ""
        }
    );
    println!("load average at start: {}", measure::load_average());
    let _busy = contention::start_if_asked();

    let only_two = std::env::var_os("EVENTBUS_ASYNC_QUICK").is_some();
    let contenders = if only_two {
        &CONTENDERS[..2]
    } else {
        &CONTENDERS[..]
    };
    for (publishers, subscribers) in [(1, 1), (1, 4), (1, 16), (4, 4), (4, 16)] {
        let shape = Shape {
            publishers,
            subscribers,
            messages,
            capacity,
            current_thread,
        };
        throughput(shape, rounds, contenders);
    }
    // The scale section runs last: 10,000 threads lift the load average for minutes after.
    println!(
        "\nload average after throughput: {}",
        measure::load_average()
    );
    scale(Kind::Tasks, tasks, scale_messages);
    scale(Kind::Threads, threads, scale_messages);
    println!("\nload average at end: {}", measure::load_average());
}
