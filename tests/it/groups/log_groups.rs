//! Consumer groups on log topics (`#[topic(retain = ..)]`): a keyed group's workers each read
//! the log at their own position and take the messages their key picks, so one key's history
//! and live messages reach one worker, in order, each message once across the group; a group
//! without a key shares one position, each message going to one of its workers.

use super::identity_holds;
use crate::support::{Latch, Seen, Signal, PATIENCE};

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::ThreadId;
use std::time::Instant;

use eventbus::{Bus, Message, Options, Overflow, Start, Topic};

/// A log topic that keeps more than these tests publish.
#[derive(Topic, Debug, Clone, Copy, PartialEq)]
#[topic(retain = 1000)]
struct Visit {
    customer: u64,
    n: u64,
}

fn customer(v: &Visit) -> u64 {
    v.customer
}

/// What one handling saw: the customer, the message's seq, and which thread handled it.
type Handled = (u64, u64, ThreadId);

/// Checks what a keyed group handled: every seq in `expected` once, each customer's in seq
/// order on one thread.
fn check_keyed(seen: &[Handled], expected: std::ops::Range<u64>) {
    let mut seqs: Vec<u64> = seen.iter().map(|h| h.1).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, expected.collect::<Vec<_>>(), "each message once");
    let mut by_customer: HashMap<u64, Vec<(u64, ThreadId)>> = HashMap::new();
    for &(customer, seq, thread) in seen {
        by_customer.entry(customer).or_default().push((seq, thread));
    }
    for (customer, handled) in by_customer {
        let seqs: Vec<u64> = handled.iter().map(|h| h.0).collect();
        let mut sorted = seqs.clone();
        sorted.sort_unstable();
        assert_eq!(seqs, sorted, "customer {customer}: out of order");
        let threads: HashSet<ThreadId> = handled.iter().map(|h| h.1).collect();
        assert_eq!(threads.len(), 1, "customer {customer}: on {threads:?}");
    }
}

/// Issue 26: a keyed group started late replays the log's history and goes on with the live
/// messages, one key's on one worker in order, each message once across the group.
#[test]
fn a_keyed_group_replays_a_log_and_goes_on_live_one_key_per_worker_in_order() {
    let bus = Bus::builder().build();
    for n in 0..60 {
        bus.publish(Visit { customer: n % 7, n }).unwrap();
    }
    let seen: Seen<Handled> = Seen::new();
    let record = seen.clone();
    let options = Options::default()
        .name("visits")
        .workers(3)
        .key(customer)
        .start(Start::Earliest);
    let group = bus.subscribe_group::<Visit>(options, move |m: &Message<Visit>| {
        record.push((m.customer, m.seq(), std::thread::current().id()));
    });
    std::thread::scope(|scope| {
        for publisher in 0..2u64 {
            let bus = &bus;
            scope.spawn(move || {
                for i in 0..40 {
                    let n = 60 + publisher * 40 + i;
                    bus.publish(Visit { customer: n % 7, n }).unwrap();
                }
            });
        }
    });
    bus.close();
    check_keyed(&seen.get(), 0..140);
    let stats = group.stats();
    identity_holds(&stats);
    assert_eq!((stats.received, stats.delivered), (140, 140), "{stats:?}");
    assert_eq!(stats.workers.len(), 3);
    let per_worker: u64 = stats.workers.iter().map(|w| w.delivered).sum();
    assert_eq!(per_worker, 140);
    let busy = stats.workers.iter().filter(|w| w.delivered > 0).count();
    assert!(busy >= 2, "7 customers over 3 workers: {stats:?}");
}

/// A keyed group from `Start::Seq(n)` gets the history from `n` on, and a failing message is
/// retried and dead-lettered by its own worker, the others going on.
#[test]
fn a_keyed_log_group_starts_at_a_seq_and_dead_letters_per_worker() {
    let bus = Bus::builder().build();
    for n in 0..30 {
        bus.publish(Visit { customer: n % 3, n }).unwrap();
    }
    let seen: Seen<Handled> = Seen::new();
    let record = seen.clone();
    let options = Options::default()
        .workers(2)
        .key(customer)
        .start(Start::Seq(10))
        .retries(1)
        .backoff(std::time::Duration::from_millis(1));
    let group = bus.subscribe_group::<Visit>(options, move |m: &Message<Visit>| {
        record.push((m.customer, m.seq(), std::thread::current().id()));
        if m.n % 10 == 5 {
            return Err(format!("visit {} is bad", m.n));
        }
        Ok(())
    });
    for n in 30..40 {
        bus.publish(Visit { customer: n % 3, n }).unwrap();
    }
    bus.close();
    // Each bad one is seen twice (a retry): once in the check below.
    let mut once = seen.get();
    once.dedup_by_key(|h| h.1);
    let mut firsts: Vec<Handled> = Vec::new();
    for h in once {
        if !firsts.iter().any(|f| f.1 == h.1) {
            firsts.push(h);
        }
    }
    check_keyed(&firsts, 10..40);
    let letters: Vec<u64> = bus.dead_letters().iter().map(|l| l.seq()).collect();
    let mut letters = letters;
    letters.sort_unstable();
    assert_eq!(letters, [15, 25, 35]);
    let stats = group.stats();
    identity_holds(&stats);
    assert_eq!(
        (stats.received, stats.delivered, stats.dead_lettered),
        (30, 27, 3)
    );
}

/// `Block` on a log: a worker `capacity` messages behind holds the publishers, per worker, as
/// a single log subscription does; the held worker's key keeps its order when released.
#[test]
fn a_stuck_keyed_log_worker_holds_publishers_once_it_is_capacity_behind() {
    let bus = Bus::builder().build();
    let (release, started) = (Latch::new(), Signal::new());
    let (gate, signal) = (release.clone(), started.clone());
    let seen: Seen<Handled> = Seen::new();
    let record = seen.clone();
    let options = Options::default()
        .workers(2)
        .key(customer)
        .capacity(4)
        .overflow(Overflow::Block);
    bus.subscribe_group::<Visit>(options, move |m: &Message<Visit>| {
        if m.n == 0 {
            signal.send(0);
            gate.wait();
        }
        record.push((m.customer, m.seq(), std::thread::current().id()));
    });
    bus.publish(Visit { customer: 0, n: 0 }).unwrap();
    assert_eq!(started.next(), 0);
    // The stuck worker's position stays at 0: at most `capacity` more are accepted.
    let mut accepted = 1;
    while bus
        .try_publish(Visit {
            customer: accepted % 2,
            n: accepted,
        })
        .is_ok()
    {
        accepted += 1;
        assert!(
            accepted < 100,
            "a stuck Block worker must hold the publishers"
        );
    }
    assert!((2..=5).contains(&accepted), "accepted {accepted}");
    release.open();
    bus.close();
    check_keyed(&seen.get(), 0..accepted);
}

/// A log topic that keeps little, so that a held group is lapped by the trim.
#[derive(Topic, Debug, Clone, Copy, PartialEq)]
#[topic(retain = 8)]
struct Tick(u64);

/// Holds each worker at its first message until `of` different workers are in their
/// handlers at once, so the test knows (rather than hopes) that the group shares its work;
/// gives up after `PATIENCE`, and the test's count of workers then fails.
#[derive(Clone)]
struct AllIn {
    threads: Arc<(Mutex<HashSet<ThreadId>>, Condvar)>,
    of: usize,
}

impl AllIn {
    fn new(of: usize) -> Self {
        AllIn {
            threads: Arc::new((Mutex::new(HashSet::new()), Condvar::new())),
            of,
        }
    }

    fn arrive(&self) {
        let (threads, all_in) = &*self.threads;
        let mut threads = threads.lock().unwrap();
        if threads.insert(std::thread::current().id()) {
            all_in.notify_all();
            let deadline = Instant::now() + PATIENCE;
            while threads.len() < self.of && Instant::now() < deadline {
                threads = all_in.wait_timeout(threads, PATIENCE).unwrap().0;
            }
        }
    }

    fn count(&self) -> usize {
        self.threads.0.lock().unwrap().len()
    }
}

/// Issue 26: a group without a key on a log topic shares one position in the log. Started
/// from the beginning, it gets the history and then the live messages, each exactly once
/// across its workers (in no promised order), and every worker takes part; the close
/// delivers everything accepted before it returns.
#[test]
fn a_keyless_group_shares_one_position_in_a_log_history_and_live_each_once() {
    let bus = Bus::builder().build();
    for n in 0..30 {
        bus.publish(Visit { customer: n % 7, n }).unwrap();
    }
    let seen: Seen<Handled> = Seen::new();
    let record = seen.clone();
    let all_in = AllIn::new(3);
    let arrive = all_in.clone();
    let options = Options::default()
        .name("visits")
        .workers(3)
        .start(Start::Earliest);
    let group = bus.subscribe_group::<Visit>(options, move |m: &Message<Visit>| {
        arrive.arrive();
        record.push((m.customer, m.seq(), std::thread::current().id()));
    });
    std::thread::scope(|scope| {
        for publisher in 0..2u64 {
            let bus = &bus;
            scope.spawn(move || {
                for i in 0..40 {
                    let n = 30 + publisher * 40 + i;
                    bus.publish(Visit { customer: n % 7, n }).unwrap();
                }
            });
        }
    });
    bus.close();
    let seen = seen.get();
    let mut seqs: Vec<u64> = seen.iter().map(|h| h.1).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..110).collect::<Vec<_>>(), "each message once");
    assert_eq!(all_in.count(), 3, "every worker took part");
    let threads: HashSet<ThreadId> = seen.iter().map(|h| h.2).collect();
    assert_eq!(threads.len(), 3);
    let stats = group.stats();
    identity_holds(&stats);
    assert_eq!((stats.received, stats.delivered), (110, 110), "{stats:?}");
    assert_eq!(stats.workers.len(), 3);
    assert!(stats.workers.iter().all(|w| w.delivered > 0), "{stats:?}");
    assert_eq!(stats.workers.iter().map(|w| w.delivered).sum::<u64>(), 110);
}

/// From `Start::Seq(n)` and with a filter: the history from `n`, what the filter lets
/// through, once; what it rejects counted as filtered.
#[test]
fn a_keyless_log_group_starts_at_a_seq_and_filters() {
    let bus = Bus::builder().build();
    for n in 0..20 {
        bus.publish(Visit { customer: 0, n }).unwrap();
    }
    let seen: Seen<Handled> = Seen::new();
    let record = seen.clone();
    let options = Options::default()
        .workers(2)
        .start(Start::Seq(5))
        .filter(|v: &Visit| v.n % 2 == 0);
    let group = bus.subscribe_group::<Visit>(options, move |m: &Message<Visit>| {
        record.push((m.customer, m.seq(), std::thread::current().id()));
    });
    for n in 20..30 {
        bus.publish(Visit { customer: 0, n }).unwrap();
    }
    bus.close();
    let mut seqs: Vec<u64> = seen.get().iter().map(|h| h.1).collect();
    seqs.sort_unstable();
    let even: Vec<u64> = (5..30).filter(|n| n % 2 == 0).collect();
    assert_eq!(seqs, even);
    let stats = group.stats();
    identity_holds(&stats);
    assert_eq!(
        (stats.received, stats.delivered, stats.filtered),
        (12, 12, 13),
        "{stats:?}"
    );
}

/// `DropOldest`: a keyless group lapped by the trim skips to the oldest message kept and
/// counts what it lost as dropped, as a single log subscription does.
#[test]
fn a_lapped_keyless_log_group_skips_to_the_oldest_kept_and_counts_the_lap() {
    let bus = Bus::builder().build();
    let (release, started) = (Latch::new(), Signal::new());
    let (gate, signal) = (release.clone(), started.clone());
    let seen: Seen<u64> = Seen::new();
    let record = seen.clone();
    let options = Options::default()
        .workers(3)
        .capacity(4)
        .overflow(Overflow::DropOldest);
    let group = bus.subscribe_group::<Tick>(options, move |m: &Message<Tick>| {
        if m.0 < 3 {
            signal.send(m.0);
            gate.wait();
        }
        record.push(m.seq());
    });
    for n in 0..3 {
        bus.publish(Tick(n)).unwrap();
    }
    // Each worker holds one of the first three: the group's position is 3.
    let mut held: Vec<u64> = (0..3).map(|_| started.next()).collect();
    held.sort_unstable();
    assert_eq!(held, [0, 1, 2]);
    for n in 3..43 {
        bus.publish(Tick(n)).unwrap();
    }
    // The log keeps 35..43: 3..35 were trimmed before the group read them.
    release.open();
    bus.close();
    let mut seqs = seen.get();
    seqs.sort_unstable();
    let expected: Vec<u64> = (0..3).chain(35..43).collect();
    assert_eq!(seqs, expected);
    let stats = group.stats();
    identity_holds(&stats);
    assert_eq!(
        (stats.received, stats.delivered, stats.dropped),
        (43, 11, 32),
        "{stats:?}"
    );
}

/// `Block`: a keyless group `capacity` messages behind in the log holds the publishers (the
/// messages in its workers' handlers are theirs, as a shared mailbox's are); released, it
/// delivers every accepted message once.
#[test]
fn a_keyless_log_group_capacity_behind_holds_the_publishers() {
    let bus = Bus::builder().build();
    let (release, started) = (Latch::new(), Signal::new());
    let (gate, signal) = (release.clone(), started.clone());
    let seen: Seen<u64> = Seen::new();
    let record = seen.clone();
    let options = Options::default()
        .workers(2)
        .capacity(4)
        .overflow(Overflow::Block);
    let group = bus.subscribe_group::<Visit>(options, move |m: &Message<Visit>| {
        if m.n < 2 {
            signal.send(m.n);
            gate.wait();
        }
        record.push(m.seq());
    });
    for n in 0..2 {
        bus.publish(Visit { customer: 0, n }).unwrap();
    }
    let mut held = [started.next(), started.next()];
    held.sort_unstable();
    assert_eq!(held, [0, 1]);
    // Both workers hold one: four more wait in the log, then the publishers are held.
    let mut accepted = 2;
    while bus
        .try_publish(Visit {
            customer: 0,
            n: accepted,
        })
        .is_ok()
    {
        accepted += 1;
        assert!(
            accepted < 100,
            "a held Block group must hold the publishers"
        );
    }
    assert_eq!(accepted, 6);
    release.open();
    bus.close();
    let mut seqs = seen.get();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..6).collect::<Vec<_>>());
    let stats = group.stats();
    identity_holds(&stats);
    assert_eq!((stats.received, stats.delivered), (6, 6), "{stats:?}");
}

/// A keyed group started at a seq the log no longer keeps: what was trimmed before it started
/// is counted as dropped once for the group (on its first worker: no worker can tell whose
/// it was), not once per worker.
#[test]
fn a_keyed_log_group_started_before_the_oldest_kept_counts_the_gap_once() {
    let bus = Bus::builder().build();
    for n in 0..20 {
        bus.publish(Tick(n)).unwrap();
    }
    let seen: Seen<u64> = Seen::new();
    let record = seen.clone();
    let options = Options::default()
        .workers(2)
        .key(|t: &Tick| t.0 % 2)
        .start(Start::Seq(5));
    let group = bus.subscribe_group::<Tick>(options, move |m: &Message<Tick>| {
        record.push(m.seq());
    });
    bus.close();
    // The log keeps 12..20: 5..12 were trimmed before the group started.
    let mut seqs = seen.get();
    seqs.sort_unstable();
    assert_eq!(seqs, (12..20).collect::<Vec<_>>());
    let stats = group.stats();
    identity_holds(&stats);
    assert_eq!(
        (stats.received, stats.delivered, stats.dropped),
        (15, 8, 7),
        "{stats:?}"
    );
}

/// Unsubscribing a keyless log group delivers what it had accepted (the messages in the log
/// when it left), each once, and nothing published after.
#[test]
fn an_unsubscribed_keyless_log_group_delivers_what_it_accepted_and_no_more() {
    let bus = Bus::builder().build();
    let seen: Seen<u64> = Seen::new();
    let record = seen.clone();
    let options = Options::default().workers(3).capacity(8);
    let group = bus.subscribe_group::<Visit>(options, move |m: &Message<Visit>| {
        record.push(m.seq());
    });
    for n in 0..50 {
        bus.publish(Visit { customer: 0, n }).unwrap();
    }
    let stats = group.unsubscribe();
    for n in 50..60 {
        bus.publish(Visit { customer: 0, n }).unwrap();
    }
    bus.close();
    let mut seqs = seen.get();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..50).collect::<Vec<_>>());
    identity_holds(&stats);
    assert_eq!((stats.received, stats.delivered), (50, 50), "{stats:?}");
}

/// What a log group cannot do is refused with what to do instead: `DropOldest` on a keyed
/// group (a worker lapped by the trim cannot tell which of the messages it lost were its
/// own, so its drops could not be counted).
#[test]
fn a_drop_oldest_keyed_group_on_a_log_topic_is_refused_with_the_way_out() {
    let bus = Bus::builder().build();
    let handler = |_: &Message<Visit>| {};
    let options = Options::default()
        .workers(2)
        .key(customer)
        .overflow(Overflow::DropOldest);
    let error = bus
        .try_subscribe_group::<Visit>(options, handler)
        .unwrap_err();
    assert!(
        matches!(error, eventbus::SubscribeError::Group { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("Block"), "{error}");
    assert!(bus.stats().subscriptions.is_empty());
    bus.close();
}

/// The same with tasks: `subscribe_group_async` with a key on a log topic replays and goes
/// on live, one key's messages in order by one task.
#[cfg(feature = "tokio")]
#[test]
fn an_async_keyed_group_replays_a_log_one_key_in_order() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    for n in 0..50 {
        bus.publish(Visit { customer: n % 5, n }).unwrap();
    }
    let seen: Seen<(u64, u64)> = Seen::new();
    let record = seen.clone();
    let options = Options::default()
        .workers(3)
        .key(customer)
        .start(Start::Earliest);
    let group = bus.subscribe_group_async(options, move |m: Message<Visit>| {
        let record = record.clone();
        async move {
            tokio::task::yield_now().await;
            record.push((m.customer, m.seq()));
        }
    });
    runtime.block_on(async {
        for n in 50..100 {
            bus.publish_async(Visit { customer: n % 5, n })
                .await
                .unwrap();
        }
        bus.close_async().await;
    });
    let seen = seen.get();
    let mut seqs: Vec<u64> = seen.iter().map(|h| h.1).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..100).collect::<Vec<_>>());
    for customer in 0..5 {
        let of: Vec<u64> = seen
            .iter()
            .filter(|h| h.0 == customer)
            .map(|h| h.1)
            .collect();
        assert!(
            of.windows(2).all(|w| w[0] < w[1]),
            "customer {customer}: {of:?}"
        );
    }
    let stats = group.stats();
    identity_holds(&stats);
    assert_eq!((stats.received, stats.delivered), (100, 100));
}

/// The same with tasks: `subscribe_group_async` without a key on a log topic shares one
/// position, history and live messages each to exactly one task, every task taking part.
#[cfg(feature = "tokio")]
#[test]
fn an_async_keyless_group_shares_a_log_each_message_once() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    for n in 0..40 {
        bus.publish(Visit { customer: 0, n }).unwrap();
    }
    let seen: Seen<(tokio::task::Id, u64)> = Seen::new();
    let record = seen.clone();
    // Each task waits at its first message until all three are in their handlers.
    let (arrived, _) = tokio::sync::watch::channel(HashSet::<tokio::task::Id>::new());
    let arrived = Arc::new(arrived);
    let count = Arc::clone(&arrived);
    let options = Options::default().workers(3).start(Start::Earliest);
    let group = bus.subscribe_group_async(options, move |m: Message<Visit>| {
        let (record, arrived) = (record.clone(), Arc::clone(&arrived));
        async move {
            let task = tokio::task::id();
            let mut first = false;
            arrived.send_modify(|tasks| first = tasks.insert(task));
            if first {
                let mut all_in = arrived.subscribe();
                let _ =
                    tokio::time::timeout(PATIENCE, all_in.wait_for(|tasks| tasks.len() >= 3)).await;
            }
            record.push((task, m.seq()));
        }
    });
    runtime.block_on(async {
        for n in 40..80 {
            bus.publish_async(Visit { customer: 0, n }).await.unwrap();
        }
        bus.close_async().await;
    });
    let seen = seen.get();
    let mut seqs: Vec<u64> = seen.iter().map(|h| h.1).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..80).collect::<Vec<_>>(), "each message once");
    assert_eq!(count.borrow().len(), 3, "every task took part");
    let stats = group.stats();
    identity_holds(&stats);
    assert_eq!((stats.received, stats.delivered), (80, 80), "{stats:?}");
}
