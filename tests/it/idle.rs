//! `Bus::wait_idle`: returns once everything accepted is handled by every subscription, so a
//! test goes from publish to assert with no sleep (issue 27, item 6).

use crate::support::{Latch, Seen, Signal};

use std::time::Duration;

use eventbus::{Bus, Message, Options, Overflow, Start, Topic};

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct Job(u64);

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
#[topic(retain = 100)]
struct Logged(u64);

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct Next(u64);

#[test]
fn an_empty_bus_is_idle_at_once() {
    let bus = Bus::builder().build();
    bus.wait_idle();
    assert!(bus.wait_idle_timeout(Duration::ZERO));
    bus.close();
}

#[test]
fn wait_idle_returns_once_everything_published_is_handled() {
    let bus = Bus::builder().build();
    let (fast, slow) = (Seen::new(), Seen::new());
    let record = fast.clone();
    bus.subscribe::<Job>(Options::default(), move |m: &Message<Job>| record.push(m.0));
    let record = slow.clone();
    bus.subscribe::<Job>(Options::default().capacity(4), move |m: &Message<Job>| {
        std::thread::yield_now();
        record.push(m.0);
    });
    for i in 0..100 {
        bus.publish(Job(i)).unwrap();
    }
    bus.wait_idle();
    let all: Vec<u64> = (0..100).collect();
    assert_eq!((fast.get(), slow.get()), (all.clone(), all));
    bus.close();
}

/// A stuck handler keeps the bus busy: `wait_idle_timeout` gives up (false) while it is
/// stuck, and `wait_idle` returns once it is released and the rest is handled.
#[test]
fn a_stuck_handler_keeps_the_bus_busy_until_it_is_released() {
    let bus = Bus::builder().build();
    let (release, started) = (Latch::new(), Signal::new());
    let (gate, signal) = (release.clone(), started.clone());
    let seen = Seen::new();
    let record = seen.clone();
    bus.subscribe::<Job>(Options::default(), move |m: &Message<Job>| {
        if m.0 == 0 {
            signal.send(0);
            gate.wait();
        }
        record.push(m.0);
    });
    for i in 0..3 {
        bus.publish(Job(i)).unwrap();
    }
    assert_eq!(started.next(), 0);
    assert!(!bus.wait_idle_timeout(Duration::from_millis(30)));
    assert!(seen.get().is_empty());
    release.open();
    bus.wait_idle();
    assert_eq!(seen.get(), [0, 1, 2]);
    bus.close();
}

/// A retry waiting out its backoff is work pending; a dead letter is finished work.
#[test]
fn a_pending_retry_is_busy_and_a_dead_letter_is_done() {
    let bus = Bus::builder().build();
    let attempts = Seen::new();
    let record = attempts.clone();
    let options = Options::default()
        .retries(2)
        .backoff(Duration::from_millis(20));
    bus.subscribe::<Job>(options, move |m: &Message<Job>| {
        record.push(m.0);
        Err::<(), _>("always")
    });
    bus.publish(Job(5)).unwrap();
    bus.wait_idle();
    assert_eq!(attempts.get(), [5, 5, 5], "every retry ran before idle");
    assert_eq!(bus.dead_letters().len(), 1);
    bus.close();
}

/// A cascade: what handlers publish while the wait goes on is waited for too.
#[test]
fn what_handlers_publish_during_the_wait_is_waited_for() {
    let bus = Bus::builder().build();
    let seen = Seen::new();
    let record = seen.clone();
    let publisher = bus.clone();
    bus.subscribe::<Job>(Options::default(), move |m: &Message<Job>| {
        std::thread::yield_now();
        publisher.publish(Next(m.0 * 10)).unwrap();
    });
    bus.subscribe::<Next>(Options::default(), move |m: &Message<Next>| {
        std::thread::yield_now();
        record.push(m.0);
    });
    for i in 0..20 {
        bus.publish(Job(i)).unwrap();
    }
    bus.wait_idle();
    assert_eq!(seen.get(), (0..20).map(|i| i * 10).collect::<Vec<_>>());
    bus.close();
}

/// A log subscription is idle once it has read to the end of the log (history included).
#[test]
fn a_log_subscription_is_idle_once_it_has_read_to_the_end() {
    let bus = Bus::builder().build();
    for i in 0..50 {
        bus.publish(Logged(i)).unwrap();
    }
    let seen = Seen::new();
    let record = seen.clone();
    let options = Options::default()
        .start(Start::Earliest)
        .overflow(Overflow::Block)
        .capacity(8);
    bus.subscribe::<Logged>(options, move |m: &Message<Logged>| {
        std::thread::yield_now();
        record.push(m.0);
    });
    for i in 50..80 {
        bus.publish(Logged(i)).unwrap();
    }
    bus.wait_idle();
    assert_eq!(seen.get(), (0..80).collect::<Vec<_>>());
    bus.close();
}

/// Called inside a handler it would wait for itself: it panics (a failed attempt), and the
/// bus goes on.
#[test]
fn wait_idle_inside_a_handler_panics_instead_of_waiting_for_itself() {
    let bus = Bus::builder().build();
    let inner = bus.clone();
    bus.subscribe::<Job>(
        Options::default().name("waiter"),
        move |_: &Message<Job>| {
            inner.wait_idle();
        },
    );
    bus.publish(Job(1)).unwrap();
    bus.wait_idle();
    let letters = bus.dead_letters();
    assert_eq!(letters.len(), 1);
    assert!(
        letters[0].error().contains("wait for itself"),
        "{}",
        letters[0].error()
    );
    bus.close();
}

#[cfg(feature = "tokio")]
mod with_tokio {
    use super::*;

    /// `wait_idle_async` waits for task workers, on a `current_thread` runtime too.
    #[test]
    fn wait_idle_async_waits_for_task_workers_on_any_runtime() {
        for multi in [false, true] {
            let runtime = if multi {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .unwrap()
            } else {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
            };
            runtime.block_on(async {
                let bus = Bus::builder().build();
                let seen = Seen::new();
                let record = seen.clone();
                bus.subscribe_async(Options::default(), move |m: Message<Job>| {
                    let record = record.clone();
                    async move {
                        tokio::task::yield_now().await;
                        record.push(m.0);
                    }
                });
                for i in 0..30 {
                    bus.publish_async(Job(i)).await.unwrap();
                }
                bus.wait_idle_async().await;
                assert_eq!(seen.get(), (0..30).collect::<Vec<_>>(), "multi: {multi}");
                bus.close_async().await;
            });
        }
    }

    /// The sync `wait_idle` on a `current_thread` runtime would stop the tasks it waits
    /// for: it panics and says what to use.
    #[test]
    fn the_sync_wait_on_a_current_thread_runtime_panics_with_the_way_out() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let panic = runtime.block_on(async {
            let bus = Bus::builder().build();
            let outcome =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| bus.wait_idle()));
            bus.close_async().await;
            outcome.unwrap_err()
        });
        let text = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap();
        assert!(text.contains("wait_idle_async"), "{text}");
    }

    /// On a multi-thread runtime's thread the sync wait is safe (`block_in_place`).
    #[test]
    fn the_sync_wait_on_a_multi_thread_runtime_waits_safely() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let bus = Bus::builder().build();
            let seen = Seen::new();
            let record = seen.clone();
            bus.subscribe_async(Options::default(), move |m: Message<Job>| {
                let record = record.clone();
                async move {
                    tokio::task::yield_now().await;
                    record.push(m.0);
                }
            });
            for i in 0..10 {
                bus.publish_async(Job(i)).await.unwrap();
            }
            bus.wait_idle();
            assert_eq!(seen.get(), (0..10).collect::<Vec<_>>());
            bus.close_async().await;
        });
    }
}
