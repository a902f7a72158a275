//! The `on_dead_letter` hook: shown every dead letter, off the workers' path.

use crate::support;

use std::sync::{Arc, Mutex};

use eventbus::{Bus, DeadLetter, Message, Options, Topic};
use support::{Latch, Signal};

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct Charge(u64);

fn failing(bus: &Bus) {
    bus.subscribe::<Charge>(Options::default().name("billing"), |m: &Message<Charge>| {
        if m.0 == 3 {
            panic!("hook test panic on 3");
        }
        Err::<(), _>(format!("declined {}", m.0))
    });
}

#[test]
fn the_hook_sees_every_dead_letter_before_close_returns() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let bus = Bus::builder()
        .on_dead_letter(move |letter: &DeadLetter| {
            record.lock().unwrap().push((
                letter.seq(),
                letter.error().to_owned(),
                letter.payload::<Charge>().copied(),
            ))
        })
        .build();
    failing(&bus);
    for i in 0..5 {
        bus.publish(Charge(i)).unwrap();
    }
    bus.close();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 5);
    assert_eq!(seen[0], (0, "declined 0".to_owned(), Some(Charge(0))));
    assert_eq!(seen[3].1, "panicked: hook test panic on 3");
    assert_eq!(bus.stats().dead_letter_hook_skipped, 0);
}

#[test]
fn a_slow_hook_never_delays_the_workers() {
    let release = Latch::new();
    let started = Signal::new();
    let (gate, signal) = (release.clone(), started.clone());
    let bus = Bus::builder()
        .on_dead_letter(move |letter: &DeadLetter| {
            if letter.seq() == 0 {
                signal.send(0);
                gate.wait();
            }
        })
        .build();
    let delivered = Signal::new();
    let record = delivered.clone();
    bus.subscribe::<Charge>(Options::default(), move |m: &Message<Charge>| {
        if m.0 == 0 {
            return Err("first one fails");
        }
        record.send(m.0);
        Ok(())
    });
    bus.publish(Charge(0)).unwrap();
    assert_eq!(started.next(), 0);
    // The hook is stuck on the first letter; the worker carries on regardless.
    for i in 1..=50 {
        bus.publish(Charge(i)).unwrap();
        assert_eq!(delivered.next(), i);
    }
    release.open();
    bus.close();
}

#[test]
fn a_hook_that_falls_far_behind_skips_letters_and_says_so() {
    let release = Latch::new();
    let gate = release.clone();
    let bus = Bus::builder()
        .dead_letter_capacity(5_000)
        .on_dead_letter(move |_: &DeadLetter| gate.wait())
        .build();
    bus.subscribe::<Charge>(Options::default().capacity(4096), |_: &Message<Charge>| {
        Err::<(), _>("no")
    });
    for i in 0..3_000 {
        bus.publish(Charge(i)).unwrap();
    }
    // Exact: every message has been tried and kept before the hook is let go (the hook is
    // no subscription: the bus is idle while it is held).
    bus.wait_idle();
    assert_eq!(bus.stats().subscriptions[0].dead_lettered, 3_000);
    release.open();
    bus.close();
    let stats = bus.stats();
    assert_eq!(stats.dead_letters, 3_000);
    // One letter in the hook, 1024 waiting for it: the rest skipped it.
    assert!(stats.dead_letter_hook_skipped >= 3_000 - 1_025, "{stats:?}");
    assert!(stats.dead_letter_hook_skipped < 3_000);
}
