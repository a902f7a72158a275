//! Keyed work across processes: `export_keyed` puts each message on its key's partition,
//! and the members of an `import_keyed` share the partitions, one owner per partition at a
//! time, with members joining and leaving mid-stream, and one crashing (a runtime of its
//! own, shut down). Each member is a bus and a bridge of its own (one process here; the
//! server cannot tell). The tests wait for the partitions' owners by reading the leases in
//! the import's registry stream (the wire format's `eventbus-keyed-<stream>`) at each
//! change the members publish, never by sleeping.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use eventbus::nats::{async_nats, ImportOptions};

use super::*;

#[derive(Topic, Serialize, Deserialize, Debug, PartialEq)]
#[topic(name = "orders.keyed")]
struct Order {
    customer: u32,
    n: u64,
}

const PARTITIONS: u32 = 8;
const CUSTOMERS: u64 = 24;
/// Short leases, so that a crashed member's lapse and the looks are quick.
const LEASE: Duration = Duration::from_secs(2);
/// The lease where no member crashes: a stall of a second or two on a loaded machine must
/// not make a live member's lease lapse (hand-overs there come with nudges, not lapses).
const STEADY: Duration = Duration::from_secs(10);

/// One handling: which member handled which customer's message `n`.
type Handled = (usize, u32, u64);

/// A member: a bus recording what it handles (as `member`) and its bridge importing
/// `Order` keyed as "billing" with `lease` (the registry keeps the first member's).
async fn member(
    server: &Server,
    member: usize,
    tx: &mpsc::UnboundedSender<Handled>,
    lease: Duration,
) -> Bridge {
    let bus = bus();
    let tx = tx.clone();
    bus.subscribe_async::<Order, _, _, _>(
        Options::default().name("test::handled"),
        move |m: Message<Order>| {
            let _ = tx.send((member, m.customer, m.n));
            async {}
        },
    );
    let bridge = Bridge::connect(&bus, &server.url()).await.unwrap();
    bridge
        .import_keyed_with::<Order>("billing", ImportOptions::new().lease(lease))
        .await
        .unwrap();
    bridge
}

/// A member whose handler takes `work` per message (its work, not a wait for anything):
/// an import is acked once its bus accepted the message, so a slow member holds a backlog
/// of acked messages in its mailbox when a partition moves away from it.
async fn slow_member(
    server: &Server,
    member: usize,
    tx: &mpsc::UnboundedSender<Handled>,
    work: Duration,
    lease: Duration,
) -> Bridge {
    let bus = bus();
    let tx = tx.clone();
    bus.subscribe_async::<Order, _, _, _>(
        Options::default().name("test::handled"),
        move |m: Message<Order>| {
            let _ = tx.send((member, m.customer, m.n));
            tokio::time::sleep(work)
        },
    );
    let bridge = Bridge::connect(&bus, &server.url()).await.unwrap();
    bridge
        .import_keyed_with::<Order>("billing", ImportOptions::new().lease(lease))
        .await
        .unwrap();
    bridge
}

/// Waits until every partition's lease is held as the assignment says for exactly
/// `members` (partition `p` by the `p % n`-th of the sorted ids): reads the leases in the
/// registry again at each change the members publish there (renewals every quarter
/// lease, and a nudge when one leaves or gives a lease back).
async fn owned_by(server: &Server, members: &[&str]) {
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let stream = Bridge::stream_name::<Order>();
    let registry = format!("eventbus-keyed-{stream}");
    let mut changes = client
        .subscribe(format!("{registry}.billing.>"))
        .await
        .unwrap();
    let mut nudges = client
        .subscribe(format!("eventbus-nudge.{stream}.billing"))
        .await
        .unwrap();
    let mut sorted: Vec<&str> = members.to_vec();
    sorted.sort_unstable();
    let wanted: BTreeMap<String, String> = (0..PARTITIONS)
        .map(|p| {
            let owner = sorted[p as usize % sorted.len()];
            (format!("{registry}.billing.p.{p}"), owner.to_string())
        })
        .collect();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let leases = leases(&js, &registry).await;
        if leases == wanted {
            return;
        }
        tokio::select! {
            _ = next_message(&mut changes) => {}
            _ = next_message(&mut nudges) => {}
            _ = tokio::time::sleep_until(deadline) => {
                panic!("the leases {leases:?} never became {wanted:?}")
            }
        }
    }
}

/// Each partition's lease subject and its owner, as the registry holds them now.
async fn leases(js: &async_nats::jetstream::Context, registry: &str) -> BTreeMap<String, String> {
    let mut leases = BTreeMap::new();
    let Ok(stream) = js.get_stream(registry).await else {
        return leases;
    };
    let mut subjects = stream
        .info_with_subjects(format!("{registry}.billing.p.*"))
        .await
        .unwrap();
    let mut held = Vec::new();
    while let Some(entry) = next_message(&mut subjects).await {
        held.push(entry.unwrap().0);
    }
    for subject in held {
        if let Ok(last) = stream.get_last_raw_message_by_subject(&subject).await {
            leases.insert(subject, String::from_utf8(last.payload.to_vec()).unwrap());
        }
    }
    leases
}

/// Publishes the orders `ids` on `bus`, customer `n % CUSTOMERS`.
async fn publish(bus: &Bus, ids: std::ops::Range<u64>) {
    for n in ids {
        let customer = (n % CUSTOMERS) as u32;
        bus.publish_async(Order { customer, n }).await.unwrap();
    }
}

/// The next `count` handlings, in the order they happened, or a failure naming what came.
async fn handled(rx: &mut mpsc::UnboundedReceiver<Handled>, count: usize) -> Vec<Handled> {
    let deadline = Instant::now() + PATIENCE;
    let mut seen = Vec::with_capacity(count);
    while seen.len() < count {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(handling)) => seen.push(handling),
            _ => panic!(
                "handled {} of {count} within {PATIENCE:?}; the last: {:?}",
                seen.len(),
                seen.last()
            ),
        }
    }
    seen
}

/// Every order of `0..count` handled exactly once, and each customer's in publish order.
fn assert_once_in_key_order(seen: &[Handled], count: u64) {
    let mut all: Vec<u64> = seen.iter().map(|h| h.2).collect();
    all.sort_unstable();
    assert!(
        all.iter().copied().eq(0..count),
        "lost or handled twice: {} handlings, {:?}...",
        all.len(),
        &all[..all.len().min(50)]
    );
    let mut per_customer: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for (_, customer, n) in seen {
        per_customer.entry(*customer).or_default().push(*n);
    }
    for (customer, ns) in &per_customer {
        let expected: Vec<u64> = (0..count)
            .filter(|n| n % CUSTOMERS == u64::from(*customer))
            .collect();
        assert_eq!(ns, &expected, "customer {customer}'s orders out of order");
    }
}

/// Each customer's handlers, one run per member in the order they handled it.
fn runs(seen: &[Handled]) -> BTreeMap<u32, Vec<usize>> {
    let mut runs: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (member, customer, _) in seen {
        let run = runs.entry(*customer).or_default();
        if run.last() != Some(member) {
            run.push(*member);
        }
    }
    runs
}

/// A bus importing `Order` plainly (not keyed) as "audit", recording what it handles as
/// member 0.
async fn plain_audit(server: &Server) -> (Bus, Bridge, mpsc::UnboundedReceiver<Handled>) {
    let audit = bus();
    let (tx, rx) = mpsc::unbounded_channel();
    audit.subscribe_async::<Order, _, _, _>(
        Options::default().name("test::audit"),
        move |m: Message<Order>| {
            let _ = tx.send((0, m.customer, m.n));
            async {}
        },
    );
    let importer = Bridge::connect(&audit, &server.url()).await.unwrap();
    importer.import::<Order>("audit").await.unwrap();
    (audit, importer, rx)
}

/// A shop exporting `Order` keyed on the customer.
async fn shop(server: &Server) -> (Bus, Bridge) {
    let shop = bus();
    let exporter = Bridge::connect(&shop, &server.url()).await.unwrap();
    exporter
        .export_keyed::<Order>(PARTITIONS, |o| o.customer)
        .await
        .unwrap();
    (shop, exporter)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_share_the_partitions_each_key_once_and_in_order() {
    let server = Server::start();
    let (shop, exporter) = shop(&server).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (a, b) = (
        member(&server, 0, &tx, STEADY).await,
        member(&server, 1, &tx, STEADY).await,
    );
    owned_by(&server, &[a.id(), b.id()]).await;

    let count = 1_000;
    publish(&shop, 0..count).await;
    let seen = handled(&mut rx, count as usize).await;
    assert_once_in_key_order(&seen, count);
    // Each customer handled by one member only (nobody came or went), and both worked.
    let runs = runs(&seen);
    assert!(runs.values().all(|r| r.len() == 1), "{runs:?}");
    let members: BTreeSet<usize> = runs.values().map(|r| r[0]).collect();
    assert_eq!(members, BTreeSet::from([0, 1]), "one member did everything");
    nothing_more_keyed(&mut rx, &shop, count).await;
    exporter.close().await.unwrap();
    a.close().await.unwrap();
    b.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_joining_and_leaving_mid_stream_keep_each_keys_order() {
    let server = Server::start();
    let (shop, exporter) = shop(&server).await;
    let (tx, mut rx) = mpsc::unbounded_channel();

    // The first member alone takes every partition.
    let first = member(&server, 0, &tx, STEADY).await;
    owned_by(&server, &[first.id()]).await;
    publish(&shop, 0..400).await;
    // A second joins while the first is still at work: half the partitions move.
    let second = member(&server, 1, &tx, STEADY).await;
    owned_by(&server, &[first.id(), second.id()]).await;
    publish(&shop, 400..800).await;
    // The first leaves while messages flow: its partitions go to the second.
    let second_id = second.id().to_string();
    let leaving = tokio::spawn(first.close());
    publish(&shop, 800..1_000).await;
    leaving.await.unwrap().unwrap();
    owned_by(&server, &[&second_id]).await;
    publish(&shop, 1_000..1_200).await;

    let count = 1_200;
    let seen = handled(&mut rx, count as usize).await;
    assert_once_in_key_order(&seen, count);
    // No customer was handled by two members at once: each went from the first to the
    // second at most once, never back.
    let runs = runs(&seen);
    for (customer, run) in &runs {
        assert!(
            run == &[0] || run == &[1] || run == &[0, 1],
            "customer {customer} went between members: {run:?}"
        );
    }
    // Both hand-overs happened: some customers moved, some stayed with the first until it
    // left, and the second ended with all of them.
    assert!(runs.values().any(|r| r == &[0, 1]), "{runs:?}");
    let late: BTreeSet<usize> = seen.iter().filter(|h| h.2 >= 1_000).map(|h| h.0).collect();
    assert_eq!(
        late,
        BTreeSet::from([1]),
        "the first member handled after it left"
    );
    nothing_more_keyed(&mut rx, &shop, count).await;
    exporter.close().await.unwrap();
    second.close().await.unwrap();
}

/// A partition that moves away from a member with a backlog moves only once the member
/// has handled that backlog: each customer's orders in order across both members, read in
/// the one order the two handlers recorded them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_over_waits_for_the_old_owners_backlog_to_be_handled() {
    let server = Server::start();
    let (shop, exporter) = shop(&server).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    // A lease long enough for the fence (half of it, at most the ack wait: 5 s) to outlast
    // the backlog, 240 orders of 5 ms, four times over, on a loaded machine too; and a
    // backlog long enough that a hand-over without the fence would start inside it.
    let (work, lease) = (Duration::from_millis(5), STEADY);
    let first = slow_member(&server, 0, &tx, work, lease).await;
    owned_by(&server, &[first.id()]).await;
    publish(&shop, 0..240).await;
    // The first is at work, with most of the 240 still to handle (about 1.2 s of work).
    let mut seen = handled(&mut rx, 1).await;
    let second = slow_member(&server, 1, &tx, work, lease).await;
    owned_by(&server, &[first.id(), second.id()]).await;
    publish(&shop, 240..360).await;
    seen.extend(handled(&mut rx, 359).await);
    assert_once_in_key_order(&seen, 360);
    let runs = runs(&seen);
    assert!(
        runs.values().any(|r| r == &[0, 1]),
        "no customer moved: {runs:?}"
    );
    nothing_more_keyed(&mut rx, &shop, 360).await;
    exporter.close().await.unwrap();
    first.close().await.unwrap();
    second.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_import_of_a_keyed_topic_sees_every_message_in_order() {
    let server = Server::start();
    let (shop, exporter) = shop(&server).await;
    let (_audit, importer, mut rx) = plain_audit(&server).await;
    publish(&shop, 0..500).await;
    let seen = handled(&mut rx, 500).await;
    let ns: Vec<u64> = seen.iter().map(|h| h.2).collect();
    assert_eq!(ns, (0..500).collect::<Vec<_>>());
    exporter.close().await.unwrap();
    importer.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_keyed_input_is_a_clear_error() {
    let server = Server::start();
    let shop = bus();
    let bridge = Bridge::connect(&shop, &server.url()).await.unwrap();

    let zero = bridge.export_keyed::<Order>(0, |o| o.customer).await;
    let error = zero.expect_err("0 partitions");
    assert!(matches!(error, Error::Keyed { .. }), "{error:?}");
    assert!(error.to_string().contains("0 partitions"), "{error}");

    bridge
        .export_keyed::<Order>(PARTITIONS, |o| o.customer)
        .await
        .unwrap();
    // Another exporter of the topic with another count is refused.
    let other = Bridge::connect(&bus(), &server.url()).await.unwrap();
    let error = other
        .export_keyed::<Order>(PARTITIONS * 2, |o| o.customer)
        .await
        .expect_err("another partition count");
    assert!(error.to_string().contains("8 partitions"), "{error}");

    // A topic exported plainly has no partitions to share.
    other.export::<OrderPlaced>().await.unwrap();
    let importer = Bridge::connect(&bus(), &server.url()).await.unwrap();
    let error = importer
        .import_keyed::<OrderPlaced>("billing")
        .await
        .expect_err("a keyed import of a plain topic");
    assert!(matches!(error, Error::Keyed { .. }), "{error:?}");
    assert!(error.to_string().contains("export_keyed"), "{error}");

    // Twice under one name on one bridge, and a name JetStream cannot hold.
    importer.import_keyed::<Order>("billing").await.unwrap();
    let twice = importer.import_keyed::<Order>("billing").await;
    assert!(matches!(twice, Err(Error::Twice { .. })), "{twice:?}");
    let bad = importer.import_keyed::<Order>("bill.ing").await;
    assert!(matches!(bad, Err(Error::BadName { .. })), "{bad:?}");
    bridge.close().await.unwrap();
    other.close().await.unwrap();
    importer.close().await.unwrap();
}

/// Nothing more arrives at any member while a marker makes the trip.
async fn nothing_more_keyed(rx: &mut mpsc::UnboundedReceiver<Handled>, bus: &Bus, n: u64) {
    publish(bus, n..n + 1).await;
    let after = handled(rx, 1).await;
    assert_eq!(after[0].2, n, "a message arrived twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_crashes_hands_its_partitions_over_at_least_once_in_key_order() {
    let server = Server::start();
    let (shop, exporter) = shop(&server).await;
    let (tx, mut rx) = mpsc::unbounded_channel();

    // The member that crashes lives on a runtime of its own (its bus's workers, its
    // bridge's tasks and its connection): shut down, it stops at once, without a word.
    let crashing = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let url = server.url();
    let crash_tx = tx.clone();
    // What the crashing member's bus accepted, recorded as it accepts it (an inline
    // subscriber runs in the importer's publish, before the ack): an import is acked once
    // its bus accepted the message, so what its bus had accepted and not yet handled when
    // it crashed is lost with it, as any process's mailboxes are.
    let accepted: Arc<Mutex<BTreeSet<u64>>> = Arc::default();
    let accepting = Arc::clone(&accepted);
    let (lost, recorder) = crashing
        .spawn(async move {
            let bus = bus();
            let inline = bus.subscribe_inline::<Order>(
                Options::default().name("test::accepted"),
                move |m: &Message<Order>| {
                    accepting.lock().unwrap().insert(m.n);
                },
            );
            bus.subscribe_async::<Order, _, _, _>(
                Options::default().name("test::handled"),
                move |m: Message<Order>| {
                    let _ = crash_tx.send((0, m.customer, m.n));
                    async {}
                },
            );
            let bridge = Bridge::connect(&bus, &url).await.unwrap();
            bridge
                .import_keyed_with::<Order>("billing", ImportOptions::new().lease(LEASE))
                .await
                .unwrap();
            (bridge, inline)
        })
        .await
        .unwrap();
    let staying = member(&server, 1, &tx, LEASE).await;
    owned_by(&server, &[lost.id(), staying.id()]).await;

    let count = 1_000;
    publish(&shop, 0..count / 2).await;
    // Once the crashing member has handled some, it dies mid-stream.
    let mut seen = Vec::new();
    while !seen.iter().any(|h: &Handled| h.0 == 0) {
        seen.extend(handled(&mut rx, 1).await);
    }
    crashing.shutdown_background();
    // Its bus and bridge went with its runtime; nothing of them runs any more.
    std::mem::forget(lost);
    std::mem::forget(recorder);
    publish(&shop, count / 2..count).await;

    // Its leases lapse; the other takes every partition, and what the crashed one had not
    // acknowledged comes again: every order at least once, but for what the crashed bus
    // had accepted (acked) and not handled.
    let deadline = Instant::now() + PATIENCE;
    let mut missing: BTreeSet<u64> = (0..count).collect();
    for h in &seen {
        missing.remove(&h.2);
    }
    let in_crashed_mailbox = |seen: &[Handled]| -> BTreeSet<u64> {
        let handled_there: BTreeSet<u64> = seen.iter().filter(|h| h.0 == 0).map(|h| h.2).collect();
        accepted
            .lock()
            .unwrap()
            .difference(&handled_there)
            .copied()
            .collect()
    };
    loop {
        // Looked at again each time: the crashed runtime's thread may still be finishing
        // a poll when `shutdown_background` returns.
        let lost = in_crashed_mailbox(&seen);
        missing.retain(|n| !lost.contains(n));
        if missing.is_empty() {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(h)) => {
                missing.remove(&h.2);
                seen.push(h);
            }
            _ => panic!("{} orders never handled: {missing:?}", missing.len()),
        }
    }
    // Each customer's orders in order across the hand-over, whichever member handled
    // them: the only repeat is what the crashed one had in hand, unacknowledged, coming
    // again to the other before anything later of its partition (one per partition at
    // most).
    let mut per_customer: BTreeMap<u32, Vec<(usize, u64)>> = BTreeMap::new();
    for (member, customer, n) in &seen {
        per_customer
            .entry(*customer)
            .or_default()
            .push((*member, *n));
    }
    for (customer, handlings) in &per_customer {
        let again = handlings
            .windows(2)
            .all(|w| w[0].1 < w[1].1 || (w[0].1 == w[1].1 && w[0].0 == 0 && w[1].0 == 1));
        assert!(
            again,
            "customer {customer}'s orders across the hand-over: {handlings:?}"
        );
    }
    let mut all: Vec<u64> = seen.iter().map(|h| h.2).collect();
    all.sort_unstable();
    let twice = all.windows(2).filter(|w| w[0] == w[1]).count();
    assert!(
        twice <= PARTITIONS as usize,
        "{twice} orders handled twice: more than one in hand per partition"
    );
    owned_by(&server, &[staying.id()]).await;
    exporter.close().await.unwrap();
    staying.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_function_that_panics_makes_that_message_a_dead_letter_of_the_export() {
    let server = Server::start();
    let shop = bus();
    let exporter = Bridge::connect(&shop, &server.url()).await.unwrap();
    exporter
        .export_keyed::<Order>(PARTITIONS, |o: &Order| {
            assert!(o.n != 3, "no key for order 3");
            o.customer
        })
        .await
        .unwrap();
    let (_audit, importer, mut rx) = plain_audit(&server).await;
    publish(&shop, 0..10).await;
    let seen = handled(&mut rx, 9).await;
    let ns: Vec<u64> = seen.iter().map(|h| h.2).collect();
    assert_eq!(ns, [0, 1, 2, 4, 5, 6, 7, 8, 9]);
    let letters = shop.dead_letters();
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0].subscriber(), "nats-export:orders.keyed");
    assert_eq!(letters[0].seq(), 3);
    // `close` reports it with the exports the server never acknowledged.
    let closed = exporter.close().await;
    assert!(
        matches!(&closed, Err(Error::Unsent { letters }) if letters.len() == 1),
        "{closed:?}"
    );
    importer.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_count_that_cannot_be_read_is_a_clear_error() {
    let server = Server::start();
    let (_shop, exporter) = shop(&server).await;
    // Another program overwrites the declaration with something that is not a count.
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let declaration = format!("eventbus-keyed.{}", Bridge::stream_name::<Order>());
    js.publish(declaration, "eight".into())
        .await
        .unwrap()
        .await
        .unwrap();

    let importer = Bridge::connect(&bus(), &server.url()).await.unwrap();
    let error = importer
        .import_keyed::<Order>("billing")
        .await
        .expect_err("a keyed import of a stream whose partition count cannot be read");
    assert!(matches!(error, Error::Keyed { .. }), "{error:?}");
    assert!(error.to_string().contains("eight"), "{error}");
    exporter.close().await.unwrap();
    importer.close().await.unwrap();
}

/// A keyed import started before any export declared the partitions waits for the
/// declaration. When another program then writes one the bridge cannot use, the import
/// says so in its stats (it cannot return an error: its call returned long ago), and it
/// starts once the declaration is put right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_import_says_why_it_waits_when_the_partition_count_becomes_unreadable() {
    let server = Server::start();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let importer = member(&server, 0, &tx, LEASE).await;
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let declaration = format!("eventbus-keyed.{}", Bridge::stream_name::<Order>());
    js.publish(declaration.clone(), "eight".into())
        .await
        .unwrap()
        .await
        .unwrap();
    let problem = || {
        let stats = importer.stats();
        stats.imports.iter().find_map(|i| i.problem.clone())
    };
    let deadline = Instant::now() + PATIENCE;
    let said = loop {
        if let Some(problem) = problem() {
            break problem;
        }
        assert!(
            Instant::now() < deadline,
            "the import never said why it waits: {}",
            importer.stats()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(said.contains("eight"), "{said}");
    assert!(importer.stats().to_string().contains("eight"));

    // Put right: the count the export declares; the import starts, and says nothing more.
    js.publish(declaration, PARTITIONS.to_string().into())
        .await
        .unwrap()
        .await
        .unwrap();
    let (shop, exporter) = shop(&server).await;
    owned_by(&server, &[importer.id()]).await;
    publish(&shop, 0..100).await;
    let seen = handled(&mut rx, 100).await;
    assert_once_in_key_order(&seen, 100);
    assert_eq!(problem(), None, "{}", importer.stats());
    exporter.close().await.unwrap();
    importer.close().await.unwrap();
}

/// `Order` on a log topic: there the export's subscriber gets imported messages too (a
/// log has no per-publish filter), and tells them by their mark.
#[derive(Topic, Serialize, Deserialize, Debug, PartialEq)]
#[topic(name = "orders.keyed.log", retain = 100)]
struct LoggedOrder {
    customer: u32,
    n: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_export_never_runs_its_key_function_on_imported_messages() {
    let server = Server::start();
    let shop = bus();
    let exporter = Bridge::connect(&shop, &server.url()).await.unwrap();
    exporter
        .export_keyed::<LoggedOrder>(PARTITIONS, |o| o.customer)
        .await
        .unwrap();
    // A relay imports the orders and exports its own keyed: what it imported goes back
    // nowhere, so its key function has nothing to do for them.
    let relay = bus();
    let (tx, mut rx) = mpsc::unbounded_channel();
    relay.subscribe_async::<LoggedOrder, _, _, _>(
        Options::default().name("test::relayed"),
        move |m: Message<LoggedOrder>| {
            let _ = tx.send((0, m.customer, m.n));
            async {}
        },
    );
    let keyed = Arc::new(AtomicU64::new(0));
    let relay_bridge = Bridge::connect(&relay, &server.url()).await.unwrap();
    let counted = Arc::clone(&keyed);
    relay_bridge
        .export_keyed::<LoggedOrder>(PARTITIONS, move |o: &LoggedOrder| {
            counted.fetch_add(1, SeqCst);
            o.customer
        })
        .await
        .unwrap();
    relay_bridge.import::<LoggedOrder>("relay").await.unwrap();

    for n in 0..20 {
        let customer = (n % CUSTOMERS) as u32;
        shop.publish_async(LoggedOrder { customer, n })
            .await
            .unwrap();
    }
    let seen = handled(&mut rx, 20).await;
    assert_once_in_key_order(&seen, 20);
    relay.wait_idle_async().await;
    assert_eq!(
        keyed.load(SeqCst),
        0,
        "the key function ran for imported orders"
    );
    // An order published on the relay itself is keyed, once.
    relay
        .publish_async(LoggedOrder { customer: 0, n: 20 })
        .await
        .unwrap();
    relay.wait_idle_async().await;
    assert_eq!(keyed.load(SeqCst), 1);
    exporter.close().await.unwrap();
    relay_bridge.close().await.unwrap();
}
