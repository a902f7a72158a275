//! The dead-letter store: bounded, counting what it discards, handing messages back; and a
//! dead letter's `source()`, the handler's error kept whole.

use std::error::Error;
use std::io;

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

/// Subscribers whose errors are, or are not, a `std::error::Error`.
pub mod sources {
    use std::error::Error;
    use std::fmt;
    use std::io;
    use std::rc::Rc;

    use eventbus::{subscriber, Topic};

    #[derive(Topic, Debug)]
    pub struct Refund;

    /// An error with a cause behind it.
    #[derive(Debug)]
    pub struct LedgerError(pub io::Error);

    impl fmt::Display for LedgerError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the ledger could not be written")
        }
    }

    impl Error for LedgerError {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    pub fn read_only() -> LedgerError {
        LedgerError(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "ledger.db is read-only",
        ))
    }

    #[subscriber(name = "ledger")]
    fn ledger(_: &Refund) -> Result<(), LedgerError> {
        Err(read_only())
    }

    #[subscriber(name = "text")]
    fn text(_: &Refund) -> Result<(), String> {
        Err("no room in the ledger".to_owned())
    }

    /// An error, but not `Send`: the dead letter, which crosses threads, keeps its text only.
    #[derive(Debug)]
    pub struct LocalError(Rc<str>);

    impl fmt::Display for LocalError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl Error for LocalError {}

    #[subscriber(name = "local")]
    fn local(_: &Refund) -> Result<(), LocalError> {
        Err(LocalError("a local error".into()))
    }
}

/// The dead letters of one `Refund`, by subscriber name.
fn refund_letters() -> Vec<eventbus::DeadLetter> {
    let bus = Bus::builder()
        .registered_in("dead_letters::sources")
        .build();
    bus.publish(sources::Refund).unwrap();
    bus.close();
    let mut letters = bus.dead_letters();
    letters.sort_by(|a, b| a.subscriber().cmp(b.subscriber()));
    letters
}

/// `letter`'s source is a `LedgerError` whose own source is the io error.
fn assert_ledger_chain(letter: &eventbus::DeadLetter) {
    assert_eq!(letter.error(), "the ledger could not be written");
    let source = Error::source(letter).expect("the dead letter keeps the handler's error");
    let ledger = source
        .downcast_ref::<sources::LedgerError>()
        .expect("the source is the handler's error");
    assert_eq!(ledger.0.kind(), io::ErrorKind::PermissionDenied);
    let io = source
        .source()
        .and_then(|cause| cause.downcast_ref::<io::Error>())
        .expect("the handler's error keeps its own source");
    assert_eq!(io.to_string(), "ledger.db is read-only");
}

#[test]
fn a_subscriber_returning_an_error_keeps_it_as_the_dead_letters_source() {
    let letters = refund_letters();
    let ledger = letters.iter().find(|l| l.subscriber() == "ledger").unwrap();
    assert_ledger_chain(ledger);
}

#[test]
fn a_dynamic_handler_returning_a_boxed_error_keeps_it_as_the_dead_letters_source() {
    let bus = Bus::builder().build();
    bus.subscribe::<sources::Refund>(
        Options::default().name("ledger"),
        |_: &Message<sources::Refund>| -> Result<(), Box<dyn Error + Send + Sync>> {
            Err(Box::new(sources::read_only()))
        },
    );
    bus.publish(sources::Refund).unwrap();
    bus.close();
    assert_ledger_chain(&bus.dead_letters()[0]);
}

#[test]
fn an_error_that_is_only_text_or_not_send_has_no_source() {
    let letters = refund_letters();
    for (name, text) in [
        ("local", "a local error"),
        ("text", "no room in the ledger"),
    ] {
        let letter = letters.iter().find(|l| l.subscriber() == name).unwrap();
        assert_eq!(letter.error(), text);
        assert!(Error::source(letter).is_none(), "{name}");
    }
}

/// A dead letter's message goes back to the subscriber that gave up on it, and to no one
/// else; the letter leaves the store; a second redelivery of it finds nothing.
#[test]
fn redeliver_hands_the_message_back_to_its_subscriber_alone() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let bus = Bus::builder().build();
    let fixed = Arc::new(AtomicBool::new(false));
    let (billing_tx, billing_rx) = std::sync::mpsc::channel();
    let (audit_tx, audit_rx) = std::sync::mpsc::channel();
    let billing = {
        let fixed = Arc::clone(&fixed);
        bus.subscribe::<Charge>(
            Options::default().name("billing"),
            move |m: &Message<Charge>| {
                if !fixed.load(Ordering::SeqCst) && m.account == 2 {
                    return Err("frozen");
                }
                billing_tx.send((m.seq(), m.account)).unwrap();
                Ok(())
            },
        )
    };
    let audit = bus.subscribe::<Charge>(
        Options::default().name("audit"),
        move |m: &Message<Charge>| audit_tx.send((m.seq(), m.account)).unwrap(),
    );
    for account in 1..=3 {
        bus.publish(Charge { account, cents: 10 }).unwrap();
    }
    assert_eq!(billing_rx.recv().unwrap(), (0, 1));
    assert_eq!(billing_rx.recv().unwrap(), (2, 3));
    let letter = bus.dead_letters().remove(0);
    assert_eq!((letter.seq(), letter.subscriber()), (1, "billing"));

    fixed.store(true, Ordering::SeqCst);
    bus.redeliver(&letter).unwrap();
    assert_eq!(
        billing_rx.recv().unwrap(),
        (1, 2),
        "the same message, its seq kept"
    );
    assert!(bus.dead_letters().is_empty());
    assert_eq!(
        bus.redeliver(&letter),
        Err(eventbus::RedeliverError::NotFound)
    );
    let billing = billing.unsubscribe();
    let audit = audit.unsubscribe();
    assert_eq!(audit.received, 3);
    assert_eq!(
        audit_rx.try_iter().collect::<Vec<_>>(),
        [(0, 1), (1, 2), (2, 3)],
        "the other subscriber saw each message once"
    );
    assert_eq!(
        (billing.received, billing.delivered, billing.dead_lettered),
        (4, 3, 1)
    );
    assert_eq!(
        bus.stats().topics[0].published,
        3,
        "nothing was published again"
    );
}

/// A refused redelivery leaves the letter in its place, and says why.
#[test]
fn a_refused_redelivery_keeps_the_letter_and_says_why() {
    #[derive(Topic, Debug)]
    #[topic(retain = 10)]
    struct Logged(u32);

    let bus = Bus::builder().build();
    let billing = bus
        .subscribe::<Charge>(Options::default().name("billing"), |_: &Message<Charge>| {
            Err::<(), _>("no")
        });
    for account in 0..3 {
        bus.publish(Charge { account, cents: 1 }).unwrap();
    }
    billing.unsubscribe();
    let letters = bus.dead_letters();
    let error = bus.redeliver(&letters[1]).unwrap_err();
    assert_eq!(
        error,
        eventbus::RedeliverError::Unsubscribed {
            subscriber: "billing".into(),
            topic: "Charge"
        }
    );
    assert!(
        error.to_string().contains("no longer subscribed"),
        "{error}"
    );
    let seqs: Vec<_> = bus.dead_letters().iter().map(|l| l.seq()).collect();
    assert_eq!(seqs, [0, 1, 2], "the letter is back in its place");

    let log = bus.subscribe::<Logged>(Options::default().name("reader"), |_: &Message<Logged>| {
        Err::<(), _>("no")
    });
    bus.publish(Logged(1)).unwrap();
    log.unsubscribe();
    let letter = bus.dead_letters().pop().unwrap();
    assert_eq!(letter.payload::<Logged>().map(|l| l.0), Some(1));
    assert_eq!(
        bus.redeliver(&letter),
        Err(eventbus::RedeliverError::LogTopic { topic: "Logged" })
    );
    bus.close();
    assert_eq!(
        bus.redeliver(&letters[0]),
        Err(eventbus::RedeliverError::Closed)
    );
    assert_eq!(bus.dead_letters().len(), 4);
}
