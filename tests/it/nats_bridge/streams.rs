//! Streams an operator names, limits or makes in advance (`StreamOptions`, through
//! `ExportOptions`, `ImportOptions` and `Bridge::ensure_stream_with`), against a real
//! `nats-server`.

use eventbus::nats::{async_nats, ExportOptions, ImportOptions, StreamOptions};

use super::*;

async fn jetstream(server: &Server) -> async_nats::jetstream::Context {
    async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_stream_with_limits_carries_the_topic() {
    let server = Server::start();
    let (shop, warehouse) = (bus(), bus());
    let mut rx = receive(&warehouse);
    let orders = StreamOptions::new()
        .name("ORDERS")
        .max_messages(1_000)
        .max_age(Duration::from_secs(3600));
    let exporter = Bridge::connect(&shop, &server.url()).await.unwrap();
    let importer = Bridge::connect(&warehouse, &server.url()).await.unwrap();
    exporter
        .export_with::<OrderPlaced>(
            ExportOptions::new()
                .subscriber(Options::default().capacity(64))
                .stream(orders.clone()),
        )
        .await
        .unwrap();
    importer
        .import_with::<OrderPlaced>("warehouse", ImportOptions::new().stream(orders))
        .await
        .unwrap();
    for id in 0..50 {
        shop.publish_async(OrderPlaced { id }).await.unwrap();
    }
    assert_eq!(next_ids(&mut rx, 50).await, (0..50).collect::<Vec<_>>());
    exporter.close().await.unwrap();
    importer.close().await.unwrap();

    let js = jetstream(&server).await;
    let mut stream = js.get_stream("ORDERS").await.unwrap();
    let info = stream.info().await.unwrap();
    assert_eq!(info.config.subjects, [Bridge::subject::<OrderPlaced>()]);
    assert_eq!(info.config.max_messages, 1_000);
    assert_eq!(info.config.max_age, Duration::from_secs(3600));
    assert_eq!(info.state.messages, 50);
    assert!(
        js.get_stream(Bridge::stream_name::<OrderPlaced>())
            .await
            .is_err(),
        "the default stream was made too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_stream_is_used_as_it_is_and_a_missing_or_shared_one_is_a_clear_error() {
    let server = Server::start();
    let js = jetstream(&server).await;
    let bus = bus();
    let mut rx = receive(&bus);
    let theirs = || StreamOptions::new().name("ORDERS").existing();

    // Missing: refused, and nothing made.
    let bridge = Bridge::connect(&bus, &server.url()).await.unwrap();
    let error = bridge
        .ensure_stream_with::<OrderPlaced>(theirs())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Stream { .. }), "{error}");
    assert!(error.to_string().contains("no such stream"), "{error}");
    assert!(js.get_stream("ORDERS").await.is_err());
    drop(bridge);

    // Holding another subject too: refused, and left as it was.
    let config = |subjects: Vec<String>| async_nats::jetstream::stream::Config {
        name: "ORDERS".into(),
        subjects,
        max_messages: 500,
        ..Default::default()
    };
    let subject = Bridge::subject::<OrderPlaced>();
    js.create_stream(config(vec![subject.clone(), "audit.>".into()]))
        .await
        .unwrap();
    let bridge = Bridge::connect(&bus, &server.url()).await.unwrap();
    let error = bridge
        .import_with::<OrderPlaced>("warehouse", ImportOptions::new().stream(theirs()))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("holds the subjects"), "{error}");
    drop(bridge);

    // The subject alone: used as it is, limits kept.
    js.delete_stream("ORDERS").await.unwrap();
    js.create_stream(config(vec![subject.clone()]))
        .await
        .unwrap();
    let bridge = Bridge::connect(&bus, &server.url()).await.unwrap();
    bridge
        .import_with::<OrderPlaced>("warehouse", ImportOptions::new().stream(theirs()))
        .await
        .unwrap();
    for id in 0..5 {
        js.publish(subject.clone(), format!("{{\"id\":{id}}}").into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    assert_eq!(next_ids(&mut rx, 5).await, [0, 1, 2, 3, 4]);
    bridge.close().await.unwrap();
    let mut stream = js.get_stream("ORDERS").await.unwrap();
    assert_eq!(stream.info().await.unwrap().config.max_messages, 500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_options_the_server_cannot_take_or_that_disagree_are_refused() {
    let server = Server::start();
    let bus = bus();
    let bridge = Bridge::connect(&bus, &server.url()).await.unwrap();
    for (options, says) in [
        (StreamOptions::new().replicas(0), "replicas"),
        (StreamOptions::new().replicas(6), "replicas"),
        (StreamOptions::new().name("ORD.ERS"), "letters, digits"),
        (StreamOptions::new().max_messages(0), "max messages"),
    ] {
        let error = bridge
            .ensure_stream_with::<OrderPlaced>(options)
            .await
            .unwrap_err();
        assert!(matches!(error, Error::Stream { .. }), "{error}");
        assert!(error.to_string().contains(says), "{error}");
    }
    // One bridge's export and import of a topic share one stream.
    bridge
        .export_with::<OrderPlaced>(
            ExportOptions::new().stream(StreamOptions::new().name("ORDERS")),
        )
        .await
        .unwrap();
    let error = bridge
        .import_with::<OrderPlaced>(
            "warehouse",
            ImportOptions::new().stream(StreamOptions::new().name("OTHER")),
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("share one stream"), "{error}");
    // The default fits whatever was given.
    bridge.import::<OrderPlaced>("warehouse").await.unwrap();
    bridge.close().await.unwrap();
}

#[derive(Topic, Serialize, Deserialize, Debug)]
#[topic(name = "stock.reserved")]
struct StockReserved {
    order: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_stream_holding_other_subjects_is_refused_and_left_as_it_was() {
    let server = Server::start();
    let js = jetstream(&server).await;
    let subject = Bridge::subject::<OrderPlaced>();
    js.create_stream(async_nats::jetstream::stream::Config {
        name: "ORDERS".into(),
        subjects: vec!["audit.>".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let bus = bus();
    let bridge = Bridge::connect(&bus, &server.url()).await.unwrap();
    let named = || StreamOptions::new().name("ORDERS");
    let error = bridge
        .export_with::<OrderPlaced>(ExportOptions::new().stream(named()))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Stream { .. }), "{error}");
    assert!(error.to_string().contains("holds the subjects"), "{error}");
    let mut stream = js.get_stream("ORDERS").await.unwrap();
    let subjects = stream.info().await.unwrap().config.subjects.clone();
    assert_eq!(subjects, ["audit.>"], "the operator's stream was changed");

    // The failed call's plan is forgotten: other options go on.
    bridge
        .export_with::<OrderPlaced>(
            ExportOptions::new().stream(StreamOptions::new().name("ORDERS-PLACED")),
        )
        .await
        .unwrap();
    let mut stream = js.get_stream("ORDERS-PLACED").await.unwrap();
    assert_eq!(stream.info().await.unwrap().config.subjects, [subject]);
    // One bridge keeps one topic per stream.
    let error = bridge
        .ensure_stream_with::<StockReserved>(StreamOptions::new().name("ORDERS-PLACED"))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("one topic's subject alone"),
        "{error}"
    );
    bridge.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_max_age_under_the_duplicate_window_makes_a_stream() {
    let server = Server::start();
    let bus = bus();
    let bridge = Bridge::connect(&bus, &server.url()).await.unwrap();
    let minute = Duration::from_secs(60);
    bridge
        .ensure_stream_with::<OrderPlaced>(StreamOptions::new().max_age(minute))
        .await
        .unwrap();
    let js = jetstream(&server).await;
    let mut stream = js
        .get_stream(Bridge::stream_name::<OrderPlaced>())
        .await
        .unwrap();
    let config = stream.info().await.unwrap().config.clone();
    assert_eq!((config.max_age, config.duplicate_window), (minute, minute));
    let error = bridge
        .ensure_stream_with::<StockReserved>(
            StreamOptions::new().max_age(Duration::from_millis(10)),
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("max age under"), "{error}");
    bridge.close().await.unwrap();
}
