//! `cargo bench -p eventbus --features nats --bench nats`: messages per second from one bus to
//! another through NATS JetStream (export → server → import), against raw `async-nats`
//! JetStream publish and pull-consume of the same payloads, in the same run, alternating,
//! several rounds; medians and the ratios (issue 28's goal: eventbus ≥ 0.8 × raw).
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
//! - **eventbus, 2 copies**: as eventbus, but two importing buses (two connections) call
//!   `import::<Tick>("bench")` with the one name (two copies of a consumer, sharing the work);
//!   timed until the two together have every message, each exactly once.
//!
//! - `EVENTBUS_NATS_CONTENDERS` (default `eventbus,copies,raw`): which contenders run, each
//!   round in that order. Besides `raw`, the raw publishes can carry what the bridge's do, so
//!   the server's share of the gap shows: `raw-id` only a `Nats-Msg-Id` (the server's
//!   de-duplication); `raw-bridge` the bridge's headers (`Nats-Msg-Id`, `Eventbus-Seq`,
//!   `Eventbus-Origin`) and expectation (`Nats-Expected-Last-Msg-Id`); `raw-plain` headers
//!   of the same sizes under names the server does not read; `raw-one` one short header the
//!   server does not read; `raw-expect` the `Nats-Msg-Id` and expectation alone. A suffix
//!   `@<ms>` sets the raw stream's duplicate window (default: the server's, 2 minutes):
//!   `raw-id@1000`. Ratios are against the first `raw…` contender.
//!   `EVENTBUS_NATS_RAW_HEADERS=1` (`=2`) still puts `raw-bridge` (`raw-id`) in place of `raw`
//!   in the default list.
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

/// Two importing buses under one name: timed until they have every message between them,
/// each exactly once.
async fn copies_round(url: &str, js: &async_nats::jetstream::Context, n: u64) -> Duration {
    fresh(js, &Bridge::subject::<Tick>().replace('.', "_")).await;
    let a = Bus::builder().build();
    let exporter = Bridge::connect(&a, url).await.unwrap();
    exporter.export::<Tick>().await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut copies = Vec::new();
    for _ in 0..2 {
        let b = Bus::builder().build();
        let importer = Bridge::connect(&b, url).await.unwrap();
        importer.import::<Tick>("bench").await.unwrap();
        let tx = tx.clone();
        b.subscribe_async::<Tick, _, _, _>(Options::default(), move |m: Message<Tick>| {
            let _ = tx.send(m.id);
            async {}
        });
        copies.push((b, importer));
    }
    let started = Instant::now();
    let publisher = a.clone();
    tokio::spawn(async move {
        for id in 0..n {
            publisher.publish_async(Tick { id }).await.unwrap();
        }
    });
    let mut seen = vec![false; n as usize];
    for _ in 0..n {
        let id = rx.recv().await.unwrap() as usize;
        assert!(!std::mem::replace(&mut seen[id], true), "{id} twice");
    }
    let took = started.elapsed();
    exporter.close().await.unwrap();
    a.close_async().await;
    for (b, importer) in copies {
        importer.close().await.unwrap();
        b.close_async().await;
    }
    took
}

/// What the raw publishes carry, and the raw stream's duplicate window.
#[derive(Clone, Copy)]
struct Raw {
    headers: Headers,
    window: Option<Duration>,
}

#[derive(Clone, Copy, PartialEq)]
enum Headers {
    None,
    /// `Nats-Msg-Id` only.
    Id,
    /// The bridge's headers and expectation.
    Bridge,
    /// Headers of the same sizes as `Bridge`'s, under names the server does not read.
    Plain,
    /// One short header the server does not read.
    One,
    /// `Nats-Msg-Id` and the expectation, without the bridge's own two headers.
    Expect,
}

async fn raw_round(js: &async_nats::jetstream::Context, n: u64, raw: Raw) -> Duration {
    use async_nats::jetstream::{consumer, stream};
    fresh(js, "raw_bench").await;
    let stream = js
        .create_stream(stream::Config {
            name: "raw_bench".into(),
            subjects: vec!["raw.bench".into()],
            duplicate_window: raw.window.unwrap_or_default(),
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
    let headers = raw.headers;
    let publishing = tokio::spawn(async move {
        let mut acks = std::collections::VecDeque::with_capacity(WINDOW);
        for id in 0..n {
            if acks.len() == WINDOW {
                let ack: async_nats::jetstream::context::PublishAckFuture =
                    acks.pop_front().unwrap();
                ack.await.unwrap();
            }
            let payload = serde_json::to_vec(&Tick { id }).unwrap();
            let ack = if headers == Headers::One {
                let message = async_nats::jetstream::message::PublishMessage::build()
                    .payload(payload.into())
                    .header("E", "1");
                publisher.send_publish("raw.bench", message).await
            } else if headers == Headers::Plain {
                // The same bytes as `Bridge`'s, under names the server does not read.
                let mut message = async_nats::jetstream::message::PublishMessage::build()
                    .payload(payload.into())
                    .header("Xats-Msg-Id", format!("raw-{id}").as_str())
                    .header("Eventbus-Seq", id.to_string().as_str())
                    .header("Eventbus-Origin", "raw");
                if id > 0 {
                    let last = format!("raw-{}", id - 1);
                    message = message.header("Xats-Expected-Last-Msg-Id", last.as_str());
                }
                publisher.send_publish("raw.bench", message).await
            } else if headers != Headers::None {
                // The bridge's headers, so the server does the same checks per message.
                let mut message = async_nats::jetstream::message::PublishMessage::build()
                    .payload(payload.into())
                    .message_id(format!("raw-{id}"));
                if headers == Headers::Bridge {
                    message = message
                        .header("Eventbus-Seq", id.to_string().as_str())
                        .header("Eventbus-Origin", "raw");
                }
                if matches!(headers, Headers::Bridge | Headers::Expect) && id > 0 {
                    message = message.expected_last_message_id(format!("raw-{}", id - 1));
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

/// A contender: the bridge, the bridge with two importing copies, or raw async-nats.
#[derive(Clone, Copy)]
enum Contender {
    Eventbus,
    Copies,
    Raw(Raw),
}

/// `EVENTBUS_NATS_CONTENDERS`, by name (see the module docs).
fn contenders() -> Vec<(String, Contender)> {
    let default = match measure::env("EVENTBUS_NATS_RAW_HEADERS", 0) {
        1 => "eventbus,copies,raw-bridge",
        2 => "eventbus,copies,raw-id",
        _ => "eventbus,copies,raw",
    };
    let list = std::env::var("EVENTBUS_NATS_CONTENDERS").unwrap_or_else(|_| default.into());
    list.split(',')
        .map(|name| {
            let (kind, window) = match name.split_once('@') {
                Some((kind, ms)) => (kind, Some(Duration::from_millis(ms.parse().unwrap()))),
                None => (name, None),
            };
            let raw = |headers| Contender::Raw(Raw { headers, window });
            let contender = match kind {
                "eventbus" => Contender::Eventbus,
                "copies" => Contender::Copies,
                "raw" => raw(Headers::None),
                "raw-id" => raw(Headers::Id),
                "raw-bridge" => raw(Headers::Bridge),
                "raw-plain" => raw(Headers::Plain),
                "raw-one" => raw(Headers::One),
                "raw-expect" => raw(Headers::Expect),
                other => panic!(
                    "unknown contender `{other}`: eventbus, copies, raw, raw-id, raw-expect, \
                     raw-bridge, raw-plain, raw-one (raw ones may end in @<ms>)"
                ),
            };
            let title = match contender {
                Contender::Eventbus => "eventbus".to_string(),
                Contender::Copies => "eventbus, 2 copies".to_string(),
                Contender::Raw(_) => name.to_string(),
            };
            (title, contender)
        })
        .collect()
}

fn main() {
    println!("load average at start: {}", measure::load_average().trim());
    let n = measure::env("EVENTBUS_NATS_MESSAGES", 20_000);
    let rounds = measure::env("EVENTBUS_ROUNDS", 5);
    let contenders = contenders();
    let server = Server::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let rates = runtime.block_on(async {
        let client = async_nats::connect(&server.url).await.unwrap();
        let js = async_nats::jetstream::new(client);
        let mut rates = vec![Vec::new(); contenders.len()];
        for round in 0..rounds {
            let mut line = format!("round {round}:");
            for (i, (title, contender)) in contenders.iter().enumerate() {
                let took = match *contender {
                    Contender::Eventbus => eventbus_round(&server.url, &js, n).await,
                    Contender::Copies => copies_round(&server.url, &js, n).await,
                    Contender::Raw(raw) => raw_round(&js, n, raw).await,
                };
                let rate = n as f64 / took.as_secs_f64();
                line += &format!("  {title} {rate:.0}");
                rates[i].push(rate);
            }
            println!("{line} msg/s");
        }
        rates
    });
    let medians: Vec<f64> = rates.into_iter().map(measure::median).collect();
    let base = contenders
        .iter()
        .position(|(_, c)| matches!(c, Contender::Raw(_)));
    println!("median of {rounds} rounds, {n} messages:");
    for ((title, _), median) in contenders.iter().zip(&medians) {
        let ratio = base.map_or(String::new(), |b| {
            format!(", {:.2}x {}", median / medians[b], contenders[b].0)
        });
        println!("  {title:<20} {median:>8.0} msg/s{ratio}");
    }
    println!("load average at end: {}", measure::load_average().trim());
}
