//! The counters add up: every message that reached a mailbox ends as exactly one of
//! delivered, dead-lettered, dropped or still queued.

use crate::support;

use std::time::Duration;

use eventbus::{Bus, Message, Options, Overflow, SubscriptionStats, Topic};
use support::{Latch, Signal};

#[derive(Topic, Debug, Clone, Copy)]
struct Reading(u64);

#[derive(Topic, Debug, Clone, Copy)]
struct Unheard;

fn adds_up(s: &SubscriptionStats) -> bool {
    s.received == s.delivered + s.dead_lettered + s.dropped + s.queued + s.in_handler
}

#[test]
fn the_counters_add_up_for_every_policy_and_outcome() {
    let bus = Bus::builder().build();
    let release = Latch::new();
    let started = Signal::new();
    let (gate, signal) = (release.clone(), started.clone());
    // Stuck at first, then fails every third message, panics on every fifth.
    bus.subscribe::<Reading>(
        Options::default()
            .name("moody")
            .capacity(4)
            .overflow(Overflow::DropOldest)
            .retries(1)
            .backoff(Duration::ZERO),
        move |m: &Message<Reading>| {
            if m.seq() == 0 {
                signal.send(0);
                gate.wait();
            }
            if m.0 % 5 == 0 {
                panic!("five");
            }
            if m.0 % 3 == 0 {
                return Err("three");
            }
            Ok(())
        },
    );
    bus.subscribe::<Reading>(
        Options::default()
            .name("newest")
            .capacity(2)
            .overflow(Overflow::DropNewest),
        |_: &Message<Reading>| {},
    );
    bus.subscribe::<Reading>(Options::default().name("steady"), |_: &Message<Reading>| {});

    bus.publish(Reading(1)).unwrap();
    assert_eq!(started.next(), 0);
    for i in 2..=40 {
        bus.publish(Reading(i)).unwrap();
    }
    // While stuck: one in the handler, four in the mailbox; the rest dropped as they came.
    let moody = bus.stats().subscriptions[0].clone();
    assert_eq!(
        (
            moody.received,
            moody.queued,
            moody.in_handler,
            moody.dropped
        ),
        (40, 4, 1, 35)
    );
    assert!(adds_up(&moody));
    bus.publish(Unheard).unwrap();

    release.open();
    bus.close();
    let stats = bus.stats();
    for s in &stats.subscriptions {
        assert!(adds_up(s), "{s:?}");
        assert_eq!((s.received, s.queued), (40, 0), "{s:?}");
    }
    let moody = &stats.subscriptions[0];
    // Delivered 1 and 37..=40 except the fives and threes: 1, 37, 38 → 3 delivered;
    // 39 (three) and 40 (five) failed twice each and are dead letters.
    assert_eq!(
        (
            moody.delivered,
            moody.dead_lettered,
            moody.failed,
            moody.retried
        ),
        (3, 2, 4, 2)
    );
    assert_eq!(stats.dead_letters, 2);
    let topics: Vec<_> = stats
        .topics
        .iter()
        .map(|t| (t.name, t.published, t.subscribers))
        .collect();
    assert_eq!(topics, [("Reading", 40, 3), ("Unheard", 1, 0)]);
}

#[test]
fn stats_display_as_an_aligned_table() {
    let bus = Bus::builder().build();
    bus.subscribe::<Reading>(Options::default().name("meter"), |_: &Message<Reading>| {});
    bus.publish(Reading(1)).unwrap();
    bus.close();
    let table = bus.stats().to_string();
    let lines: Vec<_> = table.lines().collect();
    assert_eq!(
        lines[0],
        "topic    subscriber  capacity  received  queued  handling  delivered  failed  retried  dead  dropped"
    );
    assert_eq!(
        lines[1],
        "Reading  meter           1024         1       0         0          1       0        0     0        0"
    );
    assert_eq!(lines[2], "topic Reading: 1 published, 1 subscriber(s)");
    assert_eq!(lines[3], "dead letters: 0 kept, 0 discarded");
}

/// Issue 30: the printed table keeps one topic's rows together (topics by name, each
/// topic's subscriptions in the order they subscribed), whatever order they subscribed in.
#[test]
fn the_table_keeps_each_topics_rows_together() {
    let bus = Bus::builder().build();
    bus.subscribe::<Reading>(Options::default().name("first"), |_: &Message<Reading>| {});
    bus.subscribe::<Unheard>(
        Options::default().name("between"),
        |_: &Message<Unheard>| {},
    );
    bus.subscribe::<Reading>(Options::default().name("second"), |_: &Message<Reading>| {});
    let table = bus.stats().to_string();
    let rows: Vec<(&str, &str)> = table
        .lines()
        .skip(1)
        .take(3)
        .map(|line| {
            let mut cells = line.split_whitespace();
            (cells.next().unwrap(), cells.next().unwrap())
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("Reading", "first"),
            ("Reading", "second"),
            ("Unheard", "between")
        ],
        "{table}"
    );
    bus.close();
}
