//! Dispatcher topics (`#[topic(dispatcher, queue = N)]`): a publish adds to the topic's
//! bounded queue and returns, and one dispatcher hands the queue out in order. Publishers go
//! while a `Block` subscriber is stuck; a full queue is their backpressure (`Full`,
//! `Timeout`, a wait); every subscriber sees one order under many publishers; a close
//! drains the queue then the mailboxes, a forced close makes what is queued dead letters; a
//! handler whose wait would lead back to itself is `WouldDeadlock`. Inline subscribers run
//! in the publish before the message is queued: in the one order, a refusal queuing nothing
//! and taking no seq, a full queue refusing before they run.

use std::sync::{Arc, Barrier};

use eventbus::{
    Bus, Message, Options, Overflow, PublishError, PublishTimeoutError, Topic, TryPublishError,
};

use crate::support::{until, Latch, Seen, Signal};

#[derive(Topic, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[topic(name = "dispatch.tick", dispatcher)]
struct Tick(u64);

#[derive(Topic, Debug, Clone, Copy, PartialEq, Eq)]
#[topic(name = "dispatch.small", dispatcher, queue = 4)]
struct Small(u64);

#[derive(Topic, Debug, Clone, Copy, PartialEq, Eq)]
#[topic(name = "dispatch.one", dispatcher, queue = 1)]
struct One(u64);

/// Three topics whose dispatchers its handlers' publishes wait on, in a ring.
#[derive(Topic, Debug, Clone, Copy, PartialEq, Eq)]
#[topic(name = "dispatch.first", dispatcher, queue = 1)]
struct First(u64);

#[derive(Topic, Debug, Clone, Copy, PartialEq, Eq)]
#[topic(name = "dispatch.second", dispatcher, queue = 1)]
struct Second(u64);

#[derive(Topic, Debug, Clone, Copy, PartialEq, Eq)]
#[topic(name = "dispatch.third", dispatcher, queue = 1)]
struct Third(u64);

#[derive(Topic, Debug, Clone, Copy, PartialEq, Eq)]
#[topic(name = "dispatch.plain")]
struct Plain(u64);

/// A `Block` subscriber of capacity 1 whose handler signals each message it starts and then
/// waits for `latch`; its messages in `seen`.
fn stuck<T: Topic + Copy>(
    bus: &Bus,
    latch: &Latch,
    seen: &Seen<T>,
    started: &Signal,
) -> eventbus::Subscription {
    let (latch, seen, started) = (latch.clone(), seen.clone(), started.clone());
    let options = Options::default().capacity(1).overflow(Overflow::Block);
    bus.subscribe::<T>(options, move |m: &Message<T>| {
        started.send(m.seq());
        latch.wait();
        seen.push(*m.payload());
    })
}

/// The topic's queue depth, as `stats()` shows it.
fn depth(bus: &Bus, topic: &str) -> Option<usize> {
    let stats = bus.stats();
    let topic = stats.topics.iter().find(|t| t.name == topic)?;
    topic.queue_depth
}

/// The messages the topic's dispatcher has finished handing out, as `stats()` shows them.
fn handed_out(bus: &Bus, topic: &str) -> Option<u64> {
    let stats = bus.stats();
    let topic = stats.topics.iter().find(|t| t.name == topic)?;
    topic.handed_out
}

/// Publishes 0, 1 and 2 to a topic whose one subscriber holds its first message until told
/// (`stuck`, capacity 1), and returns once the dispatcher waits at that full mailbox with 2:
/// the queue is then empty, and each later publish stays in it.
fn hold_the_dispatcher<T: Topic + Copy + std::fmt::Debug>(
    bus: &Bus,
    started: &Signal,
    make: fn(u64) -> T,
) {
    bus.publish(make(0)).unwrap();
    started.next();
    bus.publish(make(1)).unwrap();
    bus.publish(make(2)).unwrap();
    until("the dispatcher waits at the full mailbox", || {
        depth(bus, T::name()) == Some(0)
    });
}

#[test]
fn publishers_go_on_while_a_block_subscriber_is_stuck() {
    let bus = Bus::builder().build();
    let (latch, seen, started) = (Latch::new(), Seen::new(), Signal::new());
    let _stuck = stuck::<Tick>(&bus, &latch, &seen, &started);
    bus.publish(Tick(0)).unwrap();
    started.next();
    // One in the mailbox, one held by the dispatcher at the full mailbox.
    bus.publish(Tick(1)).unwrap();
    bus.publish(Tick(2)).unwrap();
    until("the dispatcher waits at the full mailbox", || {
        depth(&bus, "dispatch.tick") == Some(0)
    });
    // 0 and 1 are handed out; 2 is being handed out, so not counted yet.
    assert_eq!(handed_out(&bus, "dispatch.tick"), Some(2));
    // Without a dispatcher each of these would be refused: a `Block` mailbox is full.
    for n in 3..100 {
        assert_eq!(bus.try_publish(Tick(n)).map_err(|e| e.to_string()), Ok(n));
    }
    assert_eq!(depth(&bus, "dispatch.tick"), Some(97));
    latch.open();
    bus.wait_idle();
    assert_eq!(seen.get(), (0..100).map(Tick).collect::<Vec<_>>());
    assert_eq!(depth(&bus, "dispatch.tick"), Some(0));
    assert_eq!(handed_out(&bus, "dispatch.tick"), Some(100));
}

#[test]
fn a_full_queue_is_the_publishers_backpressure() {
    let bus = Bus::builder().build();
    let (latch, seen, started) = (Latch::new(), Seen::new(), Signal::new());
    let _stuck = stuck::<Small>(&bus, &latch, &seen, &started);
    hold_the_dispatcher(&bus, &started, Small);
    for n in 3..7 {
        bus.try_publish(Small(n)).unwrap();
    }
    let stats = bus.stats();
    let small = stats.topics.iter().find(|t| t.name == "dispatch.small");
    let small = small.expect("the topic is in the stats");
    assert_eq!(
        (small.queue_depth, small.queue_capacity),
        (Some(4), Some(4))
    );
    assert_eq!(small.published, 7);
    match bus.try_publish(Small(7)) {
        Err(TryPublishError::Full(Small(7))) => {}
        other => panic!("expected Full with the message back, got {other:?}"),
    }
    let short = std::time::Duration::from_millis(20);
    match bus.publish_timeout(Small(7), short) {
        Err(PublishTimeoutError::Timeout(Small(7))) => {}
        other => panic!("expected Timeout with the message back, got {other:?}"),
    }
    // Refused publishes used no seq.
    let blocked = {
        let bus = bus.clone();
        std::thread::spawn(move || bus.publish(Small(7)))
    };
    latch.open();
    assert_eq!(blocked.join().unwrap().unwrap(), 7);
    bus.wait_idle();
    assert_eq!(seen.get(), (0..8).map(Small).collect::<Vec<_>>());
    // A topic without a dispatcher shows no queue.
    bus.publish(Plain(0)).unwrap();
    let stats = bus.stats();
    let plain = stats
        .topics
        .iter()
        .find(|t| t.name == "dispatch.plain")
        .unwrap();
    assert_eq!(
        (plain.queue_depth, plain.queue_capacity, plain.handed_out),
        (None, None, None)
    );
}

#[test]
fn every_subscriber_sees_one_order_under_four_publishers() {
    let bus = Bus::builder().build();
    let seen: Vec<Seen<(u64, Tick)>> = (0..3).map(|_| Seen::new()).collect();
    let _subscriptions: Vec<_> = seen
        .iter()
        .enumerate()
        .map(|(i, seen)| {
            let seen = seen.clone();
            // Small mailboxes: the dispatcher waits at them often.
            let options = Options::default().capacity(1 + i * 7);
            bus.subscribe::<Tick>(options, move |m: &Message<Tick>| {
                seen.push((m.seq(), *m.payload()));
            })
        })
        .collect();
    let published = publish_from_four_threads(&bus);
    bus.wait_idle();
    // Each seq once, 0..2000, and each publisher's messages in the order it published them.
    assert_eq!(
        published.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(),
        (0..2_000).collect::<Vec<_>>()
    );
    for p in 0..4 {
        let mine: Vec<_> = published
            .iter()
            .filter(|(_, t)| t.0 / 1_000 == p)
            .map(|(_, t)| t.0 % 1_000)
            .collect();
        assert_eq!(mine, (0..500).collect::<Vec<_>>());
    }
    // Every subscriber saw exactly that: the seq order, with the payload each seq was given.
    for seen in &seen {
        assert_eq!(seen.get(), published);
    }
}

#[test]
fn close_drains_the_queue_then_the_mailboxes() {
    let bus = Bus::builder().build();
    let (latch, seen, started) = (Latch::new(), Seen::new(), Signal::new());
    let subscription = stuck::<Tick>(&bus, &latch, &seen, &started);
    bus.publish(Tick(0)).unwrap();
    started.next();
    for n in 1..50 {
        bus.publish(Tick(n)).unwrap();
    }
    let closing = {
        let bus = bus.clone();
        std::thread::spawn(move || bus.close())
    };
    until("the close has begun", || bus.publish(Plain(0)).is_err());
    latch.open();
    closing.join().unwrap();
    assert_eq!(seen.get(), (0..50).map(Tick).collect::<Vec<_>>());
    assert_eq!(subscription.stats().delivered, 50);
    assert_eq!(depth(&bus, "dispatch.tick"), Some(0));
}

#[test]
fn a_forced_close_makes_the_queued_messages_dead_letters() {
    let bus = Bus::builder().build();
    let (latch, seen, started) = (Latch::new(), Seen::new(), Signal::new());
    let subscription = stuck::<Tick>(&bus, &latch, &seen, &started);
    hold_the_dispatcher(&bus, &started, Tick);
    for n in 3..10 {
        bus.publish(Tick(n)).unwrap();
    }
    let report = bus.close_timeout(std::time::Duration::from_millis(50));
    assert!(!report.completed);
    // Read right after the close returned: final.
    let letters = bus.take_dead_letters();
    let mut kept: Vec<u64> = letters
        .iter()
        .map(|letter| letter.message::<Tick>().expect("a Tick").payload().0)
        .collect();
    kept.sort();
    // 1 was in the mailbox, 3..10 in the queue: each a dead letter, never attempted. 2 was in
    // the dispatcher's hands at the full mailbox: the stop ends that wait (counted as dropped),
    // unless the mailbox's close-out made room first (then it is the mailbox's, below).
    kept.retain(|&n| n != 2);
    assert_eq!(kept, [1, 3, 4, 5, 6, 7, 8, 9]);
    assert!(letters.iter().all(|letter| letter.attempts() == 0));
    latch.open();
    until("the stuck handler finished", || {
        subscription.stats().delivered == 1
    });
    until("every message has its outcome", || {
        let stats = subscription.stats();
        stats.received == 10
            && stats.received == stats.delivered + stats.dead_lettered + stats.dropped
    });
}

/// How long the filter below holds a thread to widen the window between the dispatcher
/// taking a queued message and the close taking the rest. Not a synchronisation: the test
/// passes or fails the same when it runs out; it only gives the race time to show.
const WINDOW: std::time::Duration = std::time::Duration::from_millis(300);

#[test]
fn a_forced_close_returns_with_no_queued_message_in_the_dispatchers_hands() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let bus = Bus::builder().build();
    let (latch, started) = (Latch::new(), Signal::new());
    let closer = std::thread::current().id();
    let closing = Arc::new(AtomicBool::new(false));
    let (first_for_closer, first_for_dispatcher) = (
        Arc::new(AtomicBool::new(true)),
        Arc::new(AtomicBool::new(true)),
    );
    // The dispatcher, woken by the stop, says when it holds a queued message; the close
    // returned, says the test.
    let (took, dispatcher_took) = crossbeam_channel::bounded::<()>(1);
    let (returned, close_returned) = crossbeam_channel::bounded::<()>(1);
    // A filter is asked for each queued message a forced close abandons, on the thread that
    // abandons it: the first the close takes waits until the dispatcher has taken one too,
    // and the dispatcher's waits until the close has returned.
    let filter = {
        let closing = Arc::clone(&closing);
        move |_: &Tick| {
            if !closing.load(SeqCst) {
                return true;
            }
            if std::thread::current().id() == closer {
                if first_for_closer.swap(false, SeqCst) {
                    let _ = dispatcher_took.recv_timeout(WINDOW);
                }
            } else if first_for_dispatcher.swap(false, SeqCst) {
                let _ = took.try_send(());
                let _ = close_returned.recv_timeout(WINDOW);
            }
            true
        }
    };
    let options = Options::default()
        .capacity(1)
        .overflow(Overflow::Block)
        .filter(filter);
    let subscription = {
        let (latch, started) = (latch.clone(), started.clone());
        bus.subscribe::<Tick>(options, move |m: &Message<Tick>| {
            started.send(m.seq());
            latch.wait();
        })
    };
    hold_the_dispatcher(&bus, &started, Tick);
    for n in 3..10 {
        bus.publish(Tick(n)).unwrap();
    }
    closing.store(true, SeqCst);
    let report = bus.close_timeout(std::time::Duration::from_millis(20));
    // Read right after the close returned: final.
    let letters = bus.take_dead_letters();
    let _ = returned.try_send(());
    assert!(!report.completed);
    let mut kept: Vec<u64> = letters
        .iter()
        .map(|letter| letter.message::<Tick>().expect("a Tick").payload().0)
        .collect();
    kept.sort();
    // 2, in the dispatcher's hands at the stop, may be either (see the test above).
    kept.retain(|&n| n != 2);
    assert_eq!(kept, [1, 3, 4, 5, 6, 7, 8, 9]);
    latch.open();
    until("every message has its outcome", || {
        let stats = subscription.stats();
        stats.received == 10
            && stats.received == stats.delivered + stats.dead_lettered + stats.dropped
    });
}

#[test]
fn a_handler_whose_publish_would_wait_on_itself_is_refused() {
    let bus = Bus::builder().build();
    let (latch, started) = (Latch::new(), Signal::new());
    let (tx, rx) = crossbeam_channel::unbounded();
    let options = Options::default().capacity(1).overflow(Overflow::Block);
    let _cascading = {
        let (latch, started, bus) = (latch.clone(), started.clone(), bus.clone());
        bus.clone()
            .subscribe::<One>(options, move |m: &Message<One>| {
                if m.0 == 0 {
                    started.send(m.seq());
                    latch.wait();
                    // Its own mailbox is full, the dispatcher waits at it, and the queue is full:
                    // waiting for room would never end.
                    let _ = tx.send(bus.publish(One(100)).map_err(|e| match e {
                        PublishError::WouldDeadlock(One(100)) => "would deadlock",
                        _ => "something else",
                    }));
                }
            })
    };
    hold_the_dispatcher(&bus, &started, One);
    bus.publish(One(3)).unwrap();
    assert_eq!(depth(&bus, "dispatch.one"), Some(1));
    latch.open();
    assert_eq!(
        rx.recv_timeout(crate::support::PATIENCE),
        Ok(Err("would deadlock"))
    );
    bus.wait_idle();
}

/// How many times the rings below are built.
const ROUNDS: usize = 5;

/// A handler's link in a ring: the value of a message it handles, and the message it
/// publishes to the next.
type Link<T, N> = (fn(&T) -> u64, fn(u64) -> N);

/// One handler of a ring of handlers waiting on each other's dispatcher queues: a `Block`
/// subscriber of capacity 1 to `T` whose handler, on its first message, signals on
/// `started` and waits for `go`, then publishes `next(100)` with a deadline far off (so that
/// a missed cycle ends in `Timeout`, not in a test that never ends) and sends on `outcome`
/// what came of it. The values of the messages it handled in `seen`.
fn in_a_ring<T: Topic, N: Topic>(
    bus: &Bus,
    (value, next): Link<T, N>,
    (started, go): (&Signal, &Latch),
    (outcome, seen): (&crossbeam_channel::Sender<String>, &Seen<u64>),
) -> eventbus::Subscription {
    let (started, go, outcome, seen) = (started.clone(), go.clone(), outcome.clone(), seen.clone());
    let (back, first) = (bus.clone(), std::sync::atomic::AtomicBool::new(true));
    let options = Options::default().capacity(1).overflow(Overflow::Block);
    bus.subscribe::<T>(options, move |m: &Message<T>| {
        if first.swap(false, std::sync::atomic::Ordering::SeqCst) {
            started.send(m.seq());
            go.wait();
            let timed = back.publish_timeout(next(100), crate::support::PATIENCE);
            let said = match timed {
                Ok(_) => "went through",
                Err(PublishTimeoutError::WouldDeadlock(_)) => "would deadlock",
                Err(PublishTimeoutError::Timeout(_)) => "timed out",
                Err(_) => "something else",
            };
            outcome.send(said.to_owned()).unwrap();
        }
        seen.push(value(m.payload()));
    })
}

/// Once every handler of the ring has sent what came of its publish: one was refused and the
/// rest went through, and once the bus is idle each subscriber has handled 0 to 3 and, unless
/// the publish to it was the refused one, 100 after them.
fn one_refused_and_the_rest_delivered(
    bus: &Bus,
    outcomes: &crossbeam_channel::Receiver<String>,
    seen: &[&Seen<u64>],
) {
    let mut said: Vec<String> = seen.iter().map(|_| outcomes.recv().unwrap()).collect();
    said.sort();
    let mut expected = vec!["went through"; seen.len() - 1];
    expected.push("would deadlock");
    assert_eq!(said, expected);
    bus.wait_idle();
    let seen: Vec<Vec<u64>> = seen.iter().map(|seen| seen.get()).collect();
    let reached = seen.iter().filter(|seen| seen.contains(&100)).count();
    assert_eq!(reached, seen.len() - 1, "{seen:?}");
    for one in &seen {
        let sent: Vec<u64> = (0..4).chain(one.contains(&100).then_some(100)).collect();
        assert_eq!(one, &sent, "{seen:?}");
    }
}

/// Two handlers, each waiting on the other's dispatcher queue: `on_first`'s publish of
/// `Second(100)` waits for room in Second's full queue, behind Second's dispatcher waiting at
/// `on_second`'s full mailbox; `on_second`'s publish of `First(100)` waits for room in
/// First's, behind First's dispatcher waiting at `on_first`'s. Each walk passes through the
/// other handler's node, so that node must say what it waits on for the whole wait: before,
/// it did only while its own walk ran, and the cycle was found only when two walks
/// overlapped (both were refused then, or neither, each waiting out its deadline). One is
/// refused; the other then goes through. Over [`ROUNDS`] fresh buses: before, a round whose
/// walks happened to overlap just so could still end as this one asks.
#[test]
fn two_handlers_waiting_on_each_others_dispatcher_queues_one_gets_would_deadlock() {
    for _ in 0..ROUNDS {
        let bus = Bus::builder().build();
        let (first, second, go) = (Signal::new(), Signal::new(), Latch::new());
        let (outcome, outcomes) = crossbeam_channel::unbounded();
        let (first_seen, second_seen) = (Seen::new(), Seen::new());
        let _on_first = in_a_ring(
            &bus,
            (|m: &First| m.0, Second),
            (&first, &go),
            (&outcome, &first_seen),
        );
        let _on_second = in_a_ring(
            &bus,
            (|m: &Second| m.0, First),
            (&second, &go),
            (&outcome, &second_seen),
        );
        // Each dispatcher waits at its subscriber's full mailbox, and 3 fills its queue.
        hold_the_dispatcher(&bus, &first, First);
        bus.publish(First(3)).unwrap();
        hold_the_dispatcher(&bus, &second, Second);
        bus.publish(Second(3)).unwrap();
        assert_eq!(depth(&bus, "dispatch.first"), Some(1));
        assert_eq!(depth(&bus, "dispatch.second"), Some(1));
        go.open();
        one_refused_and_the_rest_delivered(&bus, &outcomes, &[&first_seen, &second_seen]);
    }
}

/// The same with three handlers in a ring, First → Second → Third → First: a walk passes
/// through two other handlers' nodes, and before, only walks overlapping just so found it.
#[test]
fn three_handlers_waiting_on_each_others_dispatcher_queues_in_a_ring_one_gets_would_deadlock() {
    for _ in 0..ROUNDS {
        let bus = Bus::builder().build();
        let (first, second, third, go) =
            (Signal::new(), Signal::new(), Signal::new(), Latch::new());
        let (outcome, outcomes) = crossbeam_channel::unbounded();
        let (first_seen, second_seen, third_seen) = (Seen::new(), Seen::new(), Seen::new());
        let _on_first = in_a_ring(
            &bus,
            (|m: &First| m.0, Second),
            (&first, &go),
            (&outcome, &first_seen),
        );
        let _on_second = in_a_ring(
            &bus,
            (|m: &Second| m.0, Third),
            (&second, &go),
            (&outcome, &second_seen),
        );
        let _on_third = in_a_ring(
            &bus,
            (|m: &Third| m.0, First),
            (&third, &go),
            (&outcome, &third_seen),
        );
        hold_the_dispatcher(&bus, &first, First);
        bus.publish(First(3)).unwrap();
        hold_the_dispatcher(&bus, &second, Second);
        bus.publish(Second(3)).unwrap();
        hold_the_dispatcher(&bus, &third, Third);
        bus.publish(Third(3)).unwrap();
        go.open();
        let seen = [&first_seen, &second_seen, &third_seen];
        one_refused_and_the_rest_delivered(&bus, &outcomes, &seen);
    }
}

#[test]
fn observers_see_a_dispatcher_topic_in_its_order() {
    let bus = Bus::builder().build();
    let seen = Seen::new();
    let observed = seen.clone();
    let _observer = bus
        .observe(
            "dispatch.*",
            Options::default(),
            move |m: &eventbus::AnyMessage| {
                observed.push((m.seq(), m.downcast_ref::<Tick>().copied()));
            },
        )
        .unwrap();
    for n in 0..300 {
        bus.publish(Tick(n)).unwrap();
    }
    bus.wait_idle();
    let expected: Vec<_> = (0..300).map(|n| (n, Some(Tick(n)))).collect();
    assert_eq!(seen.get(), expected);
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_async_waits_for_room_in_the_queue() {
    let bus = Bus::builder().build();
    let (latch, seen, started) = (Latch::new(), Seen::new(), Signal::new());
    let _stuck = stuck::<Small>(&bus, &latch, &seen, &started);
    bus.publish_async(Small(0)).await.unwrap();
    let s = started.clone();
    tokio::task::spawn_blocking(move || s.next()).await.unwrap();
    bus.publish_async(Small(1)).await.unwrap();
    bus.publish_async(Small(2)).await.unwrap();
    let b = bus.clone();
    tokio::task::spawn_blocking(move || {
        until("the dispatcher waits at the full mailbox", || {
            depth(&b, "dispatch.small") == Some(0)
        })
    })
    .await
    .unwrap();
    for n in 3..7 {
        bus.publish_async(Small(n)).await.unwrap();
    }
    let short = std::time::Duration::from_millis(20);
    match bus.publish_timeout_async(Small(7), short).await {
        Err(PublishTimeoutError::Timeout(Small(7))) => {}
        other => panic!("expected Timeout with the message back, got {other:?}"),
    }
    let waiting = tokio::spawn({
        let bus = bus.clone();
        async move { bus.publish_async(Small(7)).await }
    });
    latch.open();
    assert_eq!(waiting.await.unwrap().unwrap(), 7);
    bus.wait_idle_async().await;
    assert_eq!(seen.get(), (0..8).map(Small).collect::<Vec<_>>());
}

#[derive(Topic, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[topic(name = "dispatch.guarded", dispatcher, queue = 4)]
struct Guarded(u64);

#[derive(Topic, Debug, Clone, Copy, PartialEq, Eq)]
#[topic(name = "dispatch.echo", dispatcher)]
struct Echo(u64);

/// An inline subscriber of `Guarded` that refuses 99 and keeps every (seq, value) it is
/// called with, the refused ones too.
fn guard(bus: &Bus, calls: &Seen<(u64, u64)>) -> eventbus::Subscription {
    let calls = calls.clone();
    let options = Options::default().name("guard");
    bus.subscribe_inline::<Guarded>(options, move |m: &Message<Guarded>| {
        calls.push((m.seq(), m.0));
        if m.0 == 99 {
            return Err("99 is refused");
        }
        Ok(())
    })
}

#[test]
fn an_inline_subscriber_sees_the_dispatcher_topics_one_order_under_four_publishers() {
    let bus = Bus::builder().build();
    let (inline, queued) = (Seen::new(), Seen::new());
    let i = inline.clone();
    let _inline = bus.subscribe_inline::<Tick>(Options::default(), move |m: &Message<Tick>| {
        i.push((m.seq(), *m.payload()));
    });
    let q = queued.clone();
    // A small mailbox: the dispatcher waits at it often, and the queue fills.
    let options = Options::default().capacity(2);
    let _queued = bus.subscribe::<Tick>(options, move |m: &Message<Tick>| {
        q.push((m.seq(), *m.payload()));
    });
    let published = publish_from_four_threads(&bus);
    bus.wait_idle();
    assert_eq!(
        published.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(),
        (0..2_000).collect::<Vec<_>>()
    );
    // The inline handler ran in the publish, the mailbox's in its worker after the hand-out:
    // the same sequence, with the payload each seq was given.
    assert_eq!(inline.get(), published);
    assert_eq!(queued.get(), published);
}

#[test]
fn on_a_dispatcher_topic_a_refusal_leaves_no_trace_in_the_queue_and_its_seq_is_reused() {
    let bus = Bus::builder().build();
    let calls = Seen::new();
    let guard = guard(&bus, &calls);
    let (latch, seen, started) = (Latch::new(), Seen::new(), Signal::new());
    let _stuck = stuck::<Guarded>(&bus, &latch, &seen, &started);
    hold_the_dispatcher(&bus, &started, Guarded);
    bus.publish(Guarded(3)).unwrap();
    assert_eq!(depth(&bus, "dispatch.guarded"), Some(1));
    let refused = bus.publish(Guarded(99)).unwrap_err();
    assert!(refused.to_string().contains("99 is refused"), "{refused}");
    assert_eq!(refused.rejection().unwrap().subscriber(), "guard");
    assert!(matches!(refused, PublishError::Rejected { .. }));
    assert_eq!(refused.into_inner(), Guarded(99));
    match bus.try_publish(Guarded(99)) {
        Err(TryPublishError::Rejected { message, .. }) => assert_eq!(message, Guarded(99)),
        other => panic!("expected Rejected with the message back, got {other:?}"),
    }
    // Nothing was queued or numbered for it.
    assert_eq!(depth(&bus, "dispatch.guarded"), Some(1));
    let stats = bus.stats();
    let topic = stats.topics.iter().find(|t| t.name == "dispatch.guarded");
    assert_eq!(topic.unwrap().published, 4);
    // The next accepted message takes the refused one's seq.
    assert_eq!(bus.publish(Guarded(4)), Ok(4));
    latch.open();
    bus.close();
    assert_eq!(seen.get(), (0..5).map(Guarded).collect::<Vec<_>>());
    assert_eq!(
        calls.get(),
        [(0, 0), (1, 1), (2, 2), (3, 3), (4, 99), (4, 99), (4, 4)]
    );
    let stats = guard.unsubscribe();
    assert_eq!((stats.received, stats.delivered, stats.failed), (7, 5, 2));
    assert!(bus.dead_letters().is_empty(), "the publisher has it back");
}

#[test]
fn a_full_queue_refuses_before_an_inline_handler_runs() {
    let bus = Bus::builder().build();
    let calls = Seen::new();
    let _guard = guard(&bus, &calls);
    let (latch, seen, started) = (Latch::new(), Seen::new(), Signal::new());
    let _stuck = stuck::<Guarded>(&bus, &latch, &seen, &started);
    hold_the_dispatcher(&bus, &started, Guarded);
    for n in 3..7 {
        bus.try_publish(Guarded(n)).unwrap();
    }
    assert_eq!(depth(&bus, "dispatch.guarded"), Some(4));
    match bus.try_publish(Guarded(7)) {
        Err(TryPublishError::Full(Guarded(7))) => {}
        other => panic!("expected Full with the message back, got {other:?}"),
    }
    let short = std::time::Duration::from_millis(20);
    match bus.publish_timeout(Guarded(7), short) {
        Err(PublishTimeoutError::Timeout(Guarded(7))) => {}
        other => panic!("expected Timeout with the message back, got {other:?}"),
    }
    // The handler saw only what was queued: a message it accepts is always published.
    assert_eq!(calls.get(), (0..7).map(|n| (n, n)).collect::<Vec<_>>());
    let blocked = {
        let bus = bus.clone();
        std::thread::spawn(move || bus.publish(Guarded(7)))
    };
    latch.open();
    assert_eq!(blocked.join().unwrap(), Ok(7));
    bus.wait_idle();
    assert_eq!(calls.get(), (0..8).map(|n| (n, n)).collect::<Vec<_>>());
    assert_eq!(seen.get(), (0..8).map(Guarded).collect::<Vec<_>>());
}

#[test]
fn an_inline_handler_publishing_to_its_own_dispatcher_topic_is_would_deadlock() {
    let bus = Bus::builder().build();
    let outcomes = Seen::new();
    let (own, outcome) = (bus.clone(), outcomes.clone());
    let _echo = bus.subscribe_inline::<Echo>(Options::default(), move |m: &Message<Echo>| {
        if m.0 == 1 {
            let again = own.publish(Echo(2));
            outcome.push(matches!(again, Err(PublishError::WouldDeadlock(_))));
            let long = std::time::Duration::from_secs(60);
            let timed = own.publish_timeout(Echo(3), long);
            outcome.push(matches!(timed, Err(PublishTimeoutError::WouldDeadlock(_))));
            // Another dispatcher topic: a synchronous cascade.
            outcome.push(own.publish(Tick(1)).is_ok());
        }
    });
    let (tx, rx) = crossbeam_channel::bounded(1);
    let publisher = {
        let bus = bus.clone();
        std::thread::spawn(move || tx.send(bus.publish(Echo(1))).unwrap())
    };
    let published = rx.recv_timeout(crate::support::PATIENCE);
    assert_eq!(published.expect("the publish froze"), Ok(0));
    publisher.join().unwrap();
    assert_eq!(outcomes.get(), [true, true, true]);
    // Nothing was left holding the topic.
    assert_eq!(bus.publish(Echo(4)), Ok(1));
    bus.close();
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_async_to_a_dispatcher_topic_waits_for_room_before_its_inline_handler_runs() {
    let bus = Bus::builder().build();
    let calls = Seen::new();
    let _guard = guard(&bus, &calls);
    let (latch, seen, started) = (Latch::new(), Seen::new(), Signal::new());
    let _stuck = stuck::<Guarded>(&bus, &latch, &seen, &started);
    bus.publish_async(Guarded(0)).await.unwrap();
    let s = started.clone();
    tokio::task::spawn_blocking(move || s.next()).await.unwrap();
    bus.publish_async(Guarded(1)).await.unwrap();
    bus.publish_async(Guarded(2)).await.unwrap();
    let b = bus.clone();
    tokio::task::spawn_blocking(move || {
        until("the dispatcher waits at the full mailbox", || {
            depth(&b, "dispatch.guarded") == Some(0)
        })
    })
    .await
    .unwrap();
    match bus.publish_async(Guarded(99)).await {
        Err(PublishError::Rejected { message, .. }) => assert_eq!(message, Guarded(99)),
        other => panic!("expected Rejected with the message back, got {other:?}"),
    }
    for n in 3..7 {
        assert_eq!(bus.publish_async(Guarded(n)).await, Ok(n));
    }
    let waiting = tokio::spawn({
        let bus = bus.clone();
        async move { bus.publish_async(Guarded(7)).await }
    });
    // The queue is full: a waiting publish has not reached the handler.
    let mut expected = vec![
        (0, 0),
        (1, 1),
        (2, 2),
        (3, 99),
        (3, 3),
        (4, 4),
        (5, 5),
        (6, 6),
    ];
    assert_eq!(calls.get(), expected);
    latch.open();
    assert_eq!(waiting.await.unwrap(), Ok(7));
    bus.wait_idle_async().await;
    assert_eq!(seen.get(), (0..8).map(Guarded).collect::<Vec<_>>());
    expected.push((7, 7));
    assert_eq!(calls.get(), expected);
}

#[test]
fn a_close_from_an_inline_handler_of_a_dispatcher_topic_does_not_wait_for_its_own_publish() {
    let bus = Bus::builder().build();
    let seen = Seen::new();
    let s = seen.clone();
    let _queued = bus.subscribe::<Echo>(Options::default(), move |m: &Message<Echo>| {
        s.push(*m.payload());
    });
    let closer = bus.clone();
    bus.subscribe_inline::<Echo>(Options::default(), move |m: &Message<Echo>| {
        if m.0 == 1 {
            closer.close();
        }
    });
    let (tx, rx) = crossbeam_channel::bounded(1);
    let publisher = {
        let bus = bus.clone();
        std::thread::spawn(move || {
            let first = bus.publish(Echo(0));
            tx.send((first, bus.publish(Echo(1)))).unwrap();
        })
    };
    let published = rx.recv_timeout(crate::support::PATIENCE);
    assert_eq!(published.expect("the publish froze"), (Ok(0), Ok(1)));
    publisher.join().unwrap();
    assert!(bus.is_closed());
    assert!(matches!(bus.publish(Echo(2)), Err(PublishError::Closed(_))));
    // Accepted before the close finished: delivered.
    bus.close();
    assert_eq!(seen.get(), [Echo(0), Echo(1)]);
}

/// Four threads, released together, publish 500 ticks each (publisher `p` the ticks
/// `p * 1000 + n`): every (seq, tick) the publishes returned, in seq order.
fn publish_from_four_threads(bus: &Bus) -> Vec<(u64, Tick)> {
    let start = Arc::new(Barrier::new(4));
    let publishers: Vec<_> = (0..4u64)
        .map(|p| {
            let (bus, start) = (bus.clone(), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                (0..500u64)
                    .map(|n| {
                        (
                            bus.publish(Tick(p * 1_000 + n)).unwrap(),
                            Tick(p * 1_000 + n),
                        )
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut published: Vec<(u64, Tick)> = publishers
        .into_iter()
        .flat_map(|p| p.join().unwrap())
        .collect();
    published.sort();
    published
}
