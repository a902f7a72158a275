//! `cargo bench -p eventbus --bench dispatcher`: a topic with a dispatcher
//! (`#[topic(dispatcher)]`) against the same topic without one, in one process, alternating,
//! several rounds; medians and ratios measured in the same run (issue 27, item 5).
//!
//! For 1, 4 and 8 publishers into 4 subscribers, and 1 publisher into 16, it prints:
//! - **throughput**: wall ns per message, from the first publish until every subscriber has
//!   handled every message (all `Block`, capacity 1024: nothing may be lost; checked);
//! - **the publisher's own time**: the publishing threads' CPU ns per publish (from
//!   `/proc/thread-self/schedstat`, so time asleep waiting for room is not counted).
//!
//! - `EVENTBUS_BENCH_MESSAGES` (default 400,000): messages per run.
//! - `EVENTBUS_BENCH_ROUNDS` (default 5): rounds; the median is reported.
//! - `EVENTBUS_BENCH_BUSY=1`: one core kept busy by a process the bench starts and stops.
//!
//! Figures from a shared machine are noisy: read the ratios, and the load average printed at
//! the start and the end. `spread`: the slowest ÷ the fastest wall time of the line's runs.

#[path = "common/contention.rs"]
mod contention;
#[path = "common/measure.rs"]
mod measure;

use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Instant;

use crossbeam_channel::{bounded, Receiver, Sender};
use eventbus::{Bus, Message, Options, Overflow, Topic};

const CAP: usize = 1024;

/// An 8-byte message, handed out by the topic's dispatcher.
#[derive(Topic, Clone)]
#[topic(dispatcher, queue = 1024)]
struct Dispatched(u64);

/// The same, handed out by each publisher.
#[derive(Topic, Clone)]
struct Direct(u64);

#[derive(Clone, Copy)]
struct Run {
    wall_ns: f64,
    publisher_ns: f64,
}

fn counter(messages: u64, done: &Sender<u64>) -> impl FnMut(u64) + Send + 'static {
    let done = done.clone();
    let mut got = 0;
    move |m| {
        std::hint::black_box(m);
        got += 1;
        if got == messages {
            done.send(got).unwrap();
        }
    }
}

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
                let mine = messages / publishers + u64::from(p < messages % publishers);
                for i in 0..mine {
                    publish(i);
                }
                let spent = measure::thread_cpu().saturating_sub(before);
                cpu.fetch_add(spent.as_nanos() as u64, Ordering::Relaxed);
            });
        }
    });
    let got: u64 = (0..subscribers).map(|_| done.recv().unwrap()).sum();
    let elapsed = start.elapsed();
    assert_eq!(
        got,
        messages * subscribers as u64,
        "a Block subscriber lost messages"
    );
    Run {
        wall_ns: elapsed.as_nanos() as f64 / messages as f64,
        publisher_ns: cpu.load(Ordering::Relaxed) as f64 / messages as f64,
    }
}

fn run(dispatched: bool, publishers: u64, subscribers: usize, messages: u64) -> Run {
    let (done_tx, done_rx) = bounded(subscribers);
    let bus = Bus::builder().build();
    let options = || Options::default().capacity(CAP).overflow(Overflow::Block);
    for _ in 0..subscribers {
        let mut count = counter(messages, &done_tx);
        if dispatched {
            bus.subscribe::<Dispatched>(options(), move |m: &Message<Dispatched>| count(m.0));
        } else {
            bus.subscribe::<Direct>(options(), move |m: &Message<Direct>| count(m.0));
        }
    }
    let run = drive(publishers, subscribers, messages, &done_rx, &|i| {
        let accepted = if dispatched {
            bus.publish(Dispatched(i)).is_ok()
        } else {
            bus.publish(Direct(i)).is_ok()
        };
        assert!(accepted, "publish refused");
    });
    bus.close();
    run
}

fn main() {
    contention::spin_if_child();
    let messages = measure::env("EVENTBUS_BENCH_MESSAGES", 400_000);
    let rounds = measure::env("EVENTBUS_BENCH_ROUNDS", 5).max(1);
    println!("load at start: {}", measure::load_average());
    let _busy = contention::start_if_asked();
    println!(
        "eventbus dispatcher topics: {messages} messages, {rounds} rounds, {} CPUs",
        thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "\n  {:<16} {:>12} {:>12} {:>8} {:>14} {:>14} {:>8} {:>8}",
        "publishers→subs",
        "wall ns/msg",
        "(direct)",
        "ratio",
        "publisher ns",
        "(direct)",
        "ratio",
        "spread"
    );
    for (publishers, subscribers) in [(1, 4), (4, 4), (8, 4), (1, 16)] {
        let (mut with, mut without) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            with.push(run(true, publishers, subscribers, messages));
            without.push(run(false, publishers, subscribers, messages));
        }
        let wall = measure::median(with.iter().map(|r| r.wall_ns).collect());
        let wall_direct = measure::median(without.iter().map(|r| r.wall_ns).collect());
        let own = measure::median(with.iter().map(|r| r.publisher_ns).collect());
        let own_direct = measure::median(without.iter().map(|r| r.publisher_ns).collect());
        let walls: Vec<f64> = with.iter().chain(&without).map(|r| r.wall_ns).collect();
        println!(
            "  {:<16} {wall:>12.1} {wall_direct:>12.1} {:>7.2}x {own:>14.1} {own_direct:>14.1} {:>7.2}x {:>7.2}x",
            format!("{publishers} → {subscribers}"),
            wall / wall_direct,
            own / own_direct,
            contention::spread(&walls),
        );
    }
    println!("\n(ratio: with a dispatcher ÷ without; below 1 is better for the dispatcher)");
    println!("load at end: {}", measure::load_average());
}
