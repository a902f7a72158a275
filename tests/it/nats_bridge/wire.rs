//! The wire format (`eventbus::wire_format`), with a plain JetStream client playing a
//! program in another language: a producer that knows only the documented subject, stream
//! and JSON body is imported; a consumer of an export finds every documented header.

use eventbus::nats::{async_nats, ORIGIN_HEADER, SEQ_HEADER};

use super::*;

/// A JetStream context of a plain client, as another language's program would have.
async fn foreign(server: &Server) -> async_nats::jetstream::Context {
    async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap())
}

/// `{"id":n}`, written by hand as a foreign producer would.
fn body(id: u64) -> String {
    format!("{{\"id\":{id}}}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_producer_without_eventbus_headers_is_imported_in_order() {
    let server = Server::start();
    let js = foreign(&server).await;
    let subject = Bridge::subject::<OrderPlaced>();
    // No stream holds the subject yet: JetStream refuses the publish, so the stream must come
    // first (`ensure_stream`, or made by hand as the wire format says).
    let early = match js.publish(subject.clone(), body(0).into()).await {
        Ok(ack) => ack.await.is_err(),
        Err(_) => true,
    };
    assert!(early, "a JetStream publish with no stream was acked");

    let warehouse = bus();
    let mut rx = receive(&warehouse);
    let bridge = Bridge::connect(&warehouse, &server.url()).await.unwrap();
    bridge.ensure_stream::<OrderPlaced>().await.unwrap();
    bridge.ensure_stream::<OrderPlaced>().await.unwrap(); // twice is no error
    let mut stream = js
        .get_stream(Bridge::stream_name::<OrderPlaced>())
        .await
        .unwrap();
    let info = stream.info().await.unwrap();
    assert_eq!(info.config.subjects, std::slice::from_ref(&subject));

    // The producer starts before any import: plain JSON, no headers.
    for id in 0..100 {
        js.publish(subject.clone(), body(id).into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    bridge.import::<OrderPlaced>("warehouse").await.unwrap();
    assert_eq!(next_ids(&mut rx, 100).await, (0..100).collect::<Vec<_>>());
    // A `Nats-Msg-Id` sent twice is stored once (the duplicate window), so imported once.
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Msg-Id", "py-100");
    for _ in 0..2 {
        js.publish_with_headers(subject.clone(), headers.clone(), body(100).into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    js.publish(subject.clone(), body(101).into())
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!(next_ids(&mut rx, 2).await, [100, 101]);
    assert!(warehouse.dead_letters().is_empty());
    bridge.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_made_by_hand_to_the_documented_layout_is_used() {
    let server = Server::start();
    let js = foreign(&server).await;
    // An operator makes the stream first, with a retention of its own.
    let config = async_nats::jetstream::stream::Config {
        name: Bridge::stream_name::<OrderPlaced>(),
        subjects: vec![Bridge::subject::<OrderPlaced>()],
        max_messages: 1_000,
        ..Default::default()
    };
    js.create_stream(config).await.unwrap();
    let (shop, warehouse) = (bus(), bus());
    let mut rx = receive(&warehouse);
    let exporter = Bridge::connect(&shop, &server.url()).await.unwrap();
    let importer = Bridge::connect(&warehouse, &server.url()).await.unwrap();
    exporter.export::<OrderPlaced>().await.unwrap();
    importer.import::<OrderPlaced>("warehouse").await.unwrap();
    for id in 0..10 {
        shop.publish_async(OrderPlaced { id }).await.unwrap();
    }
    assert_eq!(next_ids(&mut rx, 10).await, (0..10).collect::<Vec<_>>());
    exporter.close().await.unwrap();
    importer.close().await.unwrap();
    // The operator's stream, kept as it was made.
    let mut stream = js
        .get_stream(Bridge::stream_name::<OrderPlaced>())
        .await
        .unwrap();
    let info = stream.info().await.unwrap();
    assert_eq!(info.config.max_messages, 1_000);
    assert_eq!(info.state.messages, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_consumer_of_an_export_finds_every_documented_header() {
    use async_nats::jetstream::consumer::pull;

    let server = Server::start();
    let shop = bus();
    let bridge = Bridge::connect(&shop, &server.url()).await.unwrap();
    let origin = bridge.id().to_string();
    bridge.export::<OrderPlaced>().await.unwrap();
    for id in [7, 8, 9] {
        shop.publish_async(OrderPlaced { id }).await.unwrap();
    }
    // Close awaits the server's acks: the three are in the stream.
    bridge.close().await.unwrap();

    let js = foreign(&server).await;
    let stream = js
        .get_stream(Bridge::stream_name::<OrderPlaced>())
        .await
        .unwrap();
    let consumer: async_nats::jetstream::consumer::PullConsumer = stream
        .create_consumer(pull::Config {
            durable_name: Some("foreign".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut messages = consumer
        .fetch()
        .max_messages(3)
        .expires(PATIENCE)
        .messages()
        .await
        .unwrap();
    for (seq, id) in [(0u64, 7u64), (1, 8), (2, 9)] {
        let message = next_message(&mut messages)
            .await
            .expect("three messages")
            .unwrap();
        assert_eq!(message.subject.as_str(), "eventbus.orders.placed");
        let value: serde_json::Value = serde_json::from_slice(&message.payload).unwrap();
        assert_eq!(value, serde_json::json!({ "id": id }));
        let headers = message.headers.as_ref().expect("an export sets headers");
        let header = |name: &str| headers.get(name).map(|v| v.as_str().to_string());
        assert_eq!(header("Nats-Msg-Id"), Some(format!("{origin}-{seq}")));
        assert_eq!(header(SEQ_HEADER), Some(seq.to_string()));
        assert_eq!(header(ORIGIN_HEADER), Some(origin.clone()));
        // And no header the wire format does not name.
        let documented = [
            "Nats-Msg-Id",
            SEQ_HEADER,
            ORIGIN_HEADER,
            "Nats-Expected-Last-Msg-Id",
        ];
        for (name, _) in headers.iter() {
            assert!(
                documented.contains(&name.as_ref()),
                "undocumented header {name}"
            );
        }
        assert!(
            !origin.is_empty() && origin.chars().all(|c| c.is_ascii_alphanumeric()),
            "the bridge id is letters and digits: {origin:?}"
        );
        message.ack().await.unwrap();
    }
}
