//! The `on_dead_letter_async` hook (feature `tokio`): one task on the bus's runtime, shown
//! every dead letter one at a time, in the order they were made; a panic in it ends that
//! letter only; `close`, `close_async` and `close_timeout` wait for it as for the sync hook;
//! and what the builder refuses.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eventbus::{BuildError, Bus, DeadLetter, Message, Options, Topic};
use support::{until, Seen, Signal, PATIENCE};
use tokio::sync::Semaphore;

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct Charge(u64);

/// A runtime whose threads say whose they are.
fn multi_thread(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("hook-runtime")
        .enable_all()
        .build()
        .unwrap()
}

/// A subscriber named `name` that fails every message.
fn failing(bus: &Bus, name: &str) {
    bus.subscribe::<Charge>(Options::default().name(name), |_: &Message<Charge>| {
        Err::<(), _>("declined")
    });
}

/// A hook that signals each letter's seq as it starts it, waits at letter 0 until `gate`
/// has a permit, then records the seq.
fn gated(
    started: &Signal,
    gate: &Arc<Semaphore>,
    seen: &Seen<u64>,
) -> impl FnMut(DeadLetter) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
       + Send
       + 'static {
    let (started, gate, seen) = (started.clone(), Arc::clone(gate), seen.clone());
    move |letter: DeadLetter| {
        let (started, gate, seen) = (started.clone(), Arc::clone(&gate), seen.clone());
        Box::pin(async move {
            started.send(letter.seq());
            if letter.seq() == 0 {
                gate.acquire().await.unwrap().forget();
            }
            seen.push(letter.seq());
        })
    }
}

/// Letters from two subscribers failing at their own pace, with retries and panics among
/// them: the hook sees each one once, never two at a time, each subscriber's in the order
/// its letters were made, on the runtime it was given.
#[test]
fn the_hook_sees_the_letters_one_at_a_time_in_the_order_they_were_made() {
    let runtime = multi_thread(2);
    let seen: Seen<(String, u64)> = Seen::new();
    let running = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let elsewhere = Arc::new(AtomicUsize::new(0));
    let hook = {
        let (seen, running) = (seen.clone(), Arc::clone(&running));
        let (overlaps, elsewhere) = (Arc::clone(&overlaps), Arc::clone(&elsewhere));
        move |letter: DeadLetter| {
            let (seen, running) = (seen.clone(), Arc::clone(&running));
            let (overlaps, elsewhere) = (Arc::clone(&overlaps), Arc::clone(&elsewhere));
            async move {
                if running.fetch_add(1, SeqCst) != 0 {
                    overlaps.fetch_add(1, SeqCst);
                }
                for _ in 0..3 {
                    tokio::task::yield_now().await;
                    if std::thread::current().name() != Some("hook-runtime") {
                        elsewhere.fetch_add(1, SeqCst);
                    }
                }
                seen.push((letter.subscriber().to_owned(), letter.seq()));
                running.fetch_sub(1, SeqCst);
            }
        }
    };
    // Built on no runtime's thread: the hook runs on the runtime given.
    let bus = Bus::builder()
        .runtime(runtime.handle().clone())
        .on_dead_letter_async(hook)
        .build();
    bus.subscribe::<Charge>(
        Options::default()
            .name("billing")
            .retries(1)
            .backoff(Duration::ZERO),
        |m: &Message<Charge>| match m.0 % 4 {
            0 => Ok(()),
            1 => Err("declined"),
            2 if m.0 % 40 == 2 => panic!("billing panics on {}", m.0),
            _ => Err("timed out"),
        },
    );
    bus.subscribe::<Charge>(
        Options::default().name("shipping"),
        |m: &Message<Charge>| {
            if m.0 % 5 == 0 {
                Err("no stock")
            } else {
                Ok(())
            }
        },
    );
    for i in 0..200 {
        bus.publish(Charge(i)).unwrap();
    }
    bus.close();
    let seen = seen.get();
    let of = |name: &str| -> Vec<u64> {
        seen.iter()
            .filter(|(subscriber, _)| subscriber == name)
            .map(|&(_, seq)| seq)
            .collect()
    };
    assert_eq!(
        of("billing"),
        (0..200).filter(|i| i % 4 != 0).collect::<Vec<_>>()
    );
    assert_eq!(of("shipping"), (0..200).step_by(5).collect::<Vec<_>>());
    assert_eq!(seen.len(), 150 + 40, "a letter shown to no one or twice");
    assert_eq!(overlaps.load(SeqCst), 0, "two letters were shown at once");
    assert_eq!(
        elsewhere.load(SeqCst),
        0,
        "the hook ran off the bus's runtime"
    );
    assert_eq!(bus.take_dead_letters().len(), 190);
    assert_eq!(bus.stats().dead_letter_hook_skipped, 0);
}

/// A panic while making the hook's future, or while it runs after an `.await`, ends that
/// letter; the next one is shown as usual.
#[test]
fn a_panicking_hook_keeps_going() {
    let runtime = multi_thread(2);
    let seen = Seen::new();
    let record = seen.clone();
    let bus = Bus::builder()
        .runtime(runtime.handle().clone())
        .on_dead_letter_async(move |letter: DeadLetter| {
            if letter.seq() == 1 {
                panic!("async hook test: panics making its future");
            }
            let record = record.clone();
            async move {
                tokio::task::yield_now().await;
                if letter.seq() == 3 {
                    panic!("async hook test: panics after an await");
                }
                record.push(letter.seq());
            }
        })
        .build();
    failing(&bus, "billing");
    for i in 0..6 {
        bus.publish(Charge(i)).unwrap();
    }
    bus.close();
    assert_eq!(seen.get(), [0, 2, 4, 5]);
    assert_eq!(bus.take_dead_letters().len(), 6);
}

/// `close` returns only once the hook has finished every letter it was given: the hook is
/// held at letter 0 while the close runs, and let go only then.
#[test]
fn close_waits_for_a_slow_hook() {
    let runtime = multi_thread(2);
    let (started, gate, seen) = (Signal::new(), Arc::new(Semaphore::new(0)), Seen::new());
    let bus = Bus::builder()
        .runtime(runtime.handle().clone())
        .on_dead_letter_async(gated(&started, &gate, &seen))
        .build();
    failing(&bus, "billing");
    for i in 0..3 {
        bus.publish(Charge(i)).unwrap();
    }
    assert_eq!(started.next(), 0);
    let closed = Signal::new();
    let (closer, signal) = (bus.clone(), closed.clone());
    let closing = std::thread::spawn(move || {
        closer.close();
        signal.send(0);
    });
    until("the close has begun", || bus.is_closed());
    assert!(closed.rx_is_empty(), "close returned with the hook held");
    assert!(seen.get().is_empty());
    gate.add_permits(1);
    closing.join().unwrap();
    assert_eq!(seen.get(), [0, 1, 2]);
    let report = bus.close_timeout(Duration::ZERO);
    assert!(!report.hook_running, "{report:?}");
}

/// `close_async` on a `current_thread` runtime, whose one thread the hook's task shares:
/// it awaits the hook's letters without stopping that task.
#[test]
fn close_async_on_a_current_thread_runtime_waits_for_the_hook() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (started, gate, seen) = (Signal::new(), Arc::new(Semaphore::new(0)), Seen::new());
        let bus = Bus::builder() // takes the current runtime
            .on_dead_letter_async(gated(&started, &gate, &seen))
            .build();
        failing(&bus, "billing");
        for i in 0..3 {
            bus.publish_async(Charge(i)).await.unwrap();
        }
        let closer = bus.clone();
        let closing = tokio::spawn(async move { closer.close_async().await });
        // The hook takes letter 0 and the close begins, both on this one thread.
        while started.rx_is_empty() || !bus.is_closed() {
            tokio::task::yield_now().await;
        }
        assert_eq!(started.next(), 0);
        assert!(
            !closing.is_finished(),
            "close_async returned with the hook held"
        );
        assert!(seen.get().is_empty());
        gate.add_permits(1);
        closing.await.unwrap();
        assert_eq!(seen.get(), [0, 1, 2]);
    });
}

/// The sync `close`, called from a task of a runtime with one worker thread, whose hook
/// task needs a thread too: it waits (in `block_in_place`) without freezing the runtime.
#[test]
fn sync_close_from_the_only_worker_thread_waits_for_the_hook() {
    let runtime = multi_thread(1);
    let seen = Seen::new();
    let record = seen.clone();
    let bus = Bus::builder()
        .runtime(runtime.handle().clone())
        .on_dead_letter_async(move |letter: DeadLetter| {
            let record = record.clone();
            async move {
                tokio::task::yield_now().await;
                record.push(letter.seq());
            }
        })
        .build();
    failing(&bus, "billing");
    for i in 0..3 {
        bus.publish(Charge(i)).unwrap();
    }
    let (tx, rx) = crossbeam_channel::bounded(1);
    let (closer, record) = (bus.clone(), seen.clone());
    runtime.spawn(async move {
        closer.close();
        let _ = tx.send(record.get());
    });
    match rx.recv_timeout(PATIENCE) {
        Ok(seen_at_close) => assert_eq!(seen_at_close, [0, 1, 2]),
        Err(_) => {
            runtime.shutdown_background();
            panic!("close on the runtime's only worker thread froze");
        }
    }
}

/// `close_timeout` past a hook that never finishes returns at its deadline (having waited
/// for the hook until then) and says the hook is still running.
#[test]
fn close_timeout_past_a_stuck_hook_reports_it_running() {
    let runtime = multi_thread(2);
    let started = Signal::new();
    let signal = started.clone();
    let bus = Bus::builder()
        .runtime(runtime.handle().clone())
        .on_dead_letter_async(move |letter: DeadLetter| {
            signal.send(letter.seq());
            std::future::pending::<()>()
        })
        .build();
    failing(&bus, "billing");
    bus.publish(Charge(0)).unwrap();
    assert_eq!(started.next(), 0);
    let deadline = Duration::from_millis(200);
    let began = Instant::now();
    let report = bus.close_timeout(deadline);
    let took = began.elapsed();
    assert!(report.hook_running, "{report:?}");
    assert!(!report.completed, "{report:?}");
    assert!(took >= deadline, "gave up on the hook early: {took:?}");
    // A wide bound: a descheduled test thread on a loaded machine must not fail it.
    assert!(took < deadline + Duration::from_secs(10), "took {took:?}");
    assert_eq!(bus.take_dead_letters().len(), 1);
}

/// The same through `close_timeout_async`, awaited on the hook's own runtime.
#[test]
fn close_timeout_async_past_a_stuck_hook_reports_it_running() {
    let runtime = multi_thread(2);
    runtime.block_on(async {
        let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
        let bus = Bus::builder()
            .on_dead_letter_async(move |letter: DeadLetter| {
                let _ = started_tx.send(letter.seq());
                std::future::pending::<()>()
            })
            .build();
        failing(&bus, "billing");
        bus.publish_async(Charge(0)).await.unwrap();
        assert_eq!(started.recv().await, Some(0));
        let deadline = Duration::from_millis(200);
        let began = Instant::now();
        let report = bus.close_timeout_async(deadline).await;
        let took = began.elapsed();
        assert!(report.hook_running, "{report:?}");
        assert!(took >= deadline, "gave up on the hook early: {took:?}");
        assert!(took < deadline + Duration::from_secs(10), "took {took:?}");
    });
}

/// The hook awaits real async work with the letter held: each goes through a channel of
/// one slot (its `send` waits for the reader), then into a tokio `Mutex`, payload and all.
#[test]
fn the_hook_persists_each_letter_through_async_calls() {
    let runtime = multi_thread(2);
    runtime.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<DeadLetter>(1);
        let saved = Arc::new(tokio::sync::Mutex::new(Vec::new()));
        let db = Arc::clone(&saved);
        let writer = tokio::spawn(async move {
            while let Some(letter) = rx.recv().await {
                tokio::task::yield_now().await;
                let charge = *letter.payload::<Charge>().unwrap();
                db.lock().await.push((charge, letter.error().to_owned()));
            }
        });
        let bus = Bus::builder()
            .on_dead_letter_async(move |letter: DeadLetter| {
                let tx = tx.clone();
                async move { tx.send(letter).await.unwrap() }
            })
            .build();
        failing(&bus, "billing");
        for i in 0..20 {
            bus.publish_async(Charge(i)).await.unwrap();
        }
        bus.close_async().await;
        // The hook (and its sender) is gone once the close returns: the writer ends.
        writer.await.unwrap();
        let expected: Vec<_> = (0..20)
            .map(|i| (Charge(i), "declined".to_owned()))
            .collect();
        assert_eq!(*saved.lock().await, expected);
    });
}

/// A hook held at its first letter while 3,000 are made: 1,024 wait for it, the rest skip
/// it (counted; no worker waits), and the store keeps every one of them.
#[test]
fn a_hook_that_falls_far_behind_skips_letters_and_the_store_keeps_them() {
    let runtime = multi_thread(2);
    let (started, gate, seen) = (Signal::new(), Arc::new(Semaphore::new(0)), Seen::new());
    let bus = Bus::builder()
        .runtime(runtime.handle().clone())
        .dead_letter_capacity(5_000)
        .on_dead_letter_async(gated(&started, &gate, &seen))
        .build();
    bus.subscribe::<Charge>(
        Options::default().name("billing").capacity(4096),
        |_: &Message<Charge>| Err::<(), _>("declined"),
    );
    bus.publish(Charge(0)).unwrap();
    // The hook holds letter 0: its queue is empty.
    assert_eq!(started.next(), 0);
    for i in 1..3_000 {
        bus.publish(Charge(i)).unwrap();
    }
    // The hook is no subscription: the bus is idle while it is held.
    bus.wait_idle();
    assert_eq!(bus.stats().dead_letter_hook_skipped, 3_000 - 1 - 1_024);
    gate.add_permits(1);
    bus.close();
    assert_eq!(seen.get(), (0..=1_024).collect::<Vec<u64>>());
    let kept: Vec<u64> = bus
        .take_dead_letters()
        .iter()
        .map(DeadLetter::seq)
        .collect();
    assert_eq!(kept, (0..3_000).collect::<Vec<u64>>());
}

/// `close` (or `close_async`) from inside the hook cannot wait for the hook: it begins the
/// close and returns, and the hook carries on with the next letter.
fn close_from_inside_the_hook(asynchronous: bool) {
    let runtime = multi_thread(2);
    let slot: Arc<Mutex<Option<Bus>>> = Arc::new(Mutex::new(None));
    let returned = Signal::new();
    let (hook_bus, signal) = (Arc::clone(&slot), returned.clone());
    let bus = Bus::builder()
        .runtime(runtime.handle().clone())
        .on_dead_letter_async(move |letter: DeadLetter| {
            let (hook_bus, signal) = (Arc::clone(&hook_bus), signal.clone());
            async move {
                // Taken, so the hook holds no handle of the bus once it has closed it.
                let bus = hook_bus.lock().unwrap().take();
                if let Some(bus) = bus {
                    if asynchronous {
                        bus.close_async().await;
                    } else {
                        bus.close();
                    }
                }
                signal.send(letter.seq());
            }
        })
        .build();
    failing(&bus, "billing");
    *slot.lock().unwrap() = Some(bus.clone());
    bus.publish(Charge(0)).unwrap();
    assert_eq!(returned.next(), 0);
    assert!(bus.is_closed());
    bus.close();
}

#[test]
fn close_from_inside_the_hook_returns() {
    close_from_inside_the_hook(false);
}

#[test]
fn close_async_from_inside_the_hook_returns() {
    close_from_inside_the_hook(true);
}

/// A bus has one dead-letter hook: given both, in either order, `try_build` says so.
#[test]
fn a_builder_given_both_hooks_is_refused() {
    let runtime = multi_thread(1);
    let both = [
        Bus::builder()
            .runtime(runtime.handle().clone())
            .on_dead_letter(|_: &DeadLetter| {})
            .on_dead_letter_async(|_: DeadLetter| async {})
            .try_build(),
        Bus::builder()
            .runtime(runtime.handle().clone())
            .on_dead_letter_async(|_: DeadLetter| async {})
            .on_dead_letter(|_: &DeadLetter| {})
            .try_build(),
    ];
    for built in both {
        let error = built.unwrap_err();
        assert!(matches!(error, BuildError::TwoDeadLetterHooks), "{error:?}");
        assert_eq!(
            error.to_string(),
            "both `on_dead_letter` and `on_dead_letter_async` were called, and a bus has one \
             dead-letter hook: keep one of them"
        );
    }
}

/// With no runtime given and none current, `try_build` refuses the async hook (no panic);
/// `build` panics with the same message, as for its other errors.
#[test]
fn the_async_hook_with_no_runtime_is_refused() {
    let error = Bus::builder()
        .on_dead_letter_async(|_: DeadLetter| async {})
        .try_build()
        .unwrap_err();
    assert!(matches!(error, BuildError::HookWithoutRuntime), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("`.runtime(handle)`"), "{message}");
    let panic = std::panic::catch_unwind(|| {
        Bus::builder()
            .on_dead_letter_async(|_: DeadLetter| async {})
            .build()
    })
    .unwrap_err();
    assert_eq!(panic.downcast_ref::<String>(), Some(&message));
}
