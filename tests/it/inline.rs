//! Inline subscribers: handlers that run inside the publish, on the publisher's thread, in the
//! topic's one order; a refusal (an `Err` or a panic) rejects the publish whole, hands the
//! message back and uses no seq; a synchronous cascade to other topics works, a publish back
//! to a topic whose handlers the thread runs is `WouldDeadlock`; options an inline
//! subscriber cannot take are refused.

use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use eventbus::{
    AnyMessage, Bus, Message, Options, Overflow, PublishError, PublishTimeoutError, Start,
    SubscribeError, Topic, TryPublishError,
};

use crate::support::{until, Latch, Seen, Signal};

#[derive(Topic, Debug, Clone, Copy, PartialEq, Eq)]
#[topic(name = "inline.transfer")]
struct Transfer {
    from: u64,
    cents: i64,
}

#[derive(Topic, Debug, Clone, Copy, PartialEq, Eq)]
#[topic(name = "inline.audit")]
struct Audit(u64);

#[derive(Topic, Debug, Clone, Copy, PartialEq, Eq)]
#[topic(name = "inline.kept", retain = 100)]
struct Kept(i64);

#[derive(Debug)]
struct OverLimit(i64);

impl std::fmt::Display for OverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} cents is over the limit", self.0)
    }
}

impl std::error::Error for OverLimit {}

/// A dynamic handler keeps its error whole (the `source()` of the refusal) when it is a
/// `Box<dyn Error + Send + Sync>`, as for any subscriber.
fn limit(m: &Message<Transfer>) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    if m.cents > 1_000 {
        return Err(Box::new(OverLimit(m.cents)));
    }
    Ok(())
}

#[test]
fn an_inline_handler_sees_the_topics_one_order_under_four_publishers() {
    let bus = Bus::builder().build();
    let inline = Seen::new();
    let queued = Seen::new();
    let (i, q) = (inline.clone(), queued.clone());
    let _inline =
        bus.subscribe_inline::<Transfer>(Options::default(), move |m: &Message<Transfer>| {
            i.push((m.seq(), m.from, m.cents));
        });
    let worker = bus.subscribe::<Transfer>(Options::default(), move |m: &Message<Transfer>| {
        q.push((m.seq(), m.from, m.cents));
    });
    let start = Arc::new(Barrier::new(4));
    let publishers: Vec<_> = (0..4u64)
        .map(|from| {
            let (bus, start) = (bus.clone(), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                for cents in 0..500 {
                    bus.publish(Transfer { from, cents }).unwrap();
                }
            })
        })
        .collect();
    for publisher in publishers {
        publisher.join().unwrap();
    }
    worker.unsubscribe();
    let inline = inline.get();
    assert_eq!(inline.len(), 2_000);
    // Numbered in the order the handler saw them, with no gap...
    assert!(inline
        .iter()
        .enumerate()
        .all(|(at, &(seq, ..))| seq == at as u64));
    // ...each publisher's in its own order...
    for from in 0..4 {
        let mine: Vec<_> = inline.iter().filter(|m| m.1 == from).map(|m| m.2).collect();
        assert_eq!(mine, (0..500).collect::<Vec<_>>());
    }
    // ...and the mailbox subscriber saw that same order.
    assert_eq!(queued.get(), inline);
}

#[test]
fn a_refusal_rejects_the_publish_whole_hands_the_message_back_and_uses_no_seq() {
    let bus = Bus::builder().build();
    let queued = Seen::new();
    let observed = Seen::new();
    let (q, o) = (queued.clone(), observed.clone());
    let limits = bus.subscribe_inline::<Transfer>(Options::default().name("limits"), limit);
    let worker = bus.subscribe::<Transfer>(Options::default(), move |m: &Message<Transfer>| {
        q.push((m.seq(), m.cents));
    });
    let watch = bus
        .observe("inline.*", Options::default(), move |m: &AnyMessage| {
            o.push((m.topic(), m.seq()));
        })
        .unwrap();
    assert_eq!(bus.publish(Transfer { from: 1, cents: 10 }), Ok(0));
    let refused = bus
        .publish(Transfer {
            from: 1,
            cents: 5_000,
        })
        .unwrap_err();
    let text = refused.to_string();
    assert!(text.contains("5000 cents is over the limit"), "{text}");
    assert!(text.contains("limits"), "{text}");
    let source = std::error::Error::source(&refused).expect("the handler's error");
    assert_eq!(source.to_string(), "5000 cents is over the limit");
    assert!(source.downcast_ref::<OverLimit>().is_some());
    let rejection = refused.rejection().unwrap();
    assert_eq!(rejection.subscriber(), "limits");
    assert!(matches!(refused, PublishError::Rejected { .. }));
    assert_eq!(
        refused.into_inner(),
        Transfer {
            from: 1,
            cents: 5_000
        }
    );
    // The next accepted message takes the refused one's seq.
    assert_eq!(bus.publish(Transfer { from: 1, cents: 20 }), Ok(1));
    worker.unsubscribe();
    watch.unsubscribe();
    assert_eq!(queued.get(), [(0, 10), (1, 20)]);
    assert_eq!(
        observed.get(),
        [("inline.transfer", 0), ("inline.transfer", 1)]
    );
    let stats = limits.unsubscribe();
    assert_eq!((stats.received, stats.delivered, stats.failed), (3, 2, 1));
    assert_eq!((stats.in_handler, stats.dead_lettered), (0, 0));
    assert_eq!(bus.stats().topics[0].published, 2);
    assert!(
        bus.dead_letters().is_empty(),
        "the publisher has it, not the store"
    );
}

#[test]
fn every_publish_form_is_rejected_with_the_message_back() {
    let bus = Bus::builder().build();
    let _limits = bus.subscribe_inline::<Transfer>(Options::default().name("limits"), limit);
    let big = Transfer {
        from: 2,
        cents: 7_000,
    };
    match bus.try_publish(big) {
        Err(TryPublishError::Rejected { message, rejection }) => {
            assert_eq!(message, big);
            assert_eq!(rejection.reason(), "7000 cents is over the limit");
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    match bus.publish_timeout(big, Duration::from_secs(5)) {
        Err(PublishTimeoutError::Rejected { message, .. }) => assert_eq!(message, big),
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert_eq!(bus.try_publish(Transfer { from: 2, cents: 1 }), Ok(0));
    assert_eq!(
        bus.publish_timeout(Transfer { from: 2, cents: 1 }, Duration::from_secs(5)),
        Ok(1)
    );
}

#[test]
fn a_panic_rejects_the_publish_and_the_handler_goes_on() {
    let bus = Bus::builder().build();
    let seen = Seen::new();
    let s = seen.clone();
    let sub = bus.subscribe_inline::<Transfer>(Options::default(), move |m: &Message<Transfer>| {
        if m.cents < 0 {
            panic!("negative amount {}", m.cents);
        }
        s.push(m.cents);
    });
    let refused = bus.publish(Transfer { from: 3, cents: -5 }).unwrap_err();
    assert!(
        refused.to_string().contains("panicked: negative amount -5"),
        "{refused}"
    );
    assert_eq!(refused.into_inner().cents, -5);
    assert_eq!(bus.publish(Transfer { from: 3, cents: 5 }), Ok(0));
    assert_eq!(seen.get(), [5]);
    let stats = sub.unsubscribe();
    assert_eq!((stats.received, stats.delivered, stats.failed), (2, 1, 1));
}

#[test]
fn inline_subscribers_run_in_the_order_they_subscribed_and_the_first_refusal_stops_the_rest() {
    let bus = Bus::builder().build();
    let calls = Seen::new();
    let (a, b) = (calls.clone(), calls.clone());
    bus.subscribe_inline::<Transfer>(Options::default(), move |m: &Message<Transfer>| {
        a.push(("first", m.cents));
        if m.cents % 2 == 1 {
            return Err("odd amounts are refused");
        }
        Ok(())
    });
    bus.subscribe_inline::<Transfer>(Options::default(), move |m: &Message<Transfer>| {
        b.push(("second", m.cents));
    });
    for cents in 0..4 {
        let _ = bus.publish(Transfer { from: 4, cents });
    }
    assert_eq!(
        calls.get(),
        [
            ("first", 0),
            ("second", 0),
            ("first", 1),
            ("first", 2),
            ("second", 2),
            ("first", 3)
        ]
    );
}

#[test]
fn an_inline_handler_may_publish_to_other_topics_in_a_synchronous_cascade() {
    let bus = Bus::builder().build();
    let audits = Seen::new();
    let a = audits.clone();
    let cascade = bus.clone();
    bus.subscribe_inline::<Transfer>(Options::default(), move |m: &Message<Transfer>| {
        cascade.publish(Audit(m.seq())).map(|_| ())
    });
    let (tx, rx) = mpsc::channel();
    bus.subscribe_inline::<Audit>(Options::default(), move |m: &Message<Audit>| {
        tx.send(m.0).unwrap();
    });
    let worker = bus.subscribe::<Audit>(Options::default(), move |m: &Message<Audit>| a.push(m.0));
    for cents in 0..3 {
        let seq = bus.publish(Transfer { from: 5, cents }).unwrap();
        // Ran before the publish returned: on this thread, inside it.
        assert_eq!(rx.try_recv(), Ok(seq));
    }
    worker.unsubscribe();
    assert_eq!(audits.get(), [0, 1, 2]);
}

#[test]
fn publishing_back_to_a_topic_whose_handlers_the_thread_runs_is_would_deadlock() {
    let bus = Bus::builder().build();
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let (own, outcome) = (bus.clone(), Arc::clone(&outcomes));
    bus.subscribe_inline::<Transfer>(Options::default(), move |m: &Message<Transfer>| {
        if m.cents == 1 {
            // Its own topic.
            let again = own.publish(Transfer { from: 6, cents: 2 });
            outcome
                .lock()
                .unwrap()
                .push(matches!(again, Err(PublishError::WouldDeadlock(_))));
            // Through another topic and back.
            let around = own.publish(Audit(1));
            outcome.lock().unwrap().push(around.is_ok());
        }
    });
    let (back, outcome) = (bus.clone(), Arc::clone(&outcomes));
    bus.subscribe_inline::<Audit>(Options::default(), move |_: &Message<Audit>| {
        let again = back.try_publish(Transfer { from: 6, cents: 3 });
        outcome
            .lock()
            .unwrap()
            .push(matches!(again, Err(TryPublishError::Full(_))));
        let timed = back.publish_timeout(Transfer { from: 6, cents: 4 }, Duration::from_secs(60));
        outcome
            .lock()
            .unwrap()
            .push(matches!(timed, Err(PublishTimeoutError::WouldDeadlock(_))));
    });
    assert_eq!(bus.publish(Transfer { from: 6, cents: 1 }), Ok(0));
    assert_eq!(*outcomes.lock().unwrap(), [true, true, true, true]);
    // Nothing was left holding the topic.
    assert_eq!(bus.publish(Transfer { from: 6, cents: 5 }), Ok(1));
}

#[test]
fn options_an_inline_subscriber_cannot_take_are_refused() {
    let bus = Bus::builder().build();
    let refused = [
        Options::default().workers(2),
        Options::default().workers(2).key(|t: &Transfer| t.from),
        Options::default().capacity(10),
        Options::default().overflow(Overflow::DropOldest),
        Options::default().retries(3),
        Options::default().start(Start::Earliest),
    ];
    for options in refused {
        let error = bus
            .try_subscribe_inline::<Transfer>(options.name("bad"), |_: &Message<Transfer>| {})
            .unwrap_err();
        assert!(matches!(error, SubscribeError::Inline { .. }), "{error:?}");
        assert!(error
            .to_string()
            .starts_with("inline subscriber `bad` of `inline.transfer`"));
    }
    // A filter is a subscriber's, inline or not: asked first.
    let seen = Seen::new();
    let s = seen.clone();
    bus.subscribe_inline::<Transfer>(
        Options::default().filter(|t: &Transfer| t.cents > 0),
        move |m: &Message<Transfer>| s.push(m.cents),
    );
    bus.publish(Transfer { from: 7, cents: 0 }).unwrap();
    bus.publish(Transfer { from: 7, cents: 9 }).unwrap();
    assert_eq!(seen.get(), [9]);
}

#[test]
fn after_unsubscribe_the_handler_is_never_called_and_is_dropped() {
    let bus = Bus::builder().build();
    let seen = Seen::new();
    let s = seen.clone();
    let held = Arc::new(());
    let mine = Arc::clone(&held);
    let sub = bus.subscribe_inline::<Transfer>(Options::default(), move |m: &Message<Transfer>| {
        let _ = &mine;
        s.push(m.cents);
    });
    bus.publish(Transfer { from: 8, cents: 1 }).unwrap();
    let stats = sub.unsubscribe();
    assert_eq!(stats.delivered, 1);
    assert_eq!(
        Arc::strong_count(&held),
        1,
        "the handler went with the subscription"
    );
    bus.publish(Transfer { from: 8, cents: 2 }).unwrap();
    assert_eq!(seen.get(), [1]);
}

#[test]
fn on_a_log_topic_a_refused_message_is_not_kept_and_uses_no_seq() {
    let bus = Bus::builder().build();
    bus.subscribe_inline::<Kept>(Options::default(), |m: &Message<Kept>| {
        if m.0 < 0 {
            return Err(format!("{} is negative", m.0));
        }
        Ok(())
    });
    for value in [1, -1, 2, -2, 3] {
        let _ = bus.publish(Kept(value));
    }
    let replay = Seen::new();
    let r = replay.clone();
    let reader = bus.subscribe::<Kept>(
        Options::default().start(Start::Earliest),
        move |m: &Message<Kept>| r.push((m.seq(), m.0)),
    );
    reader.unsubscribe();
    assert_eq!(replay.get(), [(0, 1), (1, 2), (2, 3)]);
}

/// A lending worker reads a log's messages in their cells, a run at a time. A message an
/// inline subscriber kept a reference to is kept beside the log (out of line): a run stops
/// before it, and it is taken from where it is kept. Every message reaches the worker once,
/// in order, with its own value; none is read from a cell that holds no value.
#[test]
fn a_lending_worker_reads_around_messages_an_inline_subscriber_kept() {
    let bus = Bus::builder().build();
    let kept = Arc::new(Mutex::new(Vec::new()));
    let k = Arc::clone(&kept);
    let _inline = bus.subscribe_inline::<Kept>(Options::default(), move |m: &Message<Kept>| {
        if m.0 % 3 == 2 {
            k.lock().unwrap().push(m.clone());
        }
        Ok::<(), String>(())
    });
    let (started, go, seen) = (Signal::new(), Latch::new(), Seen::new());
    let (st, g, s) = (started.clone(), go.clone(), seen.clone());
    let _reader = bus.subscribe::<Kept>(
        Options::default().capacity(64).overflow(Overflow::Block),
        move |m: &Message<Kept>| {
            if m.seq() == 0 {
                st.send(0);
                g.wait();
            }
            s.push((m.seq(), m.0));
        },
    );
    bus.publish(Kept(0)).unwrap();
    // The worker holds seq 0 while the rest are appended: its next run starts at seq 1, in
    // its cell, and seq 2 is out of line.
    started.next();
    for value in 1..40 {
        bus.publish(Kept(value)).unwrap();
    }
    go.open();
    until("the worker has read all 40", || seen.get().len() == 40);
    let expected: Vec<(u64, i64)> = (0..40).map(|v| (v as u64, v)).collect();
    assert_eq!(seen.get(), expected);
    assert_eq!(
        kept.lock().unwrap().len(),
        13,
        "seqs 2, 5, .., 38 kept out of line"
    );
}

#[test]
fn a_close_from_an_inline_handler_does_not_wait_for_its_own_publish() {
    let bus = Bus::builder().build();
    let closer = bus.clone();
    bus.subscribe_inline::<Transfer>(Options::default(), move |_: &Message<Transfer>| {
        closer.close();
    });
    assert_eq!(bus.publish(Transfer { from: 9, cents: 1 }), Ok(0));
    assert!(bus.is_closed());
    assert!(matches!(
        bus.publish(Transfer { from: 9, cents: 2 }),
        Err(PublishError::Closed(_))
    ));
}

mod registered {
    use eventbus::{subscriber, Bus, Message, PublishError, Topic};

    #[derive(Topic, Debug, PartialEq)]
    #[topic(name = "inline.registered.signup")]
    pub(super) struct Signup {
        pub(super) email: &'static str,
    }

    #[subscriber(inline, name = "emails")]
    fn has_an_at(m: &Message<Signup>, _bus: &Bus) -> Result<(), String> {
        if !m.email.contains('@') {
            return Err(format!("`{}` is not an email address", m.email));
        }
        Ok(())
    }

    #[test]
    fn a_registered_inline_subscriber_refuses_at_the_publish() {
        let bus = Bus::builder().registered_in(module_path!()).build();
        assert_eq!(bus.publish(Signup { email: "a@b.c" }), Ok(0));
        match bus.publish(Signup { email: "nobody" }) {
            Err(PublishError::Rejected { message, rejection }) => {
                assert_eq!(message, Signup { email: "nobody" });
                assert_eq!(rejection.subscriber(), "emails");
                assert_eq!(rejection.reason(), "`nobody` is not an email address");
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
        let stats = bus.stats();
        assert_eq!(stats.subscriptions[0].name, "emails");
        assert_eq!(stats.topics[0].published, 1);
    }
}

/// `publish_async` awaited inside an inline handler, to its own topic: `WouldDeadlock` at
/// once, as a sync publish gets, not a wait for a turn its own thread holds (which, with the
/// task waiting for a held turn, waited for good).
#[cfg(feature = "tokio")]
#[test]
fn an_inline_handler_awaiting_publish_async_to_its_own_topic_gets_would_deadlock() {
    let bus = Bus::builder().build();
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let (own, outcome) = (bus.clone(), Arc::clone(&outcomes));
    bus.subscribe_inline::<Transfer>(Options::default(), move |m: &Message<Transfer>| {
        if m.cents == 1 {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let again = runtime.block_on(
                own.publish_timeout_async(Transfer { from: 7, cents: 2 }, Duration::from_secs(60)),
            );
            outcome
                .lock()
                .unwrap()
                .push(matches!(again, Err(PublishTimeoutError::WouldDeadlock(_))));
        }
    });
    assert_eq!(bus.publish(Transfer { from: 7, cents: 1 }), Ok(0));
    assert_eq!(*outcomes.lock().unwrap(), [true]);
    bus.close();
}

/// An all-or-nothing publish takes its topic's observers' turns before its inline handlers
/// run; one of those handlers publishing to another topic the same observer sees would wait
/// for a turn its own thread holds. An all-or-nothing or a task's publish is refused with
/// `WouldDeadlock` (the message handed back), as a publish to the handler's own topic is, not
/// a wait that never ends (before, the timed one waited out its deadline); a plain publish,
/// numbered before it takes the turn, leaves the observer's copy out, counted as dropped. The
/// outer publish then goes through, and the observer sees it.
#[test]
fn an_inline_handler_publishing_to_a_topic_an_observer_shares_under_a_held_turn_is_would_deadlock()
{
    let bus = Bus::builder().build();
    let seen = Seen::new();
    let record = seen.clone();
    let audit = bus
        .observe("inline.*", Options::default(), move |m: &AnyMessage| {
            record.push(m.topic())
        })
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let cascade = bus.clone();
    bus.subscribe_inline::<Transfer>(Options::default(), move |m: &Message<Transfer>| {
        let nested = cascade.publish_timeout(Audit(m.seq()), Duration::from_secs(20));
        tx.send(matches!(
            nested,
            Err(PublishTimeoutError::WouldDeadlock(Audit(0)))
        ))
        .unwrap();
        // A plain publish from a thread outside the bus takes each turn at its hand-out,
        // numbered by then: the observer's copy is left out, counted as dropped.
        tx.send(cascade.publish(Audit(m.seq())) == Ok(0)).unwrap();
        // A task's publish tries the turn, and is refused the same way.
        #[cfg(feature = "tokio")]
        {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap();
            let nested = runtime
                .block_on(cascade.publish_timeout_async(Audit(m.seq()), Duration::from_secs(20)));
            tx.send(matches!(
                nested,
                Err(PublishTimeoutError::WouldDeadlock(Audit(0)))
            ))
            .unwrap();
        }
    });
    let outer = bus.publish_timeout(Transfer { from: 7, cents: 1 }, Duration::from_secs(20));
    assert_eq!(outer, Ok(0));
    assert_eq!(rx.try_recv(), Ok(true), "the nested publish was refused");
    assert_eq!(rx.try_recv(), Ok(true), "the plain one went through");
    #[cfg(feature = "tokio")]
    assert_eq!(
        rx.try_recv(),
        Ok(true),
        "the nested task's publish was refused"
    );
    let stats = audit.unsubscribe();
    assert_eq!((stats.received, stats.dropped), (2, 1), "{stats:?}");
    assert_eq!(seen.get(), ["inline.transfer"]);
}

#[derive(Topic, Debug, Clone, Copy, PartialEq, Eq)]
#[topic(name = "inline.dispatched", dispatcher)]
struct Dispatched(u64);

#[derive(Topic, Debug, Clone, Copy, PartialEq, Eq)]
#[topic(name = "inline.queued", dispatcher, queue = 1)]
struct Queued(u64);

/// How a test makes a topic's messages, and reads the number back.
type Made<T> = (fn(u64) -> T, fn(&T) -> u64);

/// A cycle through an inline handler's publish: a publish of `make(3)` runs its topic's
/// inline handler, whose publish of `nested(fill + 1)` waits: `fill` messages before it
/// filled a `Block` mailbox of capacity 1 (and, on a dispatcher topic with a queue of one,
/// the queue behind the dispatcher waiting at that mailbox). That mailbox's handler, on the
/// first, publishes `make(4)`, so it waits for the order lock (or the queue) the first
/// publish holds. Its wait leads back to it through the inline handler's: refused with
/// `WouldDeadlock` (before, the walk found nothing there, and its timed publish waited out
/// its deadline); then both publishes go through.
fn a_cycle_through_an_inline_handlers_publish<T: Topic + Clone + PartialEq, N: Topic>(
    (make, value): Made<T>,
    (nested, fill): (fn(u64) -> N, u64),
) {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

    let bus = Bus::builder().build();
    let (nesting, waiting) = mpsc::channel();
    let cascade = bus.clone();
    bus.subscribe_inline::<T>(Options::default(), move |m: &Message<T>| {
        if value(m) == 3 {
            nesting.send(()).unwrap();
            // Waits for room in the full mailbox (or queue) below.
            return cascade.publish(nested(fill + 1)).map(|_| ());
        }
        Ok(())
    });
    let (started, go, outcomes) = (Signal::new(), Latch::new(), Seen::<bool>::new());
    let (tell, gate, record, back) = (started.clone(), go.clone(), outcomes.clone(), bus.clone());
    let first = AtomicBool::new(true);
    let options = Options::default().capacity(1);
    let held = bus.subscribe::<N>(options, move |_: &Message<N>| {
        if first.swap(false, SeqCst) {
            tell.send(1);
            gate.wait();
            let timed = back.publish_timeout(make(4), Duration::from_secs(20));
            record.push(
                matches!(timed, Err(PublishTimeoutError::WouldDeadlock(back)) if back == make(4)),
            );
        }
    });
    assert!(bus.publish(nested(1)).is_ok());
    assert_eq!(started.next(), 1);
    // The handler holds 1: the next fills its mailbox (and the rest the dispatcher's hands
    // and its queue).
    for n in 2..=fill {
        assert!(bus.publish(nested(n)).is_ok());
    }
    let outer = {
        let bus = bus.clone();
        std::thread::spawn(move || bus.publish(make(3)).map_err(|e| e.to_string()))
    };
    waiting.recv().unwrap();
    go.open();
    // It waits for room in the handler's mailbox, so it ends after the handler's publish.
    let outer = outer.join().unwrap();
    assert!(outer.is_ok(), "the outer publish went through: {outer:?}");
    assert_eq!(outcomes.get(), [true], "the handler's publish was refused");
    bus.close();
    let stats = held.unsubscribe();
    assert_eq!(stats.delivered, fill + 1, "{stats:?}");
}

fn transfer(cents: u64) -> Transfer {
    Transfer {
        from: 8,
        cents: cents as i64,
    }
}

fn cents(m: &Transfer) -> u64 {
    m.cents as u64
}

fn kept(n: u64) -> Kept {
    Kept(n as i64)
}

fn kept_value(m: &Kept) -> u64 {
    m.0 as u64
}

fn dispatched_value(m: &Dispatched) -> u64 {
    m.0
}

#[test]
fn a_handler_waiting_for_a_topic_whose_inline_handler_waits_for_it_gets_would_deadlock() {
    a_cycle_through_an_inline_handlers_publish((transfer, cents), (Audit, 2));
}

#[test]
fn a_handler_waiting_for_a_log_topic_whose_inline_handler_waits_for_it_gets_would_deadlock() {
    a_cycle_through_an_inline_handlers_publish((kept, kept_value), (Audit, 2));
}

#[test]
fn a_handler_waiting_for_a_dispatcher_topic_whose_inline_handler_waits_for_it_gets_would_deadlock()
{
    a_cycle_through_an_inline_handlers_publish((Dispatched, dispatched_value), (Audit, 2));
}

/// The inline handler's publish is to a dispatcher topic whose queue is full behind its
/// dispatcher, which waits at the handler's mailbox.
#[test]
fn a_handler_waiting_for_a_topic_whose_inline_handler_waits_for_a_full_queue_gets_would_deadlock() {
    a_cycle_through_an_inline_handlers_publish((transfer, cents), (Queued, 4));
}
