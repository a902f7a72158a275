//! Observers: subscribers of every topic whose name matches a pattern, those made later
//! included, each topic's messages in that topic's order, with a mailbox, overflow, retries,
//! dead letters and stats like any subscriber; malformed patterns refused.

use crate::support;

use std::collections::HashMap;
use std::sync::Barrier;

use eventbus::{
    observer, AnyMessage, Bus, Message, Options, Overflow, SubscribeError, SubscriptionStats, Topic,
};
use support::{Latch, Seen, Signal};

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
#[topic(name = "orders.placed")]
struct Placed {
    id: u64,
}

#[derive(Topic, Debug)]
#[topic(name = "orders.shipped")]
#[allow(dead_code)] // read through `Debug`
struct Shipped(u64);

#[derive(Topic, Debug)]
#[topic(name = "orders.placed.eu")]
#[allow(dead_code)] // read through `Debug`
struct PlacedEu(u64);

#[derive(Topic, Debug)]
#[topic(name = "payments.card.declined")]
struct Declined(u64);

#[derive(Topic, Debug)]
#[topic(name = "payments.refunded")]
#[allow(dead_code)] // read through `Debug`
struct Refunded(u64);

/// No `Debug`.
#[derive(Topic)]
#[topic(name = "secrets.rotated")]
struct Rotated;

#[derive(Topic, Debug)]
#[topic(name = "ledger.entry", retain = 100)]
#[allow(dead_code)] // read through `Debug`
struct Entry(u64);

/// What an observer saw: (topic, seq).
fn recorder() -> (
    Seen<(&'static str, u64)>,
    impl FnMut(&AnyMessage) + Send + 'static,
) {
    let seen = Seen::new();
    let record = seen.clone();
    (seen, move |m: &AnyMessage| {
        record.push((m.topic(), m.seq()))
    })
}

fn identity_holds(s: &SubscriptionStats) {
    assert_eq!(
        s.received,
        s.delivered + s.dead_lettered + s.dropped + s.queued + s.in_handler,
        "{s:?}"
    );
}

#[test]
fn patterns_pick_topics_by_segment() {
    let bus = Bus::builder().build();
    let (orders, record) = recorder();
    let orders_sub = bus.observe("orders.*", Options::default(), record).unwrap();
    let (payments, record) = recorder();
    let payments_sub = bus
        .observe("payments.>", Options::default(), record)
        .unwrap();
    let (one, record) = recorder();
    let one_sub = bus
        .observe("orders.shipped", Options::default(), record)
        .unwrap();
    bus.publish(Placed { id: 1 }).unwrap();
    bus.publish(Shipped(1)).unwrap();
    bus.publish(PlacedEu(1)).unwrap();
    bus.publish(Declined(1)).unwrap();
    bus.publish(Refunded(1)).unwrap();
    bus.publish(Rotated).unwrap();
    for observer in [orders_sub, payments_sub, one_sub] {
        observer.unsubscribe();
    }
    assert_eq!(orders.get(), [("orders.placed", 0), ("orders.shipped", 0)]);
    assert_eq!(
        payments.get(),
        [("payments.card.declined", 0), ("payments.refunded", 0)]
    );
    assert_eq!(one.get(), [("orders.shipped", 0)]);
}

#[test]
fn malformed_patterns_are_refused() {
    let bus = Bus::builder().build();
    for bad in [
        "",
        "orders..x",
        "orders.>.x",
        ".orders",
        "orders.",
        "orders*",
    ] {
        let refused = bus.observe(bad, Options::default().name("audit"), |_: &AnyMessage| {});
        match refused {
            Err(SubscribeError::Pattern { name, pattern, why }) => {
                assert_eq!((name.as_str(), pattern.as_str()), ("audit", bad));
                assert!(!why.is_empty());
            }
            other => panic!("{bad:?} was not refused as a pattern: {other:?}"),
        }
    }
    let error = bus
        .observe("orders.>.x", Options::default(), |_: &AnyMessage| {})
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("`>` may only be its last segment"),
        "{error}"
    );
    let error = bus
        .observe(
            "orders.*",
            Options::default().workers(2),
            |_: &AnyMessage| {},
        )
        .unwrap_err();
    assert!(matches!(error, SubscribeError::Group { .. }), "{error}");
    assert!(bus.stats().subscriptions.is_empty());
    bus.close();
}

#[test]
fn an_observer_added_before_a_topics_first_publish_sees_it_from_the_start() {
    let bus = Bus::builder().build();
    let (seen, record) = recorder();
    // No `orders.*` topic exists yet.
    let audit = bus.observe("orders.*", Options::default(), record).unwrap();
    for id in 0..3 {
        bus.publish(Placed { id }).unwrap();
    }
    audit.unsubscribe();
    assert_eq!(
        seen.get(),
        [
            ("orders.placed", 0),
            ("orders.placed", 1),
            ("orders.placed", 2)
        ]
    );
}

#[test]
fn an_observer_added_after_a_topics_first_publish_sees_what_follows() {
    let bus = Bus::builder().build();
    for id in 0..3 {
        bus.publish(Placed { id }).unwrap();
    }
    let (seen, record) = recorder();
    let audit = bus
        .observe("orders.placed", Options::default(), record)
        .unwrap();
    for id in 3..5 {
        bus.publish(Placed { id }).unwrap();
    }
    audit.unsubscribe();
    assert_eq!(seen.get(), [("orders.placed", 3), ("orders.placed", 4)]);
}

/// Topics made while the observer is being added, by publishers already running: each
/// topic's messages reach the observer from some point on, every one once, none missed.
#[test]
fn adding_an_observer_while_topics_are_made_misses_and_doubles_nothing() {
    #[derive(Topic)]
    #[topic(name = "race.a")]
    struct A;
    #[derive(Topic)]
    #[topic(name = "race.b")]
    struct B;
    #[derive(Topic)]
    #[topic(name = "race.c")]
    struct C;
    for _ in 0..20 {
        let bus = Bus::builder().build();
        let start = Barrier::new(4);
        let (seen, record) = recorder();
        let last: HashMap<&str, u64> = std::thread::scope(|scope| {
            let publish = |name: &'static str, one: fn(&Bus) -> u64| {
                let (bus, start) = (&bus, &start);
                scope.spawn(move || {
                    start.wait();
                    let mut last = 0;
                    for _ in 0..200 {
                        last = one(bus);
                    }
                    (name, last)
                })
            };
            let publishers = [
                publish("race.a", |bus| bus.publish(A).unwrap()),
                publish("race.b", |bus| bus.publish(B).unwrap()),
                publish("race.c", |bus| bus.publish(C).unwrap()),
            ];
            start.wait();
            let audit = bus.observe("race.*", Options::default(), record).unwrap();
            let last = publishers.map(|p| p.join().unwrap()).into_iter().collect();
            audit.unsubscribe();
            last
        });
        let mut by_topic: HashMap<&str, Vec<u64>> = HashMap::new();
        for (topic, seq) in seen.get() {
            by_topic.entry(topic).or_default().push(seq);
        }
        for (topic, seqs) in by_topic {
            // A run of consecutive seqs ending at the topic's last message.
            let first = seqs[0];
            assert_eq!(
                seqs,
                (first..=last[topic]).collect::<Vec<_>>(),
                "{topic}: missed, doubled or out of order"
            );
        }
        bus.close();
    }
}

#[test]
fn an_observer_sees_each_topics_messages_in_that_topics_order() {
    let bus = Bus::builder().build();
    let (seen, record) = recorder();
    let audit = bus
        .observe(">", Options::default().capacity(8), record)
        .unwrap();
    let per_topic = 2_000;
    std::thread::scope(|scope| {
        let bus = &bus;
        scope.spawn(move || (0..per_topic).for_each(|id| drop(bus.publish(Placed { id }))));
        scope.spawn(move || (0..per_topic).for_each(|n| drop(bus.publish(Shipped(n)))));
        scope.spawn(move || (0..per_topic).for_each(|n| drop(bus.publish(Declined(n)))));
        scope.spawn(move || (0..per_topic).for_each(|n| drop(bus.publish(Refunded(n)))));
    });
    let stats = audit.unsubscribe();
    let mut by_topic: HashMap<&str, Vec<u64>> = HashMap::new();
    for (topic, seq) in seen.get() {
        by_topic.entry(topic).or_default().push(seq);
    }
    assert_eq!(by_topic.len(), 4);
    for (topic, seqs) in by_topic {
        assert_eq!(seqs, (0..per_topic).collect::<Vec<_>>(), "{topic}");
    }
    assert_eq!(
        (stats.received, stats.delivered),
        (4 * per_topic, 4 * per_topic)
    );
    assert_eq!(stats.topic, ">");
    identity_holds(&stats);
}

#[test]
fn an_observer_has_its_own_mailbox_and_overflow_policy() {
    let bus = Bus::builder().build();
    let release = Latch::new();
    let started = Signal::new();
    let seen: Seen<u64> = Seen::new();
    let (gate, signal, record) = (release.clone(), started.clone(), seen.clone());
    let audit = bus
        .observe(
            "orders.placed",
            Options::default()
                .capacity(2)
                .overflow(Overflow::DropOldest),
            move |m: &AnyMessage| {
                let id = m.downcast_ref::<Placed>().unwrap().id;
                if id == 0 {
                    signal.send(0);
                    gate.wait();
                }
                record.push(id);
            },
        )
        .unwrap();
    let plain: Seen<u64> = Seen::new();
    let plain_record = plain.clone();
    let subscriber = bus.subscribe::<Placed>(Options::default(), move |m: &Message<Placed>| {
        plain_record.push(m.id)
    });
    bus.publish(Placed { id: 0 }).unwrap();
    assert_eq!(started.next(), 0);
    for id in 1..6 {
        // Never waits: the observer drops its oldest; the subscriber is not held up.
        bus.try_publish(Placed { id }).unwrap();
    }
    release.open();
    let stats = audit.unsubscribe();
    subscriber.unsubscribe();
    assert_eq!(seen.get(), [0, 4, 5]);
    assert_eq!(plain.get(), [0, 1, 2, 3, 4, 5]);
    assert_eq!((stats.received, stats.dropped, stats.delivered), (6, 3, 3));
    identity_holds(&stats);
}

#[test]
fn a_failing_observer_retries_then_keeps_a_dead_letter() {
    let bus = Bus::builder().build();
    let audit = bus
        .observe(
            "payments.>",
            Options::default()
                .retries(2)
                .backoff(std::time::Duration::from_millis(1))
                .name("audit"),
            |m: &AnyMessage| match m.downcast_ref::<Declined>() {
                Some(Declined(7)) => Err("cannot write the audit log"),
                _ => Ok(()),
            },
        )
        .unwrap();
    bus.publish(Declined(1)).unwrap();
    bus.publish(Declined(7)).unwrap();
    bus.publish(Refunded(2)).unwrap();
    let stats = audit.unsubscribe();
    assert_eq!(
        (
            stats.delivered,
            stats.failed,
            stats.retried,
            stats.dead_lettered
        ),
        (2, 3, 2, 1)
    );
    identity_holds(&stats);
    let letters = bus.dead_letters();
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(
        (letter.subscriber(), letter.topic(), letter.seq()),
        ("audit", "payments.card.declined", 1)
    );
    assert_eq!(letter.error(), "cannot write the audit log");
    let kept = letter.payload::<AnyMessage>().unwrap();
    assert!(matches!(kept.downcast_ref::<Declined>(), Some(Declined(7))));
}

#[test]
fn any_message_shows_its_payload_when_it_can() {
    let bus = Bus::builder().build();
    let shown: Seen<String> = Seen::new();
    let record = shown.clone();
    let all = bus
        .observe(">", Options::default(), move |m: &AnyMessage| {
            record.push(format!("{} #{}: {:?}", m.topic(), m.seq(), m));
        })
        .unwrap();
    bus.publish(Placed { id: 3 }).unwrap();
    bus.publish(Rotated).unwrap();
    all.unsubscribe();
    assert_eq!(
        shown.get(),
        [
            "orders.placed #0: Placed { id: 3 }",
            "secrets.rotated #0: <Rotated>"
        ]
    );
}

#[test]
fn an_observer_sees_log_topics_too() {
    let bus = Bus::builder().build();
    let (seen, record) = recorder();
    let audit = bus.observe("ledger.*", Options::default(), record).unwrap();
    bus.publish(Entry(1)).unwrap();
    bus.publish(Entry(2)).unwrap();
    audit.unsubscribe();
    assert_eq!(seen.get(), [("ledger.entry", 0), ("ledger.entry", 1)]);
}

#[test]
fn an_unsubscribed_observer_sees_nothing_more_and_leaves_every_topic() {
    let bus = Bus::builder().build();
    let (seen, record) = recorder();
    let audit = bus.observe("orders.*", Options::default(), record).unwrap();
    bus.publish(Placed { id: 0 }).unwrap();
    let stats = audit.unsubscribe();
    assert_eq!(stats.delivered, 1);
    bus.publish(Placed { id: 1 }).unwrap();
    bus.publish(Shipped(1)).unwrap();
    assert_eq!(seen.get(), [("orders.placed", 0)]);
    assert!(bus.stats().subscriptions.is_empty());
    bus.close();
}

#[cfg(feature = "serde")]
#[test]
fn any_message_is_json_when_its_topic_is_serialize() {
    #[derive(Topic, serde::Serialize)]
    #[topic(name = "orders.json")]
    struct Json {
        id: u64,
    }
    let bus = Bus::builder().build();
    let json: Seen<Option<String>> = Seen::new();
    let record = json.clone();
    let all = bus
        .observe(">", Options::default(), move |m: &AnyMessage| {
            record.push(m.to_json().map(|v| v.unwrap().to_string()));
        })
        .unwrap();
    bus.publish(Json { id: 5 }).unwrap();
    bus.publish(Rotated).unwrap();
    all.unsubscribe();
    assert_eq!(json.get(), [Some(r#"{"id":5}"#.to_owned()), None]);
}

mod registered {
    use super::*;

    pub(super) static AUDITED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

    #[observer("orders.*", capacity = 1000, overflow = DropOldest, name = "audit")]
    fn audit(m: &AnyMessage) {
        let line = format!("{} #{}: {:?}", m.topic(), m.seq(), m);
        AUDITED.lock().unwrap().push(line);
    }
}

#[test]
fn an_observer_attribute_registers_an_observer() {
    let registered = Bus::registered();
    let audit = registered.iter().find(|s| s.name == "audit").unwrap();
    assert_eq!((audit.topic, audit.function), ("orders.*", "audit"));
    assert_eq!(
        audit.options,
        Options::default()
            .capacity(1000)
            .overflow(Overflow::DropOldest)
            .name("audit")
    );
    let bus = Bus::builder()
        .registered_in(concat!(module_path!(), "::registered"))
        .build();
    bus.publish(Placed { id: 1 }).unwrap();
    bus.publish(Shipped(2)).unwrap();
    bus.publish(Declined(3)).unwrap();
    bus.close();
    assert_eq!(
        *registered::AUDITED.lock().unwrap(),
        [
            "orders.placed #0: Placed { id: 1 }",
            "orders.shipped #0: Shipped(2)"
        ]
    );
    let stats = bus.stats();
    assert_eq!(stats.subscriptions[0].topic, "orders.*");
}

#[derive(Topic, Debug)]
#[topic(name = "loop.again")]
struct Again(u64);

/// An observer's handler publishing into a topic it observes, its own mailbox full: refused
/// with `WouldDeadlock` before anything is numbered, never a frozen bus.
#[test]
fn an_observer_publishing_into_its_own_full_mailbox_gets_would_deadlock() {
    let bus = Bus::builder().build();
    let outcomes: Seen<String> = Seen::new();
    let record = outcomes.clone();
    let handle = bus.clone();
    let done = Signal::new();
    let signal = done.clone();
    let watch = bus
        .observe(
            "loop.*",
            Options::default().capacity(1),
            move |m: &AnyMessage| {
                if m.downcast_ref::<Again>().map(|a| a.0) == Some(0) {
                    // The mailbox is empty: this one fits; the next would wait on itself.
                    record.push(format!("{:?}", handle.publish(Again(1)).map_err(|_| ())));
                    let refused = matches!(
                        handle.publish(Again(2)),
                        Err(eventbus::PublishError::WouldDeadlock(Again(2)))
                    );
                    record.push(format!("refused: {refused}"));
                    signal.send(0);
                }
            },
        )
        .unwrap();
    bus.publish(Again(0)).unwrap();
    assert_eq!(done.next(), 0);
    let stats = watch.unsubscribe();
    assert_eq!(outcomes.get(), ["Ok(1)", "refused: true"]);
    assert_eq!((stats.received, stats.delivered, stats.dropped), (2, 2, 0));
    assert_eq!(bus.stats().topics[0].published, 2);
    bus.close();
}

/// A cycle through an observer's turn: a `publish_timeout` of one topic holds the observer's
/// turn (an all-or-nothing publish takes it first) while it waits for room in a handler's
/// full mailbox, and that handler publishes to another topic the observer sees. The
/// handler's publish would wait for a turn whose holder waits for the handler: refused with
/// `WouldDeadlock`, and the timed publish then goes through, not at its deadline.
#[test]
fn a_handler_waiting_for_an_observers_turn_whose_holder_waits_for_it_gets_would_deadlock() {
    let bus = Bus::builder().build();
    let (_seen, record) = recorder();
    let _audit = bus.observe("orders.*", Options::default(), record).unwrap();
    let (options, in_filter) = support::capacity_one_telling_of_three(|s: &Shipped| s.0);
    let (started, go, outcomes) = (Signal::new(), Latch::new(), Seen::<String>::new());
    let (tell, gate, record, handle) = (started.clone(), go.clone(), outcomes.clone(), bus.clone());
    bus.subscribe::<Shipped>(options, move |m: &Message<Shipped>| {
        if m.0 == 1 {
            tell.send(1);
            gate.wait();
            let refused = matches!(
                handle.publish(Placed { id: 10 }),
                Err(eventbus::PublishError::WouldDeadlock(Placed { id: 10 }))
            );
            record.push(format!("refused: {refused}"));
        }
    });
    let latches = (&started, &go);
    let outcomes = (&outcomes, "refused: true");
    support::a_timed_publish_held_up_by_the_handler(&bus, Shipped, latches, in_filter, outcomes);
}

/// The same hold, and the handler unsubscribes the observer instead: the observer's worker,
/// retired, waits until no publisher can still be at its mailbox, and the timed publish
/// holding its turn is blocked on the handler's mailbox, so it will not be (it reads the
/// retired flag when it wakes). The unsubscribe ends, the handler returns, and the timed
/// publish goes through, not at its deadline. The observer has seen the two before it.
#[test]
fn a_handler_unsubscribing_an_observer_whose_turn_is_held_by_a_publish_waiting_for_it_goes_through()
{
    use std::sync::{Arc, Mutex};

    let bus = Bus::builder().build();
    let (seen, record) = recorder();
    let audit = bus.observe("orders.*", Options::default(), record).unwrap();
    let audit = Arc::new(Mutex::new(Some(audit)));
    let (options, in_filter) = support::capacity_one_telling_of_three(|s: &Shipped| s.0);
    let (started, go, outcomes) = (Signal::new(), Latch::new(), Seen::<String>::new());
    let (tell, gate, record, held) = (started.clone(), go.clone(), outcomes.clone(), audit);
    bus.subscribe::<Shipped>(options, move |m: &Message<Shipped>| {
        if m.0 == 1 {
            tell.send(1);
            gate.wait();
            let observer = held.lock().unwrap().take().unwrap();
            let stats = observer.unsubscribe();
            record.push(format!("unsubscribed, {} received", stats.received));
        }
    });
    let latches = (&started, &go);
    let outcomes = (&outcomes, "unsubscribed, 2 received");
    support::a_timed_publish_held_up_by_the_handler(&bus, Shipped, latches, in_filter, outcomes);
    let shipped = [("orders.shipped", 0), ("orders.shipped", 1)];
    assert_eq!(
        seen.get(),
        shipped,
        "the two published before the timed one"
    );
}

#[derive(Topic, Debug)]
#[topic(name = "shop.placed")]
struct ShopPlaced(#[allow(dead_code)] u64);

#[derive(Topic, Debug)]
#[topic(name = "shop.audit")]
struct ShopAudit(#[allow(dead_code)] u64);

/// A `Block` observer whose handler publishes into its own topics: each of its publishes is
/// either delivered to it or refused with `WouldDeadlock` (the message handed back), never
/// dropped while the publish says `Ok`. Issue 31, item 4 (200 publishes dropped 6 of the
/// observer's own, every one `Ok`). `EVENTBUS_TEST_ITERATIONS` sets the rounds.
#[test]
fn a_block_observers_own_cascade_is_delivered_or_refused_never_dropped() {
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    use std::sync::Arc;

    let rounds: u64 = std::env::var("EVENTBUS_TEST_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .map_or(5, |n: u64| (n / 4_000).max(1));
    for _ in 0..rounds {
        let bus = Bus::builder().build();
        let (accepted, refused, audits) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
        );
        let observer = {
            let (accepted, refused, audits) = (
                Arc::clone(&accepted),
                Arc::clone(&refused),
                Arc::clone(&audits),
            );
            let options = Options::default().name("cascade").capacity(2);
            // A handle of the application's: it publishes as the observer's handler all the
            // same (the handler is who runs on the worker), and `close` below ends it.
            let handle = bus.clone();
            bus.observe("shop.*", options, move |m: &AnyMessage| {
                if let Some(placed) = m.downcast_ref::<ShopPlaced>() {
                    match handle.publish(ShopAudit(placed.0)) {
                        Ok(_) => accepted.fetch_add(1, SeqCst),
                        Err(eventbus::PublishError::WouldDeadlock(_)) => {
                            refused.fetch_add(1, SeqCst)
                        }
                        Err(other) => panic!("{other}"),
                    };
                } else {
                    audits.fetch_add(1, SeqCst);
                }
            })
            .unwrap()
        };
        for i in 0..200 {
            bus.publish(ShopPlaced(i)).unwrap();
        }
        bus.close();
        let stats = observer.unsubscribe();
        assert_eq!(stats.dropped, 0, "{stats:?}");
        assert_eq!(accepted.load(SeqCst) + refused.load(SeqCst), 200);
        assert_eq!(audits.load(SeqCst), accepted.load(SeqCst), "{stats:?}");
        assert_eq!(stats.received, 200 + accepted.load(SeqCst));
        assert_eq!(stats.delivered, stats.received);
    }
}

#[derive(Topic, Debug)]
struct Gen<T: Send + Sync + std::fmt::Debug + 'static>(#[allow(dead_code)] T);

/// A generic topic is named with its type arguments, and observed by that name as written:
/// the `>` of `Gen<u8>` is a bracket there, not the wildcard (issue 31, item 8).
#[test]
fn a_generic_topic_is_observed_by_its_name() {
    let bus = Bus::builder().build();
    let seen = Seen::new();
    let record = seen.clone();
    let exact = bus
        .observe("Gen<u8>", Options::default(), move |m: &AnyMessage| {
            record.push(format!("{} {m:?}", m.topic()))
        })
        .unwrap();
    bus.publish(Gen(1_u8)).unwrap();
    bus.publish(Gen(2_u16)).unwrap();
    exact.unsubscribe();
    assert_eq!(seen.get(), ["Gen<u8> Gen(1)"]);
    assert!(bus
        .observe("orders>", Options::default(), |_: &AnyMessage| {})
        .is_err());
}

/// A `retry_if` written for another type than the observer's error would never be asked
/// (every failure retried): refused at `observe`, as at `subscribe`.
#[test]
fn an_observer_with_a_retry_if_for_another_type_is_refused() {
    let bus = Bus::builder().build();
    let wrong = Options::default().retry_if(|_: &std::io::Error| false);
    let error = bus
        .observe(
            "orders.*",
            wrong.clone().name("audit"),
            |_: &AnyMessage| -> Result<(), String> { Err("no".to_owned()) },
        )
        .unwrap_err();
    assert!(matches!(error, SubscribeError::RetryIf { .. }), "{error}");
    let text = error.to_string();
    assert!(
        text.contains("audit") && text.contains("orders.*"),
        "{text}"
    );
    assert!(
        text.contains("io::error::Error") && text.contains("String"),
        "{text}"
    );
    // A handler that cannot fail has no error to ask about.
    let error = bus
        .observe("orders.*", wrong, |_: &AnyMessage| {})
        .unwrap_err();
    assert!(
        matches!(error, SubscribeError::RetryIf { error: "()", .. }),
        "{error}"
    );
    // One written for the handler's error is kept, and asked.
    let asked = Options::default()
        .retries(3)
        .backoff(std::time::Duration::ZERO)
        .retry_if(|e: &String| e != "permanent");
    let attempts = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = std::sync::Arc::clone(&attempts);
    let audit = bus
        .observe(
            "orders.*",
            asked,
            move |_: &AnyMessage| -> Result<(), String> {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Err("permanent".to_owned())
            },
        )
        .unwrap();
    bus.publish(Placed { id: 1 }).unwrap();
    bus.close();
    assert_eq!(attempts.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(audit.stats().dead_lettered, 1);
}
