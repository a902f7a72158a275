//! Async subscribers and publishers on tokio (feature `tokio`): the same promises as thread
//! subscribers, checked the same way, plus what only async code meets: `publish_async`'s
//! cancel safety, streams, sync calls on a runtime's thread, and a bus with no runtime.

use crate::support;

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use eventbus::{
    Bus, Message, MessageStream, Options, Overflow, PublishError, SubscribeError, Topic,
};
use futures_core::Stream;
use support::{Latch, Seen, Signal, PATIENCE};

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct A(u64);

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct B(u64);

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// An async subscriber that records what it saw; it first awaits, so a message really is
/// held across an `.await`.
fn recorder<T: Topic + Copy + Into<u64>>(
    seen: &Seen<u64>,
) -> impl FnMut(Message<T>) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
       + Send
       + 'static {
    let seen = seen.clone();
    move |m: Message<T>| {
        let seen = seen.clone();
        Box::pin(async move {
            tokio::task::yield_now().await;
            seen.push((*m).into());
        })
    }
}

impl From<A> for u64 {
    fn from(a: A) -> u64 {
        a.0
    }
}

impl From<B> for u64 {
    fn from(b: B) -> u64 {
        b.0
    }
}

async fn next<T: Send + Sync + 'static>(stream: &mut MessageStream<T>) -> Option<Message<T>> {
    poll_fn(|cx| Pin::new(&mut *stream).poll_next(cx)).await
}

/// Promise 4: threads and tasks publishing at once; an async and a thread subscriber see one
/// order, the same one.
#[test]
fn async_and_thread_subscribers_see_one_order_from_threads_and_tasks() {
    let runtime = multi_thread();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let by_task = Seen::new();
    let record = by_task.clone();
    bus.subscribe_async::<A, _, _, _>(Options::default().capacity(4), move |m: Message<A>| {
        let record = record.clone();
        async move {
            tokio::task::yield_now().await;
            record.push(m.seq());
        }
    });
    let by_thread = Seen::new();
    let record = by_thread.clone();
    bus.subscribe::<A>(Options::default().capacity(4), move |m: &Message<A>| {
        record.push(m.seq())
    });
    std::thread::scope(|scope| {
        for t in 0..2 {
            let bus = bus.clone();
            scope.spawn(move || {
                for i in 0..200 {
                    bus.publish(A(t * 1000 + i)).unwrap();
                }
            });
        }
        runtime.block_on(async {
            let tasks: Vec<_> = (0..2)
                .map(|t| {
                    let bus = bus.clone();
                    tokio::spawn(async move {
                        for i in 0..200 {
                            bus.publish_async(A(10_000 + t * 1000 + i)).await.unwrap();
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
        });
    });
    bus.close();
    assert_eq!(by_task.get(), (0..800).collect::<Vec<_>>());
    assert_eq!(by_thread.get(), by_task.get());
}

/// Promise 1: an async subscriber stuck in its handler holds up no one else.
#[test]
fn a_stuck_async_subscriber_does_not_hold_up_another() {
    let runtime = multi_thread();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let release = Arc::new(tokio::sync::Notify::new());
    let started = Signal::new();
    let (gate, signal) = (Arc::clone(&release), started.clone());
    bus.subscribe_async::<A, _, _, _>(Options::default().name("stuck"), move |m: Message<A>| {
        let (gate, signal) = (Arc::clone(&gate), signal.clone());
        async move {
            signal.send(m.0);
            gate.notified().await;
        }
    });
    let fast = Seen::new();
    bus.subscribe_async(Options::default().name("fast"), recorder::<A>(&fast));
    for i in 0..5 {
        bus.publish(A(i)).unwrap();
    }
    assert_eq!(started.next(), 0);
    support::until("the fast one has all five", || fast.get().len() == 5);
    assert_eq!(fast.get(), [0, 1, 2, 3, 4]);
    let stuck = bus.stats().subscriptions[0].clone();
    assert_eq!((stuck.queued, stuck.in_handler), (4, 1));
    release.notify_one();
    for _ in 1..5 {
        assert!(started.next() > 0);
        release.notify_one();
    }
    bus.close();
}

/// Promise 2 for async subscribers: each overflow policy, exactly.
#[test]
fn each_overflow_policy_holds_for_an_async_subscriber() {
    for (overflow, expected, dropped) in [
        (Overflow::DropOldest, vec![1, 4, 5], 2),
        (Overflow::DropNewest, vec![1, 2, 3], 2),
    ] {
        let runtime = multi_thread();
        let bus = Bus::builder().runtime(runtime.handle().clone()).build();
        let release = Latch::new();
        let started = Signal::new();
        let seen = Seen::new();
        let (gate, signal, record) = (release.clone(), started.clone(), seen.clone());
        let subscription = bus.subscribe_async::<A, _, _, _>(
            Options::default().capacity(2).overflow(overflow),
            move |m: Message<A>| {
                let (gate, signal, record) = (gate.clone(), signal.clone(), record.clone());
                async move {
                    if m.0 == 1 {
                        signal.send(1);
                        tokio::task::spawn_blocking(move || gate.wait())
                            .await
                            .unwrap();
                    }
                    record.push(m.0);
                }
            },
        );
        bus.publish(A(1)).unwrap();
        assert_eq!(started.next(), 1);
        for i in 2..=5 {
            bus.publish(A(i)).unwrap();
        }
        release.open();
        let stats = subscription.unsubscribe();
        assert_eq!(seen.get(), expected, "{overflow:?}");
        assert_eq!(stats.dropped, dropped, "{overflow:?}");
        bus.close();
    }
}

/// Promise 2, `Block`: `publish_async` waits for room by awaiting, and a thread publisher
/// into an async subscriber's full mailbox waits too; nothing is lost.
#[test]
fn block_waits_for_an_async_subscriber_and_loses_nothing() {
    let runtime = multi_thread();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let seen = Seen::new();
    bus.subscribe_async(Options::default().capacity(1), recorder::<A>(&seen));
    let publisher = bus.clone();
    let thread = std::thread::spawn(move || {
        for i in 0..300 {
            publisher.publish(A(i)).unwrap();
        }
    });
    thread.join().unwrap();
    let publisher = bus.clone();
    runtime.block_on(async move {
        for i in 300..600 {
            publisher.publish_async(A(i)).await.unwrap();
        }
    });
    bus.close();
    assert_eq!(seen.get(), (0..600).collect::<Vec<_>>());
}

/// Promise 3: an `Err` is retried in place, a panic is a failed attempt, then dead letters;
/// the task lives on.
#[test]
fn async_retries_then_dead_letters_and_panics_are_failed_attempts() {
    let runtime = multi_thread();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let attempts = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&attempts);
    let subscription = bus.subscribe_async::<A, _, _, _>(
        Options::default()
            .retries(2)
            .backoff(Duration::from_millis(1))
            .name("flaky"),
        move |m: Message<A>| {
            let counted = Arc::clone(&counted);
            async move {
                tokio::task::yield_now().await;
                match m.0 {
                    1 => {
                        counted.fetch_add(1, SeqCst);
                        Err(format!("{} refused", m.0))
                    }
                    2 => panic!("the future panics"),
                    _ => Ok(()),
                }
            }
        },
    );
    for i in 0..4 {
        bus.publish(A(i)).unwrap();
    }
    bus.close();
    let stats = subscription.stats();
    assert_eq!(attempts.load(SeqCst), 3);
    assert_eq!(
        (
            stats.delivered,
            stats.failed,
            stats.retried,
            stats.dead_lettered
        ),
        (2, 6, 4, 2)
    );
    let letters = bus.dead_letters();
    assert_eq!(letters[0].error(), "1 refused");
    assert_eq!(letters[0].payload::<A>(), Some(&A(1)));
    assert!(letters[1].error().contains("the future panics"));
    assert_eq!(
        stats.received,
        stats.delivered + stats.dead_lettered + stats.dropped + stats.queued + stats.in_handler
    );
}

/// Promise 5: `close_async` delivers a cascade that async handlers publish while it drains,
/// then refuses publishes from outside, handing the message back.
#[test]
fn close_async_delivers_a_cascade_published_while_draining() {
    let runtime = multi_thread();
    runtime.block_on(async {
        let bus = Bus::builder().build();
        let publisher = bus.clone();
        bus.subscribe_async::<A, _, _, _>(Options::default().capacity(1), move |m: Message<A>| {
            let publisher = publisher.clone();
            async move {
                publisher.publish_async(B(m.0 * 10)).await.unwrap();
                publisher.publish_async(B(m.0 * 10 + 1)).await.unwrap();
            }
        });
        let seen = Seen::new();
        bus.subscribe_async(Options::default().capacity(1), recorder::<B>(&seen));
        for i in 1..=3 {
            bus.publish_async(A(i)).await.unwrap();
        }
        bus.close_async().await;
        assert_eq!(seen.get(), [10, 11, 20, 21, 30, 31]);
        assert_eq!(
            bus.publish_async(A(9)).await,
            Err(PublishError::Closed(A(9)))
        );
    });
}

/// The wait graph covers tasks: an async handler publishing into its own full mailbox is
/// refused instead of waiting forever.
#[test]
fn an_async_handler_publishing_into_its_own_full_mailbox_gets_would_deadlock() {
    let runtime = multi_thread();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let results = Seen::new();
    let (record, publisher) = (results.clone(), bus.clone());
    let release = Latch::new();
    let started = Signal::new();
    let (gate, signal) = (release.clone(), started.clone());
    bus.subscribe_async::<A, _, _, _>(Options::default().capacity(1), move |m: Message<A>| {
        let (record, publisher, gate, signal) = (
            record.clone(),
            publisher.clone(),
            gate.clone(),
            signal.clone(),
        );
        async move {
            if m.0 == 0 {
                signal.send(0);
                tokio::task::spawn_blocking(move || gate.wait())
                    .await
                    .unwrap();
                let refused = publisher.publish_async(A(100)).await;
                record.push(format!("{refused:?}"));
            }
        }
    });
    bus.publish(A(0)).unwrap();
    assert_eq!(started.next(), 0);
    bus.publish(A(1)).unwrap(); // the mailbox of one is full
    release.open();
    bus.close();
    assert_eq!(results.get(), ["Err(WouldDeadlock(..))"]);
}

/// `publish_async` dropped while it waits for room has published nothing: no seq, no
/// subscriber reached, nothing counted.
#[test]
fn publish_async_cancelled_while_waiting_publishes_nothing() {
    let runtime = multi_thread();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let (release, started, seen) = held_at_first(&bus);
    let other = Seen::new();
    let record = other.clone();
    bus.subscribe::<A>(Options::default(), move |m: &Message<A>| record.push(m.0));
    bus.publish(A(0)).unwrap();
    assert_eq!(started.next(), 0);
    bus.publish(A(1)).unwrap();
    let publisher = bus.clone();
    runtime.block_on(async move {
        let waited =
            tokio::time::timeout(Duration::from_millis(50), publisher.publish_async(A(2))).await;
        assert!(
            waited.is_err(),
            "the mailbox is full: the publish must wait"
        );
    });
    release.open();
    assert_eq!(
        bus.publish(A(3)).unwrap(),
        2,
        "the cancelled publish took no seq"
    );
    bus.close();
    assert_eq!(seen.get(), [0, 1, 3]);
    assert_eq!(other.get(), [0, 1, 3]);
}

/// A task whose `publish_async` finds another publisher holding the topic's turn waits for
/// the turn as a task: its runtime's thread runs other tasks meanwhile. Before, the publish
/// waited on the order lock itself and held the thread up, and every task queued on it, for
/// as long as the holder kept the turn (longer where the holder's thread was descheduled).
#[test]
fn publish_async_waits_for_a_held_turn_without_holding_up_its_runtime() {
    let bus = Bus::builder().build();
    // The first message stops in a filter, which runs under the topic's turn, until let go.
    let (inside, in_filter) = std::sync::mpsc::channel();
    let gate = Latch::new();
    let hold = gate.clone();
    let options = Options::default().filter(move |a: &A| {
        if a.0 == 0 {
            let _ = inside.send(());
            hold.wait();
        }
        true
    });
    let seen = Seen::new();
    let record = seen.clone();
    bus.subscribe::<A>(options, move |m: &Message<A>| record.push(m.0));
    let holder = {
        let bus = bus.clone();
        std::thread::spawn(move || bus.publish(A(0)).unwrap())
    };
    in_filter.recv().unwrap();
    // On one thread, a publishing task first, then one that only says it ran.
    let (ran, other_ran) = std::sync::mpsc::channel();
    let tasks = {
        let bus = bus.clone();
        std::thread::spawn(move || {
            current_thread().block_on(async move {
                let publishing = tokio::spawn(async move { bus.publish_async(A(1)).await });
                let other = tokio::spawn(async move { ran.send(()).unwrap() });
                other.await.unwrap();
                publishing.await.unwrap()
            })
        })
    };
    let ran_while_held = other_ran.recv_timeout(PATIENCE).is_ok();
    // Let go whatever happened, so that everything ends.
    gate.open();
    assert_eq!(holder.join().unwrap(), 0);
    assert_eq!(
        tasks.join().unwrap(),
        Ok(1),
        "the waiting publish went through"
    );
    assert!(
        ran_while_held,
        "the other task ran while the publisher waited for the turn"
    );
    bus.close();
    assert_eq!(seen.get(), [0, 1]);
}

/// A subscription as a stream: it yields in order, close ends it after everything
/// accepted, and dropping it unsubscribes.
#[test]
fn a_stream_yields_in_order_ends_at_close_and_unsubscribes_when_dropped() {
    let runtime = current_thread();
    runtime.block_on(async {
        let bus = Bus::builder().build();
        let mut orders = bus.stream::<A>(Options::default().capacity(4).name("stream"));
        let mut gone = bus.stream::<A>(Options::default().name("gone"));
        for i in 0..3 {
            bus.publish_async(A(i)).await.unwrap();
        }
        assert_eq!(next(&mut gone).await.map(|m| m.0), Some(0));
        drop(gone);
        assert_eq!(bus.stats().subscriptions.len(), 1);
        let closer = bus.clone();
        let close = tokio::spawn(async move { closer.close_async().await });
        let mut seen = Vec::new();
        while let Some(m) = next(&mut orders).await {
            seen.push((m.seq(), m.0));
        }
        close.await.unwrap();
        assert_eq!(seen, [(0, 0), (1, 1), (2, 2)]);
        let stats = orders.stats();
        assert_eq!((stats.received, stats.delivered, stats.queued), (3, 3, 0));
    });
}

/// A sync `publish` on a `current_thread` runtime's thread never waits for the bus's own
/// tasks: where it would, it hands the message back with `WouldDeadlock`.
#[test]
fn sync_publish_on_a_current_thread_runtime_refuses_to_wait() {
    let runtime = current_thread();
    runtime.block_on(async {
        let bus = Bus::builder().build();
        let seen = Seen::new();
        bus.subscribe_async(Options::default().capacity(1), recorder::<A>(&seen));
        assert_eq!(bus.publish(A(0)), Ok(0)); // room: published as anywhere
        let refused = bus.publish(A(1)).unwrap_err();
        assert_eq!(refused, PublishError::WouldDeadlock(A(1)));
        // The text tells an HTTP handler (not only a bus handler) what it can do instead.
        let text = refused.to_string();
        for advice in ["current_thread", "publish_async", "multi-thread runtime"] {
            assert!(text.contains(advice), "{advice:?} missing from: {text}");
        }
        bus.publish_async(A(1)).await.unwrap();
        bus.close_async().await;
        assert_eq!(seen.get(), [0, 1]);
    });
}

/// A sync `publish` on a `current_thread` runtime fills a mailbox to its last slot, then
/// refuses: a publish asks whether it runs on a runtime only when a mailbox may be full, so
/// the room each mailbox counts down must never claim more than there is (had it, the
/// publish below would block the runtime's only thread for good).
#[test]
fn sync_publish_on_a_current_thread_runtime_fills_every_slot_then_refuses() {
    let runtime = current_thread();
    runtime.block_on(async {
        let bus = Bus::builder().build();
        let (seen, others) = (Seen::new(), Seen::new());
        bus.subscribe_async(Options::default().capacity(5), recorder::<A>(&seen));
        let newest = Options::default()
            .capacity(2)
            .overflow(Overflow::DropNewest);
        bus.subscribe_async(newest, recorder::<A>(&others));
        for round in 0..3 {
            let first = round * 6;
            for i in first..first + 5 {
                assert_eq!(bus.publish(A(i)), Ok(i), "round {round}");
            }
            let refused = first + 5;
            assert_eq!(
                bus.publish(A(refused)),
                Err(PublishError::WouldDeadlock(A(refused)))
            );
            // The tasks empty both mailboxes; then the room is counted again from scratch.
            bus.publish_async(A(refused)).await.unwrap();
            until_emptied(&bus).await;
        }
        bus.close_async().await;
        assert_eq!(seen.get(), (0..18).collect::<Vec<_>>());
    });
}

/// The same, where the room a sync publish counts can be spent behind its back: messages
/// another kind of publish put in (`try_publish`, between the sync publishes of `A`), and a
/// priority mailbox (its own queue, not a channel, on `B`). Each topic's mailbox fills to
/// its last slot, then the publish refuses; had the count claimed room that is not there,
/// the publish would block the runtime's only thread for good, and the test says so at its
/// patience's end.
#[test]
fn sync_publish_on_a_current_thread_runtime_counts_room_others_spent() {
    within_patience(|| {
        let runtime = current_thread();
        runtime.block_on(async {
            let bus = Bus::builder().build();
            let (plain, urgent) = (Seen::new(), Seen::new());
            bus.subscribe_async(Options::default().capacity(5), recorder::<A>(&plain));
            let by_level = Options::default()
                .capacity(3)
                .priority(|b: &B| (b.0 % 2) as u8);
            bus.subscribe_async(by_level, recorder::<B>(&urgent));
            for round in 0..3 {
                let first = round * 6;
                assert_eq!(bus.publish(A(first)), Ok(first), "round {round}");
                for i in first + 1..first + 3 {
                    assert_eq!(bus.try_publish(A(i)), Ok(i), "round {round}");
                }
                for i in first + 3..first + 5 {
                    assert_eq!(bus.publish(A(i)), Ok(i), "round {round}");
                }
                let refused = first + 5;
                assert_eq!(
                    bus.publish(A(refused)),
                    Err(PublishError::WouldDeadlock(A(refused)))
                );
                bus.publish_async(A(refused)).await.unwrap();
                let first = round * 4;
                for i in first..first + 3 {
                    assert_eq!(bus.publish(B(i)), Ok(i), "round {round}");
                }
                let refused = first + 3;
                assert_eq!(
                    bus.publish(B(refused)),
                    Err(PublishError::WouldDeadlock(B(refused)))
                );
                bus.publish_async(B(refused)).await.unwrap();
                // The tasks empty the mailboxes; then the room is counted again.
                until_emptied(&bus).await;
            }
            bus.close_async().await;
            assert_eq!(plain.get(), (0..18).collect::<Vec<_>>());
            let mut urgent = urgent.get();
            urgent.sort_unstable();
            assert_eq!(urgent, (0..12).collect::<Vec<_>>());
        });
    });
}

/// Yields until the bus's tasks have taken every message out of their mailboxes.
async fn until_emptied(bus: &Bus) {
    while bus.stats().subscriptions.iter().any(|s| s.queued > 0) {
        tokio::task::yield_now().await;
    }
}

/// On a multi-thread runtime's thread, a sync `publish` and `close` wait safely: the
/// thread's other tasks are handed off while they block.
#[test]
fn sync_publish_and_close_on_a_multi_thread_runtime_wait_safely() {
    let runtime = multi_thread();
    runtime.block_on(async {
        let bus = Bus::builder().build();
        let seen = Seen::new();
        bus.subscribe_async(Options::default().capacity(1), recorder::<A>(&seen));
        let publisher = bus.clone();
        tokio::spawn(async move {
            for i in 0..50 {
                publisher.publish(A(i)).unwrap();
            }
            publisher.close();
        })
        .await
        .unwrap();
        assert_eq!(seen.get(), (0..50).collect::<Vec<_>>());
    });
}

/// An async subscriber with no runtime is refused with an error naming it.
#[test]
fn an_async_subscriber_without_a_runtime_is_refused_by_name() {
    let bus = Bus::builder().build();
    let error = bus
        .try_subscribe_async::<A, _, _, _>(
            Options::default().name("saver"),
            |_: Message<A>| async {},
        )
        .unwrap_err();
    assert!(matches!(error, SubscribeError::NoRuntime { .. }));
    assert!(error.to_string().contains("`saver`"), "{error}");
    let report = bus.close_timeout(PATIENCE);
    assert!(report.completed);
}

mod registered {
    //! `#[subscriber] async fn`: the same parameters as a sync subscriber, in any order.

    use super::*;
    use eventbus::{subscriber, BuildError, State};

    #[derive(Topic, Debug)]
    struct OrderPlaced {
        id: u64,
    }

    #[derive(Topic, Debug)]
    struct OrderSaved {
        id: u64,
    }

    #[derive(Default)]
    struct Db {
        saved: std::sync::Mutex<Vec<u64>>,
        confirmed: std::sync::Mutex<Vec<u64>>,
    }

    #[derive(Debug)]
    struct DbError(u64);

    impl std::fmt::Display for DbError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "order {} refused", self.0)
        }
    }

    impl std::error::Error for DbError {}

    #[subscriber(capacity = 4, retries = 1, backoff = "1ms")]
    async fn save_order(order: &OrderPlaced, db: State<Db>, bus: &Bus) -> Result<(), DbError> {
        tokio::task::yield_now().await;
        if order.id == 13 {
            return Err(DbError(13));
        }
        db.saved.lock().unwrap().push(order.id);
        bus.publish_async(OrderSaved { id: order.id }).await.ok();
        Ok(())
    }

    #[subscriber]
    async fn confirm(saved: &Message<OrderSaved>, bus: &Bus, db: &State<Db>) {
        let _ = bus;
        tokio::task::yield_now().await;
        db.confirmed.lock().unwrap().push(saved.id);
    }

    fn here() -> &'static str {
        module_path!()
    }

    #[test]
    fn async_fn_subscribers_take_state_and_the_bus_and_keep_their_errors() {
        let runtime = multi_thread();
        runtime.block_on(async {
            let bus = Bus::builder()
                .state(Db::default())
                .registered_in(here())
                .build();
            for id in [1, 13, 2] {
                bus.publish_async(OrderPlaced { id }).await.unwrap();
            }
            bus.close_async().await;
            let db = bus.state::<Db>().unwrap();
            assert_eq!(*db.saved.lock().unwrap(), [1, 2]);
            assert_eq!(*db.confirmed.lock().unwrap(), [1, 2]);
            let letters = bus.dead_letters();
            assert_eq!((letters.len(), letters[0].attempts()), (1, 2));
            let source = std::error::Error::source(&letters[0]).unwrap();
            assert_eq!(source.to_string(), "order 13 refused");
        });
    }

    #[test]
    fn async_fn_subscribers_without_a_runtime_fail_try_build_before_anything_starts() {
        let error = Bus::builder()
            .state(Db::default())
            .registered_in(here())
            .try_build()
            .unwrap_err();
        assert!(
            matches!(
                error,
                BuildError::Subscribe(SubscribeError::NoRuntime { .. })
            ),
            "{error}"
        );
        assert!(error.to_string().contains("no tokio runtime"), "{error}");
    }
}

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
#[topic(retain = 64)]
struct Logged(u64);

/// Log topics take async subscribers and streams too: history first, then live messages,
/// with no gap and no repeat at the seam, one order with the thread subscribers; `Block`
/// holds the publishers to the slowest task.
#[test]
fn async_subscribers_and_streams_read_a_log_topic_from_its_history_on() {
    let runtime = multi_thread();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    for i in 0..10 {
        bus.publish(Logged(i)).unwrap();
    }
    let by_task = Seen::new();
    let record = by_task.clone();
    bus.subscribe_async::<Logged, _, _, _>(
        Options::default()
            .capacity(4)
            .start(eventbus::Start::Earliest),
        move |m: Message<Logged>| {
            let record = record.clone();
            async move {
                tokio::task::yield_now().await;
                record.push(m.seq());
            }
        },
    );
    let mut stream = bus.stream::<Logged>(Options::default().start(eventbus::Start::Seq(5)));
    let by_thread = Seen::new();
    let record = by_thread.clone();
    bus.subscribe::<Logged>(
        Options::default().start(eventbus::Start::Earliest),
        move |m: &Message<Logged>| record.push(m.seq()),
    );
    runtime.block_on(async {
        let tasks: Vec<_> = (0..2)
            .map(|t| {
                let bus = bus.clone();
                tokio::spawn(async move {
                    for i in 0..200 {
                        bus.publish_async(Logged(1000 * (t + 1) + i)).await.unwrap();
                    }
                })
            })
            .collect();
        let mut streamed = Vec::new();
        while streamed.len() < 405 {
            streamed.push(
                next(&mut stream)
                    .await
                    .expect("the stream ended early")
                    .seq(),
            );
        }
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(streamed, (5..410).collect::<Vec<_>>());
        let closer = bus.clone();
        let close = tokio::spawn(async move { closer.close_async().await });
        assert!(
            next(&mut stream).await.is_none(),
            "the stream ends at close"
        );
        close.await.unwrap();
    });
    assert_eq!(by_task.get(), (0..410).collect::<Vec<_>>());
    assert_eq!(by_thread.get(), by_task.get());
    for stats in bus.stats().subscriptions {
        assert_eq!(
            stats.received,
            stats.delivered + stats.dead_lettered + stats.dropped + stats.queued + stats.in_handler,
            "{stats:?}"
        );
    }
}

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
#[topic(retain = 8)]
struct HeldLog(u64);

/// As for a thread reader: unsubscribing a `Block` async log subscriber that is behind
/// delivers what it had queued, though the trim passes where it was (issue 31, item 3).
#[test]
fn unsubscribing_a_block_async_reader_that_is_behind_delivers_what_it_had_queued() {
    let runtime = multi_thread();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let release = Arc::new(tokio::sync::Notify::new());
    let (started, seen) = (Signal::new(), Seen::new());
    let subscription = {
        let (release, started, seen) = (Arc::clone(&release), started.clone(), seen.clone());
        bus.subscribe_async::<HeldLog, _, _, _>(
            Options::default().capacity(8),
            move |m: Message<HeldLog>| {
                let (release, started, seen) =
                    (Arc::clone(&release), started.clone(), seen.clone());
                async move {
                    if m.0 == 0 {
                        started.send(0);
                        release.notified().await;
                    }
                    seen.push(m.0);
                }
            },
        )
    };
    for i in 0..8 {
        bus.publish(HeldLog(i)).unwrap();
    }
    assert_eq!(started.next(), 0);
    std::thread::scope(|scope| {
        let leaving = scope.spawn(move || subscription.unsubscribe());
        let publisher = scope.spawn(|| {
            for i in 8..16 {
                bus.publish(HeldLog(i)).unwrap();
            }
        });
        publisher.join().unwrap();
        release.notify_one();
        let stats = leaving.join().unwrap();
        assert_eq!(
            seen.get(),
            (0..8).collect::<Vec<_>>(),
            "what was queued, in order"
        );
        assert_eq!((stats.received, stats.delivered, stats.dropped), (8, 8, 0));
    });
    bus.close();
}

/// `publish_timeout_async` hands the message back when room does not come in time, publishes
/// nothing then, and publishes once there is room (issue 32, item 5).
#[test]
fn publish_timeout_async_hands_the_message_back_when_room_does_not_come() {
    let runtime = multi_thread();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let (gate, started, seen) = held_at_first(&bus);
    runtime.block_on(async {
        bus.publish_async(A(0)).await.unwrap();
        assert_eq!(started.next(), 0);
        bus.publish_async(A(1)).await.unwrap(); // fills the mailbox
        let late = bus
            .publish_timeout_async(A(2), Duration::from_millis(30))
            .await;
        assert_eq!(late, Err(eventbus::PublishTimeoutError::Timeout(A(2))));
        assert_eq!(bus.stats().topics[0].published, 2, "nothing numbered");
        gate.open();
        assert_eq!(bus.publish_timeout_async(A(3), PATIENCE).await, Ok(2));
        bus.close_async().await;
    });
    assert_eq!(seen.get(), [0, 1, 3]);
}

/// Runs `body` on a thread of its own and fails if it has not returned within `PATIENCE`:
/// for a test whose failure is a hang. A panic in `body` fails the test too.
fn within_patience(body: impl FnOnce() + Send + 'static) {
    let (done, finished) = std::sync::mpsc::channel();
    let body = std::thread::spawn(move || {
        body();
        let _ = done.send(());
    });
    match finished.recv_timeout(PATIENCE) {
        Ok(()) => body.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("still waiting after {PATIENCE:?}")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(body.join().unwrap_err())
        }
    }
}

/// A runtime without its time driver: `Builder::new_current_thread()` with no `enable_time()`.
fn without_a_timer() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// `publish_async` and `publish_timeout_async` wait for room on a runtime built without its
/// time driver (`Builder::new_current_thread()` with no `enable_time()`): their wait needs
/// no tokio timer (before, tokio panicked "timers are disabled" at the first wait).
#[test]
fn publish_async_waits_for_room_on_a_runtime_without_a_timer() {
    within_patience(|| {
        let runtime = without_a_timer();
        let bus = Bus::builder().build();
        let (gate, started, seen) = held_at_first(&bus);
        // Whatever happens below, the handler is let go, so the bus can close.
        let _open = OpenOnDrop(gate.clone());
        runtime.block_on(async {
            bus.publish_async(A(0)).await.unwrap();
            assert_eq!(started.next(), 0);
            bus.publish_async(A(1)).await.unwrap(); // fills the mailbox
            let late = bus
                .publish_timeout_async(A(2), Duration::from_millis(20))
                .await;
            assert_eq!(late, Err(eventbus::PublishTimeoutError::Timeout(A(2))));
            let mut waiting = std::pin::pin!(bus.publish_async(A(3)));
            let poll = |cx: &mut std::task::Context<'_>| {
                std::task::Poll::Ready(std::future::Future::poll(waiting.as_mut(), cx))
            };
            let first = poll_fn(poll).await;
            assert!(first.is_pending(), "the mailbox is full: it must wait");
            gate.open();
            assert_eq!(waiting.await, Ok(2));
        });
        bus.close();
        assert_eq!(seen.get(), [0, 1, 3]);
    });
}

/// `publish_timeout_async` on a runtime without a time driver gives up at its timeout, not
/// before, and hands the message back, unpublished (before, tokio panicked "timers are
/// disabled" at the wait).
#[test]
fn publish_timeout_async_times_out_on_a_runtime_without_a_timer() {
    within_patience(|| {
        let runtime = without_a_timer();
        let bus = Bus::builder().build();
        let (gate, started, _) = held_at_first(&bus);
        let _open = OpenOnDrop(gate.clone());
        runtime.block_on(async {
            bus.publish_timeout_async(A(0), PATIENCE).await.unwrap();
            assert_eq!(started.next(), 0);
            bus.publish_timeout_async(A(1), PATIENCE).await.unwrap(); // fills the mailbox
            let timeout = Duration::from_millis(30);
            let began = std::time::Instant::now();
            let late = bus.publish_timeout_async(A(2), timeout).await;
            assert!(
                began.elapsed() >= timeout,
                "gave up early: {:?}",
                began.elapsed()
            );
            assert_eq!(late, Err(eventbus::PublishTimeoutError::Timeout(A(2))));
            assert_eq!(bus.stats().topics[0].published, 2, "nothing numbered");
        });
        gate.open();
        bus.close();
    });
}

/// An async subscriber's retries and `wait_idle_async` need no time driver either: on a
/// runtime built without one, a failed attempt is retried after its backoff and the bus is
/// seen idle (before, tokio panicked "timers are disabled" in the worker's retry).
#[test]
fn async_retries_and_wait_idle_on_a_runtime_without_a_timer() {
    within_patience(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let bus = Bus::builder().runtime(runtime.handle().clone()).build();
        let attempts = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&attempts);
        let subscription = bus.subscribe_async::<A, _, _, _>(
            Options::default()
                .retries(2)
                .backoff(Duration::from_millis(5)),
            move |_: Message<A>| {
                let attempt = counted.fetch_add(1, SeqCst);
                async move {
                    match attempt {
                        0 => Err("refused once"),
                        _ => Ok(()),
                    }
                }
            },
        );
        runtime.block_on(async {
            bus.publish_async(A(0)).await.unwrap();
            bus.wait_idle_async().await;
        });
        let stats = subscription.stats();
        assert_eq!((stats.delivered, stats.failed, stats.retried), (1, 1, 1));
        assert_eq!(attempts.load(SeqCst), 2);
        bus.close();
    });
}

/// A thread subscriber of `A` with one slot that holds message 0 in its handler until the
/// gate opens, saying when it started to; what it handled, in order.
fn held_at_first(bus: &Bus) -> (Latch, Signal, Seen<u64>) {
    let (gate, started, seen) = (Latch::new(), Signal::new(), Seen::new());
    let (held, start, record) = (gate.clone(), started.clone(), seen.clone());
    bus.subscribe::<A>(Options::default().capacity(1), move |m: &Message<A>| {
        if m.0 == 0 {
            start.send(0);
            held.wait();
        }
        record.push(m.0);
    });
    (gate, started, seen)
}

/// Opens its latch when dropped: a failing test lets its handler go, so the bus can close.
struct OpenOnDrop(Latch);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// Issue 32: `close_timeout_async` past its deadline keeps each message still queued for a
/// task worker as a dead letter, with its payload, before it returns.
#[test]
fn a_forced_async_close_keeps_queued_messages_as_dead_letters() {
    let runtime = multi_thread();
    runtime.block_on(async {
        let bus = Bus::builder().build();
        let (release, started) = (Latch::new(), Signal::new());
        let (gate, signal) = (release.clone(), started.clone());
        let subscription = bus.subscribe_async(Options::default(), move |m: Message<A>| {
            let (gate, signal) = (gate.clone(), signal.clone());
            async move {
                if m.0 == 0 {
                    signal.send(0);
                    // Held off the runtime's threads: the close must give up on it.
                    tokio::task::spawn_blocking(move || gate.wait())
                        .await
                        .unwrap();
                }
            }
        });
        for i in 0..5 {
            bus.publish_async(A(i)).await.unwrap();
        }
        let first = tokio::task::spawn_blocking(move || started.next());
        assert_eq!(first.await.unwrap(), 0);
        let report = bus.close_timeout_async(Duration::from_millis(20)).await;
        assert!(!report.completed);
        let kept: Vec<(u64, u64, u32)> = bus
            .dead_letters()
            .iter()
            .map(|l| (l.seq(), l.payload::<A>().unwrap().0, l.attempts()))
            .collect();
        assert_eq!(kept, [(1, 1, 0), (2, 2, 0), (3, 3, 0), (4, 4, 0)]);
        let stats = subscription.stats();
        assert_eq!(
            (
                stats.dead_lettered,
                stats.dropped,
                stats.queued,
                stats.in_handler
            ),
            (4, 0, 0, 1)
        );
        release.open();
    });
}
