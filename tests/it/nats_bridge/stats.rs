//! The bridge's stats (`Bridge::stats`, and the same in `Bus::stats().bridges`): per export
//! what was taken, sent, acked and is pending; per import what was received, imported,
//! acked and dead-lettered.

use super::*;

/// Waits (polling the stats, which are counters) until `condition` holds, or fails naming
/// `what` and the last stats seen.
pub(super) async fn eventually(
    what: &str,
    bridge: &Bridge,
    condition: impl Fn(&eventbus::nats::BridgeStats) -> bool,
) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let stats = bridge.stats();
        if condition(&stats) {
            return;
        }
        assert!(Instant::now() < deadline, "never happened: {what}\n{stats}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_counts_what_it_sends_and_imports_and_the_bus_shows_it() {
    let server = Server::start();
    let (shop, warehouse, exporter, importer, mut rx) = shop_and_warehouse(&server).await;

    let n = 200;
    for id in 0..n {
        shop.publish_async(OrderPlaced { id }).await.unwrap();
    }
    assert_eq!(
        next_ids(&mut rx, n as usize).await,
        (0..n).collect::<Vec<_>>()
    );
    // One that is no `OrderPlaced`, from another client: a dead letter of the import.
    let raw = async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap());
    raw.publish(Bridge::subject::<OrderPlaced>(), "not json".into())
        .await
        .unwrap()
        .await
        .unwrap();

    eventually("every export acked", &exporter, |s| s.exports[0].acked == n).await;
    let export = &exporter.stats().exports[0];
    assert_eq!(export.topic, "orders.placed");
    assert_eq!(export.subject, "eventbus.orders.placed");
    assert_eq!(
        (
            export.taken,
            export.acked,
            export.pending,
            export.dead_lettered
        ),
        (n, n, 0, 0)
    );
    assert!(
        export.sent >= n && export.sent == n + export.resent,
        "{export:?}"
    );
    assert!(exporter.stats().imports.is_empty());

    eventually("every import settled", &importer, |s| {
        let i = &s.imports[0];
        i.imported == n && i.acked >= n && i.dead_lettered == 1
    })
    .await;
    let import = &importer.stats().imports[0];
    assert_eq!(
        (import.topic, import.name.as_str()),
        ("orders.placed", "warehouse")
    );
    // A redelivery of one already imported is acked again (and counted as skipped).
    assert_eq!(import.acked, import.imported + import.skipped, "{import:?}");
    // Each message received is imported, skipped, dead-lettered or held (and comes again).
    assert_eq!(
        import.received,
        import.imported + import.skipped + import.dead_lettered + import.held,
        "{import:?}"
    );
    assert_eq!(importer.stats().reconnects, 0);

    // The bus shows its bridges' stats; a bridge gone is gone from them.
    let shown = shop.stats().bridges;
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].id, exporter.id());
    assert_eq!(shown[0].exports[0].acked, n);
    assert!(
        shop.stats().to_string().contains("export orders.placed"),
        "{}",
        shop.stats()
    );
    assert_eq!(warehouse.stats().bridges[0].imports[0].imported, n);
    exporter.close().await.unwrap();
    importer.close().await.unwrap();
    assert!(shop.stats().bridges.is_empty());
    assert!(warehouse.stats().bridges.is_empty());
}

/// The dashboard's page (in Chromium) shows a row per export and per import of each bridge.
#[cfg(feature = "dashboard")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_each_export_and_import_of_a_bridge() {
    let server = Server::start();
    let bus = bus();
    let bridge = Bridge::connect(&bus, &server.url()).await.unwrap();
    bridge.export::<OrderPlaced>().await.unwrap();
    // Importing its own export: each message comes back and is skipped (its origin).
    bridge.import::<OrderPlaced>("audit").await.unwrap();
    for id in 0..5 {
        bus.publish_async(OrderPlaced { id }).await.unwrap();
    }
    eventually("acked and skipped", &bridge, |s| {
        s.exports[0].acked == 5 && s.imports[0].skipped == 5 && s.imports[0].acked == 5
    })
    .await;
    let dashboard = eventbus::dashboard::serve(&bus, "127.0.0.1:0").unwrap();
    let url = format!("http://{}/", dashboard.addr());
    tokio::task::block_in_place(|| {
        let driver = crate::dashboard::Driver::start();
        driver.go(&url);
        driver.wait_for("#bridges tbody tr td.way", &["export", "import"]);
        driver.wait_for("#bridges tbody tr[data-way=export] td.acked", &["5"]);
        driver.wait_for(
            "#bridges tbody tr[data-way=export] td.where",
            &["eventbus.orders.placed"],
        );
        driver.wait_for("#bridges tbody tr[data-way=import] td.where", &["audit"]);
        driver.wait_for("#bridges tbody tr[data-way=import] td.skipped", &["5"]);
        driver.wait_for("#bridges tbody tr[data-way=import] td.passed", &["0"]);
    });
    drop(dashboard);
    bridge.close().await.unwrap();
}

/// A keyed import that waits because its partition count is unreadable says why on the
/// dashboard's page (in Chromium), under its row: an operator looking at the page sees it.
#[cfg(feature = "dashboard")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_why_a_keyed_import_waits() {
    let server = Server::start();
    let bus = bus();
    let bridge = Bridge::connect(&bus, &server.url()).await.unwrap();
    bridge.import_keyed::<OrderPlaced>("billing").await.unwrap();
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let declaration = format!("eventbus-keyed.{}", Bridge::stream_name::<OrderPlaced>());
    js.publish(declaration, "eight".into())
        .await
        .unwrap()
        .await
        .unwrap();
    eventually("the import says why it waits", &bridge, |s| {
        s.imports[0].problem.is_some()
    })
    .await;
    let dashboard = eventbus::dashboard::serve(&bus, "127.0.0.1:0").unwrap();
    let url = format!("http://{}/", dashboard.addr());
    tokio::task::block_in_place(|| {
        let driver = crate::dashboard::Driver::start();
        driver.go(&url);
        driver.wait_for("#bridges tbody tr[data-way=import] td.where", &["billing"]);
        driver.wait_until("#bridges tbody tr.problem td", |texts| {
            texts.len() == 1 && texts[0].starts_with("waiting: ") && texts[0].contains("eight")
        });
    });
    drop(dashboard);
    bridge.close().await.unwrap();
}
