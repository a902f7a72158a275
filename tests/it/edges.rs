//! The promises at the edges, tried as a hostile user would: unsubscribing from outside while
//! a close waits, panics in message `Drop`s and panic payloads, slow hooks and drops against
//! `close_timeout`, dropping the bus after a timed-out close, unsubscribing from inside a
//! handler round a cycle, and `publish_timeout` behind a blocked publisher.
//!
//! The racing cases run `EVENTBUS_EDGE_ROUNDS` times (default 20).

use crate::support;

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eventbus::{Bus, Message, Options, Topic};
use support::{until, Latch, Seen, Signal, PATIENCE};

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct A(u64);

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct B(u64);

fn rounds() -> u64 {
    std::env::var("EVENTBUS_EDGE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

/// Runs `f` on a thread of its own and fails the test, instead of hanging it, if `f` does not
/// return within `PATIENCE`.
fn within<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(PATIENCE)
        .unwrap_or_else(|_| panic!("{what} did not return: the bus froze"))
}

/// Item 1: a subscription unsubscribed from another thread, with messages queued and its
/// handler busy, is drained before `close` returns, cascade included.
#[test]
fn close_waits_for_an_unsubscribe_from_outside_to_drain() {
    for _ in 0..rounds() {
        let bus = Bus::builder().build();
        let release = Latch::new();
        let started = Signal::new();
        let (gate, signal, publisher) = (release.clone(), started.clone(), bus.clone());
        let leaving = bus.subscribe::<A>(Options::default(), move |m: &Message<A>| {
            if m.0 == 0 {
                signal.send(0);
                gate.wait();
            }
            publisher.publish(B(m.0)).unwrap();
        });
        let seen = Seen::new();
        let record = seen.clone();
        bus.subscribe::<B>(Options::default(), move |m: &Message<B>| record.push(m.0));
        for i in 0..5 {
            bus.publish(A(i)).unwrap();
        }
        assert_eq!(started.next(), 0);
        let unsubscriber = std::thread::spawn(move || leaving.unsubscribe());
        // The unsubscribe has begun: the subscription has left the stats.
        until("the unsubscribe began", || {
            bus.stats().subscriptions.len() == 1
        });
        let closer = bus.clone();
        let close = std::thread::spawn(move || closer.close());
        until("the close began", || bus.is_closed());
        release.open();
        close.join().unwrap();
        // Everything accepted was delivered before close returned: A's five, and the B each
        // of them published while the bus drained.
        assert_eq!(seen.get(), [0, 1, 2, 3, 4]);
        let stats = unsubscriber.join().unwrap();
        assert_eq!((stats.received, stats.delivered), (5, 5));
    }
}

/// A topic whose value 1 panics when dropped.
#[derive(Topic, Debug)]
struct Brittle(u64);

impl Drop for Brittle {
    fn drop(&mut self) {
        if self.0 == 1 && !std::thread::panicking() {
            panic!("Brittle(1) panics in its Drop");
        }
    }
}

/// Item 2a: the message's own `Drop` panics where the worker lets go of it.
#[test]
fn a_message_whose_drop_panics_leaves_the_worker_alive() {
    let bus = Bus::builder().build();
    let seen = Seen::new();
    let record = seen.clone();
    let subscription = bus.subscribe::<Brittle>(Options::default(), move |m: &Message<Brittle>| {
        record.push(m.0)
    });
    for i in 0..4 {
        bus.publish(Brittle(i)).unwrap();
    }
    let closer = bus.clone();
    let report = within("close_timeout", move || closer.close_timeout(PATIENCE));
    assert!(report.completed, "{report:?}");
    assert_eq!(seen.get(), [0, 1, 2, 3]);
    assert_eq!(subscription.stats().delivered, 4);
}

/// A panic payload that panics again when dropped.
struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("the panic payload panics in its Drop");
        }
    }
}

/// Item 2b: the handler panics with a payload whose `Drop` panics.
#[test]
fn a_panic_payload_whose_drop_panics_is_a_failed_attempt() {
    let bus = Bus::builder().build();
    let seen = Seen::new();
    let record = seen.clone();
    let subscription = bus.subscribe::<A>(Options::default(), move |m: &Message<A>| {
        if m.0 == 1 {
            std::panic::panic_any(PanicsOnDrop);
        }
        record.push(m.0);
    });
    for i in 0..4 {
        bus.publish(A(i)).unwrap();
    }
    let closer = bus.clone();
    let report = within("close_timeout", move || closer.close_timeout(PATIENCE));
    assert!(report.completed, "{report:?}");
    assert_eq!(seen.get(), [0, 2, 3]);
    let stats = subscription.stats();
    assert_eq!(
        (stats.delivered, stats.failed, stats.dead_lettered),
        (3, 1, 1)
    );
    assert_eq!(bus.dead_letters()[0].seq(), 1);
}

/// A value a handler captures that panics when the handler is dropped.
struct Grenade;

impl Drop for Grenade {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("a captured value panics in its Drop");
        }
    }
}

/// Item 2c: the handler's captured value panics in its `Drop` when the subscription ends,
/// by unsubscribe and by close.
#[test]
fn a_captured_value_whose_drop_panics_ends_its_subscription_cleanly() {
    let bus = Bus::builder().build();
    let seen = Seen::new();
    let (record, grenade) = (seen.clone(), Grenade);
    let leaving = bus.subscribe::<A>(Options::default(), move |m: &Message<A>| {
        let _ = &grenade;
        record.push(m.0);
    });
    let (record, grenade) = (seen.clone(), Grenade);
    bus.subscribe::<B>(Options::default(), move |m: &Message<B>| {
        let _ = &grenade;
        record.push(100 + m.0);
    });
    bus.publish(A(1)).unwrap();
    let stats = within("unsubscribe", move || leaving.unsubscribe());
    assert_eq!(stats.delivered, 1);
    bus.publish(B(2)).unwrap();
    let closer = bus.clone();
    let report = within("close_timeout", move || closer.close_timeout(PATIENCE));
    assert!(report.completed, "{report:?}");
    assert_eq!(seen.get(), [1, 102]);
}

/// Item 3: a dead-letter hook that does not return does not hold `close_timeout` past its
/// deadline; the report says the hook is still running.
#[test]
fn close_timeout_returns_on_time_past_a_slow_hook() {
    let release = Latch::new();
    let gate = release.clone();
    let shown = Signal::new();
    let signal = shown.clone();
    let bus = Bus::builder()
        .on_dead_letter(move |letter| {
            signal.send(letter.seq());
            gate.wait();
        })
        .build();
    bus.subscribe::<A>(Options::default(), |_: &Message<A>| Err::<(), _>("no"));
    bus.publish(A(0)).unwrap();
    assert_eq!(shown.next(), 0);
    let deadline = Duration::from_millis(200);
    let closer = bus.clone();
    let started = Instant::now();
    let report = within("close_timeout", move || closer.close_timeout(deadline));
    let took = started.elapsed();
    // The hold lasts until after this check, so any bound tells "on time" from "waited for
    // it"; a wide one keeps a descheduled test thread on a loaded machine from failing it.
    assert!(took < deadline + Duration::from_secs(10), "took {took:?}");
    assert!(!report.completed, "{report:?}");
    release.open();
}

/// A topic whose value 1's `Drop` waits until the test lets it go.
#[derive(Topic)]
struct Slow(u64, Option<Latch>);

impl Drop for Slow {
    fn drop(&mut self) {
        if let Some(latch) = &self.1 {
            latch.wait();
        }
    }
}

/// Item 3: a message whose `Drop` does not return does not hold `close_timeout` past its
/// deadline.
#[test]
fn close_timeout_returns_on_time_past_a_slow_message_drop() {
    let bus = Bus::builder().build();
    let release = Latch::new();
    let delivered = Signal::new();
    let signal = delivered.clone();
    bus.subscribe::<Slow>(Options::default(), move |m: &Message<Slow>| {
        signal.send(m.0)
    });
    bus.publish(Slow(1, Some(release.clone()))).unwrap();
    assert_eq!(delivered.next(), 1);
    let deadline = Duration::from_millis(200);
    let closer = bus.clone();
    let started = Instant::now();
    let report = within("close_timeout", move || closer.close_timeout(deadline));
    let took = started.elapsed();
    // The hold lasts until after this check, so any bound tells "on time" from "waited for
    // it"; a wide one keeps a descheduled test thread on a loaded machine from failing it.
    assert!(took < deadline + Duration::from_secs(10), "took {took:?}");
    assert!(!report.completed, "{report:?}");
    release.open();
}

/// Item 4: dropping the last `Bus` after a timed-out close never waits for a stuck handler.
#[test]
fn dropping_the_bus_after_a_timed_out_close_never_blocks() {
    let bus = Bus::builder().build();
    let release = Latch::new();
    let started = Signal::new();
    let (gate, signal) = (release.clone(), started.clone());
    bus.subscribe::<A>(Options::default(), move |m: &Message<A>| {
        signal.send(m.0);
        gate.wait();
    });
    bus.publish(A(0)).unwrap();
    assert_eq!(started.next(), 0);
    let report = bus.close_timeout(Duration::from_millis(50));
    assert!(!report.completed);
    within("dropping the last Bus", move || drop(bus));
    release.open();
}

/// Item 5: handler X (its `Block` mailbox of one full) unsubscribes Y while Y's handler is
/// blocked publishing into X's mailbox. Neither waits forever, and close completes.
#[test]
fn unsubscribe_from_a_handler_round_a_cycle_never_freezes_the_bus() {
    for _ in 0..rounds() {
        let bus = Bus::builder().build();
        let (hand_y, y_handle) = crossbeam_channel::bounded::<eventbus::Subscription>(1);
        let release = Latch::new();
        let x_started = Signal::new();
        let about_to_block = Signal::new();
        let (gate, signal) = (release.clone(), x_started.clone());
        let unsubscribed = Arc::new(AtomicU64::new(0));
        let done = Arc::clone(&unsubscribed);
        bus.subscribe::<A>(
            Options::default().capacity(1).name("x"),
            move |m: &Message<A>| {
                if m.0 == 0 {
                    signal.send(0);
                    gate.wait();
                    let y = y_handle.recv().unwrap();
                    y.unsubscribe();
                    done.store(1, SeqCst);
                }
            },
        );
        let (publisher, signal) = (bus.clone(), about_to_block.clone());
        let y = bus.subscribe::<B>(Options::default().name("y"), move |_: &Message<B>| {
            publisher.publish(A(1)).unwrap(); // fills X's mailbox
            signal.send(2);
            let _ = publisher.publish(A(2)); // waits for X, or is refused
        });
        hand_y.send(y).unwrap();
        bus.publish(A(0)).unwrap();
        assert_eq!(x_started.next(), 0);
        bus.publish(B(0)).unwrap();
        assert_eq!(about_to_block.next(), 2);
        release.open();
        let closer = bus.clone();
        let report = within("close_timeout", move || closer.close_timeout(PATIENCE));
        assert!(report.completed, "{report:?}");
        assert_eq!(unsubscribed.load(SeqCst), 1);
    }
}

/// Item 6: `queued` counts what waits in the mailbox, never the message being handled.
#[test]
fn queued_never_exceeds_capacity() {
    let bus = Bus::builder().build();
    let release = Latch::new();
    let started = Signal::new();
    let (gate, signal) = (release.clone(), started.clone());
    let subscription = bus.subscribe::<A>(Options::default().capacity(3), move |m: &Message<A>| {
        if m.0 == 0 {
            signal.send(0);
            gate.wait();
        }
    });
    bus.publish(A(0)).unwrap();
    assert_eq!(started.next(), 0);
    for i in 1..4 {
        bus.publish(A(i)).unwrap();
    }
    let stats = subscription.stats();
    assert_eq!(stats.queued, 3, "{stats:?}");
    let report = bus.close_timeout(Duration::from_millis(50));
    let mine = &report.subscriptions[0];
    assert_eq!(mine.queued, 3, "{report:?}");
    release.open();
}

/// Item 7: `publish_timeout` bounds the wait for the topic's turn behind a publisher that is
/// itself blocked, and hands the message back unnumbered.
#[test]
fn publish_timeout_bounds_the_wait_for_the_topics_turn() {
    let bus = Bus::builder().build();
    let release = Latch::new();
    let started = Signal::new();
    let seen = Seen::new();
    let (gate, signal, record) = (release.clone(), started.clone(), seen.clone());
    bus.subscribe::<A>(Options::default().capacity(1), move |m: &Message<A>| {
        if m.0 == 0 {
            signal.send(0);
            gate.wait();
        }
        record.push(m.0);
    });
    bus.publish(A(0)).unwrap();
    assert_eq!(started.next(), 0);
    bus.publish(A(1)).unwrap(); // fills the mailbox
    let blocked = bus.clone();
    let first = std::thread::spawn(move || blocked.publish(A(2)).unwrap());
    // Message 2 is numbered: `first` holds the topic's turn and waits for room, so `late`
    // waits for the turn, not for room.
    until("message 2 is numbered", || {
        bus.stats().topics[0].published == 3
    });
    let late = bus.clone();
    let result = within("publish_timeout", move || {
        late.publish_timeout(A(3), Duration::from_millis(100))
    });
    let error = result.unwrap_err();
    assert_eq!(error.into_inner(), A(3));
    release.open();
    assert_eq!(first.join().unwrap(), 2);
    assert_eq!(
        bus.publish(A(4)).unwrap(),
        3,
        "the refused message took no seq"
    );
    bus.close();
    assert_eq!(seen.get(), [0, 1, 2, 4]);
}

/// A panic payload that panics when dropped, thrown from a message's `Drop`.
#[derive(Topic, Debug)]
struct Nasty(u64);

impl Drop for Nasty {
    fn drop(&mut self) {
        if self.0 == 1 && !std::thread::panicking() {
            std::panic::panic_any(PanicsOnDrop);
        }
    }
}

/// Item 2a, worse: the message's `Drop` panics with a payload whose `Drop` panics again
/// (found by review, failed before the fix: the worker died after [0, 1]).
#[test]
fn a_message_drop_panicking_with_a_panicking_payload_leaves_the_worker_alive() {
    let bus = Bus::builder().build();
    let seen = Seen::new();
    let record = seen.clone();
    bus.subscribe::<Nasty>(Options::default(), move |m: &Message<Nasty>| {
        record.push(m.0)
    });
    for i in 0..4 {
        bus.publish(Nasty(i)).unwrap();
    }
    let closer = bus.clone();
    let report = within("close_timeout", move || closer.close_timeout(PATIENCE));
    assert!(report.completed, "{report:?}");
    assert_eq!(seen.get(), [0, 1, 2, 3]);
}

/// A handler error that panics when dropped.
#[derive(Debug)]
struct Grumpy;

impl std::fmt::Display for Grumpy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("grumpy")
    }
}

impl std::error::Error for Grumpy {}

impl Drop for Grumpy {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("the handler's error panics in its Drop");
        }
    }
}

/// The handler's error is user code too: its `Drop` panicking between retries leaves the
/// worker alive (found by review, failed before the fix: seen [0]).
#[test]
fn a_handler_error_whose_drop_panics_leaves_the_worker_alive() {
    let bus = Bus::builder().build();
    let seen = Seen::new();
    let record = seen.clone();
    bus.subscribe::<A>(
        Options::default()
            .retries(1)
            .backoff(Duration::from_millis(1)),
        move |m: &Message<A>| -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
            if m.0 == 1 {
                return Err(Box::new(Grumpy));
            }
            record.push(m.0);
            Ok(())
        },
    );
    for i in 0..4 {
        bus.publish(A(i)).unwrap();
    }
    let closer = bus.clone();
    let report = within("close_timeout", move || closer.close_timeout(PATIENCE));
    assert_eq!(seen.get(), [0, 2, 3], "{report:?}");
    // The dead letter keeps the error; let go of it where its panic cannot hurt.
    let letters = bus.take_dead_letters();
    assert_eq!(letters.len(), 1);
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(letters)));
}

/// A subscribe racing a forced stop is retired too: its worker finishes (found by review:
/// 37 of 300 rounds left the worker waiting forever).
#[test]
fn a_subscribe_racing_a_forced_stop_is_retired_too() {
    for _ in 0..rounds() * 5 {
        let bus = Bus::builder().build();
        let subscriber = bus.clone();
        let subscribing = std::thread::spawn(move || {
            // A large mailbox makes the subscribe slow enough to race the stop.
            subscriber.try_subscribe::<B>(Options::default().capacity(1 << 20), |_: &Message<B>| {})
        });
        let _ = bus.close_timeout(Duration::ZERO);
        if let Ok(subscription) = subscribing.join().unwrap() {
            within("unsubscribe after a forced stop", move || {
                subscription.unsubscribe()
            });
        }
    }
}

/// `close` from the `on_dead_letter` hook cannot wait for the hook: it begins the close and
/// returns (found by review: it never returned).
#[test]
fn close_from_the_dead_letter_hook_returns() {
    let slot: Arc<std::sync::OnceLock<Bus>> = Arc::new(std::sync::OnceLock::new());
    let closed = Signal::new();
    let (hook_bus, signal) = (Arc::clone(&slot), closed.clone());
    let bus = Bus::builder()
        .on_dead_letter(move |letter| {
            if let Some(bus) = hook_bus.get() {
                bus.close();
                signal.send(letter.seq());
            }
        })
        .build();
    let _ = slot.set(bus.clone());
    bus.subscribe::<A>(Options::default(), |_: &Message<A>| Err::<(), _>("no"));
    bus.publish(A(0)).unwrap();
    assert_eq!(closed.next(), 0);
    assert!(bus.is_closed());
}
