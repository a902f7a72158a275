//! `cargo bench -p eventbus --bench log_topics`: log topics (`#[topic(retain = N)]`) against
//! the `bus` crate's shared ring and against eventbus's own mailbox topics, in one process,
//! alternating, several rounds; medians and ratios measured in the same run.
//!
//! Three questions (issue 13's targets):
//! 1. **Fan-out.** ns per delivery, 1 publisher → 1, 4, 16, 64 subscribers, and 4 publishers
//!    → 4, 16, every subscriber `Block` (nothing may be lost; checked). Target: a log topic
//!    within 1.5 × the `bus` crate at 4 and 16 subscribers with 1 publisher, within 2 × with
//!    4 publishers (the `bus` crate has one writer, so its 4 publishers share it under a lock).
//! 2. **The publisher's own cost**: the publishing thread's CPU time per publish (from
//!    `/proc/thread-self/schedstat`, so time asleep waiting for room is not counted; the few
//!    spins and yields before it sleeps are), by number of subscribers. Target: 1, 4, 16 and 64 subscribers within 1.5 × of each other.
//! 3. **Replay.** A subscriber joining a log of 10⁶ retained messages with `Start::Earliest`
//!    catches up at ≥ the live rate (ns per delivery of the 1 → 1 live run, same round).
//!
//! - `EVENTBUS_BENCH_MESSAGES` (default 1,000,000): messages per fan-out run (a quarter at
//!   64 subscribers) and the replayed log's length.
//! - `EVENTBUS_BENCH_ROUNDS` (default 5): rounds; the median is reported.
//! - `EVENTBUS_BENCH_ONLY` (text): only the measurements whose title contains it
//!   (`fan-out`, `publishers`, `replay`).
//! - `EVENTBUS_BENCH_SUBSCRIBERS` (a number): only the fan-outs to that many subscribers.
//! - `EVENTBUS_BENCH_CONTENDER` (text): only the contenders whose name contains it (`log
//!   topic`, `bus crate`, `mailbox`), e.g. to count one contender's context switches with
//!   `perf stat`; the ratios need the `bus` crate among them.
//!
//! - `EVENTBUS_BENCH_BUSY=1`: the contended regime, one core kept busy by a process the bench
//!   starts and stops (`common/contention.rs`). Each line also prints its rounds' spread (slowest ÷
//!   fastest).
//!
//! Figures from a shared machine are noisy: read the ratios, and the load average printed at
//! the start and the end.

#[path = "common/contention.rs"]
mod contention;
#[path = "common/measure.rs"]
mod measure;

use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Instant;

use crossbeam_channel::{bounded, Receiver, Sender};
use eventbus::{Bus, Message, Options, Overflow, Start, Topic};
use parking_lot::Mutex;

/// Ring size of every contender, and the `Block` subscribers' capacity.
const CAP: usize = 1024;

/// An 8-byte message on a log topic.
#[derive(Topic, Clone)]
#[topic(retain = 1024)]
struct Logged(u64);

/// The same on a mailbox topic.
#[derive(Topic, Clone)]
struct Mailed(u64);

/// The replayed topic: keeps a million messages.
#[derive(Topic)]
#[topic(retain = 1_000_000)]
struct History(u64);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Contender {
    Log,
    Mailbox,
    BusCrate,
}

use Contender::*;

impl Contender {
    fn name(self) -> &'static str {
        match self {
            Log => "eventbus log topic",
            Mailbox => "eventbus mailbox topic",
            BusCrate => "bus crate",
        }
    }
}

fn subscribed(subscribers: usize) -> bool {
    std::env::var("EVENTBUS_BENCH_SUBSCRIBERS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(true, |only| only == subscribers)
}

fn split(messages: u64, publishers: u64, p: u64) -> u64 {
    messages / publishers + u64::from(p < messages % publishers)
}

/// One run: wall ns per delivery, and the publishers' CPU ns per publish.
#[derive(Clone, Copy)]
struct Run {
    ns_per_delivery: f64,
    publisher_ns: f64,
}

/// Publishes `messages` from `publishers` threads with `publish`, waits for `subscribers`
/// "done"s, and times it.
fn drive(
    publishers: u64,
    subscribers: usize,
    messages: u64,
    done: &Receiver<u64>,
    publish: &(dyn Fn(u64) + Sync),
) -> Run {
    let start = Instant::now();
    let cpu = AtomicU64::new(0);
    thread::scope(|scope| {
        for p in 0..publishers {
            let cpu = &cpu;
            scope.spawn(move || {
                let before = measure::thread_cpu();
                for i in 0..split(messages, publishers, p) {
                    publish(i);
                }
                let spent = measure::thread_cpu().saturating_sub(before);
                cpu.fetch_add(spent.as_nanos() as u64, Ordering::Relaxed);
            });
        }
    });
    let got: u64 = (0..subscribers).map(|_| done.recv().unwrap()).sum();
    let elapsed = start.elapsed();
    let deliveries = messages * subscribers as u64;
    assert_eq!(got, deliveries, "a Block subscriber lost messages");
    Run {
        ns_per_delivery: elapsed.as_nanos() as f64 / deliveries as f64,
        publisher_ns: cpu.load(Ordering::Relaxed) as f64 / messages as f64,
    }
}

/// A handler that counts and says "done" (with its count) after `messages`.
fn counter<M>(messages: u64, done: &Sender<u64>) -> impl FnMut(&M) + Send + 'static {
    let done = done.clone();
    let mut got = 0;
    move |m: &M| {
        std::hint::black_box(m);
        got += 1;
        if got == messages {
            done.send(got).unwrap();
        }
    }
}

fn run(contender: Contender, publishers: u64, subscribers: usize, messages: u64) -> Run {
    let (done_tx, done_rx) = bounded(subscribers);
    match contender {
        Log | Mailbox => {
            let bus = Bus::builder().build();
            let options = || Options::default().capacity(CAP).overflow(Overflow::Block);
            for _ in 0..subscribers {
                if contender == Log {
                    let mut count = counter(messages, &done_tx);
                    bus.subscribe::<Logged>(options(), move |m: &Message<Logged>| count(&m.0));
                } else {
                    let mut count = counter(messages, &done_tx);
                    bus.subscribe::<Mailed>(options(), move |m: &Message<Mailed>| count(&m.0));
                }
            }
            let run = drive(publishers, subscribers, messages, &done_rx, &|i| {
                let accepted = if contender == Log {
                    bus.publish(Logged(i)).is_ok()
                } else {
                    bus.publish(Mailed(i)).is_ok()
                };
                assert!(accepted, "publish refused");
            });
            bus.close();
            run
        }
        BusCrate => {
            let mut ring = bus::Bus::<Logged>::new(CAP);
            let readers: Vec<_> = (0..subscribers)
                .map(|_| {
                    let mut rx = ring.add_rx();
                    let mut count = counter(messages, &done_tx);
                    thread::spawn(move || {
                        for _ in 0..messages {
                            count(&rx.recv().unwrap().0);
                        }
                    })
                })
                .collect();
            // One writer: several publishers take turns under a lock.
            let ring = Mutex::new(ring);
            let run = drive(publishers, subscribers, messages, &done_rx, &|i| {
                ring.lock().broadcast(Logged(i));
            });
            for reader in readers {
                reader.join().unwrap();
            }
            run
        }
    }
}

/// Every contender, `rounds` times, alternating; prints medians; returns the medians.
fn fan_out(
    publishers: u64,
    subscribers: usize,
    messages: u64,
    rounds: u64,
    contenders: &[Contender],
) -> Vec<(Contender, Run)> {
    let contenders: Vec<Contender> = contenders
        .iter()
        .copied()
        .filter(|c| measure::wanted("EVENTBUS_BENCH_CONTENDER", c.name()))
        .collect();
    let contenders = &contenders[..];
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); contenders.len()];
    for _ in 0..rounds {
        for (i, &contender) in contenders.iter().enumerate() {
            runs[i].push(run(contender, publishers, subscribers, messages));
        }
    }
    let medians: Vec<(Contender, Run)> = contenders
        .iter()
        .zip(&runs)
        .map(|(&c, r)| {
            let run = Run {
                ns_per_delivery: measure::median(r.iter().map(|r| r.ns_per_delivery).collect()),
                publisher_ns: measure::median(r.iter().map(|r| r.publisher_ns).collect()),
            };
            (c, run)
        })
        .collect();
    let bus_crate = medians
        .iter()
        .find(|(c, _)| *c == BusCrate)
        .map(|(_, r)| r.ns_per_delivery);
    println!(
        "\n{publishers} publisher(s) → {subscribers} subscribers, {messages} messages, Block, \
         median of {rounds}"
    );
    println!(
        "  {:<24} {:>10} {:>14} {:>16} {:>8}",
        "contender", "ns/deliv", "÷ bus crate", "publisher ns/msg", "spread"
    );
    for ((contender, run), rounds) in medians.iter().zip(&runs) {
        let ratio = bus_crate.map_or("-".into(), |b| format!("{:.2}x", run.ns_per_delivery / b));
        let each: Vec<f64> = rounds.iter().map(|r| r.ns_per_delivery).collect();
        println!(
            "  {:<24} {:>10.1} {:>14} {:>16.1} {:>7.2}x",
            contender.name(),
            run.ns_per_delivery,
            ratio,
            run.publisher_ns,
            contention::spread(&each)
        );
    }
    medians
}

fn replay(messages: u64, rounds: u64, live: f64) {
    let mut times = Vec::new();
    for _ in 0..rounds {
        let bus = Bus::builder().build();
        for i in 0..messages {
            assert!(bus.publish(History(i)).is_ok());
        }
        let (done_tx, done_rx) = bounded(1);
        let start = Instant::now();
        let mut count = counter(messages, &done_tx);
        bus.subscribe::<History>(
            Options::default().start(Start::Earliest),
            move |m: &Message<History>| count(&m.0),
        );
        assert_eq!(done_rx.recv().unwrap(), messages, "replay lost messages");
        times.push(start.elapsed().as_nanos() as f64 / messages as f64);
        bus.close();
    }
    let replayed = measure::median(times);
    println!("\nreplay: 1 subscriber joins {messages} retained messages with Start::Earliest");
    println!("  replay {replayed:.1} ns/message; live 1 → 1 on a log topic {live:.1} ns/delivery");
    println!(
        "  target: replay rate ≥ live rate: replay is {:.2}x as fast",
        live / replayed
    );
}

fn main() {
    contention::spin_if_child();
    let messages = measure::env("EVENTBUS_BENCH_MESSAGES", 1_000_000);
    let rounds = measure::env("EVENTBUS_BENCH_ROUNDS", 5).max(1);
    println!("load at start: {}", measure::load_average());
    let _busy = contention::start_if_asked();
    println!(
        "eventbus log topics: {messages} messages, {rounds} rounds, {} CPUs",
        thread::available_parallelism().map_or(0, |n| n.get())
    );
    let all = [Log, BusCrate, Mailbox];
    let mut publisher_cost = Vec::new();
    let mut live = None;
    if measure::wanted("EVENTBUS_BENCH_ONLY", "fan-out") {
        for subscribers in [1, 4, 16, 64].into_iter().filter(|&s| subscribed(s)) {
            let n = if subscribers == 64 {
                messages / 4
            } else {
                messages
            };
            let medians = fan_out(1, subscribers, n, rounds, &all);
            let log = medians.iter().find(|(c, _)| *c == Log).map(|(_, r)| *r);
            let bus_crate = medians
                .iter()
                .find(|(c, _)| *c == BusCrate)
                .map(|(_, r)| *r);
            if let (Some(log), Some(bus_crate)) = (log, bus_crate) {
                if subscribers == 1 {
                    live = Some(log.ns_per_delivery);
                }
                if subscribers == 4 || subscribers == 16 {
                    println!(
                        "  target: log ≤ 1.5 × bus crate: {:.2}x",
                        log.ns_per_delivery / bus_crate.ns_per_delivery
                    );
                }
                let mailbox = medians.iter().find(|(c, _)| *c == Mailbox).map(|(_, r)| *r);
                publisher_cost.push((
                    subscribers,
                    log.publisher_ns,
                    mailbox.map(|m| m.publisher_ns),
                ));
            }
        }
        if let Some(&(_, first, _)) = publisher_cost.first() {
            println!("\nthe publisher's own CPU ns per publish, by subscribers (median)");
            println!(
                "  {:>11} {:>10} {:>8} {:>10}",
                "subscribers", "log", "÷ 1 sub", "mailbox"
            );
            for (subscribers, log, mailbox) in &publisher_cost {
                println!(
                    "  {subscribers:>11} {log:>10.1} {:>7.2}x {:>10}",
                    log / first,
                    mailbox.map_or("-".into(), |m| format!("{m:.1}"))
                );
            }
            let high = publisher_cost.iter().map(|c| c.1).fold(0.0, f64::max);
            let low = publisher_cost.iter().map(|c| c.1).fold(f64::MAX, f64::min);
            println!("  target: highest ÷ lowest ≤ 1.5: {:.2}x", high / low);
        }
    }
    if measure::wanted("EVENTBUS_BENCH_ONLY", "publishers") {
        for subscribers in [4, 16].into_iter().filter(|&s| subscribed(s)) {
            let medians = fan_out(4, subscribers, messages, rounds, &[Log, BusCrate]);
            if let [(_, log), (_, bus_crate)] = medians[..] {
                println!(
                    "  target: log ≤ 2 × bus crate with 4 publishers: {:.2}x",
                    log.ns_per_delivery / bus_crate.ns_per_delivery
                );
            }
        }
    }
    if measure::wanted("EVENTBUS_BENCH_ONLY", "replay") {
        let live = live.unwrap_or_else(|| {
            let runs: Vec<f64> = (0..rounds)
                .map(|_| run(Log, 1, 1, messages).ns_per_delivery)
                .collect();
            measure::median(runs)
        });
        replay(messages, rounds, live);
    }
    println!("\nload at end: {}", measure::load_average());
}
