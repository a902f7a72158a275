//! Misbehaving handlers: publishing into their own full mailbox or round a cycle, panicking
//! at random, and subscribe/unsubscribe storms while others publish. The bus never freezes.

use crate::support;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eventbus::{Bus, Message, Options, PublishError, Topic};
use support::{Latch, Seen, Signal, PATIENCE};

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct A(u64);

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct B(u64);

/// Runs `close` on another thread and fails the test if it does not return in time.
fn close_within_patience(bus: &Bus) {
    let closer = bus.clone();
    let (done_tx, done_rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        closer.close();
        let _ = done_tx.send(());
    });
    done_rx
        .recv_timeout(PATIENCE)
        .expect("close did not return: the bus froze");
}

#[test]
fn a_handler_publishing_into_its_own_full_mailbox_gets_would_deadlock() {
    let bus = Bus::builder().build();
    let results = Seen::new();
    let (record, publisher) = (results.clone(), bus.clone());
    let release = Latch::new();
    let started = Signal::new();
    let (gate, signal) = (release.clone(), started.clone());
    bus.subscribe::<A>(Options::default().capacity(2), move |m: &Message<A>| {
        if m.0 == 0 {
            signal.send(0);
            gate.wait();
            // The mailbox holds 1 and 2: full. Waiting for room would wait for ourselves.
            let refused = publisher.publish(A(100));
            record.push(format!("{refused:?}"));
            if let Err(error) = refused {
                assert!(error.to_string().contains("would wait forever"));
                assert_eq!(error.into_inner(), A(100));
            }
        }
    });
    bus.publish(A(0)).unwrap();
    assert_eq!(started.next(), 0);
    bus.publish(A(1)).unwrap();
    bus.publish(A(2)).unwrap();
    release.open();
    close_within_patience(&bus);
    assert_eq!(results.get(), ["Err(WouldDeadlock(..))"]);
    // The refused message was never numbered.
    assert_eq!(bus.stats().topics[0].published, 3);
}

#[test]
fn a_publish_cycle_between_two_handlers_never_freezes_the_bus() {
    const ROUNDS: u64 = 200;
    let bus = Bus::builder().build();
    let refused = Arc::new(AtomicU64::new(0));
    let (on_a, on_b) = (bus.clone(), bus.clone());
    let (refused_a, refused_b) = (refused.clone(), refused.clone());
    // A → B → A, with one-slot mailboxes, so both handlers soon wait on each other.
    bus.subscribe::<A>(Options::default().capacity(1), move |m: &Message<A>| {
        if m.0 < ROUNDS {
            if let Err(PublishError::WouldDeadlock(_)) = on_a.publish(B(m.0 + 1)) {
                refused_a.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    bus.subscribe::<B>(Options::default().capacity(1), move |m: &Message<B>| {
        if m.0 < ROUNDS {
            for _ in 0..2 {
                if let Err(PublishError::WouldDeadlock(_)) = on_b.publish(A(m.0 + 1)) {
                    refused_b.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    });
    for i in 0..8 {
        bus.publish(A(i)).unwrap();
    }
    close_within_patience(&bus);
    let stats = bus.stats();
    for s in &stats.subscriptions {
        assert_eq!(
            s.received,
            s.delivered + s.dropped + s.dead_lettered,
            "{s:?}"
        );
        assert_eq!(s.queued, 0);
    }
    // The cascade doubles each round, so with one-slot mailboxes it must have hit the cycle.
    assert!(refused.load(Ordering::SeqCst) > 0);
}

#[test]
fn handlers_that_panic_at_random_leave_the_bus_working() {
    const MESSAGES: u64 = 2_000;
    let bus = Bus::builder().build();
    let seen = Seen::new();
    for n in 0..3u64 {
        let record = seen.clone();
        bus.subscribe::<A>(
            Options::default().capacity(16).name(format!("moody-{n}")),
            move |m: &Message<A>| {
                // A cheap, repeatable "random": about one message in five panics.
                let roll =
                    m.0.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                        .rotate_left(17 + n as u32)
                        % 5;
                if roll == 0 {
                    panic!("random failure on {}", m.0);
                }
                record.push((n, m.0));
            },
        );
    }
    std::thread::scope(|scope| {
        for t in 0..4 {
            let bus = bus.clone();
            scope.spawn(move || {
                for i in 0..MESSAGES / 4 {
                    bus.publish(A(t * 10_000 + i)).unwrap();
                }
            });
        }
    });
    close_within_patience(&bus);
    let stats = bus.stats();
    let letters = bus.dead_letters();
    let mut dead = 0;
    for s in &stats.subscriptions {
        assert_eq!(s.received, MESSAGES);
        assert_eq!(s.delivered + s.dead_lettered, MESSAGES, "{s:?}");
        dead += s.dead_lettered;
    }
    assert_eq!(letters.len() as u64, dead);
    assert!(letters.iter().all(|l| l.error()
        == format!(
            "panicked: random failure on {}",
            l.payload::<A>().unwrap().0
        )));
    assert_eq!(seen.get().len() as u64 + dead, 3 * MESSAGES);
    // Nothing was left poisoned: a new bus and this one's stats keep working.
    assert!(bus.publish(A(0)).is_err());
}

#[test]
fn subscribe_and_unsubscribe_storms_lose_nothing_for_the_subscriptions_that_stay() {
    const PER_PUBLISHER: u64 = 2_000;
    let bus = Bus::builder().build();
    let stayers: Vec<Seen<u64>> = (0..2).map(|_| Seen::new()).collect();
    for seen in &stayers {
        let record = seen.clone();
        bus.subscribe::<A>(Options::default().capacity(8), move |m: &Message<A>| {
            record.push(m.seq())
        });
    }
    let stop = AtomicBool::new(false);
    let churned = AtomicU64::new(0);
    std::thread::scope(|scope| {
        let publishers: Vec<_> = (0..4)
            .map(|t| {
                let (bus, churned) = (bus.clone(), &churned);
                scope.spawn(move || {
                    for i in 0..PER_PUBLISHER {
                        bus.publish(A(t * 100_000 + i)).unwrap();
                        // Half the publishes wait for the storm, so that it is sure to blow
                        // while they go on, however the threads are scheduled.
                        if i == PER_PUBLISHER / 2 {
                            support::until("a subscription churned", || {
                                churned.load(Ordering::SeqCst) > 0
                            });
                        }
                    }
                })
            })
            .collect();
        for _ in 0..2 {
            scope.spawn(|| {
                while !stop.load(Ordering::SeqCst) {
                    let s = bus.subscribe::<A>(Options::default().capacity(1), |_: &Message<A>| {});
                    s.unsubscribe();
                    churned.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        for publisher in publishers {
            publisher.join().unwrap();
        }
        stop.store(true, Ordering::SeqCst);
    });
    close_within_patience(&bus);
    let every: Vec<u64> = (0..4 * PER_PUBLISHER).collect();
    for seen in &stayers {
        assert_eq!(seen.get(), every);
    }
    assert!(churned.load(Ordering::SeqCst) > 0);
    assert_eq!(bus.stats().subscriptions.len(), 2);
}

#[test]
fn a_handler_that_hangs_forever_does_not_stop_the_others_or_close_timeout() {
    let bus = Bus::builder().build();
    let started = Signal::new();
    let signal = started.clone();
    let forever = Arc::new(Mutex::new(()));
    let held = forever.lock().unwrap();
    let hang = forever.clone();
    bus.subscribe::<A>(Options::default().name("hangs"), move |_: &Message<A>| {
        signal.send(0);
        let _never = hang.lock();
    });
    let others = Seen::new();
    let record = others.clone();
    let works = bus.subscribe::<B>(Options::default().name("works"), move |m: &Message<B>| {
        record.push(m.0)
    });
    bus.publish(A(1)).unwrap();
    bus.publish(A(2)).unwrap();
    assert_eq!(started.next(), 0);
    for i in 0..100 {
        bus.publish(B(i)).unwrap();
    }
    // "works" gets everything while "hangs" hangs; waited for here, not raced against the
    // close's deadline, so a late-scheduled worker cannot fail the test.
    support::until_idle(&works);
    let report = bus.close_timeout(Duration::from_millis(200));
    assert!(!report.completed);
    let stuck: Vec<_> = report
        .unfinished()
        .map(|u| (u.name.clone(), u.queued + u.in_handler))
        .collect();
    assert_eq!(stuck, [("hangs".to_owned(), 2)]);
    assert_eq!(others.get(), (0..100).collect::<Vec<_>>());
    let unique: HashSet<_> = others.get().into_iter().collect();
    assert_eq!(unique.len(), 100);
    drop(held);
}
