//! Unsubscribing while publishers are under way: it never waits behind a publisher blocked
//! on another subscriber's mailbox, nothing published after it arrives, and nothing a
//! publisher already had in hand for the mailbox is lost.

use crate::support;

use std::sync::{Arc, Mutex};

use eventbus::{Bus, Message, Options, Subscription, Topic};
use support::{until, Latch, Seen, Signal, PATIENCE};

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct A(u64);

fn published(bus: &Bus) -> u64 {
    bus.stats().topics.iter().map(|t| t.published).sum()
}

/// A `Block` subscriber with room for one message, stuck in its handler on message 0 until
/// `gate` opens; it records what it saw.
fn stuck(bus: &Bus, gate: &Latch, seen: &Seen<u64>) -> Subscription {
    let started = Signal::new();
    let (gate, signal, record) = (gate.clone(), started.clone(), seen.clone());
    let subscription = bus.subscribe::<A>(
        Options::default().capacity(1).name("stuck"),
        move |m: &Message<A>| {
            if m.0 == 0 {
                signal.send(0);
                gate.wait();
            }
            record.push(m.0);
        },
    );
    bus.publish(A(0)).unwrap();
    assert_eq!(started.next(), 0);
    bus.publish(A(1)).unwrap(); // fills the mailbox
    subscription
}

#[test]
fn unsubscribe_does_not_wait_for_a_publisher_blocked_on_another_mailbox() {
    let bus = Bus::builder().build();
    let gate = Latch::new();
    let stuck_seen = Seen::new();
    let _stuck = stuck(&bus, &gate, &stuck_seen);
    let leaving_seen = Seen::new();
    let record = leaving_seen.clone();
    let leaving = bus.subscribe::<A>(Options::default().name("leaving"), move |m: &Message<A>| {
        record.push(m.0)
    });
    // The first two messages went to `stuck` before `leaving` subscribed; these go to both.
    std::thread::scope(|scope| {
        let publisher = scope.spawn(|| bus.publish(A(2)));
        // Message 2 is numbered: its publisher holds the topic and waits for room at `stuck`.
        until("message 2 is numbered", || published(&bus) == 3);
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        scope.spawn(move || done_tx.send(leaving.unsubscribe()).unwrap());
        let returned = done_rx.recv_timeout(PATIENCE);
        gate.open(); // so that a failure below ends the test instead of hanging it
        let stats =
            returned.expect("unsubscribe waited for a publisher blocked on another mailbox");
        // The blocked publisher had not reached `leaving`, and now never will.
        assert_eq!((stats.received, stats.delivered), (0, 0));
        assert_eq!(publisher.join().unwrap().unwrap(), 2);
    });
    bus.publish(A(3)).unwrap();
    bus.close();
    assert_eq!(leaving_seen.get(), Vec::<u64>::new());
    assert_eq!(stuck_seen.get(), [0, 1, 2, 3]);
}

#[test]
fn a_subscriber_leaving_from_its_own_handler_gets_what_a_blocked_publisher_brings() {
    let bus = Bus::builder().build();
    let gate = Latch::new();
    let seen = Seen::new();
    let own: Arc<Mutex<Option<Subscription>>> = Arc::default();
    let started = Signal::new();
    let (handle, signal, record, wait) = (own.clone(), started.clone(), seen.clone(), gate.clone());
    let subscription = bus.subscribe::<A>(Options::default().capacity(1), move |m: &Message<A>| {
        if m.0 == 0 {
            signal.send(0);
            wait.wait();
            // Cannot wait for itself: returns at once, the worker finishes the mailbox.
            handle.lock().unwrap().take().unwrap().unsubscribe();
        }
        record.push(m.0);
    });
    *own.lock().unwrap() = Some(subscription);
    bus.publish(A(0)).unwrap();
    assert_eq!(started.next(), 0);
    bus.publish(A(1)).unwrap(); // fills the mailbox
    std::thread::scope(|scope| {
        let publisher = scope.spawn(|| bus.publish(A(2)));
        until("message 2 is numbered", || published(&bus) == 3);
        // The handler unsubscribes while message 2's publisher waits for room in its
        // mailbox: that message was published first, so it is delivered, not lost.
        gate.open();
        assert_eq!(publisher.join().unwrap().unwrap(), 2);
    });
    // Published after the unsubscribe: goes nowhere.
    bus.publish(A(3)).unwrap();
    // Close waits for the worker that is still emptying its mailbox.
    bus.close();
    assert_eq!(seen.get(), [0, 1, 2]);
}

#[test]
fn unsubscribe_waits_for_a_publisher_blocked_on_its_own_mailbox_and_delivers_its_message() {
    let bus = Bus::builder().build();
    let gate = Latch::new();
    let seen = Seen::new();
    let subscription = stuck(&bus, &gate, &seen);
    std::thread::scope(|scope| {
        let publisher = scope.spawn(|| bus.publish(A(2)));
        until("message 2 is numbered", || published(&bus) == 3);
        let leaving = scope.spawn(move || subscription.unsubscribe());
        gate.open();
        let stats = leaving.join().unwrap();
        assert_eq!(publisher.join().unwrap().unwrap(), 2);
        // Everything received was delivered before unsubscribe returned.
        assert_eq!((stats.received, stats.delivered, stats.queued), (3, 3, 0));
    });
    assert_eq!(seen.get(), [0, 1, 2]);
    bus.publish(A(3)).unwrap();
    bus.close();
    assert_eq!(seen.get(), [0, 1, 2]);
}
