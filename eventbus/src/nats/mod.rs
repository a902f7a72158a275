//! A bridge to NATS JetStream (feature `nats`): a topic's messages exported from one bus to
//! a JetStream stream, and imported from it into another bus, in another process.
//!
//! Facade level: it uses the [`Bus`]'s public async half (an async subscriber per exported
//! topic, `publish_async` per imported message) and two crate-private methods of it,
//! `Bus::record_dead_letter` (an undecodable import is a dead letter no subscriber made) and
//! `Bus::add_bridge` (the bus's `stats()` shows the bridge's).
//!
//! Feature `nats` turns on `tokio` and `serde`; its client, `async-nats`, needs rustc 1.89.
//!
//! # Examples
//!
//! Two processes, each with its bus: the shop exports its orders and imports the
//! warehouse's reservations (`examples/nats_shop.rs` is the whole program, both roles).
//!
//! ```no_run
//! use eventbus::{nats::Bridge, Bus, Message, Options, Topic};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Topic, Serialize, Deserialize)]
//! #[topic(name = "orders.placed")]
//! struct OrderPlaced { id: u64 }
//!
//! #[derive(Topic, Serialize, Deserialize)]
//! #[topic(name = "stock.reserved")]
//! struct StockReserved { order: u64 }
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let bus = Bus::builder().build();
//! bus.subscribe::<StockReserved>(Options::default(), |m: &Message<StockReserved>| {
//!     println!("reserved: order {}", m.order);
//! });
//! let bridge = Bridge::connect(&bus, "nats://127.0.0.1:4222").await?;
//! bridge.export::<OrderPlaced>().await?;
//! bridge.import::<StockReserved>("shop").await?;
//! bus.publish_async(OrderPlaced { id: 1 }).await?;
//! // ... later: send what was accepted, await the server's acks, stop importing.
//! bridge.close().await?;
//! bus.close_async().await;
//! # Ok(()) }
//! ```
//!
//! # Layout on the server
//!
//! The [wire format](crate::wire_format) spells out, for a program in another language,
//! the subjects, streams, headers and body below; it is built without this feature.
//!
//! Each topic is one stream, made (or its subjects updated) by the first bridge that exports
//! or imports it ([`StreamOptions`] name it, limit it, or use one made in advance): topic `orders.placed` is subject `eventbus.orders.placed` and stream
//! `eventbus_orders_placed`. A character a subject token cannot hold (anything but ASCII
//! letters, digits and `-`, and a `.` that would leave a token empty) is written `~XX`, its
//! UTF-8 bytes in hex, so distinct topic names never share a subject.
//!
//! # Export
//!
//! An exported topic has an async subscriber (by default `Block`, capacity 1024, named
//! `nats-export:<topic>`). For each message it publishes the JSON of the value with the
//! headers `Nats-Msg-Id` (`<bridge id>-<topic seq>`, where the bridge id is random per
//! [`Bridge::connect`], so ids stay unique across restarts of the process although the
//! seq starts again at 0), `Eventbus-Seq` (the topic seq) and `Eventbus-Origin` (the bridge
//! id), and hands it to the topic's sender, which keeps up to 256 messages awaiting the
//! server's acks, each sent expecting its predecessor to be the stream's last
//! (`Nats-Expected-Last-Msg-Id`), so the stream holds the topic's order exactly: a message
//! lost on the way makes the later ones be refused, never stored ahead of it. On any failure
//! (no ack in time, connection lost, stream missing, a refused expectation) the sender sends
//! everything not acked again, one at a time and in order, with backoff while the server
//! cannot be reached, each with its `Nats-Msg-Id`, so the server's duplicate window
//! (2 minutes) drops a copy that did arrive; then it opens the window again. While the
//! server is away the window fills, then the subscriber's mailbox, and with `Block` the
//! topic's publishers wait. A value that cannot be serialized is a failed attempt of the
//! bus's own (retried in place as the subscriber's options say, then a dead letter); a
//! message the server refuses for itself (too large, say) is a dead letter of the export
//! subscriber, with its value. A topic exported by several processes goes one at a time more
//! often (their messages interleave, so expectations fail): slower, never out of order. A log
//! topic is exported like a mailbox topic: what is published from the export on (its
//! subscription starts `Now`); imported into a log topic, messages go into its log, so a
//! subscriber that comes later on the importing side replays them.
//!
//! # Import
//!
//! An imported topic has a durable pull consumer on its stream, named by the caller (one per
//! (name, topic)), with explicit acks and up to 1024 messages unacknowledged. JetStream
//! redelivers an unacked message after the ones sent later, so the order is the importer's
//! to keep, by stream sequence (the topic's stream holds nothing else, and the order the
//! exporter gave it): it handles messages strictly one after another. A message that comes
//! ahead of the one expected (that one was lost on the way, say with a broken connection) is
//! neither handled nor acked; the server sends the missing one again when its ack wait
//! (5 s) runs out, and the later ones after it. A missing message that the consumer's ack
//! floor has passed (asked of the server: deleted from the stream, or handled in an earlier
//! run whose ack arrived when an earlier one's did not) is not waited for. A message that comes behind
//! (a redelivery of one already published: its ack was lost) is only acked again. Each
//! message is decoded as JSON and published on the local bus with `publish_async`; it is
//! acked only once the bus has accepted it (while the bus makes it wait, progress acks keep
//! the server from sending it again). A message that cannot
//! be decoded becomes a dead letter on the local bus (subscriber `nats-import:<name>`, seq the
//! stream sequence, payload the raw bytes as `Vec<u8>`) and is terminated on the server so it
//! is not sent again.
//!
//! ## Copies of one import
//!
//! Any number of bridges, in one process or many, may import a topic under one name (two
//! copies of a service): they share the durable consumer, so the server splits the stream
//! between them, each message to one copy. Each copy handles its share in the order it
//! arrives, which is stream order (the server hands each copy's pull requests their
//! messages in stream order); there is no order across copies. What a copy had not acked
//! when it stopped or died is sent to the others once its ack wait runs out: at least once.
//!
//! The strict order above cannot hold for a copy among others: from its side, a message
//! the server gave another copy looks exactly like one lost on the way to it, and waiting
//! for it stalls both (each waits an ack wait per gap). Neither the ack floor (another
//! copy's message is unacked while it is in hand, as a lost one is) nor the consumer's
//! count of waiting pull requests (one client may have several) tells them apart. So the
//! copies register: each stores its entry in a registry stream before its first pull
//! request, renews it every 5 s, and removes it when it stops (see `copies`). An importer
//! that sees a gap reads the registry before waiting. This is sound: a message the server
//! gave another copy was given to a pull request of that copy, made after its entry was
//! stored, and before the later message this importer holds was given out; so the
//! registry read after that lists the other copy. Listed with others, an importer handles
//! what comes in the order it comes. Alone, it keeps the strict order; and going back to
//! it (the others left) waits until the consumer has nothing unacked, so that nothing
//! below the ack floor is still in another copy's hands. A crashed copy stays listed for
//! up to 15 s (its entry's age limit), during which the others keep per-copy order; an
//! entry that lapsed while its copy still runs (its bus held the importer for 15 s) only
//! makes the others strict again, which is slower, never lossy: the strict order acks a
//! message without handling it only below its expected one, which moves past a message
//! only once this copy handled it or the ack floor passed it.
//!
//! ## Keyed imports
//!
//! [`Bridge::export_keyed`] sends each message on one of its topic's partition subjects,
//! picked by its key's hash; [`Bridge::import_keyed`] bridges under one name are the
//! members of a keyed import and share the partitions, one owner per partition at a time
//! (partition `p` to the `p % n`-th of the `n` live members, sorted by bridge id), moving
//! them when a member comes or goes. The guarantees, per key: its messages are handled in
//! the order exported, by one member at a time, across hand-overs; at least once across
//! crashes. A partition's consumer gives one message at a time (the next only once the
//! previous one is acked, whoever held it), so a partition moves without reordering. A
//! hand-over is fenced: the old owner finishes the message in hand, waits until its bus's
//! subscriptions of the topic have handled what they had been given (an import is acked
//! once the bus accepted it, so a slow subscriber still holds acked messages) and until
//! the server has its ack, each wait at most half a lease, then gives the lease back; the
//! new owner starts once it holds the lease. A subscriber whose backlog takes longer than
//! half a lease to handle can see the next owner start before it is done: give such
//! imports a longer lease. A
//! member that crashes stops renewing its leases: they lapse after one lease (10 s by
//! default, [`ImportOptions::lease`]) and its unacknowledged message, one per partition, is
//! sent again after the ack wait (5 s), before that partition's later ones. Only a member
//! stalled for longer than a lease while it holds a message (its leases lapse and are
//! taken) can overlap with the next owner on that message. The leases live in JetStream
//! itself (nats-server 2.9 has no consumer groups): see the
//! [wire format](crate::wire_format#keyed-topics). A topic exported keyed is still one
//! stream in one order: a plain [`import`](Bridge::import) of it sees every message.
//!
//! ## The heartbeat watchdog
//!
//! An importer's pull requests ask the server for a heartbeat every second while nothing
//! comes. When two are missed, the importer asks the server about its consumer: no answer
//! means the server is away, and the client's reconnect will resume the stream; an answer
//! means this pull subscription stopped hearing the server while the connection works, so
//! the importer makes its subscription again, from the consumer's ack floor (counted in
//! `ImportStats::recreated`). What it had been given and not acked comes again after the
//! ack wait (5 s), in order.
//!
//! An imported message is never exported again: a message keeps whether an importer
//! published it (`message/origin.rs`, marked on the thread polling the importer's publish);
//! on a mailbox topic the export's filter refuses it at publish, on a log topic the export's
//! worker skips it as it reads. And an importer skips messages its own bridge exported
//! (`Eventbus-Origin`).
//!
//! # Failures
//!
//! [`Bridge::connect`] fails within [`Bridge::CONNECT_TIMEOUT`] if no server answers;
//! [`Bridge::connect_with`] takes [`ConnectOptions`] (user and password, token, credentials
//! file, TLS, client name) and fails with [`Error::Auth`] if the server refuses them. The
//! client is re-exported as [`async_nats`](mod@async_nats), so a program can use its types
//! without matching its version. A
//! connection lost later is made again by the client with backoff (doubling from 50 ms to
//! 2 s); exports go on with the message in hand (de-duplicated by id), imports from the
//! durable consumer's position. A crash of the importing process between the local publish
//! and the ack delivers that message again in the next run: at least once. The bus itself
//! keeps nothing on disk: what an exporting process had accepted but not yet sent when it
//! crashed is lost with it (a graceful `close` sends it first).
//!
//! # Close
//!
//! [`Bridge::close`] stops the importers (each after the message in hand), then unsubscribes
//! the exporters, which first send everything they had accepted and wait for the server's
//! acks, for up to [`Bridge::CLOSE_TIMEOUT`]; what could not be sent by then is a dead letter,
//! and `close` returns them all in [`Error::Unsent`]. [`Bus::close_async`] also delivers
//! everything accepted to the exporters first (without a deadline while the server is down).

use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use std::collections::VecDeque;
use std::future::IntoFuture;

use async_nats::jetstream::context::{PublishError, PublishErrorKind};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::publish::PublishAck;
use async_nats::jetstream::{self, consumer, stream, AckKind};
use futures_core::Stream;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;

mod connect;
mod copies;
mod error;
mod export;
mod import;
mod keyed;
mod options;
mod stats;
mod streams;

use crate::bus::subscription::Subscription;
use crate::bus::Bus;
use crate::dead_letter::DeadLetter;
use crate::handler::Failure;
use crate::options::Options;
use crate::topic::Topic;
use export::{backoff, Handoff, Sender, WINDOW};
use import::{Importer, IMPORT_WINDOW};

/// The header holding the message's seq in its topic, on the exporting bus.
pub const SEQ_HEADER: &str = "Eventbus-Seq";
/// The header holding the id of the bridge that exported the message.
pub const ORIGIN_HEADER: &str = "Eventbus-Origin";

/// How long the server's ack of one export, or its answer to a request, is waited for
/// before the message is sent again.
const ACK_TIMEOUT: Duration = Duration::from_secs(2);
/// How long an imported message may stay unacknowledged before the server sends it again
/// (progress acks extend it while the local bus makes the importer wait).
const ACK_WAIT: Duration = Duration::from_secs(5);
/// How long the server remembers a `Nats-Msg-Id` to drop a copy.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);
/// The first and the longest wait between two tries (reconnects, resends, consumer setup).
const BACKOFF: (Duration, Duration) = (Duration::from_millis(50), Duration::from_secs(2));

type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub use crate::stats::bridge::{BridgeStats, ExportStats, ImportStats};
pub use connect::ConnectOptions;
pub use error::Error;
pub use keyed::{KeyOutput, PartitionKey};
pub use options::{ExportOptions, ImportOptions, StreamOptions};

/// The NATS client the bridge is built on, re-exported so a program can use its types
/// (to read a stream, say) without matching its version in its own `Cargo.toml`.
///
/// # Examples
///
/// ```no_run
/// use eventbus::nats::{async_nats, Bridge};
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = async_nats::connect("nats://127.0.0.1:4222").await?;
/// let js = async_nats::jetstream::new(client);
/// let mut stream = js.get_stream("eventbus_orders_placed").await?;
/// println!("{} orders in the stream", stream.info().await?.state.messages);
/// # Ok(()) }
/// ```
pub use async_nats;

/// A bus's link to a NATS JetStream server: topics exported to it, imported from it.
///
/// # Examples
///
/// ```no_run
/// use eventbus::{nats::Bridge, Bus, Topic};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Topic, Serialize, Deserialize)]
/// #[topic(name = "orders.placed")]
/// struct OrderPlaced { id: u64 }
///
/// #[derive(Topic, Serialize, Deserialize)]
/// #[topic(name = "stock.reserved")]
/// struct StockReserved { order: u64 }
///
/// # #[tokio::main] async fn main() -> Result<(), eventbus::nats::Error> {
/// let bus = Bus::builder().build();
/// let bridge = Bridge::connect(&bus, "nats://127.0.0.1:4222").await?;
/// bridge.export::<OrderPlaced>().await?;          // to subject eventbus.orders.placed
/// bridge.import::<StockReserved>("shop").await?;  // durable consumer "shop"
/// bus.publish_async(OrderPlaced { id: 1 }).await.unwrap();
/// bridge.close().await?;                          // sends what was accepted, awaits acks
/// # Ok(()) }
/// ```
pub struct Bridge {
    shared: Arc<Shared>,
    bus: Bus,
    exports: Mutex<Vec<Export>>,
    imports: Mutex<Vec<Import>>,
    /// What the bus's `stats()` asks for this bridge's stats; the bus keeps a weak handle.
    look: Arc<crate::stats::bridge::BridgeLook>,
}

/// What the bridge's handlers and tasks share.
struct Shared {
    js: jetstream::Context,
    client: async_nats::Client,
    /// Random per connect: with the topic seq, a `Nats-Msg-Id` unique across restarts.
    id: String,
    /// Set by `close` once its deadline has passed: exports waiting for the server give up.
    give_up: AtomicBool,
    runtime: tokio::runtime::Handle,
    /// Every export's and import's counters.
    board: stats::Board,
    /// Each topic's stream, as an export or import of it asked (the default if none did).
    /// Lock order: a leaf, held for a look or an insert.
    streams: Mutex<std::collections::HashMap<&'static str, StreamOptions>>,
    /// The topics this bridge exports or imports keyed: their streams also hold the
    /// partitions' subjects. Lock order: a leaf, held for a look or an insert.
    keyed: Mutex<std::collections::HashSet<&'static str>>,
}

struct Export {
    subscription: Subscription,
    /// Tells the sender that the subscription is gone.
    finish: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

struct Import {
    topic: &'static str,
    name: String,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl fmt::Debug for Bridge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bridge")
            .field("id", &self.shared.id)
            .finish_non_exhaustive()
    }
}

impl Bridge {
    /// How long [`connect`](Bridge::connect) waits for a server.
    pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
    /// How long [`close`](Bridge::close) waits for the server to acknowledge what was
    /// accepted for export.
    pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);

    /// Connects `bus` to the NATS server at `url` (`nats://host:port`). Call it on a tokio
    /// runtime: the bridge's import tasks run there.
    ///
    /// # Errors
    ///
    /// [`Error::Connect`] if no server answers within [`CONNECT_TIMEOUT`](Self::CONNECT_TIMEOUT)
    /// (a refused connection fails at once); [`Error::NoRuntime`] outside a runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use eventbus::{nats::{Bridge, Error}, Bus};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let bus = Bus::builder().build();
    /// // Port 1 on this machine: no NATS server there.
    /// let error = Bridge::connect(&bus, "nats://127.0.0.1:1").await.unwrap_err();
    /// assert!(matches!(error, Error::Connect { .. }));
    /// assert!(error.to_string().starts_with("cannot connect to the NATS server at `nats://127.0.0.1:1`"));
    /// # });
    /// ```
    pub async fn connect(bus: &Bus, url: &str) -> Result<Bridge, Error> {
        Self::connect_with(bus, url, ConnectOptions::new()).await
    }

    /// Connects like [`connect`](Bridge::connect), to a server that asks for credentials
    /// or TLS: see [`ConnectOptions`].
    ///
    /// # Errors
    ///
    /// [`Error::Auth`] if the server refuses the credentials (or none were given and it
    /// asks for some), within [`CONNECT_TIMEOUT`](Self::CONNECT_TIMEOUT); otherwise as
    /// [`connect`](Bridge::connect) (a credentials file that cannot be read, a TLS
    /// handshake that fails: [`Error::Connect`]).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use eventbus::{nats::{Bridge, ConnectOptions, Error}, Bus};
    ///
    /// # #[tokio::main] async fn main() -> Result<(), Error> {
    /// let bus = Bus::builder().build();
    /// let options = ConnectOptions::new().user_and_password("shop", "s3cret").name("shop");
    /// match Bridge::connect_with(&bus, "nats://127.0.0.1:4222", options).await {
    ///     Ok(bridge) => bridge.close().await?,
    ///     Err(Error::Auth { .. }) => eprintln!("wrong user or password"),
    ///     Err(error) => return Err(error),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn connect_with(
        bus: &Bus,
        url: &str,
        options: ConnectOptions,
    ) -> Result<Bridge, Error> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        let refused = |source: BoxError| Error::Connect {
            url: url.to_string(),
            source,
        };
        let base = async_nats::ConnectOptions::new()
            .connection_timeout(Self::CONNECT_TIMEOUT)
            .request_timeout(Some(ACK_TIMEOUT))
            .reconnect_delay_callback(|attempts| backoff(attempts as u32));
        let connect = options
            .apply(base)
            .await
            .map_err(|e| refused(Box::new(e)))?
            .connect(url);
        let client = match tokio::time::timeout(Self::CONNECT_TIMEOUT, connect).await {
            Ok(Ok(client)) => client,
            Ok(Err(error)) => {
                use async_nats::ConnectErrorKind::{Authentication, AuthorizationViolation};
                if matches!(error.kind(), Authentication | AuthorizationViolation) {
                    return Err(Error::Auth {
                        url: url.to_string(),
                        source: Box::new(error),
                    });
                }
                return Err(refused(Box::new(error)));
            }
            Err(elapsed) => {
                return Err(Error::Connect {
                    url: url.to_string(),
                    source: Box::new(elapsed),
                })
            }
        };
        let js = jetstream::ContextBuilder::new()
            .timeout(ACK_TIMEOUT)
            .build(client.clone());
        // The client's inboxes are named with a fresh random id (a NUID): unique per process
        // run, which the seq alone is not.
        let inbox = client.new_inbox();
        let id = inbox.rsplit('.').next().unwrap_or(&inbox).to_string();
        let shared = Arc::new(Shared {
            js,
            board: stats::Board::new(id.clone(), client.clone()),
            client,
            id,
            give_up: AtomicBool::new(false),
            runtime,
            streams: Mutex::new(std::collections::HashMap::new()),
            keyed: Mutex::new(std::collections::HashSet::new()),
        });
        let look: Arc<crate::stats::bridge::BridgeLook> = {
            let shared = Arc::clone(&shared);
            Arc::new(move || shared.board.stats())
        };
        bus.add_bridge(Arc::downgrade(&look));
        Ok(Bridge {
            shared,
            bus: bus.clone(),
            exports: Mutex::new(Vec::new()),
            imports: Mutex::new(Vec::new()),
            look,
        })
    }

    /// What this bridge has done: per export, messages taken, sent (and resent), acked by
    /// the server, pending and dead letters; per import, messages received (and
    /// redelivered), imported, acked, skipped, held and dead letters; and the client's
    /// reconnects. [`Bus::stats`] shows the same for every bridge of the bus (and so do
    /// the `metrics` feature and the dashboard).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use eventbus::{nats::Bridge, Bus, Topic};
    ///
    /// #[derive(Topic, serde::Serialize)]
    /// #[topic(name = "orders.placed")]
    /// struct OrderPlaced { id: u64 }
    ///
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let bus = Bus::builder().build();
    /// let bridge = Bridge::connect(&bus, "nats://127.0.0.1:4222").await?;
    /// bridge.export::<OrderPlaced>().await?;
    /// bus.publish_async(OrderPlaced { id: 7 }).await?;
    /// let stats = bridge.stats();
    /// println!("{stats}"); // bridge <id>: 0 reconnect(s), then a line per export and import
    /// assert_eq!(stats.exports[0].topic, "orders.placed");
    /// # Ok(()) }
    /// ```
    pub fn stats(&self) -> BridgeStats {
        (self.look)()
    }

    /// This bridge's id: random per [`connect`](Bridge::connect), the first part of each
    /// export's `Nats-Msg-Id` and its `Eventbus-Origin` header.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// The subject topic `T` is sent on: `eventbus.` and its name, escaped where needed
    /// (see the [module docs](self)).
    ///
    /// # Examples
    ///
    /// ```
    /// use eventbus::{nats::Bridge, Topic};
    ///
    /// #[derive(Topic)]
    /// #[topic(name = "orders.placed")]
    /// struct OrderPlaced;
    ///
    /// #[derive(Topic)]
    /// struct Wrapper<T>(T);
    ///
    /// assert_eq!(Bridge::subject::<OrderPlaced>(), "eventbus.orders.placed");
    /// assert_eq!(Bridge::subject::<Wrapper<u8>>(), "eventbus.Wrapper~3Cu8~3E");
    /// ```
    pub fn subject<T: Topic>() -> String {
        subject(T::name())
    }

    /// The stream topic `T` is kept in: its [subject](Bridge::subject) with each `.` written
    /// `_` (see the [wire format](crate::wire_format#stream)).
    ///
    /// # Examples
    ///
    /// ```
    /// use eventbus::{nats::Bridge, Topic};
    ///
    /// #[derive(Topic)]
    /// #[topic(name = "orders.placed")]
    /// struct OrderPlaced;
    ///
    /// assert_eq!(Bridge::stream_name::<OrderPlaced>(), "eventbus_orders_placed");
    /// ```
    /// (the default: [`StreamOptions::name`] names another).
    pub fn stream_name<T: Topic>() -> String {
        stream_name(&subject(T::name()))
    }

    /// Makes topic `T`'s stream on the server if it is missing (as [`export`](Bridge::export)
    /// and [`import`](Bridge::import) do), so that a producer in another language can
    /// publish on the topic's subject before any bridge exports or imports it. A stream of
    /// that name made otherwise is used as it is (its subjects completed); another bridge
    /// making it at the same moment is no failure.
    ///
    /// # Errors
    ///
    /// [`Error::Server`] if the stream can be neither found nor made (a stream of another
    /// name already covers the subject, say).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use eventbus::{nats::Bridge, Bus, Topic};
    ///
    /// #[derive(Topic, serde::Deserialize)]
    /// #[topic(name = "orders.placed")]
    /// struct OrderPlaced { id: u64 }
    ///
    /// # #[tokio::main] async fn main() -> Result<(), eventbus::nats::Error> {
    /// let bus = Bus::builder().build();
    /// let bridge = Bridge::connect(&bus, "nats://127.0.0.1:4222").await?;
    /// bridge.ensure_stream::<OrderPlaced>().await?;
    /// // A Python producer may publish on `eventbus.orders.placed` from now on.
    /// # Ok(()) }
    /// ```
    pub async fn ensure_stream<T: Topic>(&self) -> Result<(), Error> {
        self.shared.ensure_stream(T::name()).await.map(drop)
    }

    /// Makes topic `T`'s stream as [`ensure_stream`](Bridge::ensure_stream) does, named and
    /// made as `stream` says; this bridge's export and import of `T` then use that stream.
    ///
    /// # Errors
    ///
    /// As [`ensure_stream`](Bridge::ensure_stream); [`Error::Stream`] for options the server
    /// cannot take, an existing stream that is missing or holds other subjects, or options
    /// other than this bridge gave `T` before.
    pub async fn ensure_stream_with<T: Topic>(&self, stream: StreamOptions) -> Result<(), Error> {
        self.shared
            .ensure_planned(T::name(), stream)
            .await
            .map(drop)
    }

    /// Exports every message of `T` published on the bus from now on to the server, with an
    /// async subscriber: `Block`, capacity 1024, named `nats-export:<topic>`. Makes the
    /// topic's stream if it is missing.
    ///
    /// # Errors
    ///
    /// [`Error::Server`] if the stream cannot be made, [`Error::Subscribe`] if the
    /// subscription cannot start, [`Error::Twice`] if `T` is already exported.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use eventbus::{nats::Bridge, Bus, Topic};
    ///
    /// #[derive(Topic, serde::Serialize)]
    /// #[topic(name = "orders.placed")]
    /// struct OrderPlaced { id: u64 }
    ///
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let bus = Bus::builder().build();
    /// let bridge = Bridge::connect(&bus, "nats://127.0.0.1:4222").await?;
    /// bridge.export::<OrderPlaced>().await?;
    /// bus.publish_async(OrderPlaced { id: 7 }).await?; // on subject eventbus.orders.placed
    /// bridge.close().await?;                            // once the server has acked it
    /// # Ok(()) }
    /// ```
    pub async fn export<T: Topic + Serialize>(&self) -> Result<(), Error> {
        self.export_with::<T>(Options::default()).await
    }

    /// Exports like [`export`](Bridge::export), with the subscriber's options: capacity and
    /// overflow (what a full mailbox does while the server is away: `Block` waits, the
    /// others drop, counted), retries and backoff (for a value that cannot be serialized),
    /// name.
    ///
    /// # Errors
    ///
    /// As [`export`](Bridge::export); [`Error::Filter`] when `options` hold a filter.
    pub async fn export_with<T: Topic + Serialize>(
        &self,
        options: impl Into<ExportOptions>,
    ) -> Result<(), Error> {
        self.export_routed::<T>(options.into(), None).await
    }

    /// Exports `T` keyed: each message goes on the subject of one of `partitions`
    /// partitions, picked by the hash of `key` (as a local keyed group's
    /// [`Options::key`]), so that the members of an [`import_keyed`](Bridge::import_keyed)
    /// handle one key's messages in order, one member at a time. The topic's stream holds
    /// the partitions' subjects too, in one order: a plain [`import`](Bridge::import) of it
    /// still sees every message, in the order exported. Otherwise as
    /// [`export`](Bridge::export).
    ///
    /// The partition is the key's [`Hash`] bytes hashed with 64-bit FNV-1a, modulo
    /// `partitions`: the same in every process of one build. Every keyed export of a topic
    /// uses one count, which the first one declares on the server (see the
    /// [wire format](crate::wire_format#keyed-topics)). The key function runs on the export
    /// subscriber's worker, once per message; one that panics fails that message's export
    /// (retried as the subscriber's options say, then a dead letter of the export).
    ///
    /// # Errors
    ///
    /// [`Error::Keyed`] for 0 or more than 1024 partitions, or a count other than the one
    /// declared; otherwise as [`export`](Bridge::export).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use eventbus::{nats::Bridge, Bus, Topic};
    ///
    /// #[derive(Topic, serde::Serialize)]
    /// #[topic(name = "orders.placed")]
    /// struct OrderPlaced { customer: String, id: u64 }
    ///
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let bus = Bus::builder().build();
    /// let bridge = Bridge::connect(&bus, "nats://127.0.0.1:4222").await?;
    /// // One customer's orders on one of 8 partitions: handled in order, by one member.
    /// bridge.export_keyed::<OrderPlaced>(8, |o| o.customer.clone()).await?;
    /// bus.publish_async(OrderPlaced { customer: "ada".into(), id: 1 }).await?;
    /// bridge.close().await?;
    /// # Ok(()) }
    /// ```
    pub async fn export_keyed<T: Topic + Serialize>(
        &self,
        partitions: u32,
        key: impl PartitionKey<T> + Send + Sync + 'static,
    ) -> Result<(), Error> {
        self.export_keyed_with::<T>(partitions, key, ExportOptions::new())
            .await
    }

    /// Exports keyed like [`export_keyed`](Bridge::export_keyed), with the subscriber's
    /// options and the stream's (as [`export_with`](Bridge::export_with)).
    ///
    /// # Errors
    ///
    /// As [`export_keyed`](Bridge::export_keyed) and [`export_with`](Bridge::export_with).
    pub async fn export_keyed_with<T: Topic + Serialize>(
        &self,
        partitions: u32,
        key: impl PartitionKey<T> + Send + Sync + 'static,
        options: impl Into<ExportOptions>,
    ) -> Result<(), Error> {
        keyed::check_partitions(T::name(), partitions)?;
        let partitioner = keyed::partitioner::<T>(partitions, key);
        self.export_routed::<T>(options.into(), Some((partitions, partitioner)))
            .await
    }

    /// Exports `T` on its subject, or keyed on its partitions' subjects.
    async fn export_routed<T: Topic + Serialize>(
        &self,
        options: ExportOptions,
        keyed: Option<(u32, keyed::Partitioner<T>)>,
    ) -> Result<(), Error> {
        let ExportOptions {
            subscriber: options,
            stream,
        } = options;
        if options.filter.is_some() {
            return Err(Error::Filter { topic: T::name() });
        }
        let name = options
            .name
            .clone()
            .unwrap_or_else(|| format!("nats-export:{}", T::name()));
        if self
            .exports
            .lock()
            .iter()
            .any(|e| e.subscription.name() == name)
        {
            return Err(Error::Twice { topic: T::name() });
        }
        let route = match keyed {
            None => {
                self.shared.ensure_planned(T::name(), stream).await?;
                export::Route::Topic(subject(T::name()).into())
            }
            Some((partitions, partition)) => {
                // Lock order: `keyed`, a leaf.
                let was = !self.shared.keyed.lock().insert(T::name());
                let made = self.shared.ensure_planned(T::name(), stream).await;
                let declared = match made {
                    Ok(_) => {
                        let stream = self.shared.stream_of(T::name());
                        keyed::declare(&self.shared.js, T::name(), &stream, partitions).await
                    }
                    Err(error) => Err(error),
                };
                if let Err(error) = declared {
                    if !was {
                        self.shared.keyed.lock().remove(T::name());
                    }
                    return Err(error);
                }
                export::Route::Keyed {
                    subjects: (0..partitions)
                        .map(|p| partition_subject(T::name(), p).into())
                        .collect(),
                    partition,
                }
            }
        };
        let (to_sender, from) = tokio::sync::mpsc::channel(WINDOW);
        let (settled_tx, settled) = tokio::sync::watch::channel(0);
        let (finish, finished) = tokio::sync::watch::channel(false);
        let bus = self.bus.worker_handle();
        let mut handoff = Handoff {
            to_sender,
            handed: 0,
            settled,
            bus: bus.worker_handle(),
            id: self.shared.id.as_str().into(),
            route,
        };
        // An imported message is never exported again. On a mailbox topic the filter runs
        // on the importer's publish, on the thread it marks, and keeps the message out of
        // the export's mailbox; on a log topic filters run on the worker, which reads the
        // mark kept in the message instead (`Handoff::hand`).
        let mut options = options.name(name.clone());
        if T::retention().is_none() {
            options = options.filter(|_: &T| !crate::message::origin::importing());
        }
        let subscription = self
            .bus
            .try_subscribe_async::<T, _, _, _>(
                options,
                move |message: crate::message::Message<T>| handoff.hand(message),
            )
            .map_err(Error::Subscribe)?;
        let sender = Sender::<T> {
            shared: Arc::clone(&self.shared),
            topic: T::name(),
            name: name.into(),
            subscription: subscription.id(),
            bus,
            window: VecDeque::with_capacity(WINDOW),
            last_sent: None,
            settled: settled_tx,
            counters: self.shared.board.export(T::name()),
        };
        let task = self.shared.runtime.spawn(sender.run(from, finished));
        self.exports.lock().push(Export {
            subscription,
            finish,
            task,
        });
        Ok(())
    }

    /// Imports `T` from the server: a durable consumer `name` on the topic's stream (made if
    /// missing, and resumed where it was if it exists), whose messages are published on the
    /// bus in the stream's order. Makes the topic's stream if it is missing.
    ///
    /// Bridges importing `T` under one `name` (copies of one service, here or in other
    /// processes) share the consumer: each message goes to one of them, each handles its
    /// share in stream order (see [Copies of one import](self#copies-of-one-import)).
    ///
    /// Subscribe to `T` on the bus first: the import publishes what the stream holds at once,
    /// and a mailbox topic keeps nothing for subscribers that come later.
    ///
    /// # Errors
    ///
    /// [`Error::BadName`] for a name JetStream cannot hold, [`Error::Server`] if the stream
    /// or the consumer cannot be made, [`Error::Twice`] if `T` is already imported under
    /// `name` by this bridge.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use eventbus::{nats::Bridge, Bus, Message, Options, Topic};
    ///
    /// #[derive(Topic, serde::Deserialize)]
    /// #[topic(name = "orders.placed")]
    /// struct OrderPlaced { id: u64 }
    ///
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let bus = Bus::builder().build();
    /// bus.subscribe::<OrderPlaced>(Options::default(), |m: &Message<OrderPlaced>| {
    ///     println!("order {} from another process", m.id);
    /// });
    /// let bridge = Bridge::connect(&bus, "nats://127.0.0.1:4222").await?;
    /// bridge.import::<OrderPlaced>("warehouse").await?; // resumes where "warehouse" stopped
    /// # Ok(()) }
    /// ```
    pub async fn import<T: Topic + DeserializeOwned>(&self, name: &str) -> Result<(), Error> {
        self.import_with::<T>(name, ImportOptions::new()).await
    }

    /// Imports like [`import`](Bridge::import), from the stream `options` name or make.
    ///
    /// # Errors
    ///
    /// As [`import`](Bridge::import); [`Error::Stream`] for stream options the server
    /// cannot take, an existing stream that is missing or holds other subjects, or options
    /// other than this bridge's export of `T` gave.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use eventbus::nats::{Bridge, ImportOptions, StreamOptions};
    /// use eventbus::{Bus, Topic};
    ///
    /// #[derive(Topic, serde::Deserialize)]
    /// #[topic(name = "orders.placed")]
    /// struct OrderPlaced { id: u64 }
    ///
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let bus = Bus::builder().build();
    /// let bridge = Bridge::connect(&bus, "nats://127.0.0.1:4222").await?;
    /// // The operators made the stream ORDERS for `eventbus.orders.placed`.
    /// let orders = StreamOptions::new().name("ORDERS").existing();
    /// bridge
    ///     .import_with::<OrderPlaced>("warehouse", ImportOptions::new().stream(orders))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn import_with<T: Topic + DeserializeOwned>(
        &self,
        name: &str,
        options: ImportOptions,
    ) -> Result<(), Error> {
        if !valid_name(name) {
            return Err(Error::BadName {
                name: name.to_string(),
            });
        }
        if self
            .imports
            .lock()
            .iter()
            .any(|i| i.topic == T::name() && i.name == name)
        {
            return Err(Error::Twice { topic: T::name() });
        }
        let stream = self
            .shared
            .ensure_planned(T::name(), options.stream)
            .await?;
        let consumer = self.shared.consumer(&stream, T::name(), name).await?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let importer = Importer {
            shared: Arc::clone(&self.shared),
            bus: self.bus.clone(),
            topic: T::name(),
            name: name.to_string(),
            subscriber: format!("nats-import:{name}").into(),
            consumer: None,
            expected: 0,
            looked: None,
            copies: copies::Copies::new(&self.shared.stream_of(T::name()), name, &self.shared.id),
            alone: true,
            counters: self.shared.board.import(T::name(), name),
        };
        let task = self
            .shared
            .runtime
            .spawn(importer.run::<T>(consumer, stopped));
        self.imports.lock().push(Import {
            topic: T::name(),
            name: name.to_string(),
            stop,
            task,
        });
        Ok(())
    }

    /// Imports `T`, exported keyed ([`export_keyed`](Bridge::export_keyed)), as one member
    /// of the keyed import `name`: the members (bridges importing `T` keyed under `name`,
    /// here or in other processes) share the partitions, one owner per partition at a
    /// time, and move them when a member comes or goes. So one key's messages are handled
    /// in order, by one member at a time, across hand-overs; at least once across crashes.
    ///
    /// Each member owns the partitions `p` with `p % members == its rank` among the live
    /// members (sorted by bridge id), holding a lease on each in a JetStream registry
    /// stream (used as a key-value bucket). A partition's consumer gives one message at a
    /// time; a member giving a partition up finishes the message in hand, waits until its
    /// bus has handled what it had been given and the server has its ack (each at most half
    /// a lease), and only then gives the lease back (a fenced hand-over). A member that
    /// crashes stops
    /// renewing: its leases lapse after one lease (10 s, see [`ImportOptions::lease`]) and
    /// its unacknowledged message (one per partition) is sent again after the ack wait
    /// (5 s), before the partition's later ones. An import is acked once the member's bus
    /// accepted the message, as for [`import`](Bridge::import); the hand-over waits for the
    /// subscribers to handle it (at most half a lease), but what a crashed member's bus had
    /// accepted and not yet handled is lost with it, as any mailbox is in a crash. (See the
    /// [wire format](crate::wire_format#keyed-topics) for the registries and consumers.)
    ///
    /// Started before any keyed export of `T`, the member waits for the first one; but a
    /// topic whose stream exists without partitions was never exported keyed. If the count
    /// declared meanwhile cannot be read (another program wrote it), the member says why
    /// it waits in [`ImportStats::problem`] (and on the live page, under its row, with
    /// feature `dashboard`) and starts once the declaration is put right.
    ///
    /// # Errors
    ///
    /// [`Error::Keyed`] if `T`'s stream exists and holds no partitions (exported plainly,
    /// never keyed), or if its declared partition count cannot be read; [`Error::BadName`] for a name JetStream cannot hold (with the suffix
    /// `-keyed-<partition>`); [`Error::Twice`] if this bridge already imports `T` keyed
    /// under `name`; [`Error::Server`] if the server cannot be asked.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use eventbus::{nats::Bridge, Bus, Message, Options, Topic};
    ///
    /// #[derive(Topic, serde::Deserialize)]
    /// #[topic(name = "orders.placed")]
    /// struct OrderPlaced { customer: String, id: u64 }
    ///
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let bus = Bus::builder().build();
    /// bus.subscribe::<OrderPlaced>(Options::default(), |m: &Message<OrderPlaced>| {
    ///     println!("order {} of {}, in the customer's order", m.id, m.customer);
    /// });
    /// let bridge = Bridge::connect(&bus, "nats://127.0.0.1:4222").await?;
    /// // Start this process twice: the copies share the partitions.
    /// bridge.import_keyed::<OrderPlaced>("billing").await?;
    /// # Ok(()) }
    /// ```
    pub async fn import_keyed<T: Topic + DeserializeOwned>(&self, name: &str) -> Result<(), Error> {
        self.import_keyed_with::<T>(name, ImportOptions::new())
            .await
    }

    /// Imports keyed like [`import_keyed`](Bridge::import_keyed), from the stream
    /// `options` name, with their [lease](ImportOptions::lease).
    ///
    /// # Errors
    ///
    /// As [`import_keyed`](Bridge::import_keyed) and [`import_with`](Bridge::import_with);
    /// [`Error::Keyed`] for a lease under 400 ms.
    pub async fn import_keyed_with<T: Topic + DeserializeOwned>(
        &self,
        name: &str,
        options: ImportOptions,
    ) -> Result<(), Error> {
        let longest = keyed::durable_name(name, keyed::MAX_PARTITIONS);
        if !valid_name(name) || !valid_name(&longest) {
            return Err(Error::BadName {
                name: name.to_string(),
            });
        }
        let lease = options.lease.unwrap_or(keyed::LEASE);
        if lease < keyed::MIN_LEASE {
            return Err(Error::Keyed {
                topic: T::name(),
                why: format!("a lease of {lease:?}: at least {:?}", keyed::MIN_LEASE),
            });
        }
        let entry = format!("keyed:{name}");
        if self
            .imports
            .lock()
            .iter()
            .any(|i| i.topic == T::name() && i.name == entry)
        {
            return Err(Error::Twice { topic: T::name() });
        }
        let kept = self.shared.plan(T::name(), options.stream)?;
        let stream = self.shared.stream_of(T::name());
        let declared = keyed::declared(&self.shared.js, T::name(), &stream).await;
        let found = match declared {
            Ok(Some(_)) => Ok(None),
            Ok(None) => streams::find(&self.shared.js, T::name(), &stream).await,
            Err(error) => Err(error),
        };
        let refused = match found {
            Ok(Some(made)) => {
                let partitions = partitions_subject(T::name());
                (!made.cached_info().config.subjects.contains(&partitions)).then(|| Error::Keyed {
                    topic: T::name(),
                    why: format!(
                        "its stream `{stream}` was made without partitions (exported or \
                             imported plainly): export it with `export_keyed` first"
                    ),
                })
            }
            Ok(None) => None,
            Err(error) => Some(error),
        };
        if let Some(error) = refused {
            if kept {
                // Lock order: `streams`, a leaf.
                self.shared.streams.lock().remove(T::name());
            }
            return Err(error);
        }
        // Lock order: `keyed`, a leaf.
        self.shared.keyed.lock().insert(T::name());
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let member = keyed::Member::<T> {
            shared: Arc::clone(&self.shared),
            bus: self.bus.clone(),
            topic: T::name(),
            name: name.to_string(),
            stream,
            lease,
            counters: self.shared.board.import(T::name(), name),
            owned: std::collections::BTreeMap::new(),
            releasing: Vec::new(),
            kind: std::marker::PhantomData,
        };
        let task = self.shared.runtime.spawn(member.run(stopped));
        self.imports.lock().push(Import {
            topic: T::name(),
            name: entry,
            stop,
            task,
        });
        Ok(())
    }

    /// Stops the importers (each after the message in hand), then sends everything accepted
    /// for export and waits for the server's acks, for up to
    /// [`CLOSE_TIMEOUT`](Self::CLOSE_TIMEOUT). The bus stays open.
    ///
    /// # Errors
    ///
    /// [`Error::Unsent`] with the dead letters of the exports never acknowledged (these
    /// include exports that failed earlier).
    pub async fn close(self) -> Result<(), Error> {
        self.close_timeout(Self::CLOSE_TIMEOUT).await
    }

    /// Closes like [`close`](Bridge::close), waiting at most `timeout` for the server's acks.
    ///
    /// # Errors
    ///
    /// As [`close`](Bridge::close).
    pub async fn close_timeout(self, timeout: Duration) -> Result<(), Error> {
        let imports = std::mem::take(&mut *self.imports.lock());
        for import in &imports {
            let _ = import.stop.send(true);
        }
        for import in imports {
            let _ = import.task.await;
        }
        let exports = std::mem::take(&mut *self.exports.lock());
        let names: Vec<String> = exports
            .iter()
            .map(|e| e.subscription.name().to_string())
            .collect();
        let (subscriptions, senders): (Vec<_>, Vec<_>) = exports
            .into_iter()
            .map(|e| (e.subscription, (e.finish, e.task)))
            .unzip();
        let shared = Arc::clone(&self.shared);
        let deadline = self.shared.runtime.spawn(async move {
            tokio::time::sleep(timeout).await;
            shared.give_up.store(true, SeqCst);
        });
        // Unsubscribing delivers what was queued; it blocks its thread until then.
        let drained = tokio::task::spawn_blocking(move || {
            for subscription in subscriptions {
                subscription.unsubscribe();
            }
        })
        .await;
        // Then the senders send what they were handed and await the acks.
        for (finish, task) in senders {
            let _ = finish.send(true);
            let _ = task.await;
        }
        deadline.abort();
        if let Err(error) = drained {
            if error.is_panic() {
                std::panic::resume_unwind(error.into_panic());
            }
        }
        let _ = tokio::time::timeout(ACK_TIMEOUT, self.shared.client.flush()).await;
        let letters: Vec<DeadLetter> = self
            .bus
            .dead_letters()
            .into_iter()
            .filter(|letter| names.iter().any(|n| n == letter.subscriber()))
            .collect();
        if letters.is_empty() {
            Ok(())
        } else {
            Err(Error::Unsent { letters })
        }
    }
}

/// Dropped without [`close`](Bridge::close): the imports stop (each after the message in
/// hand); the exports go on until the bus closes, which delivers them first.
impl Drop for Bridge {
    fn drop(&mut self) {
        for import in self.imports.lock().iter() {
            let _ = import.stop.send(true);
        }
    }
}

impl Shared {
    /// Makes the topic's stream, or adds its subject to a stream of that name made otherwise;
    /// another bridge making it at the same moment is no failure (see `streams`).
    async fn ensure_stream(&self, topic: &'static str) -> Result<stream::Stream, Error> {
        let subject = subject(topic);
        // Lock order: `streams`, a leaf.
        let plan = self.streams.lock().get(topic).cloned().unwrap_or_default();
        let name = plan.stream_name(&subject);
        let mut subjects = vec![subject];
        // Lock order: `keyed`, a leaf.
        if self.keyed.lock().contains(topic) {
            subjects.push(partitions_subject(topic));
        }
        if plan.existing {
            return streams::existing(&self.js, topic, &name, &subjects).await;
        }
        // A stream the options name is the topic's alone: used if it holds the subject
        // alone, refused if it holds others (made if missing). The default name, derived
        // from the subject, gets the subject added if a stream of that name lacks it.
        if plan.name.is_some() {
            if let Some(stream) = streams::find(&self.js, topic, &name).await? {
                return streams::alone(topic, &name, &subjects, stream);
            }
        }
        streams::make_stream(&self.js, plan.config(subjects))
            .await
            .map_err(|(what, source)| Error::Server {
                topic,
                what,
                source,
            })
    }

    /// Keeps `options` as the topic's stream plan and makes (or finds) the stream; a plan
    /// this call kept is forgotten again if the stream cannot be had, so a later call may
    /// ask otherwise.
    async fn ensure_planned(
        &self,
        topic: &'static str,
        options: StreamOptions,
    ) -> Result<stream::Stream, Error> {
        let kept = self.plan(topic, options)?;
        let made = self.ensure_stream(topic).await;
        if made.is_err() && kept {
            // Lock order: `streams`, a leaf.
            self.streams.lock().remove(topic);
        }
        made
    }

    /// Keeps `options` as the topic's stream plan (`true` if this call kept it): the first
    /// non-default plan given for a topic holds; another one is refused, the default always
    /// fits; a stream name planned for another topic is refused.
    fn plan(&self, topic: &'static str, options: StreamOptions) -> Result<bool, Error> {
        options.check(topic)?;
        // Lock order: `streams`, a leaf.
        let mut streams = self.streams.lock();
        if let Some(name) = &options.name {
            let taken = streams.iter().find(|(other, plan)| {
                **other != topic && plan.name.as_deref() == Some(name.as_str())
            });
            if let Some((other, _)) = taken {
                return Err(Error::Stream {
                    topic,
                    stream: name.clone(),
                    why: format!(
                        "this bridge keeps topic `{other}` in that stream; a stream holds one \
                         topic's subject alone"
                    ),
                });
            }
        }
        match streams.get(topic) {
            Some(kept) if options != StreamOptions::default() && *kept != options => {
                Err(Error::Stream {
                    topic,
                    stream: options.stream_name(&subject(topic)),
                    why: format!(
                        "this bridge already bridges the topic through the stream options \
                         {kept:?}; its export and import share one stream"
                    ),
                })
            }
            Some(_) => Ok(false),
            None => {
                streams.insert(topic, options);
                Ok(true)
            }
        }
    }

    /// The name of the topic's stream, as planned.
    fn stream_of(&self, topic: &'static str) -> String {
        // Lock order: `streams`, a leaf.
        let streams = self.streams.lock();
        match streams.get(topic) {
            Some(plan) => plan.stream_name(&subject(topic)),
            None => stream_name(&subject(topic)),
        }
    }

    /// The durable consumer `name` on the topic's stream: made if missing, else as it is.
    async fn consumer(
        &self,
        stream: &stream::Stream,
        topic: &'static str,
        name: &str,
    ) -> Result<consumer::PullConsumer, Error> {
        let config = consumer::pull::Config {
            durable_name: Some(name.to_string()),
            deliver_policy: consumer::DeliverPolicy::All,
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: ACK_WAIT,
            max_ack_pending: IMPORT_WINDOW,
            ..Default::default()
        };
        stream
            .get_or_create_consumer(name, config)
            .await
            .map_err(|e| Error::Server {
                topic,
                what: "make the durable consumer",
                source: Box::new(e),
            })
    }
}

/// `eventbus.` and the topic's name, each character a subject token cannot hold written
/// `~XX` (its UTF-8 bytes in hex), and a `.` kept only between two non-empty tokens.
fn subject(topic: &str) -> String {
    let mut subject = String::from("eventbus");
    for token in topic.split('.') {
        subject.push('.');
        if token.is_empty() {
            subject.push_str("~2E");
            continue;
        }
        for c in token.chars() {
            if c.is_ascii_alphanumeric() || c == '-' {
                subject.push(c);
            } else {
                let mut bytes = [0; 4];
                for b in c.encode_utf8(&mut bytes).bytes() {
                    subject.push_str(&format!("~{b:02X}"));
                }
            }
        }
    }
    subject
}

/// The subject of partition `partition` of a keyed topic: its [`subject`], then `~p` (a
/// token an escaped topic name never holds) and the partition's number.
fn partition_subject(topic: &str, partition: u32) -> String {
    format!("{}.~p.{partition}", subject(topic))
}

/// The subjects of every partition of a keyed topic, as its stream holds them.
fn partitions_subject(topic: &str) -> String {
    format!("{}.~p.*", subject(topic))
}

/// Whether JetStream can hold `name` as a consumer's or a stream's name: letters, digits,
/// `-` and `_`, at most 200.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The stream of a subject: its dots as `_` (which the escaped tokens never hold).
fn stream_name(subject: &str) -> String {
    subject.replace('.', "_")
}

#[cfg(test)]
mod tests {
    use super::subject;

    #[test]
    fn subjects_escape_what_a_token_cannot_hold() {
        assert_eq!(subject("orders.placed"), "eventbus.orders.placed");
        assert_eq!(subject("Wrapper<u32>"), "eventbus.Wrapper~3Cu32~3E");
        assert_eq!(subject("a..b"), "eventbus.a.~2E.b");
        assert_eq!(subject("a_b c"), "eventbus.a~5Fb~20c");
        assert_eq!(subject("*.>"), "eventbus.~2A.~3E");
    }
}
