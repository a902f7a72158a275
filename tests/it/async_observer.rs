//! Async observers (feature `tokio`): `Bus::observe_async` and `#[observer] async fn`, a
//! tokio task observing every topic whose name matches a pattern, with the promises of a
//! sync observer: every matching topic (those made later too), each topic's messages in that
//! topic's order, retries then dead letters, a close that drains, a panic that the task
//! survives.

use crate::support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use eventbus::{observer, AnyMessage, Bus, Options, SubscribeError, Topic};
use support::Seen;

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
#[topic(name = "shop.placed")]
struct Placed(u64);

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
#[topic(name = "shop.shipped")]
struct Shipped(u64);

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
#[topic(name = "shop.placed.eu")]
struct PlacedEu(u64);

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
#[topic(name = "bank.paid")]
struct Paid(u64);

/// A log topic.
#[derive(Topic, Debug, Clone, Copy, PartialEq)]
#[topic(name = "bank.kept", retain = 100)]
struct Kept(u64);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A bus on `runtime`.
fn bus_on(runtime: &tokio::runtime::Runtime) -> Bus {
    let _inside = runtime.enter();
    Bus::builder().build()
}

/// The value of a message of any of this module's topics.
fn value(m: &AnyMessage) -> u64 {
    m.downcast_ref::<Placed>()
        .map(|p| p.0)
        .or_else(|| m.downcast_ref::<Shipped>().map(|s| s.0))
        .or_else(|| m.downcast_ref::<PlacedEu>().map(|p| p.0))
        .or_else(|| m.downcast_ref::<Paid>().map(|p| p.0))
        .or_else(|| m.downcast_ref::<Kept>().map(|k| k.0))
        .expect("one of this module's topics")
}

/// An async observer of `pattern` that records (topic, seq, value), awaiting first so the
/// message really is held across an `.await`.
fn recorder(
    bus: &Bus,
    pattern: &str,
    options: Options,
) -> (eventbus::Subscription, Seen<(&'static str, u64, u64)>) {
    let seen = Seen::new();
    let record = seen.clone();
    let subscription = bus
        .observe_async(pattern, options, move |m: AnyMessage| {
            let record = record.clone();
            async move {
                tokio::task::yield_now().await;
                record.push((m.topic(), m.seq(), value(&m)));
            }
        })
        .unwrap();
    (subscription, seen)
}

#[test]
fn an_async_observer_sees_every_matching_topic_those_made_later_too() {
    let runtime = runtime();
    let bus = bus_on(&runtime);
    // Made before the observer: observed from the next message on.
    bus.publish(Placed(0)).unwrap();
    let (audit, seen) = recorder(&bus, "shop.*", Options::default().name("audit"));
    bus.publish(Placed(1)).unwrap();
    // Made after it: observed from its first message.
    bus.publish(Shipped(2)).unwrap();
    bus.publish(PlacedEu(3)).unwrap(); // `shop.placed.eu`: one segment too many
    bus.publish(Paid(4)).unwrap(); // another prefix
    bus.publish(Shipped(5)).unwrap();
    bus.publish(Placed(6)).unwrap();
    runtime.block_on(bus.close_async());
    let mut by_topic: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    for (topic, seq, value) in seen.get() {
        by_topic.entry(topic).or_default().push((seq, value));
    }
    assert_eq!(
        by_topic,
        BTreeMap::from([
            ("shop.placed", vec![(1, 1), (2, 6)]),
            ("shop.shipped", vec![(0, 2), (1, 5)]),
        ])
    );
    let stats = audit.stats();
    assert_eq!(
        (stats.topic, stats.received, stats.delivered),
        ("shop.*", 4, 4)
    );
}

/// Two publisher threads per topic, two topics: the observer sees each topic's messages in
/// that topic's order (its seqs, which the publishers' interleaving decides).
#[test]
fn an_async_observer_sees_each_topics_messages_in_that_topics_order() {
    const EACH: u64 = 200;
    let runtime = runtime();
    let bus = bus_on(&runtime);
    let (_audit, seen) = recorder(&bus, "shop.*", Options::default().capacity(8));
    let start = Barrier::new(4);
    std::thread::scope(|scope| {
        for publisher in 0..4u64 {
            let (bus, start) = (&bus, &start);
            scope.spawn(move || {
                start.wait();
                for n in 0..EACH {
                    let value = publisher * EACH + n;
                    match publisher % 2 {
                        0 => bus.publish(Placed(value)).unwrap(),
                        _ => bus.publish(Shipped(value)).unwrap(),
                    };
                }
            });
        }
    });
    runtime.block_on(bus.close_async());
    let seen = seen.get();
    assert_eq!(seen.len() as u64, 4 * EACH);
    for topic in ["shop.placed", "shop.shipped"] {
        let seqs: Vec<u64> = seen
            .iter()
            .filter(|(t, _, _)| *t == topic)
            .map(|(_, seq, _)| *seq)
            .collect();
        assert_eq!(seqs, (0..2 * EACH).collect::<Vec<_>>(), "{topic}");
        // Each of the topic's publishers' messages in the order it published them.
        for publisher in (0..4u64).filter(|p| (p % 2 == 0) == (topic == "shop.placed")) {
            let values: Vec<u64> = seen
                .iter()
                .filter(|(t, _, v)| *t == topic && v / EACH == publisher)
                .map(|(_, _, v)| *v)
                .collect();
            let expected: Vec<u64> = (publisher * EACH..(publisher + 1) * EACH).collect();
            assert_eq!(values, expected, "{topic}, publisher {publisher}");
        }
    }
}

#[test]
fn an_async_observer_retries_then_keeps_a_dead_letter() {
    let runtime = runtime();
    let bus = bus_on(&runtime);
    let attempts = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&attempts);
    let seen = Seen::new();
    let record = seen.clone();
    let audit = bus
        .observe_async(
            "shop.*",
            Options::default()
                .name("audit")
                .retries(2)
                .backoff(Duration::from_millis(1)),
            move |m: AnyMessage| {
                let (counted, record) = (Arc::clone(&counted), record.clone());
                async move {
                    tokio::task::yield_now().await;
                    if value(&m) == 13 {
                        counted.fetch_add(1, SeqCst);
                        return Err(format!("{} refused", value(&m)));
                    }
                    record.push(value(&m));
                    Ok(())
                }
            },
        )
        .unwrap();
    for value in [1, 13, 2] {
        bus.publish(Placed(value)).unwrap();
    }
    runtime.block_on(bus.close_async());
    assert_eq!(seen.get(), [1, 2]);
    assert_eq!(attempts.load(SeqCst), 3);
    let letters = bus.dead_letters();
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(
        (letter.subscriber(), letter.topic(), letter.seq()),
        ("audit", "shop.placed", 1)
    );
    assert_eq!((letter.attempts(), letter.error()), (3, "13 refused"));
    let stats = audit.stats();
    assert_eq!(
        (
            stats.delivered,
            stats.failed,
            stats.retried,
            stats.dead_lettered
        ),
        (2, 3, 2, 1)
    );
}

#[test]
fn an_async_observer_survives_a_panicking_handler() {
    let runtime = runtime();
    let bus = bus_on(&runtime);
    let seen = Seen::new();
    let record = seen.clone();
    let audit = bus
        .observe_async(
            "shop.>",
            Options::default().name("audit"),
            move |m: AnyMessage| {
                // A panic while making the future, and one while polling it.
                assert_ne!(value(&m), 2, "two while making the future");
                let record = record.clone();
                async move {
                    tokio::task::yield_now().await;
                    assert_ne!(value(&m), 4, "four while polling");
                    record.push(value(&m));
                }
            },
        )
        .unwrap();
    for value in 1..=5 {
        bus.publish(PlacedEu(value)).unwrap();
    }
    runtime.block_on(bus.close_async());
    assert_eq!(seen.get(), [1, 3, 5]);
    let letters = bus.dead_letters();
    let errors: Vec<(u64, bool)> = letters
        .iter()
        .map(|l| {
            (
                l.seq(),
                l.error().starts_with("panicked") && l.error().contains("while"),
            )
        })
        .collect();
    assert_eq!(errors, [(1, true), (3, true)]);
    let stats = audit.stats();
    assert_eq!((stats.delivered, stats.dead_lettered), (3, 2));
}

/// A close delivers everything the observer's mailbox accepted, though its task was held
/// when the close began.
#[test]
fn closing_drains_an_async_observer() {
    let runtime = runtime();
    let bus = bus_on(&runtime);
    let (open, gate) = tokio::sync::watch::channel(false);
    let seen = Seen::new();
    let record = seen.clone();
    let started = support::Signal::new();
    let signal = started.clone();
    let audit = bus
        .observe_async(
            "shop.*",
            Options::default().capacity(64),
            move |m: AnyMessage| {
                let (record, signal, mut gate) = (record.clone(), signal.clone(), gate.clone());
                async move {
                    signal.send(m.seq());
                    let _ = gate.wait_for(|open| *open).await;
                    record.push(value(&m));
                }
            },
        )
        .unwrap();
    for value in 0..50 {
        bus.publish(Placed(value)).unwrap();
    }
    assert_eq!(started.next(), 0); // held at its first message, the rest queued
    let closer = bus.clone();
    let closing = std::thread::spawn(move || closer.close());
    support::until("the close began", || bus.is_closed());
    assert!(!bus.is_drained());
    open.send_replace(true);
    closing.join().unwrap();
    assert_eq!(seen.get(), (0..50).collect::<Vec<_>>());
    let stats = audit.stats();
    assert_eq!((stats.delivered, stats.queued, stats.dropped), (50, 0, 0));
}

/// A task publishing to a topic whose async observer's mailbox is full waits for room as a
/// task. On a current_thread runtime the observer's task runs on the same thread: a publish
/// that looked again at once, without yielding, would keep it from ever making room.
#[test]
fn publish_async_waits_as_a_task_for_a_full_async_observer_on_its_runtime() {
    let (done, finished) = std::sync::mpsc::channel();
    let _runtime_thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let bus = Bus::builder().build();
            let (_audit, seen) = recorder(&bus, "shop.*", Options::default().capacity(2));
            for value in 0..20 {
                bus.publish_async(Placed(value)).await.unwrap();
            }
            bus.close_async().await;
            done.send(seen.get()).unwrap();
        });
    });
    let seen = finished
        .recv_timeout(support::PATIENCE)
        .expect("every publish went through and the close ended");
    let values: Vec<u64> = seen.iter().map(|(_, _, value)| *value).collect();
    assert_eq!(values, (0..20).collect::<Vec<_>>());
}

/// A `publish_timeout_async` that cannot take an observer's turn, held by a publisher of
/// another topic (here in a filter, which runs with the turns of an all-or-nothing publish
/// taken), gives up at its deadline, not when the turn comes.
#[test]
fn publish_timeout_async_gives_up_at_its_deadline_while_an_observers_turn_is_held() {
    let runtime = runtime();
    let bus = bus_on(&runtime);
    let (_audit, _seen) = recorder(&bus, "shop.*", Options::default());
    let (inside, in_filter) = std::sync::mpsc::channel();
    let gate = support::Latch::new();
    let hold = gate.clone();
    let options = Options::default().filter(move |s: &Shipped| {
        if s.0 == 0 {
            let _ = inside.send(());
            hold.wait();
        }
        true
    });
    bus.subscribe::<Shipped>(options, |_: &eventbus::Message<Shipped>| {});
    let holder = {
        let bus = bus.clone();
        std::thread::spawn(move || bus.publish_timeout(Shipped(0), support::PATIENCE).is_ok())
    };
    in_filter.recv().unwrap();
    let (tell, told) = std::sync::mpsc::channel();
    let publisher = bus.clone();
    runtime.spawn(async move {
        let outcome = publisher
            .publish_timeout_async(Placed(1), Duration::from_millis(50))
            .await;
        let timed_out = matches!(
            outcome,
            Err(eventbus::PublishTimeoutError::Timeout(Placed(1)))
        );
        let _ = tell.send(timed_out);
    });
    let outcome = told.recv_timeout(support::PATIENCE);
    // Let go whatever happened, so that everything ends.
    gate.open();
    assert_eq!(
        outcome,
        Ok(true),
        "the publish gave up at its deadline while the turn was held"
    );
    assert!(holder.join().unwrap());
    bus.close();
}

/// A cycle through an observer's turn, awaited: a `publish_timeout` of one topic holds the
/// observer's turn while it waits for room in an async handler's full mailbox, and that
/// handler awaits a publish to another topic the observer sees. Refused with
/// `WouldDeadlock`, and the timed publish then goes through, not at its deadline.
#[test]
fn an_async_handler_awaiting_an_observers_turn_whose_holder_waits_for_it_gets_would_deadlock() {
    let runtime = runtime();
    let bus = bus_on(&runtime);
    let (_audit, _seen) = recorder(&bus, "shop.*", Options::default());
    let (options, in_filter) = support::capacity_one_telling_of_three(|s: &Shipped| s.0);
    let (started, go, outcomes) = (support::Signal::new(), support::Latch::new(), Seen::new());
    let (tell, gate, record, handle) = (started.clone(), go.clone(), outcomes.clone(), bus.clone());
    bus.subscribe_async::<Shipped, _, _, _>(options, move |m: eventbus::Message<Shipped>| {
        let (tell, gate, record, handle) =
            (tell.clone(), gate.clone(), record.clone(), handle.clone());
        async move {
            if m.0 == 1 {
                tell.send(1);
                tokio::task::spawn_blocking(move || gate.wait())
                    .await
                    .unwrap();
                let refused = matches!(
                    handle.publish_async(Placed(10)).await,
                    Err(eventbus::PublishError::WouldDeadlock(Placed(10)))
                );
                record.push(format!("refused: {refused}"));
            }
        }
    });
    let latches = (&started, &go);
    let outcomes = (&outcomes, "refused: true");
    support::a_timed_publish_held_up_by_the_handler(&bus, Shipped, latches, in_filter, outcomes);
}

/// An async handler awaiting a publish whose topic has two full observers, the second
/// waiting (its handler publishing) for that handler: the cycle is found at once, not once
/// the first observer has room (here never, until the test lets it go).
#[test]
fn an_async_handler_awaiting_room_in_two_full_observers_sees_a_cycle_through_the_second() {
    a_cycle_through_the_second_of_two_full_mailboxes(First::Observer);
}

/// The same where the first full mailbox is a subscriber's and the second an observer's: the
/// task records both, as a sync publish does, not the subscriber's alone.
#[test]
fn an_async_handler_awaiting_room_in_a_full_subscriber_sees_a_cycle_through_a_full_observer() {
    a_cycle_through_the_second_of_two_full_mailboxes(First::Subscriber);
}

/// Opens its latches when dropped.
struct OpenOnDrop<const N: usize>([support::Latch; N]);

impl<const N: usize> Drop for OpenOnDrop<N> {
    fn drop(&mut self) {
        self.0.iter().for_each(support::Latch::open);
    }
}

/// Whose mailbox of `shop.placed` is the first full one.
enum First {
    Observer,
    Subscriber,
}

/// An async handler H of `shop.shipped` (capacity 1, full) awaits `publish_async(Placed(10))`,
/// whose topic has two full `Block` mailboxes of capacity 1: the first (`first`) held by the
/// test, the second an observer whose handler publishes to `shop.shipped` and so waits for H.
/// At least one of the two waits is refused with `WouldDeadlock` (whichever walked the graph
/// second, or both): H's publish or the observer's, which report on one channel.
fn a_cycle_through_the_second_of_two_full_mailboxes(first: First) {
    let runtime = runtime();
    let bus = bus_on(&runtime);
    let (reached, hold) = (support::Signal::new(), support::Latch::new());
    let (report, heard) = std::sync::mpsc::channel::<String>();
    let (signal, gate) = (reached.clone(), hold.clone());
    let held = move |value: u64| {
        if value == 1 {
            signal.send(1);
            gate.wait();
        }
    };
    let options = Options::default().capacity(1);
    let _first = match first {
        First::Observer => bus
            .observe("shop.placed", options.clone(), move |m: &AnyMessage| {
                held(value(m))
            })
            .unwrap(),
        First::Subscriber => bus
            .subscribe(options.clone(), move |m: &eventbus::Message<Placed>| {
                held(m.0)
            }),
    };
    let (signal, handle, told) = (reached.clone(), bus.clone(), report.clone());
    let second = bus.observe("shop.placed", options.clone(), move |m: &AnyMessage| {
        if value(m) == 1 {
            signal.send(2);
            // Waits for room in H's full mailbox.
            let outcome = handle.publish(Shipped(3));
            let refused = matches!(outcome, Err(eventbus::PublishError::WouldDeadlock(_)));
            told.send(format!("observer refused: {refused}")).unwrap();
        }
    });
    let _second = second.unwrap();
    let (started, go) = (support::Signal::new(), support::Latch::new());
    // Whatever fails, both latches open before the runtime is dropped: it waits for H's
    // blocking wait.
    let _open_both = OpenOnDrop([go.clone(), hold.clone()]);
    let (tell, open, publisher) = (started.clone(), go.clone(), bus.clone());
    bus.subscribe_async::<Shipped, _, _, _>(options, move |m: eventbus::Message<Shipped>| {
        let (tell, open, publisher, told) = (
            tell.clone(),
            open.clone(),
            publisher.clone(),
            report.clone(),
        );
        async move {
            if m.0 == 1 {
                tell.send(1);
                tokio::task::spawn_blocking(move || open.wait())
                    .await
                    .unwrap();
                let outcome = publisher.publish_async(Placed(10)).await;
                let refused = matches!(outcome, Err(eventbus::PublishError::WouldDeadlock(_)));
                told.send(format!("handler refused: {refused}")).unwrap();
            }
        }
    });
    bus.publish(Shipped(1)).unwrap();
    assert_eq!(started.next(), 1);
    // H holds 1: this one fills its mailbox.
    bus.publish(Shipped(2)).unwrap();
    bus.publish(Placed(1)).unwrap();
    let mut seen = [reached.next(), reached.next()];
    seen.sort();
    assert_eq!(seen, [1, 2], "both are in their handlers");
    // Each holds 1: this one fills both mailboxes.
    bus.publish(Placed(2)).unwrap();
    go.open();
    let first_word = heard.recv_timeout(support::PATIENCE);
    hold.open();
    assert!(
        matches!(
            first_word.as_deref(),
            Ok("handler refused: true" | "observer refused: true")
        ),
        "the cycle was found before the first mailbox had room: {first_word:?}"
    );
    bus.close();
}

/// An async observer's handler awaiting a publish into a topic it observes, its own mailbox
/// full: refused with `WouldDeadlock`, never a task waiting for itself.
#[test]
fn an_async_observer_publishing_into_its_own_full_mailbox_gets_would_deadlock() {
    publishing_into_its_own_full_mailbox("shop.placed", Placed);
}

/// The same on a log topic: an async observer awaiting a publish into a log topic it
/// observes, its own mailbox full, is refused with `WouldDeadlock`, not left looking again.
#[test]
fn an_async_observer_publishing_into_a_log_topic_with_its_own_mailbox_full_gets_would_deadlock() {
    publishing_into_its_own_full_mailbox("bank.kept", Kept);
}

/// An async observer of `pattern` (capacity 1) whose handler, on the message `make(0)`,
/// awaits a publish of `make(1)` (which fits) and then of `make(2)` (which would wait on its
/// own mailbox): the second must come back `WouldDeadlock`.
fn publishing_into_its_own_full_mailbox<T>(pattern: &str, make: fn(u64) -> T)
where
    T: Topic + Copy + PartialEq + std::fmt::Debug,
{
    let runtime = runtime();
    let bus = bus_on(&runtime);
    let outcomes: Seen<String> = Seen::new();
    let (record, handle) = (outcomes.clone(), bus.clone());
    let (signal, done) = std::sync::mpsc::channel();
    let watch = bus
        .observe_async(
            pattern,
            Options::default().capacity(1),
            move |m: AnyMessage| {
                let (record, handle, signal) = (record.clone(), handle.clone(), signal.clone());
                async move {
                    if value(&m) == 0 {
                        // The mailbox is empty: this one fits; the next would wait on itself.
                        let fits = handle.publish_async(make(1)).await;
                        record.push(format!("{:?}", fits.map_err(|_| ())));
                        let refused = matches!(
                            handle.publish_async(make(2)).await,
                            Err(eventbus::PublishError::WouldDeadlock(m)) if m == make(2)
                        );
                        record.push(format!("refused: {refused}"));
                        signal.send(()).unwrap();
                    }
                }
            },
        )
        .unwrap();
    bus.publish(make(0)).unwrap();
    if done.recv_timeout(support::PATIENCE).is_err() {
        // A task that never yields keeps a runtime's drop waiting for it: leave both.
        std::mem::forget((bus, runtime));
        panic!("the handler's second publish never came back");
    }
    bus.close();
    assert_eq!(outcomes.get(), ["Ok(1)", "refused: true"]);
    let stats = watch.stats();
    assert_eq!((stats.received, stats.delivered, stats.dropped), (2, 2, 0));
}

#[test]
fn an_async_observer_needs_a_runtime_and_a_retry_if_of_its_error() {
    let bus = Bus::builder().build(); // no runtime here
    let error = bus
        .observe_async(
            "shop.*",
            Options::default().name("audit"),
            |_: AnyMessage| async {},
        )
        .unwrap_err();
    assert!(matches!(error, SubscribeError::NoRuntime { .. }), "{error}");
    let runtime = runtime();
    let bus = bus_on(&runtime);
    let wrong = Options::default().retry_if(|_: &std::io::Error| false);
    let error = bus
        .observe_async("shop.*", wrong, |_: AnyMessage| async {
            Err::<(), _>("no".to_owned())
        })
        .unwrap_err();
    assert!(
        matches!(
            error,
            SubscribeError::RetryIf {
                topic: "shop.*",
                ..
            }
        ),
        "{error}"
    );
    let error = bus
        .observe_async("shop..x", Options::default(), |_: AnyMessage| async {})
        .unwrap_err();
    assert!(matches!(error, SubscribeError::Pattern { .. }), "{error}");
    bus.close();
}

mod registered {
    use super::*;

    pub(super) static AUDITED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

    #[derive(Default)]
    pub(super) struct Tally(pub(super) AtomicU64);

    #[observer(
        "shop.*",
        capacity = 100,
        retries = 1,
        backoff = "1ms",
        name = "async_audit"
    )]
    async fn audit(m: &AnyMessage, tally: eventbus::State<Tally>, bus: &Bus) -> Result<(), String> {
        let _ = bus;
        tokio::task::yield_now().await;
        if tally.0.fetch_add(1, SeqCst) == 0 {
            return Err("first attempt fails".to_owned());
        }
        let line = format!("{} #{}: {:?}", m.topic(), m.seq(), m);
        AUDITED.lock().unwrap().push(line);
        Ok(())
    }

    pub(super) fn here() -> &'static str {
        module_path!()
    }
}

#[test]
fn an_async_observer_attribute_registers_an_async_observer() {
    let registered = Bus::registered();
    let audit = registered.iter().find(|s| s.name == "async_audit").unwrap();
    assert_eq!((audit.topic, audit.function), ("shop.*", "audit"));
    let runtime = runtime();
    runtime.block_on(async {
        let bus = Bus::builder()
            .state(registered::Tally::default())
            .registered_in(registered::here())
            .build();
        bus.publish_async(Placed(1)).await.unwrap();
        bus.publish_async(Shipped(2)).await.unwrap();
        bus.publish_async(Paid(3)).await.unwrap();
        bus.close_async().await;
        assert_eq!(
            *registered::AUDITED.lock().unwrap(),
            ["shop.placed #0: Placed(1)", "shop.shipped #0: Shipped(2)"]
        );
        let stats = bus.stats();
        let audit = &stats.subscriptions[0];
        assert_eq!(
            (audit.topic, audit.delivered, audit.retried),
            ("shop.*", 2, 1)
        );
    });
    // Without a runtime it cannot start, and says so before anything starts.
    let error = Bus::builder()
        .state(registered::Tally::default())
        .registered_in(registered::here())
        .try_build()
        .unwrap_err();
    assert!(error.to_string().contains("no tokio runtime"), "{error}");
}
