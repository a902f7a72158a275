//! Filters: checked at publish, before the mailbox; a rejected message takes no slot and is
//! counted as `filtered`, not `received`; a panicking filter breaks nothing and counts as a
//! drop; `#[subscriber(filter = ...)]` names a function.

use crate::support;

use eventbus::{subscriber, Bus, Message, Options, SubscribeError, Topic};
use support::{Latch, Seen, Signal};

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct Order {
    id: u64,
    cents: u64,
}

#[derive(Topic, Debug)]
struct Other;

fn is_big(o: &Order) -> bool {
    o.cents > 100_000
}

#[test]
fn a_rejected_message_takes_no_slot_and_counts_as_filtered() {
    let bus = Bus::builder().build();
    let release = Latch::new();
    let started = Signal::new();
    let seen = Seen::new();
    let (gate, signal, record) = (release.clone(), started.clone(), seen.clone());
    // A mailbox of one, its handler held: only a slot-free filter lets the small orders by.
    let review = bus.subscribe::<Order>(
        Options::default().capacity(1).filter(is_big),
        move |m: &Message<Order>| {
            if m.id == 0 {
                signal.send(0);
                gate.wait();
            }
            record.push(m.id);
        },
    );
    bus.publish(Order {
        id: 0,
        cents: 200_000,
    })
    .unwrap();
    assert_eq!(started.next(), 0);
    bus.publish(Order {
        id: 1,
        cents: 300_000,
    })
    .unwrap(); // fills the mailbox
    for id in 2..10 {
        // Rejected: publishing them never waits for the full mailbox.
        assert_eq!(bus.try_publish(Order { id, cents: 5 }).map(|_| ()), Ok(()));
    }
    release.open();
    let stats = review.unsubscribe();
    assert_eq!(seen.get(), [0, 1]);
    assert_eq!((stats.received, stats.filtered, stats.delivered), (2, 8, 2));
    assert_eq!(
        stats.received,
        stats.delivered + stats.dead_lettered + stats.dropped + stats.queued + stats.in_handler
    );
    bus.close();
}

#[test]
fn a_panicking_filter_breaks_neither_the_publish_nor_the_others() {
    let bus = Bus::builder().build();
    let filtered = Seen::new();
    let record = filtered.clone();
    let fussy = bus.subscribe::<Order>(
        Options::default().name("fussy").filter(|o: &Order| {
            assert!(o.id != 3, "the filter panics on order 3");
            true
        }),
        move |m: &Message<Order>| record.push(m.id),
    );
    let everything = Seen::new();
    let record = everything.clone();
    bus.subscribe::<Order>(Options::default(), move |m: &Message<Order>| {
        record.push(m.id)
    });
    for id in 0..5 {
        bus.publish(Order { id, cents: 1 }).unwrap();
    }
    let stats = fussy.unsubscribe();
    bus.close();
    assert_eq!(filtered.get(), [0, 1, 2, 4]);
    assert_eq!(everything.get(), [0, 1, 2, 3, 4]);
    assert_eq!((stats.received, stats.dropped, stats.delivered), (5, 1, 4));
}

#[test]
fn a_filter_for_another_topic_is_refused_at_subscribe() {
    let bus = Bus::builder().build();
    let error = bus
        .try_subscribe::<Other>(
            Options::default().name("x").filter(is_big),
            |_: &Message<Other>| {},
        )
        .unwrap_err();
    assert!(matches!(error, SubscribeError::Filter { .. }), "{error}");
    assert!(error.to_string().contains("its filter takes `&"), "{error}");
    bus.close();
}

#[derive(Topic, Debug)]
struct Big(u64);

fn big_enough(b: &Big) -> bool {
    b.0 >= 10
}

#[subscriber(filter = big_enough)]
fn only_big(b: &Big, seen: eventbus::State<Seen<u64>>) {
    seen.push(b.0);
}

#[test]
fn subscriber_filter_names_a_function() {
    let seen: Seen<u64> = Seen::new();
    let bus = Bus::builder()
        .state(seen.clone())
        .registered_in(module_path!())
        .build();
    for value in [1, 10, 5, 20] {
        bus.publish(Big(value)).unwrap();
    }
    bus.close();
    assert_eq!(seen.get(), [10, 20]);
    assert_eq!(bus.stats().subscriptions[0].filtered, 2);
}

#[derive(Topic, Debug)]
#[topic(retain = 16)]
struct Logged(u64);

#[test]
fn a_filter_on_a_log_topic_skips_what_it_rejects_in_order_and_counts_it() {
    let bus = Bus::builder().build();
    for n in 0..6 {
        bus.publish(Logged(n)).unwrap();
    }
    let seen = Seen::default();
    let record = seen.clone();
    // Replays the log's history through the filter, then the live messages.
    let subscription = bus.subscribe::<Logged>(
        Options::default()
            .name("evens")
            .start(eventbus::Start::Earliest)
            .filter(|l: &Logged| l.0 % 2 == 0),
        move |m: &Message<Logged>| record.push(m.0),
    );
    for n in 6..10 {
        bus.publish(Logged(n)).unwrap();
    }
    bus.close();
    assert_eq!(seen.get(), [0, 2, 4, 6, 8]);
    let stats = subscription.stats();
    assert_eq!((stats.filtered, stats.received, stats.delivered), (5, 5, 5));
    assert_eq!(
        stats.received,
        stats.delivered + stats.dead_lettered + stats.dropped + stats.queued + stats.in_handler
    );
}

#[test]
fn a_panicking_filter_on_a_log_topic_drops_that_message_only() {
    let bus = Bus::builder().build();
    let seen = Seen::default();
    let record = seen.clone();
    let subscription = bus.subscribe::<Logged>(
        Options::default().filter(|l: &Logged| {
            assert!(l.0 != 1, "the filter panics on 1");
            true
        }),
        move |m: &Message<Logged>| record.push(m.0),
    );
    for n in 0..3 {
        bus.publish(Logged(n)).unwrap();
    }
    bus.close();
    assert_eq!(seen.get(), [0, 2]);
    let stats = subscription.stats();
    assert_eq!((stats.received, stats.dropped, stats.delivered), (3, 1, 2));
}
