//! Closing and unsubscribing: everything accepted is delivered, nothing after.

use crate::support;

use std::time::Duration;

use eventbus::{Bus, Message, Options, PublishError, SubscribeError, Topic};
use support::{Latch, Seen, Signal};

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct A(u64);

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct B(u64);

#[test]
fn publish_after_close_hands_the_message_back() {
    let bus = Bus::builder().build();
    bus.close();
    assert!(bus.is_closed());
    let error = bus.publish(A(5)).unwrap_err();
    assert!(error.to_string().contains("closed"));
    assert_eq!(error, PublishError::Closed(A(5)));
    assert_eq!(error.into_inner(), A(5));
}

/// A close that begins while threads publish to a topic no one hears still ends, refuses
/// every publish after, and numbered every publish it accepted.
#[test]
fn close_ends_while_threads_publish_to_a_topic_no_one_hears() {
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    for _ in 0..20 {
        let bus = Bus::builder().build();
        let accepted = AtomicU64::new(0);
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    while bus.publish(B(0)).is_ok() {
                        accepted.fetch_add(1, SeqCst);
                    }
                });
            }
            support::until("some publishes", || accepted.load(SeqCst) > 100);
            bus.close();
            assert!(bus.is_closed());
        });
        assert_eq!(bus.publish(B(1)), Err(PublishError::Closed(B(1))));
        let published: u64 = bus.stats().topics.iter().map(|t| t.published).sum();
        assert_eq!(
            published,
            accepted.load(SeqCst),
            "a publish accepted and not numbered"
        );
    }
}

/// A close while threads make topics by publishing to them for the first time, and publish
/// on to them with no one hearing: each close ends in time, and every publish it accepted was
/// numbered.
#[test]
fn close_ends_while_threads_make_topics_no_one_hears() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};

    macro_rules! topics {
        ($($name:ident)*) => {
            $(
                #[derive(Topic)]
                struct $name;
            )*
            fn publish_each(bus: &Bus) -> Option<u64> {
                let mut accepted = 0;
                $(
                    if bus.publish($name).is_ok() {
                        accepted += 1;
                    } else {
                        return (accepted > 0).then_some(accepted);
                    }
                )*
                Some(accepted)
            }
        };
    }
    topics!(T0 T1 T2 T3 T4 T5 T6 T7 T8 T9 T10 T11 T12 T13 T14 T15);

    for round in 0..20 {
        let bus = Bus::builder().build();
        let accepted = AtomicU64::new(0);
        let closed = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    while !closed.load(SeqCst) {
                        match publish_each(&bus) {
                            Some(n) => accepted.fetch_add(n, SeqCst),
                            None => break,
                        };
                    }
                });
            }
            // Early in some rounds, while topics are still being made.
            if round % 2 == 1 {
                support::until("some publishes", || accepted.load(SeqCst) > 0);
            }
            let report = bus.close_timeout(Duration::from_secs(10));
            closed.store(true, SeqCst);
            assert!(report.completed, "round {round}: the close did not end");
        });
        assert_eq!(
            publish_each(&bus),
            None,
            "round {round}: accepted after the close"
        );
        let published: u64 = bus.stats().topics.iter().map(|t| t.published).sum();
        assert_eq!(
            published,
            accepted.load(SeqCst),
            "round {round}: a publish accepted and not numbered"
        );
    }
}

#[test]
fn close_delivers_what_was_queued() {
    let bus = Bus::builder().build();
    let release = Latch::new();
    let started = Signal::new();
    let seen = Seen::new();
    let (gate, signal, record) = (release.clone(), started.clone(), seen.clone());
    bus.subscribe::<A>(Options::default(), move |m: &Message<A>| {
        if m.0 == 0 {
            signal.send(0);
            gate.wait();
        }
        record.push(m.0);
    });
    for i in 0..50 {
        bus.publish(A(i)).unwrap();
    }
    assert_eq!(started.next(), 0);
    std::thread::scope(|scope| {
        let closer = scope.spawn(|| bus.close());
        release.open();
        closer.join().unwrap();
    });
    assert_eq!(seen.get(), (0..50).collect::<Vec<_>>());
}

#[test]
fn close_delivers_a_cascade_published_by_handlers_while_draining() {
    let bus = Bus::builder().build();
    let release = Latch::new();
    let started = Signal::new();
    let (gate, signal, publisher) = (release.clone(), started.clone(), bus.clone());
    // Small mailboxes, so the cascade really waits for room while the bus drains.
    bus.subscribe::<A>(Options::default().capacity(1), move |m: &Message<A>| {
        if m.0 == 1 {
            signal.send(1);
            gate.wait();
        }
        publisher.publish(B(m.0 * 10)).unwrap();
        publisher.publish(B(m.0 * 10 + 1)).unwrap();
    });
    let seen = Seen::new();
    let record = seen.clone();
    bus.subscribe::<B>(Options::default().capacity(1), move |m: &Message<B>| {
        record.push(m.0)
    });
    bus.publish(A(1)).unwrap();
    assert_eq!(started.next(), 1);
    bus.publish(A(2)).unwrap();
    std::thread::scope(|scope| {
        let closer = scope.spawn(|| bus.close());
        // Exact: the close has begun (outside publishers are refused) before any B exists.
        while !bus.is_closed() {
            std::thread::yield_now();
        }
        assert!(bus.publish(A(3)).is_err());
        release.open();
        closer.join().unwrap();
    });
    assert_eq!(seen.get(), [10, 11, 20, 21]);
    assert!(bus.publish(B(0)).is_err());
}

#[test]
fn unsubscribe_delivers_what_was_queued_and_nothing_after() {
    let bus = Bus::builder().build();
    let release = Latch::new();
    let started = Signal::new();
    let seen = Seen::new();
    let (gate, signal, record) = (release.clone(), started.clone(), seen.clone());
    let subscription = bus.subscribe::<A>(Options::default(), move |m: &Message<A>| {
        if m.0 == 0 {
            signal.send(0);
            gate.wait();
        }
        record.push(m.0);
    });
    let everything = Seen::new();
    let all = everything.clone();
    bus.subscribe::<A>(Options::default(), move |m: &Message<A>| all.push(m.0));
    for i in 0..5 {
        bus.publish(A(i)).unwrap();
    }
    assert_eq!(started.next(), 0);
    std::thread::scope(|scope| {
        let leaving = scope.spawn(move || subscription.unsubscribe());
        release.open();
        leaving.join().unwrap();
    });
    // Unsubscribe has returned: its worker has stopped, having delivered 0..5.
    assert_eq!(seen.get(), [0, 1, 2, 3, 4]);
    for i in 5..10 {
        bus.publish(A(i)).unwrap();
    }
    bus.close();
    assert_eq!(seen.get(), [0, 1, 2, 3, 4]);
    assert_eq!(everything.get(), (0..10).collect::<Vec<_>>());
    assert_eq!(bus.stats().subscriptions.len(), 1);
}

#[test]
fn dropping_the_last_handle_closes_the_bus() {
    let seen = Seen::new();
    {
        let bus = Bus::builder().build();
        let record = seen.clone();
        bus.subscribe::<A>(Options::default(), move |m: &Message<A>| record.push(m.0));
        let clone = bus.clone();
        for i in 0..20 {
            clone.publish(A(i)).unwrap();
        }
        drop(bus);
        clone.publish(A(20)).unwrap();
    }
    // The drop waited for every accepted message to be delivered.
    assert_eq!(seen.get(), (0..=20).collect::<Vec<_>>());
}

#[test]
fn close_from_inside_a_handler_starts_the_close_and_returns() {
    let outer = Bus::builder().build();
    let (tx, rx) = crossbeam_channel::bounded::<Bus>(1);
    let closed = Signal::new();
    let signal = closed.clone();
    outer.subscribe::<A>(Options::default(), move |_: &Message<A>| {
        let bus = rx.recv().unwrap();
        bus.close();
        signal.send(u64::from(bus.is_closed()));
    });
    tx.send(outer.clone()).unwrap();
    outer.publish(A(1)).unwrap();
    assert_eq!(closed.next(), 1);
    outer.close();
    assert!(outer.publish(A(2)).is_err());
}

#[test]
fn close_timeout_returns_on_time_and_reports_a_hung_handler() {
    let bus = Bus::builder().build();
    let release = Latch::new();
    let started = Signal::new();
    let (gate, signal) = (release.clone(), started.clone());
    bus.subscribe::<A>(Options::default().name("hung"), move |m: &Message<A>| {
        signal.send(m.0);
        gate.wait();
    });
    let other = Seen::new();
    let record = other.clone();
    let fine = bus.subscribe::<A>(Options::default().name("fine"), move |m: &Message<A>| {
        record.push(m.0)
    });
    for i in 0..4 {
        bus.publish(A(i)).unwrap();
    }
    assert_eq!(started.next(), 0);
    // "fine" has finished before the deadline starts, however late its worker was scheduled:
    // the report must leave it out because it is done, not because it was quick.
    support::until_idle(&fine);
    let report = bus.close_timeout(Duration::from_millis(100));
    assert!(!report.completed);
    let unfinished: Vec<_> = report
        .unfinished()
        .map(|u| (u.name.as_str(), u.queued, u.in_handler))
        .collect();
    assert_eq!(unfinished, [("hung", 3, 1)]);
    assert_eq!(other.get(), [0, 1, 2, 3]);
    assert!(bus.publish(A(9)).is_err());
    release.open();
}

#[test]
fn close_timeout_that_completes_says_so() {
    let bus = Bus::builder().build();
    bus.subscribe::<A>(Options::default(), |_: &Message<A>| {});
    bus.publish(A(1)).unwrap();
    let report = bus.close_timeout(Duration::from_secs(20));
    assert!(report.completed);
    assert_eq!(report.unfinished().count(), 0);
}

#[test]
fn subscribing_to_a_closed_bus_is_an_error() {
    let bus = Bus::builder().build();
    bus.close();
    let error = bus
        .try_subscribe::<A>(Options::default().name("late"), |_: &Message<A>| {})
        .unwrap_err();
    assert!(matches!(error, SubscribeError::Closed { .. }));
    assert_eq!(
        error.to_string(),
        "subscriber `late`: the bus is closed; nothing can subscribe"
    );
}

/// Holds the messages below `first` in the handler until `release` opens, so a
/// `close_timeout` gives up with the rest queued, however the threads are scheduled.
fn held(
    first: u64,
    release: &Latch,
    started: &Signal,
) -> impl Fn(&Message<A>) + Send + Sync + 'static {
    let (gate, signal) = (release.clone(), started.clone());
    move |m: &Message<A>| {
        if m.0 < first {
            signal.send(m.0);
            gate.wait();
        }
    }
}

/// What a dead letter kept, in the store's order: (seq, payload, attempts).
fn kept(bus: &Bus) -> Vec<(u64, u64, u32)> {
    bus.dead_letters()
        .iter()
        .map(|letter| {
            (
                letter.seq(),
                letter.payload::<A>().unwrap().0,
                letter.attempts(),
            )
        })
        .collect()
}

/// Issue 32: each message still queued when `close_timeout` gives up is a dead letter with
/// its payload and an error saying so, before the close returns: counted as dead-lettered,
/// not dropped, and the stats read right after the close are the ones read later.
#[test]
fn a_forced_close_keeps_every_queued_message_as_a_dead_letter() {
    let bus = Bus::builder().build();
    let (release, started) = (Latch::new(), Signal::new());
    let subscription =
        bus.subscribe::<A>(Options::default().name("held"), held(1, &release, &started));
    for i in 0..10 {
        bus.publish(A(i)).unwrap();
    }
    assert_eq!(started.next(), 0);
    let report = bus.close_timeout(Duration::from_millis(20));
    assert!(!report.completed);
    let unfinished: Vec<_> = report
        .unfinished()
        .map(|u| (u.queued, u.in_handler))
        .collect();
    assert_eq!(
        unfinished,
        [(9, 1)],
        "the report says what the deadline left"
    );
    // Right after: the nine are dead letters, in topic order, never attempted.
    let expected: Vec<_> = (1..10).map(|i| (i, i, 0)).collect();
    assert_eq!(kept(&bus), expected);
    let error = bus.dead_letters()[0].error().to_string();
    assert!(error.contains("close"), "{error}");
    let right_after = subscription.stats();
    assert_eq!(
        (
            right_after.received,
            right_after.in_handler,
            right_after.queued
        ),
        (10, 1, 0)
    );
    assert_eq!((right_after.dead_lettered, right_after.dropped), (9, 0));
    release.open();
    let later = subscription.unsubscribe();
    assert_eq!(
        (
            later.delivered,
            later.dead_lettered,
            later.dropped,
            later.queued
        ),
        (1, 9, 0, 0)
    );
    assert_eq!(kept(&bus), expected, "nothing more, nothing less");
}

/// The same for both kinds of group: a keyed group's mailboxes, and the one mailbox a
/// group without a key shares.
#[test]
fn a_forced_close_keeps_a_groups_queued_messages_as_dead_letters() {
    for keyed in [true, false] {
        let bus = Bus::builder().build();
        let (release, started) = (Latch::new(), Signal::new());
        let mut options = Options::default().name("group").workers(2);
        if keyed {
            // Every message on one worker's lane: the other worker stays idle.
            options = options.key(|_: &A| 0u64);
        }
        // A keyed group's one busy worker holds message 0; both workers of a shared mailbox
        // hold one each.
        let busy = if keyed { 1 } else { 2 };
        let handler = held(busy, &release, &started);
        let group = bus.subscribe_group::<A>(options, move |m: &Message<A>| handler(m));
        for i in 0..6 {
            bus.publish(A(i)).unwrap();
        }
        for _ in 0..busy {
            started.next();
        }
        let report = bus.close_timeout(Duration::from_millis(20));
        assert!(!report.completed);
        let expected: Vec<_> = (busy..6).map(|i| (i, i, 0)).collect();
        assert_eq!(kept(&bus), expected, "keyed: {keyed}");
        assert_eq!(group.stats().dead_lettered, 6 - busy, "keyed: {keyed}");
        release.open();
        let stats = group.unsubscribe();
        assert_eq!(stats.dropped, 0, "keyed: {keyed}");
        assert_eq!(
            (stats.delivered, stats.dead_lettered, stats.queued),
            (busy, 6 - busy, 0),
            "keyed: {keyed}"
        );
    }
}
