//! The NATS JetStream bridge (feature `nats`), against a real `nats-server` that each test
//! starts on a free 127.0.0.1 port with a store in a temporary directory, and kills at the
//! end. A missing `nats-server` binary fails the tests (`apt-get install -y nats-server`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

use eventbus::nats::{Bridge, Error};
use eventbus::{Bus, Message, Options, Topic, TryPublishError};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::support;
use support::net::free_port;

/// How long a test waits for something that must happen before calling it a failure. Never
/// a synchronisation: every wait ends as soon as its event happens.
const PATIENCE: Duration = Duration::from_secs(60);

#[derive(Topic, Serialize, Deserialize, Debug, PartialEq)]
#[topic(name = "orders.placed")]
struct OrderPlaced {
    id: u64,
}

/// A running `nats-server` with JetStream, killed (and its store removed) when dropped.
struct Server {
    child: Option<Child>,
    port: u16,
    store: PathBuf,
    /// A configuration file given with `-c`, if any.
    config: Option<PathBuf>,
}

impl Server {
    fn start() -> Server {
        Server::start_with(None)
    }

    /// A server that only lets in `user` with `password`.
    fn start_with_password(user: &str, password: &str) -> Server {
        Server::start_with(Some(format!(
            "authorization {{\n  user: \"{user}\"\n  password: \"{password}\"\n}}\n"
        )))
    }

    fn start_with(config: Option<String>) -> Server {
        let store = std::env::temp_dir().join(format!(
            "eventbus-nats-{}-{}",
            std::process::id(),
            NEXT_STORE.fetch_add(1, SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&store);
        std::fs::create_dir_all(&store).unwrap();
        let config = config.map(|text| {
            let path = store.with_extension("conf");
            std::fs::write(&path, text).unwrap();
            path
        });
        let mut server = Server {
            child: None,
            port: free_port(),
            store,
            config,
        };
        server.restart();
        server
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills the server at once (SIGKILL: no clean shutdown).
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server on the same port and store, and waits until it is ready.
    fn restart(&mut self) {
        assert!(self.child.is_none(), "the server is running");
        let mut command = Command::new("nats-server");
        if let Some(config) = &self.config {
            command.arg("-c").arg(config);
        }
        let child = command
            .args(["-js", "-a", "127.0.0.1", "-p"])
            .arg(self.port.to_string())
            .arg("-sd")
            .arg(&self.store)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(child) => child,
            Err(error) => panic!(
                "cannot start `nats-server` ({error}): these tests need it on the PATH; \
                 install it with `apt-get install -y nats-server`"
            ),
        };
        // The server logs to stderr; "Server is ready" comes once JetStream and the client
        // port are up. The rest of the log is read (and dropped) so the server never blocks.
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let log = BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in log.lines() {
                let Ok(line) = line else { break };
                if line.contains("Server is ready") {
                    let _ = ready_tx.send(Ok(()));
                }
                lines.push(line);
            }
            let _ = ready_tx.send(Err(lines.join("\n")));
        });
        match ready_rx.recv_timeout(PATIENCE) {
            Ok(Ok(())) => {}
            Ok(Err(log)) => panic!("nats-server stopped before it was ready:\n{log}"),
            Err(_) => panic!("nats-server was not ready within {PATIENCE:?}"),
        }
        self.child = Some(child);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.store);
        if let Some(config) = &self.config {
            let _ = std::fs::remove_file(config);
        }
    }
}

static NEXT_STORE: AtomicU64 = AtomicU64::new(0);

/// A bus whose async subscribers run on the current runtime.
fn bus() -> Bus {
    Bus::builder().build()
}

/// The ids of `OrderPlaced` the bus receives, in order.
fn receive(bus: &Bus) -> mpsc::UnboundedReceiver<u64> {
    let (tx, rx) = mpsc::unbounded_channel();
    bus.subscribe_async::<OrderPlaced, _, _, _>(
        Options::default().name("test::receive"),
        move |m: Message<OrderPlaced>| {
            let _ = tx.send(m.id);
            async {}
        },
    );
    rx
}

/// The next `n` ids, or a failure naming what was seen if they do not come in time.
async fn next_ids(rx: &mut mpsc::UnboundedReceiver<u64>, n: usize) -> Vec<u64> {
    let deadline = Instant::now() + PATIENCE;
    let mut ids = Vec::with_capacity(n);
    while ids.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(id)) => ids.push(id),
            _ => panic!(
                "received {} of {n} messages within {PATIENCE:?}; the last: {:?}",
                ids.len(),
                ids.last()
            ),
        }
    }
    ids
}

/// A shop's bus exporting `OrderPlaced` and a warehouse's importing it as `warehouse`, each
/// with its bridge, and the ids the warehouse receives.
async fn shop_and_warehouse(
    server: &Server,
) -> (Bus, Bus, Bridge, Bridge, mpsc::UnboundedReceiver<u64>) {
    let (shop, warehouse) = (bus(), bus());
    let exporter = Bridge::connect(&shop, &server.url()).await.unwrap();
    let importer = Bridge::connect(&warehouse, &server.url()).await.unwrap();
    exporter.export::<OrderPlaced>().await.unwrap();
    importer.import::<OrderPlaced>("warehouse").await.unwrap();
    let rx = receive(&warehouse);
    (shop, warehouse, exporter, importer, rx)
}

/// Nothing more arrives while a marker message sent after everything else makes the trip.
async fn nothing_more(rx: &mut mpsc::UnboundedReceiver<u64>, bus: &Bus, marker: u64) {
    bus.publish_async(OrderPlaced { id: marker }).await.unwrap();
    let after = next_ids(rx, 1).await;
    assert_eq!(after, [marker], "a message arrived twice or out of order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_buses_exchange_ten_thousand_messages_in_order() {
    let server = Server::start();
    let (shop, warehouse) = (bus(), bus());
    let exporter = Bridge::connect(&shop, &server.url()).await.unwrap();
    let importer = Bridge::connect(&warehouse, &server.url()).await.unwrap();
    exporter.export::<OrderPlaced>().await.unwrap();
    importer.import::<OrderPlaced>("warehouse").await.unwrap();
    // The warehouse exports the topic too: what it imports must not go back out.
    importer.export::<OrderPlaced>().await.unwrap();
    let mut rx = receive(&warehouse);

    let n = 10_000;
    for id in 0..n {
        shop.publish_async(OrderPlaced { id }).await.unwrap();
    }
    let ids = next_ids(&mut rx, n as usize).await;
    assert!(
        ids.iter().copied().eq(0..n),
        "out of order or lost: first difference at {:?}",
        ids.iter().zip(0..n).position(|(a, b)| *a != b)
    );
    // Nothing imported went back out: the warehouse's export let every imported message
    // pass by, and the stream holds the n messages, once each.
    let export = export_stats(&warehouse);
    assert_eq!((export.received, export.filtered), (0, n));
    exporter.close().await.unwrap();
    importer.close().await.unwrap();
    let raw = async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap());
    let mut stream = raw.get_stream("eventbus_orders_placed").await.unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_exporters_of_one_topic_interleave_each_in_its_order() {
    let server = Server::start();
    let (east, west, warehouse) = (bus(), bus(), bus());
    let mut bridges = Vec::new();
    for shop in [&east, &west] {
        let bridge = Bridge::connect(shop, &server.url()).await.unwrap();
        bridge.export::<OrderPlaced>().await.unwrap();
        bridges.push(bridge);
    }
    let importer = Bridge::connect(&warehouse, &server.url()).await.unwrap();
    importer.import::<OrderPlaced>("warehouse").await.unwrap();
    let mut rx = receive(&warehouse);

    // Their messages interleave in the stream, so each one's expectation of its own last
    // message fails often: each goes one at a time then, and keeps its order.
    let n = 2_000;
    let publish = |shop: &Bus, base: u64| {
        let shop = shop.clone();
        tokio::spawn(async move {
            for id in base..base + n {
                shop.publish_async(OrderPlaced { id }).await.unwrap();
            }
        })
    };
    let (a, b) = (publish(&east, 0), publish(&west, 1_000_000));
    a.await.unwrap();
    b.await.unwrap();
    let ids = next_ids(&mut rx, 2 * n as usize).await;
    let east_ids: Vec<u64> = ids.iter().copied().filter(|id| *id < 1_000_000).collect();
    let west_ids: Vec<u64> = ids.iter().copied().filter(|id| *id >= 1_000_000).collect();
    assert!(east_ids.iter().copied().eq(0..n), "east: {east_ids:?}");
    assert!(
        west_ids.iter().copied().eq(1_000_000..1_000_000 + n),
        "west: {west_ids:?}"
    );
    nothing_more(&mut rx, &east, n).await;
    for bridge in bridges {
        bridge.close().await.unwrap();
    }
    importer.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_and_restarted_mid_stream_loses_nothing_and_repeats_nothing() {
    let mut server = Server::start();
    let (shop, warehouse) = (bus(), bus());
    let exporter = Bridge::connect(&shop, &server.url()).await.unwrap();
    let importer = Bridge::connect(&warehouse, &server.url()).await.unwrap();
    exporter.export::<OrderPlaced>().await.unwrap();
    importer.import::<OrderPlaced>("warehouse").await.unwrap();
    let mut rx = receive(&warehouse);

    let n = 10_000;
    let publisher = shop.clone();
    let publishing = tokio::spawn(async move {
        for id in 0..n {
            publisher.publish_async(OrderPlaced { id }).await.unwrap();
        }
    });
    // Mid-stream: some have crossed, others are on the way.
    let mut ids = next_ids(&mut rx, 1_000).await;
    tokio::task::block_in_place(|| {
        server.kill();
        server.restart();
    });
    publishing.await.unwrap();
    ids.extend(next_ids(&mut rx, (n - 1_000) as usize).await);
    assert!(
        ids.iter().copied().eq(0..n),
        "lost, repeated or out of order: first difference at {:?}",
        ids.iter().zip(0..n).position(|(a, b)| *a != b)
    );
    nothing_more(&mut rx, &shop, n).await;
    // Both clients connected again, and the stats say so; every message was acked once
    // (a resend's ack settles it, the lost first send's never did).
    stats::eventually("the exports acked", &exporter, |s| {
        s.exports[0].acked == n + 1
    })
    .await;
    // Counted after the bus took the marker: its subscriber may have seen it first.
    stats::eventually("the imports counted", &importer, |s| {
        s.imports[0].imported == n + 1
    })
    .await;
    let (shop_side, warehouse_side) = (exporter.stats(), importer.stats());
    assert!(shop_side.reconnects >= 1, "{shop_side}");
    assert!(warehouse_side.reconnects >= 1, "{warehouse_side}");
    assert_eq!(shop_side.exports[0].pending, 0, "{shop_side}");
    exporter.close().await.unwrap();
    importer.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_payload_is_a_dead_letter_on_the_importer_and_the_stream_goes_on() {
    let server = Server::start();
    let (shop, warehouse, exporter, importer, mut rx) = shop_and_warehouse(&server).await;

    shop.publish_async(OrderPlaced { id: 1 }).await.unwrap();
    assert_eq!(next_ids(&mut rx, 1).await, [1]);
    // Someone else publishes bytes that are no `OrderPlaced` on the topic's subject.
    let raw = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(raw);
    js.publish(Bridge::subject::<OrderPlaced>(), "not json {".into())
        .await
        .unwrap()
        .await
        .unwrap();
    shop.publish_async(OrderPlaced { id: 2 }).await.unwrap();
    assert_eq!(next_ids(&mut rx, 1).await, [2], "the stream went on");

    let letters = warehouse.dead_letters();
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0];
    assert_eq!(letter.topic(), "orders.placed");
    assert_eq!(letter.subscriber(), "nats-import:warehouse");
    assert_eq!(letter.seq(), 2, "the stream sequence");
    assert!(
        letter.error().contains("cannot decode"),
        "{}",
        letter.error()
    );
    assert_eq!(
        letter.payload::<Vec<u8>>().map(Vec::as_slice),
        Some(&b"not json {"[..])
    );
    // Terminated on the server: it never comes again, neither in this run nor the next.
    importer.close().await.unwrap();
    let again = bus();
    let mut rx = receive(&again);
    let importer = Bridge::connect(&again, &server.url()).await.unwrap();
    importer.import::<OrderPlaced>("warehouse").await.unwrap();
    nothing_more(&mut rx, &shop, 3).await;
    assert!(again.dead_letters().is_empty());
    exporter.close().await.unwrap();
    importer.close().await.unwrap();
}

/// Issue 26: log topics across processes. The shop exports a log topic; the warehouse
/// imports it into its own log topic and exports it too. A subscriber that comes later on
/// the warehouse replays what was imported, in order, and nothing imported goes back out:
/// the mark that a message was imported is kept in the message, where the export's worker
/// reads it (a log topic's filter would run on that worker, not on the importer's thread).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_topic_crosses_processes_and_replays_on_the_importing_side() {
    #[derive(eventbus::Topic, serde::Serialize, serde::Deserialize, Debug)]
    #[topic(name = "orders.history", retain = 1000)]
    struct History {
        id: u64,
    }
    let server = Server::start();
    let (shop, warehouse) = (bus(), bus());
    let exporter = Bridge::connect(&shop, &server.url()).await.unwrap();
    let importer = Bridge::connect(&warehouse, &server.url()).await.unwrap();
    exporter.export::<History>().await.unwrap();
    importer.import::<History>("warehouse").await.unwrap();
    importer.export::<History>().await.unwrap();
    let n = 300;
    // A live subscriber on the warehouse says when everything imported is in its log.
    let (live_tx, mut live) = mpsc::unbounded_channel();
    warehouse.subscribe_async::<History, _, _, _>(
        Options::default(),
        move |m: Message<History>| {
            let _ = live_tx.send(m.id);
            async {}
        },
    );
    for id in 0..n {
        shop.publish_async(History { id }).await.unwrap();
    }
    let arrived = next_ids(&mut live, n as usize).await;
    assert!(
        arrived.iter().copied().eq(0..n),
        "imported out of order: {arrived:?}"
    );
    // A subscriber that comes later replays the imported history from the log.
    let (tx, mut rx) = mpsc::unbounded_channel();
    warehouse.subscribe_async::<History, _, _, _>(
        Options::default().start(eventbus::Start::Earliest),
        move |m: Message<History>| {
            let _ = tx.send(m.id);
            async {}
        },
    );
    let ids = next_ids(&mut rx, n as usize).await;
    assert!(
        ids.iter().copied().eq(0..n),
        "replayed out of order: {ids:?}"
    );
    warehouse.wait_idle_async().await;
    // Nothing imported went back out: the warehouse's export read all n and sent none.
    let stats = warehouse.stats();
    let export = stats
        .subscriptions
        .iter()
        .find(|s| s.name == "nats-export:orders.history")
        .expect("the export subscription");
    assert_eq!((export.received, export.delivered), (n, n), "{export:?}");
    drop(live);
    exporter.close().await.unwrap();
    importer.close().await.unwrap();
    let raw = async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap());
    let mut stream = raw.get_stream("eventbus_orders_history").await.unwrap();
    assert_eq!(
        stream.info().await.unwrap().state.messages,
        n,
        "each message once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_to_a_port_with_no_server_fails_within_the_deadline() {
    let port = free_port();
    let bus = bus();
    let started = Instant::now();
    let url = format!("nats://127.0.0.1:{port}");
    let error = Bridge::connect(&bus, &url).await.unwrap_err();
    assert!(
        started.elapsed() <= Bridge::CONNECT_TIMEOUT + Duration::from_secs(1),
        "took {:?}",
        started.elapsed()
    );
    assert!(matches!(error, Error::Connect { .. }), "{error:?}");
    let text = error.to_string();
    assert!(
        text.starts_with(&format!("cannot connect to the NATS server at `{url}`")),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_while_the_server_is_down_blocks_and_completes_when_it_is_back() {
    let mut server = Server::start();
    let (shop, warehouse) = (bus(), bus());
    let exporter = Bridge::connect(&shop, &server.url()).await.unwrap();
    let capacity = 4;
    exporter
        .export_with::<OrderPlaced>(Options::default().capacity(capacity))
        .await
        .unwrap();
    server.kill();

    // While the server is away the exporter's window (its sender's) fills, then its mailbox:
    // the topic's publishers are held back (`Block`). Seen without waiting: `try_publish` is
    // refused once the exporter holds one it cannot hand on and has `capacity` queued.
    let mut accepted = 0;
    let deadline = Instant::now() + PATIENCE;
    loop {
        match shop.try_publish(OrderPlaced { id: accepted }) {
            Ok(_) => accepted += 1,
            Err(TryPublishError::Full(_)) => {
                let stats = export_stats(&shop);
                if (stats.in_handler, stats.queued) == (1, capacity as u64) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the exporter never took a message"
                );
                tokio::task::yield_now().await;
            }
            Err(other) => panic!("{other:?}"),
        }
    }
    assert!(accepted > capacity as u64, "{accepted}");
    // A `Block` publish waits for room (whether the sender still had room to take one more
    // before it found the server gone is a race, so this is not asserted to be pending);
    // it completes once the server is back.
    let publisher = shop.clone();
    let waiting = tokio::spawn(async move {
        publisher
            .publish_async(OrderPlaced { id: accepted })
            .await
            .unwrap()
    });
    tokio::task::block_in_place(|| server.restart());
    waiting.await.unwrap();
    for id in accepted + 1..accepted + 10 {
        shop.publish_async(OrderPlaced { id }).await.unwrap();
    }
    exporter.close().await.unwrap();

    // The stream holds every message once, in order.
    // Subscribed before the import, as `import` says: the stream already holds every message,
    // and what the import publishes before a subscriber comes is gone for it.
    let mut rx = receive(&warehouse);
    let importer = Bridge::connect(&warehouse, &server.url()).await.unwrap();
    importer.import::<OrderPlaced>("check").await.unwrap();
    let ids = next_ids(&mut rx, (accepted + 10) as usize).await;
    assert!(ids.iter().copied().eq(0..accepted + 10), "{ids:?}");
    importer.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_reports_the_exports_the_server_never_acknowledged() {
    let mut server = Server::start();
    let shop = bus();
    let exporter = Bridge::connect(&shop, &server.url()).await.unwrap();
    exporter.export::<OrderPlaced>().await.unwrap();
    server.kill();
    for id in 0..5 {
        shop.publish_async(OrderPlaced { id }).await.unwrap();
    }
    let started = Instant::now();
    let error = exporter
        .close_timeout(Duration::from_millis(300))
        .await
        .unwrap_err();
    // The deadline, then at most one ack timeout (2 s) for the send in hand.
    assert!(started.elapsed() < PATIENCE, "{:?}", started.elapsed());
    let Error::Unsent { letters } = error else {
        panic!("{error:?}")
    };
    let ids: Vec<u64> = letters
        .iter()
        .map(|l| l.payload::<OrderPlaced>().unwrap().id)
        .collect();
    assert_eq!(
        ids,
        [0, 1, 2, 3, 4],
        "every unsent message, with its value, in order"
    );
    assert!(letters
        .iter()
        .all(|l| l.subscriber() == "nats-export:orders.placed"));
    assert!(
        letters[4]
            .error()
            .contains("closed before the NATS server acknowledged"),
        "{}",
        letters[4].error()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_bus_flushes_the_exports_first() {
    let server = Server::start();
    let shop = bus();
    let exporter = Bridge::connect(&shop, &server.url()).await.unwrap();
    exporter.export::<OrderPlaced>().await.unwrap();
    let n = 1_000;
    for id in 0..n {
        shop.publish_async(OrderPlaced { id }).await.unwrap();
    }
    // No `bridge.close()`: the bus's close waits for the server's acks of what it accepted.
    shop.close_async().await;
    let raw = async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap());
    let mut stream = raw.get_stream("eventbus_orders_placed").await.unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, n);
    exporter.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shop_and_a_warehouse_in_two_processes() {
    let server = Server::start();
    let example = build_example();
    let run = |role: &str| {
        Command::new(&example)
            .args(["--role", role, "--url", &server.url(), "--orders", "20"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let warehouse = run("warehouse");
    let shop = run("shop");
    let (shop, warehouse) = tokio::task::spawn_blocking(move || {
        (
            wait_with_deadline(shop, "shop"),
            wait_with_deadline(warehouse, "warehouse"),
        )
    })
    .await
    .unwrap();
    // Both sides' output on a failure of either: a shop waiting for replies is explained by
    // what the warehouse did.
    let (shop, warehouse) = match (shop, warehouse) {
        (Ok(shop), Ok(warehouse)) => (shop, warehouse),
        (shop, warehouse) => panic!(
            "{}\n{}\n{}",
            shop.unwrap_or_else(|failed| failed),
            warehouse.unwrap_or_else(|failed| failed),
            consumers(&server.url()).await
        ),
    };
    for order in 1..=20 {
        assert!(
            shop.contains(&format!("shop: stock reserved for order {order}\n")),
            "{shop}"
        );
        assert!(
            warehouse.contains(&format!(
                "warehouse: reserving item-{order} for order {order}\n"
            )),
            "{warehouse}"
        );
    }
    let reserved: Vec<&str> = shop.lines().filter(|l| l.contains("reserved")).collect();
    assert_eq!(reserved.len(), 20, "each reservation once: {shop}");
    assert!(shop.ends_with("shop: done, 20 of 20\n"), "{shop}");
    assert!(
        warehouse.ends_with("warehouse: done, 20 of 20\n"),
        "{warehouse}"
    );
}

/// Issue 28: two copies of the warehouse (two OS processes importing `warehouse`) share the
/// orders: each order reserved by exactly one copy, every reservation back at the shop once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shop_and_two_warehouses_in_three_processes_share_the_orders() {
    let server = Server::start();
    let n = 40;
    let [shop, east, west] = shop_and_two_warehouses(&server, n, &[], "5").await;
    let mut all: Vec<u64> = [reserved(&east), reserved(&west)].concat();
    all.sort_unstable();
    assert_eq!(
        all,
        (1..=n).collect::<Vec<_>>(),
        "each order reserved by one copy:\n{east}\n{west}"
    );
    let confirmed = shop.lines().filter(|l| l.contains("reserved")).count();
    assert_eq!(confirmed as u64, n, "{shop}");
    assert!(
        shop.ends_with(&format!("shop: done, {n} of {n}\n")),
        "{shop}"
    );
}

/// Issue 28: the same with `--keyed`: the shop exports the orders keyed on their customer
/// (`id % 5`), and two warehouse processes share the partitions: each order reserved once,
/// and each customer's orders in the order they were placed within each copy (a customer
/// may move between copies only at a fenced hand-over, when the second one joins).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shop_and_two_keyed_warehouses_keep_each_customers_order() {
    let server = Server::start();
    let n = 60;
    let [shop, east, west] = shop_and_two_warehouses(&server, n, &["--keyed", "8"], "8").await;
    let shares = [reserved(&east), reserved(&west)];
    for (copy, share) in shares.iter().enumerate() {
        for customer in 0..5 {
            let orders: Vec<u64> = share
                .iter()
                .copied()
                .filter(|id| id % 5 == customer)
                .collect();
            assert!(
                orders.windows(2).all(|w| w[0] < w[1]),
                "copy {copy}, customer {customer}: {orders:?}\n{east}\n{west}"
            );
        }
    }
    let mut all: Vec<u64> = shares.concat();
    all.sort_unstable();
    assert_eq!(
        all,
        (1..=n).collect::<Vec<_>>(),
        "each order reserved by one copy:\n{east}\n{west}"
    );
    // A customer changes copies only when a partition moves (the second copy joining, one
    // leaving): a plain shared import would switch back and forth between them.
    for customer in 0..5 {
        let copies: Vec<usize> = (1..=n)
            .filter(|id| id % 5 == customer)
            .map(|id| usize::from(shares[1].contains(&id)))
            .collect();
        let switches = copies.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(
            switches <= 2,
            "customer {customer} went between copies {switches} times: {copies:?}\n{east}\n{west}"
        );
    }
    let confirmed = shop.lines().filter(|l| l.contains("reserved")).count();
    assert_eq!(confirmed as u64, n, "{shop}");
}

/// Runs the `nats_shop` example as three processes, the shop first, then, once its `n`
/// orders wait in the stream (so each warehouse's idle clock, started when it is ready,
/// begins with orders to take, however slowly the shop started), two warehouses stopping
/// after `idle` seconds without an order, all with `args`: their outputs (shop, east,
/// west), or a failure with all three and the server's consumers.
async fn shop_and_two_warehouses(
    server: &Server,
    n: u64,
    args: &[&str],
    idle: &str,
) -> [String; 3] {
    let example = build_example();
    let run = |role: &str, idle: Option<&str>| {
        let mut command = Command::new(&example);
        command.args(["--role", role, "--url", &server.url()]);
        command.args(["--orders", &n.to_string()]).args(args);
        if let Some(idle) = idle {
            command.args(["--idle", idle]);
        }
        command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let shop = run("shop", None);
    stream_holds(server, "eventbus_shop_orders_placed", n).await;
    let (east, west) = (run("warehouse", Some(idle)), run("warehouse", Some(idle)));
    let outputs = tokio::task::spawn_blocking(move || {
        [
            wait_with_deadline(shop, "shop"),
            wait_with_deadline(east, "warehouse east"),
            wait_with_deadline(west, "warehouse west"),
        ]
    })
    .await
    .unwrap();
    if outputs.iter().any(Result::is_err) {
        let said: Vec<String> = outputs
            .into_iter()
            .map(|o| o.unwrap_or_else(|failed| failed))
            .collect();
        panic!("{}\n{}", said.join("\n"), consumers(&server.url()).await);
    }
    outputs.map(Result::unwrap)
}

/// Returns once `stream` holds `n` messages, looking every 20 ms (another process fills
/// it), or after [`PATIENCE`]: the caller's own checks then say what went wrong.
async fn stream_holds(server: &Server, stream: &str, n: u64) {
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if let Ok(mut stream) = js.get_stream(stream).await {
            if stream
                .info()
                .await
                .is_ok_and(|info| info.state.messages >= n)
            {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The orders a warehouse's output says it reserved, in the order it reserved them.
fn reserved(output: &str) -> Vec<u64> {
    output
        .lines()
        .filter_map(|l| l.strip_prefix("warehouse: reserving item-"))
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect()
}

/// What the server says of the example's two durable consumers, for a failure's message.
/// Once in several CI runs the shop's import delivered nothing while the warehouse's
/// messages were acknowledged; the suspicion (unconfirmed) is nats-server 2.9.x making a
/// consumer that never delivers when two clients create its stream at once. Such a
/// consumer shows messages delivered and pending acks, with an ack floor of 0.
async fn consumers(url: &str) -> String {
    let Ok(client) = async_nats::connect(url).await else {
        return "the server's consumers: cannot connect".into();
    };
    let js = async_nats::jetstream::new(client);
    let mut said = String::from("the server's consumers:");
    for (stream, name) in [
        ("eventbus_shop_stock_reserved", "shop"),
        ("eventbus_shop_orders_placed", "warehouse"),
    ] {
        let info = match js.get_stream(stream).await {
            Ok(stream) => match stream.consumer_info(name).await {
                Ok(info) => format!(
                    "delivered {:?}, ack floor {:?}, pending acks {}, redelivered {}, \
                     pending {}",
                    info.delivered,
                    info.ack_floor,
                    info.num_ack_pending,
                    info.num_redelivered,
                    info.num_pending
                ),
                Err(error) => format!("no consumer info: {error}"),
            },
            Err(error) => format!("no stream: {error}"),
        };
        said.push_str(&format!("\n  {stream} / {name}: {info}"));
    }
    said
}

/// The process's stdout once it has exited successfully within the deadline; else what
/// went wrong, with its stdout and stderr (the process is killed past the deadline).
fn wait_with_deadline(mut child: Child, role: &str) -> Result<String, String> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let output = child.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
            let stderr = String::from_utf8_lossy(&output.stderr);
            if !status.success() {
                return Err(format!("{role} failed: {status}\n{stdout}\n{stderr}"));
            }
            return Ok(stdout);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            return Err(format!(
                "{role} did not finish within {PATIENCE:?}:\n{}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Builds `examples/nats_shop.rs` (package `eventbus-examples`) and returns its path (cargo names it in its JSON output),
/// in the target directory this test binary was built in (`<target>/<profile>/deps/`), so
/// only the example itself is compiled: cargo lets go of that directory's lock before it
/// runs the tests.
fn build_example() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // The examples are a package of their own (`examples/Cargo.toml`).
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/Cargo.toml");
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).unwrap().to_path_buf();
    let release = exe.ancestors().nth(2).unwrap().ends_with("release");
    let output = Command::new(cargo)
        .args(["build", "--quiet", "--message-format=json", "--example"])
        .args(release.then_some("--release"))
        .arg("nats_shop")
        .args(["--features", "nats", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        .env_remove("CARGO_TARGET_DIR")
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cannot build the nats_shop example"
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let line = stdout
        .lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\""))
        .filter(|l| l.contains("\"executable\":\""))
        .find(|l| l.contains("nats_shop"))
        .unwrap_or_else(|| panic!("cargo named no nats_shop executable:\n{stdout}"));
    let value: serde_json::Value = serde_json::from_str(line).unwrap();
    PathBuf::from(value["executable"].as_str().unwrap())
}

fn export_stats(bus: &Bus) -> eventbus::SubscriptionStats {
    let stats = bus.stats();
    let export = stats
        .subscriptions
        .into_iter()
        .find(|s| s.name == "nats-export:orders.placed");
    export.expect("the export subscription")
}

/// `copies` buses import "warehouse" from one exporter: what each copy received, in order,
/// once the copies together received `n` messages (or a failure naming what came).
async fn shared_import(
    server: &Server,
    copies: usize,
    n: u64,
) -> (Vec<Vec<u64>>, Bridge, Vec<Bridge>) {
    let shop = bus();
    let exporter = Bridge::connect(&shop, &server.url()).await.unwrap();
    exporter.export::<OrderPlaced>().await.unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut importers = Vec::new();
    for copy in 0..copies {
        let warehouse = bus();
        let tx = tx.clone();
        warehouse.subscribe_async::<OrderPlaced, _, _, _>(
            Options::default().name("test::receive"),
            move |m: Message<OrderPlaced>| {
                let _ = tx.send((copy, m.id));
                async {}
            },
        );
        let bridge = Bridge::connect(&warehouse, &server.url()).await.unwrap();
        bridge.import::<OrderPlaced>("warehouse").await.unwrap();
        importers.push(bridge);
    }
    for id in 0..n {
        shop.publish_async(OrderPlaced { id }).await.unwrap();
    }
    let deadline = Instant::now() + SHARED_DEADLINE;
    let mut shares = vec![Vec::new(); copies];
    let mut received = 0;
    while received < n {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some((copy, id))) => {
                shares[copy].push(id);
                received += 1;
            }
            _ => panic!(
                "{copies} copies received {received} of {n} messages within \
                 {SHARED_DEADLINE:?} (a stall); each copy's count: {:?}",
                shares.iter().map(Vec::len).collect::<Vec<_>>()
            ),
        }
    }
    (shares, exporter, importers)
}

/// How long copies sharing an import may take for 2,000 messages: a stall (a copy waiting
/// for a message the server gave another) costs an ack wait (5 s) per gap, thousands of them.
const SHARED_DEADLINE: Duration = Duration::from_secs(30);

/// Every id of `0..n` exactly once across the shares, and each share in increasing order.
fn assert_split(shares: &[Vec<u64>], n: u64) {
    for (copy, share) in shares.iter().enumerate() {
        assert!(
            share.windows(2).all(|w| w[0] < w[1]),
            "copy {copy}'s share is not in stream order: {share:?}"
        );
    }
    let mut all: Vec<u64> = shares.iter().flatten().copied().collect();
    all.sort_unstable();
    let missing: Vec<u64> = (0..n).filter(|id| all.binary_search(id).is_err()).collect();
    let twice: Vec<u64> = all
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    assert!(
        missing.is_empty() && twice.is_empty() && all.len() as u64 == n,
        "missing: {missing:?}, twice: {twice:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_of_one_import_split_the_stream_each_message_once_each_share_in_order() {
    for copies in [2, 3] {
        let server = Server::start();
        let n = 2_000;
        let (shares, exporter, importers) = shared_import(&server, copies, n).await;
        assert_split(&shares, n);
        // The server did give each copy a share (else this would test a single importer).
        assert!(
            shares.iter().all(|share| !share.is_empty()),
            "{copies} copies, counts {:?}",
            shares.iter().map(Vec::len).collect::<Vec<_>>()
        );
        exporter.close().await.unwrap();
        for importer in importers {
            importer.close().await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_closed_mid_stream_hands_its_unacknowledged_messages_to_the_others() {
    let server = Server::start();
    let shop = bus();
    let exporter = Bridge::connect(&shop, &server.url()).await.unwrap();
    exporter.export::<OrderPlaced>().await.unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();

    // The copy that closes: its subscriber stops at its 100th message until released, so
    // its mailbox (capacity 4, `Block`) fills, its importer waits on the bus with a message
    // in hand, and the pull buffer holds more, none of it acknowledged.
    let leaving = bus();
    let (release, released) = tokio::sync::watch::channel(false);
    let (stuck_tx, mut stuck) = mpsc::unbounded_channel();
    let mut seen = 0;
    let leaving_tx = tx.clone();
    leaving.subscribe_async::<OrderPlaced, _, _, _>(
        Options::default().name("test::receive").capacity(4),
        move |m: Message<OrderPlaced>| {
            let _ = leaving_tx.send((1, m.id));
            seen += 1;
            let mut released = released.clone();
            let stuck_tx = (seen == 100).then(|| stuck_tx.clone());
            async move {
                if let Some(stuck_tx) = stuck_tx {
                    let _ = stuck_tx.send(());
                    let _ = released.wait_for(|r| *r).await;
                }
            }
        },
    );
    let staying = bus();
    staying.subscribe_async::<OrderPlaced, _, _, _>(
        Options::default().name("test::receive"),
        move |m: Message<OrderPlaced>| {
            let _ = tx.send((0, m.id));
            async {}
        },
    );
    let mut bridges = Vec::new();
    for warehouse in [&staying, &leaving] {
        let bridge = Bridge::connect(warehouse, &server.url()).await.unwrap();
        bridge.import::<OrderPlaced>("warehouse").await.unwrap();
        bridges.push(bridge);
    }
    let leaving_bridge = bridges.pop().unwrap();
    let n = 2_000;
    for id in 0..n {
        shop.publish_async(OrderPlaced { id }).await.unwrap();
    }
    tokio::time::timeout(PATIENCE, stuck.recv())
        .await
        .expect("the leaving copy never received its 100th message")
        .unwrap();
    // It closes with messages unacknowledged; then its bus delivers what it had accepted.
    leaving_bridge.close().await.unwrap();
    release.send(true).unwrap();

    let deadline = Instant::now() + PATIENCE;
    let mut shares = vec![Vec::new(); 2];
    let mut received = 0;
    while received < n {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some((copy, id))) => {
                shares[copy].push(id);
                received += 1;
            }
            _ => panic!(
                "received {received} of {n} within {PATIENCE:?}; counts {:?}",
                shares.iter().map(Vec::len).collect::<Vec<_>>()
            ),
        }
    }
    // The leaving copy's share is in order; the staying one's is not (what the other left
    // unacknowledged came to it later), but together they hold every message once.
    let (left_share, staying_share) = (&shares[1], &shares[0]);
    assert!(left_share.windows(2).all(|w| w[0] < w[1]), "{left_share:?}");
    assert!(
        left_share.len() < n as usize / 2,
        "the leaving copy handled {} messages: it left nothing to hand over",
        left_share.len()
    );
    let mut all: Vec<u64> = shares.iter().flatten().copied().collect();
    all.sort_unstable();
    assert!(
        all.iter().copied().eq(0..n),
        "lost or twice; staying copy: {staying_share:?}"
    );
    nothing_more_shared(&mut rx, &shop, n).await;
    exporter.close().await.unwrap();
    for bridge in bridges {
        bridge.close().await.unwrap();
    }
}

/// Nothing more arrives at any copy while a marker makes the trip.
async fn nothing_more_shared(
    rx: &mut mpsc::UnboundedReceiver<(usize, u64)>,
    bus: &Bus,
    marker: u64,
) {
    bus.publish_async(OrderPlaced { id: marker }).await.unwrap();
    let after = tokio::time::timeout(PATIENCE, rx.recv()).await;
    assert!(
        matches!(after, Ok(Some((_, id))) if id == marker),
        "a message arrived twice: {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_asking_for_a_password_lets_in_the_right_one_only() {
    use eventbus::nats::ConnectOptions;

    let server = Server::start_with_password("shop", "s3cret");
    let (shop, warehouse) = (bus(), bus());
    let right = || ConnectOptions::new().user_and_password("shop", "s3cret");
    let exporter = Bridge::connect_with(&shop, &server.url(), right().name("shop"))
        .await
        .unwrap();
    let importer = Bridge::connect_with(&warehouse, &server.url(), right())
        .await
        .unwrap();
    exporter.export::<OrderPlaced>().await.unwrap();
    importer.import::<OrderPlaced>("warehouse").await.unwrap();
    let mut rx = receive(&warehouse);
    shop.publish_async(OrderPlaced { id: 1 }).await.unwrap();
    assert_eq!(next_ids(&mut rx, 1).await, [1]);

    // The password never shows in `Debug`.
    let debug = format!("{:?}", right());
    assert!(
        !debug.contains("s3cret") && debug.contains("shop"),
        "{debug}"
    );

    // No credentials, or a wrong password: a clear error, within the deadline.
    let wrong = ConnectOptions::new().user_and_password("shop", "guess");
    for options in [ConnectOptions::new(), wrong] {
        let started = Instant::now();
        let error = Bridge::connect_with(&bus(), &server.url(), options.clone())
            .await
            .unwrap_err();
        assert!(
            started.elapsed() <= Bridge::CONNECT_TIMEOUT + Duration::from_secs(1),
            "took {:?}",
            started.elapsed()
        );
        assert!(
            matches!(error, Error::Auth { .. }),
            "{options:?}: {error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains("refused the credentials") && text.contains("authorization"),
            "{text}"
        );
    }
    exporter.close().await.unwrap();
    importer.close().await.unwrap();
}

/// The client is re-exported: its types need no dependency of the caller's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_is_reexported() {
    use eventbus::nats::async_nats;

    let server = Server::start();
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let shop = bus();
    let exporter = Bridge::connect(&shop, &server.url()).await.unwrap();
    exporter.export::<OrderPlaced>().await.unwrap();
    shop.publish_async(OrderPlaced { id: 1 }).await.unwrap();
    exporter.close().await.unwrap();
    let mut stream = js.get_stream("eventbus_orders_placed").await.unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, 1);
}

/// How many rounds the stream-making race runs; `EVENTBUS_NATS_ROUNDS` lowers it.
fn race_rounds() -> u64 {
    std::env::var("EVENTBUS_NATS_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(150)
}

/// Two bridges starting together both find no stream and both make it: the one that loses
/// (JetStream 10058, name in use, or 10065, subjects overlap) takes the winner's stream.
/// A server answers a create of an existing stream with the same config as a success, so
/// the race only shows when the configs differ (another version of the bridge, an operator
/// who made the stream by hand): here an interloper watches the JetStream API and makes the
/// stream, with a longer age limit, the moment a bridge asks whether it exists. Each round
/// deletes the stream, then two fresh bridges export the topic at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_bridges_making_one_stream_at_once_both_succeed() {
    use eventbus::nats::async_nats;

    let server = Server::start();
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let mut asks = client
        .subscribe("$JS.API.STREAM.INFO.eventbus_orders_placed")
        .await
        .unwrap();
    client.flush().await.unwrap();
    let interloper = js.clone();
    let (made_tx, mut made) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while next_message(&mut asks).await.is_some() {
            let config = async_nats::jetstream::stream::Config {
                name: "eventbus_orders_placed".into(),
                subjects: vec![Bridge::subject::<OrderPlaced>()],
                max_age: Duration::from_secs(3600),
                ..Default::default()
            };
            let _ = made_tx.send(interloper.create_stream(config).await.is_ok());
        }
    });
    let (east, west) = (bus(), bus());
    let url = server.url();
    let mut interloper_won = 0;
    for round in 0..race_rounds() {
        let _ = js.delete_stream("eventbus_orders_placed").await;
        let (a, b) = tokio::join!(Bridge::connect(&east, &url), Bridge::connect(&west, &url));
        let (a, b) = (a.unwrap(), b.unwrap());
        let (made_a, made_b) = tokio::join!(
            tokio::spawn(async move { a.export::<OrderPlaced>().await.map(|()| a) }),
            tokio::spawn(async move { b.export::<OrderPlaced>().await.map(|()| b) })
        );
        let (a, b) = match (made_a.unwrap(), made_b.unwrap()) {
            (Ok(a), Ok(b)) => (a, b),
            (a, b) => panic!(
                "round {round}: {:?} / {:?}",
                a.err().map(|e| e.to_string()),
                b.err().map(|e| e.to_string())
            ),
        };
        while let Ok(won) = made.try_recv() {
            interloper_won += u64::from(won);
        }
        a.close().await.unwrap();
        b.close().await.unwrap();
    }
    // The race did happen: the interloper made the stream in most rounds.
    assert!(
        interloper_won * 2 >= race_rounds(),
        "the interloper made the stream in {interloper_won} of {} rounds",
        race_rounds()
    );
}

async fn next_message<S: futures_core::Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *stream).poll_next(cx)).await
}

mod keyed;
mod stats;
mod streams;
mod watchdog;
mod wire;
