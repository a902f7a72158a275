//! Consumer groups: one subscription, several workers. With a key, each key's messages go to
//! one worker, in topic order; without one, the workers share a mailbox and each message is
//! handled once. Stats per group and per worker; bad sizes, keys and places refused.

use crate::support;

#[cfg(feature = "tokio")]
mod async_groups;
mod log_groups;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::ThreadId;

use eventbus::{subscriber, Bus, Message, Options, SubscribeError, SubscriptionStats, Topic};
use support::{until, Latch, Seen, Signal};

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
#[topic(name = "orders.placed")]
struct OrderPlaced {
    customer: u64,
    publisher: u64,
    n: u64,
}

#[derive(Topic, Debug)]
struct Other(u64);

fn customer_of(o: &OrderPlaced) -> u64 {
    o.customer
}

/// Iterations, fewer in CI runs that set `EVENTBUS_TEST_SCALE=small`.
fn scale(n: u64) -> u64 {
    match std::env::var("EVENTBUS_TEST_SCALE").as_deref() {
        Ok("small") => n / 10,
        _ => n,
    }
}

fn identity_holds(s: &SubscriptionStats) {
    assert_eq!(
        s.received,
        s.delivered + s.dead_lettered + s.dropped + s.queued + s.in_handler,
        "{s:?}"
    );
}

/// What one handling saw: the customer, the message's seq, and which thread handled it.
type Handled = (u64, u64, ThreadId);

#[test]
fn one_keys_messages_are_handled_in_topic_order_by_one_worker_under_four_publishers() {
    let bus = Bus::builder().build();
    let seen: Seen<Handled> = Seen::new();
    let record = seen.clone();
    let group = bus.subscribe_group::<OrderPlaced>(
        Options::default()
            .workers(4)
            .key(customer_of)
            .capacity(16)
            .name("reserve"),
        move |m: &Message<OrderPlaced>| {
            record.push((m.customer, m.seq(), std::thread::current().id()));
        },
    );
    let per_publisher = scale(2_000);
    // What each publisher published, by customer, with the seq the bus gave it.
    let published: Vec<Vec<(u64, u64)>> = std::thread::scope(|scope| {
        let publishers: Vec<_> = (0..4)
            .map(|publisher| {
                let bus = &bus;
                scope.spawn(move || {
                    (0..per_publisher)
                        .map(|n| {
                            let customer = (n * 7 + publisher) % 32;
                            let order = OrderPlaced {
                                customer,
                                publisher,
                                n,
                            };
                            (customer, bus.publish(order).unwrap())
                        })
                        .collect()
                })
            })
            .collect();
        publishers.into_iter().map(|p| p.join().unwrap()).collect()
    });
    let stats = group.unsubscribe();
    let handled = seen.get();
    assert_eq!(handled.len() as u64, 4 * per_publisher);
    // Every message once.
    let seqs: HashSet<u64> = handled.iter().map(|&(_, seq, _)| seq).collect();
    assert_eq!(seqs.len() as u64, 4 * per_publisher);
    // Per customer: one thread, and the seqs in the order they were handled are increasing
    // (the handling order of one worker is its pushes' order).
    let mut by_customer: HashMap<u64, Vec<(u64, ThreadId)>> = HashMap::new();
    for &(customer, seq, thread) in &handled {
        by_customer.entry(customer).or_default().push((seq, thread));
    }
    assert_eq!(by_customer.len(), 32);
    for (customer, handled) in &by_customer {
        let threads: HashSet<_> = handled.iter().map(|&(_, t)| t).collect();
        assert_eq!(
            threads.len(),
            1,
            "customer {customer} went to several workers"
        );
        let order: Vec<u64> = handled.iter().map(|&(seq, _)| seq).collect();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(order, sorted, "customer {customer} out of topic order");
        // And it is exactly the customer's published seqs.
        let mut expected: Vec<u64> = published
            .iter()
            .flatten()
            .filter(|&&(c, _)| c == *customer)
            .map(|&(_, seq)| seq)
            .collect();
        expected.sort_unstable();
        assert_eq!(order, expected);
    }
    // The group is one subscription of four workers.
    assert_eq!(stats.workers.len(), 4);
    assert_eq!(stats.capacity, 4 * 16);
    assert_eq!(stats.delivered, 4 * per_publisher);
    identity_holds(&stats);
    let per_worker: u64 = stats.workers.iter().map(|w| w.received).sum();
    assert_eq!(per_worker, stats.received);
    // 32 customers over 4 workers: more than one worker had work.
    assert!(stats.workers.iter().filter(|w| w.received > 0).count() > 1);
}

#[test]
fn without_a_key_each_message_goes_to_exactly_one_worker() {
    let bus = Bus::builder().build();
    let seen: Seen<(u64, ThreadId)> = Seen::new();
    let record = seen.clone();
    let group = bus.subscribe_group::<OrderPlaced>(
        Options::default().workers(4).capacity(8).name("shared"),
        move |m: &Message<OrderPlaced>| {
            record.push((m.seq(), std::thread::current().id()));
        },
    );
    let n = scale(5_000);
    for i in 0..n {
        bus.publish(OrderPlaced {
            customer: i,
            publisher: 0,
            n: i,
        })
        .unwrap();
    }
    let stats = group.unsubscribe();
    let mut seqs: Vec<u64> = seen.get().iter().map(|&(seq, _)| seq).collect();
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
}

#[test]
fn the_workers_of_a_group_run_at_once() {
    let bus = Bus::builder().build();
    let inside = Arc::new(AtomicU64::new(0));
    let all_in = Latch::new();
    let (count, gate) = (Arc::clone(&inside), all_in.clone());
    // Each handler waits until four are inside: only four workers at once get there.
    let group = bus.subscribe_group::<OrderPlaced>(
        Options::default().workers(4),
        move |_: &Message<OrderPlaced>| {
            if count.fetch_add(1, Ordering::SeqCst) + 1 == 4 {
                gate.open();
            }
            gate.wait();
        },
    );
    for i in 0..4 {
        bus.publish(OrderPlaced {
            customer: i,
            publisher: 0,
            n: i,
        })
        .unwrap();
    }
    all_in.wait();
    let stats = group.unsubscribe();
    assert_eq!(stats.delivered, 4);
    assert!(stats.workers.iter().all(|w| w.delivered == 1), "{stats:?}");
}

#[test]
fn a_hot_key_shows_as_one_busy_worker() {
    let bus = Bus::builder().build();
    let _group = bus.subscribe::<OrderPlaced>(
        Options::default()
            .workers(4)
            .key(|o: &OrderPlaced| o.customer)
            .name("hot"),
        |_: &Message<OrderPlaced>| {},
    );
    for n in 0..900 {
        let hot = OrderPlaced {
            customer: 7,
            publisher: 0,
            n,
        };
        bus.publish(hot).unwrap();
    }
    for customer in 100..200 {
        let cold = OrderPlaced {
            customer,
            publisher: 0,
            n: 0,
        };
        bus.publish(cold).unwrap();
    }
    bus.close();
    let stats = bus.stats();
    let stats = stats
        .subscriptions
        .iter()
        .find(|s| s.name == "hot")
        .unwrap();
    identity_holds(stats);
    assert_eq!((stats.received, stats.delivered), (1000, 1000));
    let mut received: Vec<u64> = stats.workers.iter().map(|w| w.received).collect();
    received.sort_unstable();
    assert!(received[3] >= 900, "{received:?}");
    assert!(received[..3].iter().all(|&r| r < 100), "{received:?}");
    for worker in &stats.workers {
        assert_eq!(
            worker.received,
            worker.delivered
                + worker.dead_lettered
                + worker.dropped
                + worker.queued
                + worker.in_handler
        );
    }
}

#[test]
fn a_failing_message_is_retried_and_dead_lettered_in_its_own_mailbox() {
    let bus = Bus::builder().build();
    let seen: Seen<u64> = Seen::new();
    let record = seen.clone();
    let group = bus.subscribe_group::<OrderPlaced>(
        Options::default()
            .workers(2)
            .key(customer_of)
            .retries(1)
            .backoff(std::time::Duration::from_millis(1))
            .name("fails"),
        move |m: &Message<OrderPlaced>| {
            if m.n == 3 {
                return Err("no stock");
            }
            record.push(m.n);
            Ok(())
        },
    );
    for n in 0..10 {
        bus.publish(OrderPlaced {
            customer: n % 3,
            publisher: 0,
            n,
        })
        .unwrap();
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
    let letters = bus.dead_letters();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].subscriber(), "fails");
    assert_eq!(letters[0].payload::<OrderPlaced>().map(|o| o.n), Some(3));
}

#[test]
fn close_delivers_everything_a_group_accepted() {
    let bus = Bus::builder().build();
    let done = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&done);
    let group = bus.subscribe_group::<OrderPlaced>(
        Options::default().workers(3).key(customer_of).capacity(4),
        move |_: &Message<OrderPlaced>| {
            counted.fetch_add(1, Ordering::SeqCst);
        },
    );
    let shared = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&shared);
    let _pool = bus.subscribe_group::<OrderPlaced>(
        Options::default().workers(3).capacity(4),
        move |_: &Message<OrderPlaced>| {
            counted.fetch_add(1, Ordering::SeqCst);
        },
    );
    for n in 0..300 {
        bus.publish(OrderPlaced {
            customer: n,
            publisher: 0,
            n,
        })
        .unwrap();
    }
    bus.close();
    assert_eq!(done.load(Ordering::SeqCst), 300);
    assert_eq!(shared.load(Ordering::SeqCst), 300);
    let stats = group.stats();
    assert_eq!(
        (stats.received, stats.delivered, stats.queued),
        (300, 300, 0)
    );
}

#[test]
fn a_group_can_unsubscribe_itself_from_its_handler() {
    let bus = Bus::builder().build();
    let own = Arc::new(std::sync::Mutex::new(None::<eventbus::Subscription>));
    let done = Signal::new();
    let (slot, signal) = (Arc::clone(&own), done.clone());
    let group = bus.subscribe_group::<OrderPlaced>(
        Options::default().workers(2),
        move |m: &Message<OrderPlaced>| {
            if m.n == 1 {
                if let Some(me) = slot.lock().unwrap().take() {
                    me.unsubscribe();
                }
                signal.send(1);
            }
        },
    );
    *own.lock().unwrap() = Some(group);
    for n in 0..2 {
        bus.publish(OrderPlaced {
            customer: 0,
            publisher: 0,
            n,
        })
        .unwrap();
    }
    assert_eq!(done.next(), 1);
    until("the group left the bus", || {
        bus.stats().subscriptions.is_empty()
    });
    bus.close();
}

#[test]
fn bad_groups_are_refused_with_the_reason() {
    let bus = Bus::builder().build();
    let handler = |_: &Message<OrderPlaced>| {};
    let refused = |options: Options| bus.try_subscribe_group::<OrderPlaced>(options, handler);
    assert!(matches!(
        refused(Options::default().workers(0)),
        Err(SubscribeError::Workers { workers: 0, .. })
    ));
    let too_many = Options::MAX_WORKERS + 1;
    let error = refused(Options::default().workers(too_many)).unwrap_err();
    assert!(matches!(error, SubscribeError::Workers { workers, .. } if workers == too_many));
    assert!(
        error.to_string().contains("from 1 to 256 workers"),
        "{error}"
    );
    let error = refused(Options::default().workers(4).key(|o: &Other| o.0)).unwrap_err();
    assert!(
        matches!(
            error,
            SubscribeError::Key {
                topic: "orders.placed",
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("Other"), "{error}");
    let error = refused(Options::default().key(customer_of).name("lonely")).unwrap_err();
    assert!(matches!(error, SubscribeError::Group { .. }), "{error}");
    assert!(error.to_string().contains("workers(n)"), "{error}");
    // The plain `subscribe` refuses the same.
    let error = bus
        .try_subscribe::<OrderPlaced>(Options::default().workers(0), handler)
        .unwrap_err();
    assert!(matches!(error, SubscribeError::Workers { .. }));
    assert!(bus.stats().subscriptions.is_empty());
    bus.close();
}

/// A publisher sees a group as one subscriber of its topic.
#[test]
fn a_group_is_one_subscription_in_the_bus_stats() {
    let bus = Bus::builder().build();
    let _group = bus.subscribe_group::<OrderPlaced>(
        Options::default().workers(4).key(customer_of).name("g"),
        |_: &Message<OrderPlaced>| {},
    );
    bus.publish(OrderPlaced {
        customer: 1,
        publisher: 0,
        n: 0,
    })
    .unwrap();
    bus.close();
    let stats = bus.stats();
    assert_eq!(stats.subscriptions.len(), 1);
    assert_eq!(stats.topics[0].subscribers, 1);
    assert_eq!(stats.subscriptions[0].workers.len(), 4);
}

mod registered {
    use super::*;

    pub(super) static RESERVED: std::sync::Mutex<Vec<(u64, u64, ThreadId)>> =
        std::sync::Mutex::new(Vec::new());

    #[subscriber(workers = 4, key = customer_of, capacity = 256, name = "reserve_stock")]
    fn reserve_stock(o: &Message<OrderPlaced>) -> Result<(), String> {
        let handled = (o.customer, o.seq(), std::thread::current().id());
        RESERVED.lock().unwrap().push(handled);
        Ok(())
    }
}

#[test]
fn a_subscriber_attribute_makes_a_keyed_group() {
    let registered = Bus::registered();
    let entry = registered
        .iter()
        .find(|s| s.name == "reserve_stock")
        .unwrap();
    assert_eq!(
        entry.options,
        Options::default()
            .capacity(256)
            .workers(4)
            .name("reserve_stock")
    );
    let bus = Bus::builder()
        .registered_in(concat!(module_path!(), "::registered"))
        .build();
    for n in 0..400 {
        bus.publish(OrderPlaced {
            customer: n % 10,
            publisher: 0,
            n,
        })
        .unwrap();
    }
    bus.close();
    let stats = bus.stats();
    let group = &stats.subscriptions[0];
    assert_eq!(
        (group.name.as_str(), group.workers.len()),
        ("reserve_stock", 4)
    );
    assert_eq!(group.delivered, 400);
    let handled = registered::RESERVED.lock().unwrap().clone();
    let mut threads: HashMap<u64, HashSet<ThreadId>> = HashMap::new();
    let mut last: HashMap<u64, u64> = HashMap::new();
    for &(customer, seq, thread) in &handled {
        threads.entry(customer).or_default().insert(thread);
        if let Some(before) = last.insert(customer, seq) {
            assert!(before < seq, "customer {customer} out of order");
        }
    }
    assert!(threads.values().all(|t| t.len() == 1));
}

#[cfg(feature = "tokio")]
#[test]
fn an_fnmut_async_subscriber_and_a_stream_cannot_be_groups() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let error = bus
        .try_subscribe_async(
            Options::default().workers(2).name("tasks"),
            |_: Message<OrderPlaced>| async {},
        )
        .unwrap_err();
    assert!(matches!(error, SubscribeError::Group { .. }), "{error}");
    assert!(error.to_string().contains("async"), "{error}");
    let error = bus
        .try_stream::<OrderPlaced>(Options::default().workers(2).key(customer_of))
        .unwrap_err();
    assert!(matches!(error, SubscribeError::Group { .. }), "{error}");
    assert!(bus.stats().subscriptions.is_empty());
    bus.close();
}
