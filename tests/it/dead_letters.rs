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
        .registered_in(concat!(module_path!(), "::sources"))
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

/// A redelivery finds its topic wherever the directory keeps it: with more topics than its
/// fixed table holds, some live in the overflow map (before the fix, redelivering their
/// letters said `Unsubscribed`).
#[test]
fn redeliver_finds_topics_beyond_the_directorys_table() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc};

    macro_rules! many {
        ($($name:ident)*) => {
            $(
                #[derive(Topic, Debug)]
                struct $name;
            )*
            fn subscribe_all(bus: &Bus, fixed: &Arc<AtomicBool>, tx: &mpsc::Sender<&'static str>) {
                $(
                    let (done, sent) = (Arc::clone(fixed), tx.clone());
                    bus.subscribe::<$name>(
                        Options::default().name(stringify!($name)),
                        move |_: &Message<$name>| {
                            if !done.load(Ordering::SeqCst) {
                                return Err("not yet");
                            }
                            sent.send(stringify!($name)).unwrap();
                            Ok(())
                        },
                    );
                )*
            }
            fn publish_all(bus: &Bus) {
                $( bus.publish($name).unwrap(); )*
            }
            const COUNT: usize = [$(stringify!($name)),*].len();
        };
    }
    many!(M0 M1 M2 M3 M4 M5 M6 M7 M8 M9 M10 M11 M12 M13 M14 M15 M16 M17 M18 M19 M20 M21 M22 M23 M24 M25 M26 M27 M28 M29 M30 M31 M32 M33 M34 M35 M36 M37 M38 M39 M40 M41 M42 M43 M44 M45 M46 M47 M48 M49 M50 M51 M52 M53 M54 M55 M56 M57 M58 M59 M60 M61 M62 M63 M64 M65 M66 M67 M68 M69 M70 M71 M72 M73 M74 M75 M76 M77 M78 M79 M80 M81 M82 M83 M84 M85 M86 M87 M88 M89 M90 M91 M92 M93 M94 M95 M96 M97 M98 M99 M100 M101 M102 M103 M104 M105 M106 M107 M108 M109 M110 M111 M112 M113 M114 M115 M116 M117 M118 M119 M120 M121 M122 M123 M124 M125 M126 M127 M128 M129 M130 M131 M132 M133 M134 M135 M136 M137 M138 M139 M140 M141 M142 M143 M144 M145 M146 M147 M148 M149 M150 M151 M152 M153 M154 M155 M156 M157 M158 M159);

    let bus = Bus::builder().dead_letter_capacity(1000).build();
    let fixed = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    subscribe_all(&bus, &fixed, &tx);
    publish_all(&bus);
    // Each letter is stored when its handler gives up; nothing else says when all are.
    while bus.dead_letters().len() < COUNT {
        std::thread::yield_now();
    }
    let letters = bus.dead_letters();
    fixed.store(true, Ordering::SeqCst);
    let refused: Vec<_> = letters
        .iter()
        .filter_map(|letter| bus.redeliver(letter).err().map(|e| (letter.topic(), e)))
        .collect();
    assert!(refused.is_empty(), "refused: {refused:?}");
    let mut seen: Vec<_> = (0..COUNT).map(|_| rx.recv().unwrap()).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(
        seen.len(),
        COUNT,
        "each topic's subscriber got its message back"
    );
}

/// The subscriber whose mailbox fills up: `account` 0 fails the first time (its redelivery
/// is handled), 1 holds the handler until `go` is sent, and every handled account is sent to
/// `seen`.
fn held_billing(
    bus: &Bus,
    overflow: eventbus::Overflow,
) -> (
    std::sync::mpsc::Receiver<()>,
    std::sync::mpsc::Sender<()>,
    std::sync::mpsc::Receiver<u32>,
) {
    use std::sync::{mpsc, Mutex};
    let (entered_tx, entered_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = Mutex::new(go_rx);
    let (seen_tx, seen_rx) = mpsc::channel();
    let failed = std::sync::atomic::AtomicBool::new(false);
    bus.subscribe::<Charge>(
        Options::default()
            .name("billing")
            .capacity(1)
            .overflow(overflow),
        move |m: &Message<Charge>| {
            if m.account == 0 && !failed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return Err("frozen");
            }
            if m.account == 1 {
                entered_tx.send(()).unwrap();
                go_rx.lock().unwrap().recv().unwrap();
            }
            seen_tx.send(m.account).unwrap();
            Ok(())
        },
    );
    (entered_rx, go_tx, seen_rx)
}

/// A redelivery into a full mailbox is refused whatever the overflow policy: with
/// `DropNewest` it used to drop the message and delete the letter, with `DropOldest` to
/// evict a queued message, both while reporting success (this test failed before the fix).
#[test]
fn a_redelivery_to_a_full_dropping_mailbox_is_refused_and_keeps_the_letter() {
    for overflow in [
        eventbus::Overflow::DropNewest,
        eventbus::Overflow::DropOldest,
    ] {
        let bus = Bus::builder().build();
        let (entered, go, seen) = held_billing(&bus, overflow);
        bus.publish(Charge {
            account: 0,
            cents: 1,
        })
        .unwrap();
        // One at a time: a second publish into the mailbox of one could be dropped.
        while bus.dead_letters().is_empty() {
            std::thread::yield_now();
        }
        bus.publish(Charge {
            account: 1,
            cents: 1,
        })
        .unwrap();
        entered.recv().unwrap();
        let letter = bus.dead_letters().remove(0);
        assert_eq!(letter.seq(), 0);
        bus.publish(Charge {
            account: 2,
            cents: 1,
        })
        .unwrap();
        assert_eq!(
            bus.redeliver(&letter),
            Err(eventbus::RedeliverError::Full {
                subscriber: "billing".into()
            }),
            "{overflow:?}"
        );
        assert_eq!(
            bus.dead_letters().len(),
            1,
            "{overflow:?}: the letter stays"
        );
        go.send(()).unwrap();
        assert_eq!(seen.recv().unwrap(), 1);
        assert_eq!(seen.recv().unwrap(), 2, "{overflow:?}: nothing was evicted");
        // The worker has taken account 2: the mailbox has room again.
        bus.redeliver(&letter).unwrap();
        // Handled this time, so no letter is made again (one the worker made anew could beat
        // the check below).
        assert_eq!(seen.recv().unwrap(), 0, "{overflow:?}: redelivered");
        assert!(bus.dead_letters().is_empty());
        let stats = bus.stats();
        bus.close();
        assert_eq!(stats.topics[0].published, 3);
    }
}

/// A redelivery the subscription's filter now rejects is refused and the letter kept (it
/// used to count as redelivered and the letter was deleted: this test failed before the
/// fix).
#[test]
fn a_redelivery_its_filter_rejects_is_refused_and_keeps_the_letter() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc};

    let bus = Bus::builder().build();
    let rejecting = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let filter = {
        let rejecting = Arc::clone(&rejecting);
        move |c: &Charge| !(rejecting.load(Ordering::SeqCst) && c.account == 0)
    };
    bus.subscribe::<Charge>(
        Options::default().name("billing").filter(filter),
        move |m: &Message<Charge>| {
            if m.account == 0 {
                return Err("frozen");
            }
            tx.send(m.account).unwrap();
            Ok(())
        },
    );
    for account in 0..2 {
        bus.publish(Charge { account, cents: 1 }).unwrap();
    }
    assert_eq!(rx.recv().unwrap(), 1);
    let letter = bus.dead_letters().remove(0);
    rejecting.store(true, Ordering::SeqCst);
    let error = bus.redeliver(&letter).unwrap_err();
    assert_eq!(
        error,
        eventbus::RedeliverError::Rejected {
            subscriber: "billing".into()
        }
    );
    assert!(error.to_string().contains("filter"), "{error}");
    assert_eq!(bus.dead_letters().len(), 1, "the letter stays");
}

/// The dead-letter hook is shown a letter only once the store keeps it, so that what the
/// hook does with it (`Bus::redeliver`, `Bus::dead_letters`) finds it there. Before, the
/// hook's thread was handed the letter first, and a quick hook found it missing now and
/// then (`redeliver` said `NotFound`).
#[test]
fn the_hook_sees_a_letter_only_once_the_store_keeps_it() {
    const LETTERS: u32 = 500;
    let bus_for_hook = std::sync::Arc::new(std::sync::OnceLock::<Bus>::new());
    let (kept_tx, kept) = std::sync::mpsc::channel();
    let bus = {
        let bus_for_hook = bus_for_hook.clone();
        Bus::builder()
            .on_dead_letter(move |letter: &eventbus::DeadLetter| {
                let bus = bus_for_hook.get().expect("set before the first publish");
                let there = bus.dead_letters().iter().any(|l| l.seq() == letter.seq());
                let _ = kept_tx.send((letter.seq(), there));
            })
            .build()
    };
    assert!(bus_for_hook.set(bus.clone()).is_ok());
    failing(&bus);
    // One at a time: the hook's thread, just done with the last letter, takes the next one
    // the moment it is handed over, as a quick hook would.
    let mut missing = Vec::new();
    for account in 0..LETTERS {
        bus.publish(Charge { account, cents: 1 }).unwrap();
        let (seq, there) = kept.recv().unwrap();
        if !there {
            missing.push(seq);
        }
    }
    assert!(
        missing.is_empty(),
        "not kept yet when the hook saw them: {missing:?}"
    );
    bus.close();
}
