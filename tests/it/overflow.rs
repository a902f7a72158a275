//! What a full mailbox does: `DropOldest`, `DropNewest`, `Block`, and publish timeouts.

use crate::support;

use std::time::Duration;

use eventbus::{
    Bus, Message, Options, Overflow, PublishTimeoutError, SubscriptionStats, Topic, TryPublishError,
};
use support::{Latch, Seen, Signal};

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct Tick(u64);

/// A subscriber with a mailbox of 2 whose worker is stuck on message 1 until released.
struct Stuck {
    bus: Bus,
    release: Latch,
    seen: Seen<u64>,
    subscription: eventbus::Subscription,
}

fn stuck_on_first(overflow: Overflow) -> Stuck {
    let bus = Bus::builder().build();
    let release = Latch::new();
    let started = Signal::new();
    let seen = Seen::new();
    let (gate, signal, record) = (release.clone(), started.clone(), seen.clone());
    let subscription = bus.subscribe::<Tick>(
        Options::default().capacity(2).overflow(overflow),
        move |m: &Message<Tick>| {
            if m.0 == 1 {
                signal.send(1);
                gate.wait();
            }
            record.push(m.0);
        },
    );
    bus.publish(Tick(1)).unwrap();
    // The worker has taken message 1 out of the mailbox and is stuck in the handler.
    assert_eq!(started.next(), 1);
    Stuck {
        bus,
        release,
        seen,
        subscription,
    }
}

fn finish(stuck: Stuck) -> (Vec<u64>, SubscriptionStats) {
    stuck.release.open();
    stuck.bus.close();
    (stuck.seen.get(), stuck.subscription.stats())
}

#[test]
fn drop_oldest_discards_the_oldest_queued_message() {
    let stuck = stuck_on_first(Overflow::DropOldest);
    for i in 2..=4 {
        stuck.bus.publish(Tick(i)).unwrap();
    }
    let (seen, stats) = finish(stuck);
    assert_eq!(seen, [1, 3, 4]);
    assert_eq!((stats.received, stats.delivered, stats.dropped), (4, 3, 1));
}

#[test]
fn drop_newest_discards_the_message_being_published() {
    let stuck = stuck_on_first(Overflow::DropNewest);
    for i in 2..=4 {
        stuck.bus.publish(Tick(i)).unwrap();
    }
    let (seen, stats) = finish(stuck);
    assert_eq!(seen, [1, 2, 3]);
    assert_eq!((stats.received, stats.delivered, stats.dropped), (4, 3, 1));
}

#[test]
fn block_makes_the_publisher_wait_for_room() {
    let stuck = stuck_on_first(Overflow::Block);
    stuck.bus.publish(Tick(2)).unwrap();
    stuck.bus.publish(Tick(3)).unwrap();
    // The mailbox is full (2 and 3) and the worker holds 1: this publish must wait.
    let done = Signal::new();
    std::thread::scope(|scope| {
        let (bus, done_tx) = (stuck.bus.clone(), done.clone());
        scope.spawn(move || {
            let seq = bus.publish(Tick(4)).unwrap();
            done_tx.send(seq);
        });
        // Not a synchronisation: a correct bus never finishes this publish before the
        // release, so any wait at all can only catch a bug.
        std::thread::sleep(Duration::from_millis(50));
        let stats = stuck.subscription.stats();
        assert_eq!((stats.queued, stats.in_handler), (2, 1));
        assert!(done.rx_is_empty(), "the publish did not wait for room");
        stuck.release.open();
        assert_eq!(done.next(), 3);
    });
    let (seen, stats) = finish(stuck);
    assert_eq!(seen, [1, 2, 3, 4]);
    assert_eq!((stats.delivered, stats.dropped), (4, 0));
}

#[test]
fn publish_timeout_hands_the_message_back_when_a_block_mailbox_stays_full() {
    let stuck = stuck_on_first(Overflow::Block);
    // A second subscriber with room gets every message.
    let other = Seen::new();
    let record = other.clone();
    stuck
        .bus
        .subscribe::<Tick>(Options::default(), move |m: &Message<Tick>| {
            record.push(m.0)
        });
    stuck.bus.publish(Tick(2)).unwrap();
    stuck.bus.publish(Tick(3)).unwrap();
    let error = stuck
        .bus
        .publish_timeout(Tick(4), Duration::from_millis(20))
        .unwrap_err();
    // All or nothing: the subscriber with room did not get it either, and it took no seq.
    assert_eq!(error, PublishTimeoutError::Timeout(Tick(4)));
    assert!(error.to_string().contains("timed out"));
    assert_eq!(
        stuck.bus.publish_timeout(Tick(5), Duration::ZERO),
        Err(PublishTimeoutError::Timeout(Tick(5)))
    );
    assert_eq!(
        stuck.bus.try_publish(Tick(6)),
        Err(TryPublishError::Full(Tick(6)))
    );
    let bus = stuck.bus.clone();
    let (seen, stats) = finish(stuck);
    assert_eq!(seen, [1, 2, 3]);
    assert_eq!((stats.received, stats.delivered, stats.dropped), (3, 3, 0));
    assert_eq!(bus.stats().subscriptions[1].delivered, 2);
    assert_eq!(bus.stats().topics[0].published, 3);
    assert_eq!(other.get(), [2, 3]);
}

/// Many publishers, some waiting without a deadline and one with, into several `Block`
/// mailboxes of a few slots: nothing is dropped or overrun, every subscriber sees the same
/// order, and each publisher's messages in the order it published them. (With feature
/// `tokio` a publish first counts the room left for the whole topic: a count that claimed
/// room that is not there would show here.)
#[test]
fn block_keeps_every_message_and_the_order_with_many_publishers_and_tiny_mailboxes() {
    const PUBLISHERS: u64 = 4;
    const EACH: u64 = 400;
    for capacities in [[1, 2, 2], [2, 3, 4]] {
        let bus = Bus::builder().build();
        let seen: Vec<Seen<u64>> = capacities.iter().map(|_| Seen::new()).collect();
        let subscriptions: Vec<_> = capacities
            .iter()
            .zip(&seen)
            .map(|(&capacity, seen)| {
                let record = seen.clone();
                let options = Options::default()
                    .capacity(capacity)
                    .overflow(Overflow::Block);
                bus.subscribe::<Tick>(options, move |m: &Message<Tick>| record.push(m.0))
            })
            .collect();
        let start = std::sync::Barrier::new(PUBLISHERS as usize);
        std::thread::scope(|scope| {
            for publisher in 0..PUBLISHERS {
                let (bus, start) = (bus.clone(), &start);
                scope.spawn(move || {
                    start.wait();
                    for i in 0..EACH {
                        let tick = Tick(publisher * 1_000_000 + i);
                        let published = match publisher {
                            0 => bus.publish_timeout(tick, support::PATIENCE).is_ok(),
                            _ => bus.publish(tick).is_ok(),
                        };
                        assert!(published, "publisher {publisher}, message {i}");
                    }
                });
            }
        });
        bus.close();
        let first = seen[0].get();
        assert_eq!(
            first.len() as u64,
            PUBLISHERS * EACH,
            "capacities {capacities:?}"
        );
        for publisher in 0..PUBLISHERS {
            let own: Vec<u64> = first
                .iter()
                .copied()
                .filter(|t| t / 1_000_000 == publisher)
                .collect();
            let expected: Vec<u64> = (0..EACH).map(|i| publisher * 1_000_000 + i).collect();
            assert_eq!(
                own, expected,
                "publisher {publisher}, capacities {capacities:?}"
            );
        }
        for (subscriber, (seen, subscription)) in seen.iter().zip(&subscriptions).enumerate() {
            assert_eq!(
                seen.get(),
                first,
                "subscriber {subscriber}, capacities {capacities:?}"
            );
            let stats = subscription.stats();
            let counts = (stats.received, stats.delivered, stats.dropped);
            assert_eq!(
                counts,
                (PUBLISHERS * EACH, PUBLISHERS * EACH, 0),
                "{capacities:?}"
            );
        }
    }
}

#[test]
fn a_zero_capacity_is_refused_with_a_clear_error() {
    let bus = Bus::builder().build();
    let error = bus
        .try_subscribe::<Tick>(
            Options::default().capacity(0).name("x"),
            |_: &Message<Tick>| {},
        )
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "subscriber `x`: capacity 0 is not allowed; a mailbox holds from 1 to 16777216 messages"
    );
    let error = bus
        .try_subscribe::<Tick>(
            Options::default().capacity(Options::MAX_CAPACITY + 1),
            |_: &Message<Tick>| {},
        )
        .unwrap_err();
    assert!(matches!(error, eventbus::SubscribeError::Capacity { .. }));
}
