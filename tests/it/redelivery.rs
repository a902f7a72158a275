//! Redelivery where the features meet: a dead letter of an observer (whose messages are
//! `AnyMessage`s of many topics) and of a worker of a keyless group (which shares one
//! mailbox with the group's other workers) goes back to the subscriber that gave up on it.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;

use eventbus::{AnyMessage, Bus, DeadLetter, Message, Options, Topic};

#[derive(Topic, Debug, Clone, PartialEq)]
#[topic(name = "shop.charge")]
struct Charge(u32);

#[derive(Topic, Debug, Clone, PartialEq)]
#[topic(name = "shop.refund")]
struct Refund(u32);

#[derive(Topic, Debug, Clone, PartialEq)]
struct Job(u32);

/// A bus whose dead letters also arrive on the returned channel, as they are made.
fn bus_with_letters() -> (Bus, Receiver<DeadLetter>) {
    let (tx, rx) = channel();
    let bus = Bus::builder()
        .on_dead_letter(move |letter: &DeadLetter| {
            let _ = tx.send(letter.clone());
        })
        .build();
    (bus, rx)
}

#[test]
fn an_observers_dead_letter_goes_back_to_the_observer() {
    let (bus, letters) = bus_with_letters();
    let down = Arc::new(AtomicBool::new(true));
    let (seen_tx, seen) = channel();
    let audit = {
        let down = Arc::clone(&down);
        bus.observe(
            "shop.*",
            Options::default().name("audit"),
            move |m: &AnyMessage| {
                if down.load(SeqCst) {
                    return Err("down");
                }
                seen_tx.send((m.topic(), m.seq())).unwrap();
                Ok(())
            },
        )
        .unwrap()
    };
    bus.publish(Charge(7)).unwrap();
    let letter = letters.recv().unwrap();
    assert_eq!(
        (letter.topic(), letter.seq(), letter.subscriber()),
        ("shop.charge", 0, "audit")
    );
    // The value is there as the topic's own type, and as what the observer was handed.
    assert_eq!(letter.payload::<Charge>(), Some(&Charge(7)));
    assert_eq!(letter.message::<Charge>().map(Message::seq), Some(0));
    assert!(letter
        .payload::<AnyMessage>()
        .is_some_and(|m| m.is::<Charge>()));

    down.store(false, SeqCst);
    bus.redeliver(&letter).expect("the observer is subscribed");
    assert_eq!(
        seen.recv().unwrap(),
        ("shop.charge", 0),
        "the same message, its seq kept"
    );
    assert!(bus.dead_letters().is_empty());
    let stats = audit.unsubscribe();
    assert_eq!((stats.received, stats.delivered), (2, 1));
}

/// One observer's letters of two topics with the same seq are two letters: redelivering the
/// second hands back the second.
#[test]
fn an_observers_letters_of_two_topics_with_one_seq_are_told_apart() {
    let (bus, letters) = bus_with_letters();
    let down = Arc::new(AtomicBool::new(true));
    let (seen_tx, seen) = channel();
    let _audit = {
        let down = Arc::clone(&down);
        bus.observe(
            "shop.*",
            Options::default().name("audit"),
            move |m: &AnyMessage| {
                if down.load(SeqCst) {
                    return Err("down");
                }
                seen_tx
                    .send(format!("{} #{}: {m:?}", m.topic(), m.seq()))
                    .unwrap();
                Ok(())
            },
        )
        .unwrap()
    };
    bus.publish(Charge(1)).unwrap();
    bus.publish(Refund(2)).unwrap();
    let first = letters.recv().unwrap();
    let second = letters.recv().unwrap();
    assert_eq!((first.topic(), first.seq()), ("shop.charge", 0));
    assert_eq!((second.topic(), second.seq()), ("shop.refund", 0));

    down.store(false, SeqCst);
    bus.redeliver(&second).unwrap();
    assert_eq!(seen.recv().unwrap(), "shop.refund #0: Refund(2)");
    let kept = bus.dead_letters();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].payload::<Charge>(), Some(&Charge(1)));
    bus.redeliver(&first).unwrap();
    assert_eq!(seen.recv().unwrap(), "shop.charge #0: Charge(1)");
    bus.close();
}

#[test]
fn a_keyless_groups_dead_letter_goes_back_to_the_group() {
    let (bus, letters) = bus_with_letters();
    let down = Arc::new(AtomicBool::new(true));
    let (seen_tx, seen) = channel();
    let pool = {
        let down = Arc::clone(&down);
        let seen_tx = std::sync::Mutex::new(seen_tx);
        bus.subscribe_group::<Job>(
            Options::default().name("pool").workers(3),
            move |m: &Message<Job>| {
                if down.load(SeqCst) {
                    return Err("down");
                }
                seen_tx.lock().unwrap().send((m.seq(), m.0)).unwrap();
                Ok(())
            },
        )
    };
    bus.publish(Job(5)).unwrap();
    let letter = letters.recv().unwrap();
    assert_eq!((letter.seq(), letter.payload::<Job>()), (0, Some(&Job(5))));

    down.store(false, SeqCst);
    bus.redeliver(&letter).expect("the group is subscribed");
    assert_eq!(seen.recv().unwrap(), (0, 5));
    assert!(bus.dead_letters().is_empty());
    let stats = pool.unsubscribe();
    assert_eq!(
        (stats.received, stats.delivered, stats.dead_lettered),
        (2, 1, 1)
    );
}
