//! `cargo bench -p eventbus --features nats --bench nats`: messages per second from one bus to
//! another through NATS JetStream (export → server → import), against raw `async-nats`
//! JetStream publish and pull-consume of the same payloads, in the same run, alternating,
//! several rounds; medians and the ratio (issue 15's goal: eventbus ≥ 0.5 × raw).
//!
//! It starts its own `nats-server -js` (it must be on the PATH) on a free 127.0.0.1 port with
//! a store in a temporary directory, and kills it at the end.
//!
//! - `EVENTBUS_NATS_MESSAGES` (default 20,000) messages per round, a JSON `{"id":n}` each;
//!   `EVENTBUS_ROUNDS` (default 5) rounds of each contender.
//! - **eventbus**: bus A `publish_async` → `Bridge::export` (up to 256 messages awaiting
//!   acks, each expecting its predecessor) → stream → `Bridge::import` (a durable consumer,
//!   up to 1024 unacked, handled in stream order, each published on bus B, then acked) → an
//!   async subscriber on bus B. Timed from the first publish to the last message received.
//! - **raw**: `jetstream.publish` of every message without waiting (acks awaited at the end,
//!   as async-nats' docs show), while a pull consumer (defaults: `max_ack_pending` 1000)
//!   receives and acks each. Same timing. No order across redelivery, no backpressure to a
//!   local publisher, no de-duplication id: what the bridge adds is what this skips.
//!
//! - `EVENTBUS_NATS_RAW_HEADERS=1`: the raw publishes carry the bridge's headers
//!   (`Nats-Msg-Id`, `Eventbus-Seq`, `Eventbus-Origin`) and its expectation
//!   (`Nats-Expected-Last-Msg-Id`), so the server does the same work per message; `=2`: only
//!   the `Nats-Msg-Id` (the server's de-duplication).
//!
//! The load average (`/proc/loadavg`) is printed at the start and the end: figures from a
//! loaded machine are noise.

#[path = "common/measure.rs"]
mod measure;

use std::future::poll_fn;
use std::io::{BufRead, BufReader};
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use eventbus::nats::Bridge;
use eventbus::{Bus, Message, Options, Topic};
use futures_core::Stream;
use serde::{Deserialize, Serialize};

#[derive(Topic, Serialize, Deserialize)]
#[topic(name = "bench.tick")]
struct Tick {
    id: u64,
}

struct Server {
    child: Child,
    store: std::path::PathBuf,
    url: String,
}

impl Server {
    fn start() -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let store =
            std::env::temp_dir().join(format!("eventbus-nats-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&store);
        let mut child = Command::new("nats-server")
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(&store)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `nats-server` ({e}): install it with `apt-get install -y nats-server`"));
        let (tx, rx) = std::sync::mpsc::channel();
        let log = BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in log.lines().map_while(Result::ok) {
                if line.contains("Server is ready") {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(60))
            .expect("nats-server was not ready within 60 s");
        Server {
            child,
            store,
            url: format!("nats://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.store);
    }
}

async fn next<S: Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    poll_fn(|cx| Pin::new(&mut *stream).poll_next(cx)).await
}

/// Deletes a stream left by an earlier round, so each round starts empty.
async fn fresh(js: &async_nats::jetstream::Context, stream: &str) {
    let _ = js.delete_stream(stream).await;
}

async fn eventbus_round(url: &str, js: &async_nats::jetstream::Context, n: u64) -> Duration {
    fresh(js, &Bridge::subject::<Tick>().replace('.', "_")).await;
    let (a, b) = (Bus::builder().build(), Bus::builder().build());
    let exporter = Bridge::connect(&a, url).await.unwrap();
    let importer = Bridge::connect(&b, url).await.unwrap();
    exporter.export::<Tick>().await.unwrap();
    importer.import::<Tick>("bench").await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    b.subscribe_async::<Tick, _, _, _>(Options::default(), move |m: Message<Tick>| {
        let _ = tx.send(m.id);
        async {}
    });
    let started = Instant::now();
    let publisher = a.clone();
    tokio::spawn(async move {
        for id in 0..n {
            publisher.publish_async(Tick { id }).await.unwrap();
        }
    });
    for expected in 0..n {
        assert_eq!(rx.recv().await, Some(expected));
    }
    let took = started.elapsed();
    exporter.close().await.unwrap();
    importer.close().await.unwrap();
    a.close_async().await;
    b.close_async().await;
    took
}

async fn raw_round(js: &async_nats::jetstream::Context, n: u64) -> Duration {
    use async_nats::jetstream::{consumer, stream};
    fresh(js, "raw_bench").await;
    let stream = js
        .create_stream(stream::Config {
            name: "raw_bench".into(),
            subjects: vec!["raw.bench".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    let consumer = stream
        .create_consumer(consumer::pull::Config {
            durable_name: Some("bench".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut messages = consumer.messages().await.unwrap();
    let started = Instant::now();
    let publisher = js.clone();
    // Up to WINDOW acks awaited at once, as the bridge's exporter does: async-nats stops
    // taking publishes once too many acks are pending and unawaited (a run of 10,000
    // collected first never finished).
    const WINDOW: usize = 256;
    // `EVENTBUS_NATS_RAW_HEADERS=1`: the raw publishes carry the bridge's headers and
    // expectation, to tell the server's share of the gap from the bridge's.
    let headers = measure::env("EVENTBUS_NATS_RAW_HEADERS", 0);
    let publishing = tokio::spawn(async move {
        let mut acks = std::collections::VecDeque::with_capacity(WINDOW);
        for id in 0..n {
            if acks.len() == WINDOW {
                let ack: async_nats::jetstream::context::PublishAckFuture =
                    acks.pop_front().unwrap();
                ack.await.unwrap();
            }
            let payload = serde_json::to_vec(&Tick { id }).unwrap();
            let ack = if headers > 0 {
                // The bridge's headers, so the server does the same checks per message.
                let mut message = async_nats::jetstream::message::PublishMessage::build()
                    .payload(payload.into())
                    .message_id(format!("raw-{id}"));
                if headers == 1 {
                    message = message
                        .header("Eventbus-Seq", id.to_string().as_str())
                        .header("Eventbus-Origin", "raw");
                    if id > 0 {
                        message = message.expected_last_message_id(format!("raw-{}", id - 1));
                    }
                }
                publisher.send_publish("raw.bench", message).await
            } else {
                publisher.publish("raw.bench", payload.into()).await
            };
            acks.push_back(ack.unwrap());
        }
        for ack in acks {
            ack.await.unwrap();
        }
    });
    for _ in 0..n {
        let message = next(&mut messages).await.unwrap().unwrap();
        let tick: Tick = serde_json::from_slice(&message.payload).unwrap();
        std::hint::black_box(tick.id);
        message.ack().await.unwrap();
    }
    let took = started.elapsed();
    publishing.await.unwrap();
    took
}

fn main() {
    println!("load average at start: {}", measure::load_average().trim());
    let n = measure::env("EVENTBUS_NATS_MESSAGES", 20_000);
    let rounds = measure::env("EVENTBUS_ROUNDS", 5);
    let server = Server::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (ours, raw) = runtime.block_on(async {
        let client = async_nats::connect(&server.url).await.unwrap();
        let js = async_nats::jetstream::new(client);
        let (mut ours, mut raw) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let e = eventbus_round(&server.url, &js, n).await;
            let r = raw_round(&js, n).await;
            let (e, r) = (n as f64 / e.as_secs_f64(), n as f64 / r.as_secs_f64());
            println!("round {round}: eventbus {e:>10.0} msg/s   raw {r:>10.0} msg/s");
            ours.push(e);
            raw.push(r);
        }
        (ours, raw)
    });
    let (ours, raw) = (measure::median(ours), measure::median(raw));
    println!(
        "median of {rounds} rounds, {n} messages: eventbus {ours:.0} msg/s, raw async-nats {raw:.0} msg/s, ratio {:.2} (goal >= 0.5)",
        ours / raw
    );
    println!("load average at end: {}", measure::load_average().trim());
}
