//! Soak: 8 publishers and 8 subscribers over 4 topics with mixed policies. The counters add
//! up exactly, each topic's order holds for every subscriber, and memory stays flat across
//! rounds.
//!
//! `EVENTBUS_SOAK_MESSAGES` sets the number of messages (default 100,000; try 10,000,000).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use eventbus::{Bus, Message, Options, Overflow, Topic};

#[derive(Topic)]
struct Reading<const T: usize> {
    /// Big enough that keeping messages by mistake shows in the resident set.
    _payload: [u8; 256],
}

const TOPICS: usize = 4;
const PUBLISHERS: u64 = 8;
const ROUNDS: u64 = 5;

fn messages() -> u64 {
    std::env::var("EVENTBUS_SOAK_MESSAGES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000)
}

/// The resident set, from `/proc/self/statm` (pages of 4 KiB).
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("a Linux /proc");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[derive(Default)]
struct Watch {
    count: AtomicU64,
    /// One past the last seq seen.
    next: AtomicU64,
    out_of_order: AtomicBool,
}

fn subscribe<const T: usize>(bus: &Bus, overflow: Overflow, capacity: usize, watch: Arc<Watch>) {
    let name = format!("topic{T}-{overflow:?}");
    let options = Options::default()
        .name(name)
        .overflow(overflow)
        .capacity(capacity);
    let gapless = overflow == Overflow::Block;
    bus.subscribe::<Reading<T>>(options, move |m: &Message<Reading<T>>| {
        let next = watch.next.load(Ordering::Relaxed);
        let in_order = if gapless {
            m.seq() == next
        } else {
            m.seq() >= next
        };
        if !in_order {
            watch.out_of_order.store(true, Ordering::Relaxed);
        }
        watch.next.store(m.seq() + 1, Ordering::Relaxed);
        watch.count.fetch_add(1, Ordering::Relaxed);
    });
}

fn publish(bus: &Bus, topic: usize) {
    let payload = [topic as u8; 256];
    let published = match topic {
        0 => bus.publish(Reading::<0> { _payload: payload }).is_ok(),
        1 => bus.publish(Reading::<1> { _payload: payload }).is_ok(),
        2 => bus.publish(Reading::<2> { _payload: payload }).is_ok(),
        _ => bus.publish(Reading::<3> { _payload: payload }).is_ok(),
    };
    assert!(published);
}

#[test]
fn soak_counters_orders_and_memory_hold() {
    let total = messages();
    let per_round = total / ROUNDS / PUBLISHERS;
    let bus = Bus::builder().build();
    // Two subscribers per topic: a gapless Block one and a lossy one.
    let watches: Vec<[Arc<Watch>; 2]> = (0..TOPICS).map(|_| Default::default()).collect();
    let lossy = |t: usize| {
        if t % 2 == 0 {
            Overflow::DropOldest
        } else {
            Overflow::DropNewest
        }
    };
    subscribe::<0>(&bus, Overflow::Block, 64, watches[0][0].clone());
    subscribe::<0>(&bus, lossy(0), 8, watches[0][1].clone());
    subscribe::<1>(&bus, Overflow::Block, 16, watches[1][0].clone());
    subscribe::<1>(&bus, lossy(1), 4, watches[1][1].clone());
    subscribe::<2>(&bus, Overflow::Block, 256, watches[2][0].clone());
    subscribe::<2>(&bus, lossy(2), 32, watches[2][1].clone());
    subscribe::<3>(&bus, Overflow::Block, 1, watches[3][0].clone());
    subscribe::<3>(&bus, lossy(3), 1, watches[3][1].clone());

    let mut resident = Vec::new();
    for _ in 0..ROUNDS {
        std::thread::scope(|scope| {
            for p in 0..PUBLISHERS {
                let bus = bus.clone();
                scope.spawn(move || {
                    for i in 0..per_round {
                        publish(&bus, ((p + i) % TOPICS as u64) as usize);
                    }
                });
            }
        });
        while bus.stats().subscriptions.iter().any(|s| s.queued > 0) {
            std::thread::yield_now();
        }
        resident.push(resident_bytes());
    }
    bus.close();

    let stats = bus.stats();
    let published: u64 = stats.topics.iter().map(|t| t.published).sum();
    assert_eq!(published, per_round * PUBLISHERS * ROUNDS);
    for (t, topic) in stats.topics.iter().enumerate() {
        for (k, watch) in watches[t].iter().enumerate() {
            let s = &stats.subscriptions[2 * t + k];
            assert_eq!(s.topic, topic.name);
            assert_eq!(s.received, topic.published, "{s:?}");
            assert_eq!(
                s.received,
                s.delivered + s.dropped + s.dead_lettered + s.queued + s.in_handler,
                "{s:?}"
            );
            assert_eq!((s.queued, s.dead_lettered), (0, 0), "{s:?}");
            assert_eq!(watch.count.load(Ordering::Relaxed), s.delivered);
            assert!(
                !watch.out_of_order.load(Ordering::Relaxed),
                "{} saw seqs out of order",
                s.name
            );
            if k == 0 {
                assert_eq!(s.delivered, topic.published, "{s:?}");
            }
        }
    }
    // Flat: after the first round has warmed up the allocator, later rounds add nothing to
    // speak of. A leak of the messages alone would add ~6 MB a round at the default size.
    let growth = resident[ROUNDS as usize - 1].saturating_sub(resident[1]);
    println!("resident set after each round: {resident:?} (growth {growth} bytes)");
    assert!(
        growth < 4 << 20,
        "memory grew by {growth} bytes: {resident:?}"
    );
}
