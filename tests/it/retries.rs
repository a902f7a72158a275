//! Failures are retried in place, then kept as dead letters; panics are failed attempts.

use crate::support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use eventbus::{Bus, Message, Options, Topic};
use support::Seen;

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct Job(u64);

fn quick() -> Options {
    Options::default().backoff(Duration::from_micros(100))
}

#[test]
fn a_message_that_always_fails_becomes_a_dead_letter_and_the_next_is_delivered() {
    let bus = Bus::builder().build();
    let seen = Seen::new();
    let record = seen.clone();
    let subscription =
        bus.subscribe::<Job>(quick().retries(2).name("picky"), move |m: &Message<Job>| {
            record.push(m.0);
            if m.0 == 1 {
                Err(format!("job {} is cursed", m.0))
            } else {
                Ok(())
            }
        });
    bus.publish(Job(1)).unwrap();
    bus.publish(Job(2)).unwrap();
    bus.close();

    // Three attempts at 1, in place, before 2 is touched.
    assert_eq!(seen.get(), [1, 1, 1, 2]);
    let letters = bus.dead_letters();
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(
        (letter.topic(), letter.seq(), letter.subscriber()),
        ("Job", 0, "picky")
    );
    assert_eq!((letter.error(), letter.attempts()), ("job 1 is cursed", 3));
    assert_eq!(letter.payload::<Job>(), Some(&Job(1)));
    assert_eq!(letter.payload::<u64>(), None);
    let stats = subscription.stats();
    assert_eq!(
        (
            stats.delivered,
            stats.failed,
            stats.retried,
            stats.dead_lettered
        ),
        (1, 3, 2, 1)
    );
}

#[test]
fn a_message_that_fails_once_is_retried_and_delivered() {
    let bus = Bus::builder().build();
    let attempts = Arc::new(AtomicU32::new(0));
    let seen = Seen::new();
    let (count, record) = (attempts.clone(), seen.clone());
    let subscription = bus.subscribe::<Job>(quick().retries(3), move |m: &Message<Job>| {
        if m.0 == 1 && count.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err("flaky");
        }
        record.push(m.0);
        Ok(())
    });
    bus.publish(Job(1)).unwrap();
    bus.publish(Job(2)).unwrap();
    bus.close();

    assert_eq!(seen.get(), [1, 2]);
    assert!(bus.dead_letters().is_empty());
    let stats = subscription.stats();
    assert_eq!((stats.delivered, stats.failed, stats.retried), (2, 1, 1));
}

#[test]
fn a_panicking_handler_is_a_failed_attempt_and_the_worker_lives_on() {
    let bus = Bus::builder().build();
    let seen = Seen::new();
    let record = seen.clone();
    let subscription = bus.subscribe::<Job>(quick().retries(1), move |m: &Message<Job>| {
        if m.0 % 2 == 0 {
            panic!("cannot handle even job {}", m.0);
        }
        record.push(m.0);
    });
    for i in 1..=5 {
        bus.publish(Job(i)).unwrap();
    }
    bus.close();

    assert_eq!(seen.get(), [1, 3, 5]);
    let letters = bus.dead_letters();
    let errors: Vec<_> = letters
        .iter()
        .map(|l| (l.seq(), l.error(), l.attempts()))
        .collect();
    assert_eq!(
        errors,
        [
            (1, "panicked: cannot handle even job 2", 2),
            (3, "panicked: cannot handle even job 4", 2)
        ]
    );
    let stats = subscription.stats();
    assert_eq!(
        (stats.delivered, stats.failed, stats.dead_lettered),
        (3, 4, 2)
    );
}

#[test]
fn the_retry_wait_doubles_up_to_thirty_two_times_the_backoff() {
    let options = Options::default().backoff(Duration::from_millis(10));
    let waits: Vec<_> = (1..=8)
        .map(|retry| options.retry_delay(retry).as_millis())
        .collect();
    assert_eq!(waits, [10, 20, 40, 80, 160, 320, 320, 320]);
    let huge = Options::default().backoff(Duration::MAX);
    assert_eq!(huge.retry_delay(3), Duration::MAX);
}
