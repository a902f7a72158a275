//! Async consumer groups (feature `tokio`): `subscribe_group_async` and
//! `#[subscriber(workers = N, key = f)] async fn`. The promises of a thread group, with tasks:
//! each message to exactly one worker; with a key, one key's messages handled in topic order
//! by one task; the workers' handlers in progress at once; per-worker stats; overflow,
//! retries and dead letters per mailbox; a close drains them.

use super::{customer_of, identity_holds, scale, OrderPlaced};
use crate::support::{Seen, Signal, PATIENCE};

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use eventbus::{subscriber, Bus, Message, Options, Overflow, SubscribeError};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn order(customer: u64, n: u64) -> OrderPlaced {
    OrderPlaced {
        customer,
        publisher: 0,
        n,
    }
}

/// What one handling saw: the customer, the message's seq, and which task handled it.
type Handled = (u64, u64, tokio::task::Id);

#[test]
fn an_async_keyed_group_handles_one_keys_messages_in_topic_order_in_one_task() {
    let runtime = runtime();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let seen: Seen<Handled> = Seen::new();
    // Set while a handler of that customer is inside: two at once would be out of order.
    let inside: Arc<std::sync::Mutex<HashSet<u64>>> = Arc::default();
    let (record, busy) = (seen.clone(), Arc::clone(&inside));
    let group = bus.subscribe_group_async::<OrderPlaced, _, _, _>(
        Options::default()
            .workers(4)
            .key(customer_of)
            .capacity(16)
            .name("reserve"),
        move |m: Message<OrderPlaced>| {
            let (record, busy) = (record.clone(), Arc::clone(&busy));
            async move {
                assert!(busy.lock().unwrap().insert(m.customer), "two at once");
                tokio::task::yield_now().await;
                record.push((m.customer, m.seq(), tokio::task::id()));
                busy.lock().unwrap().remove(&m.customer);
            }
        },
    );
    let per_publisher = scale(1_000);
    // Two publishers, from threads of their own.
    let published: Vec<(u64, u64)> = std::thread::scope(|scope| {
        let publishers: Vec<_> = (0..2)
            .map(|publisher| {
                let bus = &bus;
                scope.spawn(move || {
                    (0..per_publisher)
                        .map(|n| {
                            let customer = (n * 7 + publisher) % 32;
                            (customer, bus.publish(order(customer, n)).unwrap())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        publishers
            .into_iter()
            .flat_map(|p| p.join().unwrap())
            .collect()
    });
    let stats = group.unsubscribe();
    let handled = seen.get();
    assert_eq!(handled.len() as u64, 2 * per_publisher);
    let seqs: HashSet<u64> = handled.iter().map(|&(_, seq, _)| seq).collect();
    assert_eq!(seqs.len() as u64, 2 * per_publisher, "each message once");
    let mut by_customer: HashMap<u64, Vec<(u64, tokio::task::Id)>> = HashMap::new();
    for &(customer, seq, task) in &handled {
        by_customer.entry(customer).or_default().push((seq, task));
    }
    assert_eq!(by_customer.len(), 32);
    for (customer, handled) in &by_customer {
        let tasks: HashSet<_> = handled.iter().map(|&(_, t)| t).collect();
        assert_eq!(tasks.len(), 1, "customer {customer} went to several tasks");
        let order: Vec<u64> = handled.iter().map(|&(seq, _)| seq).collect();
        let mut expected: Vec<u64> = published
            .iter()
            .filter(|&&(c, _)| c == *customer)
            .map(|&(_, seq)| seq)
            .collect();
        expected.sort_unstable();
        assert_eq!(order, expected, "customer {customer} out of topic order");
    }
    let tasks: HashSet<_> = handled.iter().map(|&(_, _, t)| t).collect();
    assert!(tasks.len() > 1 && tasks.len() <= 4, "{tasks:?}");
    assert_eq!(stats.workers.len(), 4);
    assert_eq!(stats.capacity, 4 * 16);
    assert_eq!(stats.delivered, 2 * per_publisher);
    identity_holds(&stats);
    assert_eq!(
        stats.workers.iter().map(|w| w.received).sum::<u64>(),
        stats.received
    );
    assert!(stats.workers.iter().filter(|w| w.received > 0).count() > 1);
    bus.close();
}

#[test]
fn without_a_key_each_message_goes_to_exactly_one_task() {
    let runtime = runtime();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let seen: Seen<u64> = Seen::new();
    let record = seen.clone();
    let group = bus.subscribe_group_async::<OrderPlaced, _, _, _>(
        Options::default().workers(4).capacity(8).name("shared"),
        move |m: Message<OrderPlaced>| {
            let record = record.clone();
            async move {
                tokio::task::yield_now().await;
                record.push(m.seq());
            }
        },
    );
    let n = scale(3_000);
    for i in 0..n {
        bus.publish(order(i, i)).unwrap();
    }
    let stats = group.unsubscribe();
    let mut seqs = seen.get();
    seqs.sort_unstable();
    assert_eq!(
        seqs,
        (0..n).collect::<Vec<_>>(),
        "each message exactly once"
    );
    assert_eq!((stats.received, stats.delivered), (n, n));
    assert_eq!(stats.capacity, 8, "one shared mailbox");
    identity_holds(&stats);
    assert_eq!(stats.workers.iter().map(|w| w.received).sum::<u64>(), n);
    for worker in &stats.workers {
        assert_eq!(worker.received, worker.delivered);
    }
    bus.close();
}

/// Each handler waits at a barrier that opens only once four are inside: it opens only if
/// the four workers' handlers are in progress at once. (The bound is a failure's, never a
/// synchronisation: it passes as soon as the barrier opens.)
#[test]
fn the_tasks_of_an_async_group_run_at_once() {
    for key in [false, true] {
        let runtime = runtime();
        let bus = Bus::builder().runtime(runtime.handle().clone()).build();
        let barrier = Arc::new(tokio::sync::Barrier::new(4));
        let opened = Arc::new(AtomicU64::new(0));
        let (gate, count) = (Arc::clone(&barrier), Arc::clone(&opened));
        let mut options = Options::default().workers(4);
        if key {
            options = options.key(|o: &OrderPlaced| o.customer);
        }
        let group = bus.subscribe_group_async::<OrderPlaced, _, _, _>(
            options,
            move |_: Message<OrderPlaced>| {
                let (gate, count) = (Arc::clone(&gate), Arc::clone(&count));
                async move {
                    if tokio::time::timeout(PATIENCE, gate.wait()).await.is_ok() {
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                }
            },
        );
        // With a key: four customers that the key spreads over the four workers.
        let mut customers = Vec::new();
        let mut lanes = HashSet::new();
        for customer in 0.. {
            if !key || lanes.insert(lane_of(customer, 4)) {
                customers.push(customer);
            }
            if customers.len() == 4 {
                break;
            }
        }
        for (n, &customer) in customers.iter().enumerate() {
            bus.publish(order(customer, n as u64)).unwrap();
        }
        let stats = group.unsubscribe();
        assert_eq!(
            opened.load(Ordering::SeqCst),
            4,
            "key {key}: not all at once"
        );
        assert_eq!(stats.delivered, 4);
        assert!(stats.workers.iter().all(|w| w.delivered == 1), "{stats:?}");
        bus.close();
    }
}

/// Which of `of` workers a customer's key picks, as the group does (found by asking a
/// group): the worker whose stats show it.
pub(super) fn lane_of(customer: u64, of: usize) -> usize {
    let bus = Bus::builder().build();
    let group = bus.subscribe_group::<OrderPlaced>(
        Options::default().workers(of).key(customer_of),
        |_: &Message<OrderPlaced>| {},
    );
    bus.publish(order(customer, 0)).unwrap();
    let stats = group.unsubscribe();
    bus.close();
    stats.workers.iter().position(|w| w.received == 1).unwrap()
}

#[test]
fn a_failing_message_is_retried_and_dead_lettered_in_its_own_mailbox() {
    let runtime = runtime();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let seen: Seen<u64> = Seen::new();
    let record = seen.clone();
    let group = bus.subscribe_group_async::<OrderPlaced, _, _, _>(
        Options::default()
            .workers(2)
            .key(customer_of)
            .retries(1)
            .backoff(std::time::Duration::from_millis(1))
            .name("fails"),
        move |m: Message<OrderPlaced>| {
            let record = record.clone();
            async move {
                tokio::task::yield_now().await;
                if m.n == 3 {
                    return Err("no stock");
                }
                record.push(m.n);
                Ok(())
            }
        },
    );
    for n in 0..10 {
        bus.publish(order(n % 3, n)).unwrap();
    }
    let stats = group.unsubscribe();
    let mut handled = seen.get();
    handled.sort_unstable();
    assert_eq!(handled, [0, 1, 2, 4, 5, 6, 7, 8, 9]);
    assert_eq!(
        (stats.dead_lettered, stats.retried, stats.failed),
        (1, 1, 2)
    );
    identity_holds(&stats);
    // All of it on the worker that has customer 0's mailbox.
    let failing = stats.workers.iter().filter(|w| w.failed > 0).count();
    assert_eq!(failing, 1, "{stats:?}");
    let letters = bus.dead_letters();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].subscriber(), "fails");
    assert_eq!(letters[0].payload::<OrderPlaced>().map(|o| o.n), Some(3));
    bus.close();
}

/// One worker is held in its handler; its mailbox (capacity 1, `DropNewest`) overflows, and
/// only its own counters show the drops.
#[test]
fn a_full_worker_mailbox_overflows_by_its_policy_alone() {
    let runtime = runtime();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let started = Signal::new();
    let hold = Arc::new(tokio::sync::Semaphore::new(0));
    let (signal, gate) = (started.clone(), Arc::clone(&hold));
    let group = bus.subscribe_group_async::<OrderPlaced, _, _, _>(
        Options::default()
            .workers(2)
            .key(customer_of)
            .capacity(1)
            .overflow(Overflow::DropNewest),
        move |m: Message<OrderPlaced>| {
            let (signal, gate) = (signal.clone(), Arc::clone(&gate));
            async move {
                if m.customer == 0 && m.n == 0 {
                    signal.send(0);
                    let _ = gate.acquire().await.unwrap();
                }
            }
        },
    );
    bus.publish(order(0, 0)).unwrap();
    assert_eq!(started.next(), 0);
    for n in 1..4 {
        bus.publish(order(0, n)).unwrap(); // one queued, two dropped
    }
    // The other worker's mailbox is untouched: it takes a message at once.
    let other = (1..).find(|&c| lane_of(c, 2) != lane_of(0, 2)).unwrap();
    bus.publish(order(other, 0)).unwrap();
    crate::support::until("the other worker handled its message", || {
        group.stats().workers.iter().any(|w| w.delivered == 1)
    });
    hold.add_permits(1);
    let stats = group.unsubscribe();
    assert_eq!((stats.delivered, stats.dropped), (3, 2), "{stats:?}");
    let mut dropped: Vec<u64> = stats.workers.iter().map(|w| w.dropped).collect();
    dropped.sort_unstable();
    assert_eq!(dropped, [0, 2]);
    identity_holds(&stats);
    bus.close();
}

#[test]
fn close_async_delivers_everything_async_groups_accepted() {
    let runtime = runtime();
    runtime.block_on(async {
        let bus = Bus::builder().build();
        let keyed = Arc::new(AtomicU64::new(0));
        let shared = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&keyed);
        let group = bus.subscribe_group_async::<OrderPlaced, _, _, _>(
            Options::default().workers(3).key(customer_of).capacity(4),
            move |_: Message<OrderPlaced>| {
                let counted = Arc::clone(&counted);
                async move {
                    tokio::task::yield_now().await;
                    counted.fetch_add(1, Ordering::SeqCst);
                }
            },
        );
        let counted = Arc::clone(&shared);
        let pool = bus.subscribe_group_async::<OrderPlaced, _, _, _>(
            Options::default().workers(3).capacity(4),
            move |_: Message<OrderPlaced>| {
                let counted = Arc::clone(&counted);
                async move {
                    tokio::task::yield_now().await;
                    counted.fetch_add(1, Ordering::SeqCst);
                }
            },
        );
        for n in 0..300 {
            bus.publish_async(order(n, n)).await.unwrap();
        }
        bus.close_async().await;
        assert_eq!(keyed.load(Ordering::SeqCst), 300);
        assert_eq!(shared.load(Ordering::SeqCst), 300);
        for stats in [group.stats(), pool.stats()] {
            assert_eq!(
                (stats.received, stats.delivered, stats.queued),
                (300, 300, 0),
                "{stats:?}"
            );
        }
    });
}

#[test]
fn an_async_group_needs_a_runtime_and_a_stream_cannot_be_a_group() {
    let bus = Bus::builder().build();
    let error = bus
        .try_subscribe_group_async(
            Options::default().workers(2).name("tasks"),
            |_: Message<OrderPlaced>| async {},
        )
        .unwrap_err();
    assert!(matches!(error, SubscribeError::NoRuntime { .. }), "{error}");
    let runtime = runtime();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    // The `FnMut` async subscribe points at the group call.
    let error = bus
        .try_subscribe_async(
            Options::default().workers(2),
            |_: Message<OrderPlaced>| async {},
        )
        .unwrap_err();
    assert!(
        error.to_string().contains("subscribe_group_async"),
        "{error}"
    );
    assert!(bus.stats().subscriptions.is_empty());
    bus.close();
}

mod registered {
    use super::*;

    pub(super) static RESERVED: std::sync::Mutex<Vec<(u64, u64)>> =
        std::sync::Mutex::new(Vec::new());

    #[subscriber(workers = 4, key = customer_of, name = "reserve_async")]
    async fn reserve(o: &OrderPlaced) {
        tokio::task::yield_now().await;
        RESERVED.lock().unwrap().push((o.customer, o.n));
    }
}

#[test]
fn an_async_subscriber_attribute_makes_a_keyed_group() {
    let runtime = runtime();
    runtime.block_on(async {
        let bus = Bus::builder()
            .registered_in(concat!(module_path!(), "::registered"))
            .build();
        for n in 0..400 {
            bus.publish_async(order(n % 10, n)).await.unwrap();
        }
        bus.close_async().await;
        let stats = bus.stats();
        let group = &stats.subscriptions[0];
        assert_eq!(
            (group.name.as_str(), group.workers.len(), group.delivered),
            ("reserve_async", 4, 400)
        );
        let handled = registered::RESERVED.lock().unwrap().clone();
        assert_eq!(handled.len(), 400);
        let mut last: HashMap<u64, u64> = HashMap::new();
        for &(customer, n) in &handled {
            if let Some(before) = last.insert(customer, n) {
                assert!(before < n, "customer {customer} out of order");
            }
        }
    });
}
