//! `cargo bench -p eventbus --bench log_memory`: the heap a log topic holds per retained
//! message (issue 29, item 5), counted with dhat's allocator, so the figures are exact and do
//! not move with the machine's load.
//!
//! A topic of `#[topic(retain = 1_000_000)]` with a 24-byte payload, no subscriber (a log
//! keeps what is published for subscriptions to come), filled with 1,000,000 messages and
//! then with 1,000,000 more (the trim takes out one per publish). Printed: the live heap
//! before, full, and after the second million, against the payloads' own 24 MB.
//!
//! - `EVENTBUS_BENCH_MESSAGES` (default 1,000,000): the retention and the messages per pass.

use eventbus::{Bus, Topic};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// 24 bytes of payload.
#[derive(Topic)]
#[topic(retain = 1_000_000)]
struct Tick {
    #[allow(dead_code)]
    a: u64,
    #[allow(dead_code)]
    b: u64,
    #[allow(dead_code)]
    c: u64,
}

fn live() -> u64 {
    dhat::HeapStats::get().curr_bytes as u64
}

fn main() {
    let _profiler = dhat::Profiler::builder().testing().build();
    assert_eq!(std::mem::size_of::<Tick>(), 24);
    let messages: u64 = std::env::var("EVENTBUS_BENCH_MESSAGES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000)
        .min(1_000_000);
    let bus = Bus::builder().build();
    // Publish one first, so the topic's state (not the messages) is in the "before" figure.
    let first = Tick { a: 0, b: 0, c: 0 };
    bus.publish(first).ok();
    let before = live();
    for i in 1..messages {
        bus.publish(Tick { a: i, b: i, c: i }).ok();
    }
    let full = live();
    for i in 0..messages {
        bus.publish(Tick { a: i, b: i, c: i }).ok();
    }
    let trimmed = live();
    let payloads = messages * 24;
    let per = |bytes: u64| (bytes - before) as f64 / (messages - 1) as f64;
    println!("log topic, retain = 1,000,000, 24-byte payload, {messages} messages per pass");
    println!("heap before the messages (bus and topic):  {before:>12} bytes");
    println!(
        "heap with the log full:                    {full:>12} bytes  ({:.1} per message, {:.2}x the payloads)",
        per(full),
        (full - before) as f64 / payloads as f64
    );
    println!(
        "heap after as many more (trimmed):         {trimmed:>12} bytes  ({:.1} per message, {:.2}x the payloads)",
        per(trimmed),
        (trimmed - before) as f64 / payloads as f64
    );
    bus.close();
}
