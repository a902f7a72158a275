//! Priority mailboxes (`Options::priority`): the worker takes the most urgent message first,
//! then topic order within a level; a full mailbox makes room at the least urgent level; what
//! cannot have a priority is refused at subscribe.

use crate::support;

use std::collections::HashMap;

use eventbus::{Bus, Message, Options, Overflow, SubscribeError, SubscriptionStats, Topic};
use support::{Latch, Seen, Signal};

/// A job: its id (the order it is published in) and its urgency.
#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct Job {
    id: u64,
    level: u8,
}

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
#[topic(retain = 100)]
struct Logged(u64);

fn level(job: &Job) -> u8 {
    job.level
}

/// A priority subscriber whose worker stops, before handling it, on each job whose id has a
/// gate, until that gate opens; `started` gets the id of each job it stops on.
struct Gated {
    bus: Bus,
    gates: HashMap<u64, Latch>,
    started: Signal,
    seen: Seen<u64>,
    subscription: eventbus::Subscription,
}

fn gated(options: Options, gates: &[u64]) -> Gated {
    let bus = Bus::builder().build();
    let gates: HashMap<u64, Latch> = gates.iter().map(|&id| (id, Latch::new())).collect();
    let (started, seen) = (Signal::new(), Seen::new());
    let (held, signal, record) = (gates.clone(), started.clone(), seen.clone());
    let subscription = bus.subscribe::<Job>(options.priority(level), move |m: &Message<Job>| {
        if let Some(gate) = held.get(&m.id) {
            signal.send(m.id);
            gate.wait();
        }
        record.push(m.id);
    });
    Gated {
        bus,
        gates,
        started,
        seen,
        subscription,
    }
}

impl Gated {
    /// Publishes job `id` of `level`.
    fn publish(&self, id: u64, level: u8) {
        self.bus.publish(Job { id, level }).unwrap();
    }

    /// Publishes job 1 (level 0) and waits until the worker is stuck on it.
    fn stuck_on_first(self) -> Self {
        self.publish(1, 0);
        assert_eq!(self.started.next(), 1);
        self
    }

    fn open(&self, id: u64) {
        self.gates[&id].open();
    }

    /// Opens every gate, closes the bus: what was handled, in order, and the stats.
    fn finish(self) -> (Vec<u64>, SubscriptionStats) {
        for gate in self.gates.values() {
            gate.open();
        }
        self.bus.close();
        (self.seen.get(), self.subscription.stats())
    }
}

#[test]
fn the_worker_takes_the_most_urgent_first_then_topic_order() {
    let jobs = gated(Options::default().capacity(16), &[1]).stuck_on_first();
    for (id, level) in [
        (2, 1),
        (3, 5),
        (4, 0),
        (5, 5),
        (6, 1),
        (7, 9),
        (8, 0),
        (9, 5),
    ] {
        jobs.publish(id, level);
    }
    let stats = jobs.subscription.stats();
    assert_eq!((stats.queued, stats.in_handler), (8, 1));
    let (seen, stats) = jobs.finish();
    assert_eq!(seen, [1, 7, 3, 5, 9, 2, 6, 4, 8]);
    assert_eq!((stats.received, stats.delivered, stats.dropped), (9, 9, 0));
}

#[test]
fn drop_oldest_drops_the_oldest_of_the_least_urgent() {
    let jobs = gated(
        Options::default()
            .capacity(3)
            .overflow(Overflow::DropOldest),
        &[1],
    );
    let jobs = jobs.stuck_on_first();
    for (id, level) in [(2, 1), (3, 5), (4, 1)] {
        jobs.publish(id, level);
    }
    // Full: room is made at level 1, the least urgent queued, by its oldest (2).
    jobs.publish(5, 3);
    // Less urgent than everything queued: the arriving one is dropped.
    jobs.publish(6, 0);
    // As urgent as the least urgent queued: the oldest of that level (4) goes.
    jobs.publish(7, 1);
    let stats = jobs.subscription.stats();
    assert_eq!((stats.queued, stats.dropped), (3, 3));
    let (seen, stats) = jobs.finish();
    assert_eq!(seen, [1, 3, 5, 7]);
    assert_eq!((stats.received, stats.delivered, stats.dropped), (7, 4, 3));
}

#[test]
fn drop_newest_drops_the_newest_of_the_least_urgent() {
    let jobs = gated(
        Options::default()
            .capacity(3)
            .overflow(Overflow::DropNewest),
        &[1],
    );
    let jobs = jobs.stuck_on_first();
    for (id, level) in [(2, 1), (3, 5), (4, 1)] {
        jobs.publish(id, level);
    }
    // Full: the newest at level 1, the least urgent (4), makes room for a more urgent one.
    jobs.publish(5, 3);
    // As urgent as the least urgent queued, and the newest of them: the arriving one goes.
    jobs.publish(6, 1);
    // Less urgent than everything queued: the arriving one goes.
    jobs.publish(7, 0);
    // The most urgent: the newest of level 1 (2) goes.
    jobs.publish(8, 9);
    let (seen, stats) = jobs.finish();
    assert_eq!(seen, [1, 8, 3, 5]);
    assert_eq!((stats.received, stats.delivered, stats.dropped), (8, 4, 4));
}

#[test]
fn a_more_urgent_arrival_evicts_a_less_urgent_queued_one() {
    for overflow in [Overflow::DropOldest, Overflow::DropNewest] {
        let jobs = gated(Options::default().capacity(2).overflow(overflow), &[1]);
        let jobs = jobs.stuck_on_first();
        jobs.publish(2, 0);
        jobs.publish(3, 0);
        jobs.publish(4, 7);
        let (seen, stats) = jobs.finish();
        let expected: &[u64] = match overflow {
            Overflow::DropOldest => &[1, 4, 3],
            _ => &[1, 4, 2],
        };
        assert_eq!(seen, expected, "{overflow:?}");
        assert_eq!((stats.delivered, stats.dropped), (3, 1), "{overflow:?}");
    }
}

#[test]
fn block_makes_the_publisher_wait_and_drops_nothing() {
    let jobs = gated(Options::default().capacity(2), &[1, 2]).stuck_on_first();
    jobs.publish(2, 0);
    jobs.publish(3, 0);
    let done = Signal::new();
    std::thread::scope(|scope| {
        let (bus, done_tx) = (jobs.bus.clone(), done.clone());
        scope.spawn(move || {
            let seq = bus.publish(Job { id: 4, level: 9 }).unwrap();
            done_tx.send(seq);
        });
        // The mailbox is full (2, 3): job 4 waits until the worker takes job 2.
        let stats = jobs.subscription.stats();
        assert!(stats.queued <= 2, "{stats:?}");
        jobs.open(1);
        assert_eq!(jobs.started.next(), 2);
        // Job 4 is in (seq 3) while the worker holds job 2.
        assert_eq!(done.next(), 3);
    });
    let stats = jobs.subscription.stats();
    assert_eq!((stats.queued, stats.in_handler), (2, 1));
    let (seen, stats) = jobs.finish();
    assert_eq!(seen, [1, 2, 4, 3]);
    assert_eq!((stats.received, stats.delivered, stats.dropped), (4, 4, 0));
}

#[test]
fn close_delivers_everything_queued_in_priority_order() {
    let jobs = gated(Options::default().capacity(8), &[1]).stuck_on_first();
    for (id, level) in [(2, 0), (3, 2), (4, 1), (5, 2), (6, 0)] {
        jobs.publish(id, level);
    }
    std::thread::scope(|scope| {
        let bus = jobs.bus.clone();
        let closing = scope.spawn(move || bus.close());
        jobs.open(1);
        closing.join().unwrap();
    });
    let (seen, stats) = jobs.finish();
    assert_eq!(seen, [1, 3, 5, 4, 2, 6]);
    assert_eq!((stats.delivered, stats.dropped), (6, 0));
}

#[test]
fn a_panicking_priority_is_the_least_urgent_and_kills_nothing() {
    let bus = Bus::builder().build();
    let (release, started, seen) = (Latch::new(), Signal::new(), Seen::new());
    let (gate, signal, record) = (release.clone(), started.clone(), seen.clone());
    let subscription = bus.subscribe::<Job>(
        Options::default().priority(|job: &Job| {
            assert!(job.level != u8::MAX, "no level for {}", job.id);
            job.level
        }),
        move |m: &Message<Job>| {
            if m.id == 1 {
                signal.send(1);
                gate.wait();
            }
            record.push(m.id);
        },
    );
    bus.publish(Job { id: 1, level: 0 }).unwrap();
    assert_eq!(started.next(), 1);
    for (id, level) in [(2, u8::MAX), (3, 0), (4, 1), (5, u8::MAX)] {
        bus.publish(Job { id, level }).unwrap();
    }
    release.open();
    bus.close();
    assert_eq!(seen.get(), [1, 4, 2, 3, 5]);
    let stats = subscription.stats();
    assert_eq!((stats.delivered, stats.dropped), (5, 0));
}

#[test]
fn other_subscribers_keep_the_topic_order() {
    let jobs = gated(Options::default(), &[1]);
    let plain = Seen::new();
    let record = plain.clone();
    jobs.bus
        .subscribe::<Job>(Options::default(), move |m: &Message<Job>| {
            record.push(m.id)
        });
    let jobs = jobs.stuck_on_first();
    for (id, level) in [(2, 0), (3, 9), (4, 5)] {
        jobs.publish(id, level);
    }
    let (seen, _) = jobs.finish();
    assert_eq!(seen, [1, 3, 4, 2]);
    assert_eq!(plain.get(), [1, 2, 3, 4]);
}

#[test]
fn what_cannot_have_a_priority_is_refused_at_subscribe() {
    let bus = Bus::builder().build();
    let refused = |result: Result<eventbus::Subscription, SubscribeError>, says: &str| {
        let error = result.unwrap_err();
        assert!(
            matches!(error, SubscribeError::Priority { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains(says), "{error}");
    };
    refused(
        bus.try_subscribe::<Logged>(
            Options::default().priority(|_: &Logged| 1),
            |_: &Message<Logged>| {},
        ),
        "log topic",
    );
    refused(
        bus.try_subscribe::<Job>(
            Options::default().priority(|n: &Logged| n.0 as u8),
            |_: &Message<Job>| {},
        ),
        "its priority takes `&",
    );
    refused(
        bus.try_subscribe::<Job>(
            Options::default().workers(2).priority(level),
            |_: &Message<Job>| {},
        ),
        "consumer group",
    );
    refused(
        bus.try_subscribe_group::<Job>(
            Options::default()
                .workers(2)
                .key(|job: &Job| job.id)
                .priority(level),
            |_: &Message<Job>| {},
        ),
        "consumer group",
    );
    let inline = bus
        .try_subscribe_inline::<Job>(Options::default().priority(level), |_: &Message<Job>| {})
        .unwrap_err();
    assert!(
        matches!(inline, SubscribeError::Inline { .. }),
        "{inline:?}"
    );
    assert!(inline.to_string().contains("priority"), "{inline}");
    assert!(bus.stats().subscriptions.is_empty());
}

#[cfg(feature = "tokio")]
#[test]
fn an_async_subscriber_takes_the_most_urgent_first() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let (release, started, seen) = (Latch::new(), Signal::new(), Seen::new());
    let (gate, signal, record) = (release.clone(), started.clone(), seen.clone());
    let subscription = bus.subscribe_async::<Job, _, _, _>(
        Options::default().priority(level),
        move |m: Message<Job>| {
            let (gate, signal, record) = (gate.clone(), signal.clone(), record.clone());
            async move {
                if m.id == 1 {
                    signal.send(1);
                    tokio::task::spawn_blocking(move || gate.wait())
                        .await
                        .unwrap();
                }
                record.push(m.id);
            }
        },
    );
    bus.publish(Job { id: 1, level: 0 }).unwrap();
    assert_eq!(started.next(), 1);
    for (id, level) in [(2, 0), (3, 4), (4, 8), (5, 4)] {
        bus.publish(Job { id, level }).unwrap();
    }
    release.open();
    bus.close();
    assert_eq!(seen.get(), [1, 4, 3, 5, 2]);
    assert_eq!(subscription.stats().delivered, 5);
}
