//! The dead-letter store: bounded, counting what it discards, handing messages back.

use eventbus::{Bus, BusBuilder, Message, Options, Topic};

#[derive(Topic, Debug, Clone, PartialEq)]
struct Charge {
    account: u32,
    cents: u64,
}

fn failing(bus: &Bus) {
    bus.subscribe::<Charge>(Options::default().name("billing"), |m: &Message<Charge>| {
        Err::<(), _>(format!("account {} is frozen", m.account))
    });
}

#[test]
fn the_store_keeps_the_newest_and_counts_what_it_discards() {
    let bus = Bus::builder().dead_letter_capacity(3).build();
    failing(&bus);
    for account in 0..5 {
        bus.publish(Charge {
            account,
            cents: 100,
        })
        .unwrap();
    }
    bus.close();
    let kept: Vec<_> = bus.dead_letters().iter().map(|l| l.seq()).collect();
    assert_eq!(kept, [2, 3, 4]);
    let stats = bus.stats();
    assert_eq!((stats.dead_letters, stats.dead_letters_discarded), (3, 2));
    assert_eq!(stats.subscriptions[0].dead_lettered, 5);
}

#[test]
fn dead_letters_can_be_taken_and_republished() {
    let bus = Bus::builder().build();
    failing(&bus);
    bus.publish(Charge {
        account: 7,
        cents: 250,
    })
    .unwrap();
    bus.close();

    let letters = bus.take_dead_letters();
    assert!(bus.dead_letters().is_empty());
    let letter = &letters[0];
    assert_eq!(
        letter.to_string(),
        "Charge #0 at billing after 1 attempt(s): account 7 is frozen"
    );
    let message = letter.message::<Charge>().unwrap();
    assert_eq!((message.seq(), message.topic()), (0, "Charge"));

    let fixed = Bus::builder().build();
    let (tx, rx) = crossbeam_channel::unbounded();
    fixed.subscribe::<Charge>(Options::default(), move |m: &Message<Charge>| {
        tx.send((**m).clone()).unwrap()
    });
    let charge = letter.payload::<Charge>().unwrap().clone();
    fixed.publish(charge).unwrap();
    fixed.close();
    assert_eq!(
        rx.try_iter().collect::<Vec<_>>(),
        [Charge {
            account: 7,
            cents: 250
        }]
    );
}

#[test]
fn a_store_of_zero_keeps_nothing_but_counts_everything() {
    let bus = Bus::builder().dead_letter_capacity(0).build();
    failing(&bus);
    bus.publish(Charge {
        account: 1,
        cents: 1,
    })
    .unwrap();
    bus.close();
    assert!(bus.dead_letters().is_empty());
    assert_eq!(bus.stats().dead_letters_discarded, 1);
}

#[test]
fn the_default_store_keeps_default_dead_letter_capacity() {
    let bus = Bus::builder().build();
    failing(&bus);
    let capacity = BusBuilder::DEFAULT_DEAD_LETTER_CAPACITY;
    assert_eq!(capacity, 10_000);
    for account in 0..=capacity as u32 {
        bus.publish(Charge { account, cents: 1 }).unwrap();
    }
    bus.close();
    let stats = bus.stats();
    assert_eq!(stats.dead_letters, capacity);
    assert_eq!(stats.dead_letters_discarded, 1);
    assert_eq!(bus.dead_letters()[0].seq(), 1);
}
