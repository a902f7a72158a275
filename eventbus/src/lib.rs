//! A typed, in-process event bus.
//!
//! Topics are Rust types; subscribers are plain functions. Every subscription has its own
//! bounded mailbox and its own worker thread, so a slow or failing subscriber delays only
//! itself, and with [`Overflow::Block`] the publishers of its topic: backpressure it chose.
//!
//! The guide below follows the order you meet things in. Every example runs as a test.
//!
//! # 1. Define a topic
//!
//! A topic is a type with `#[derive(Topic)]`: a struct, an enum (its variants share one
//! order) or a generic type (each instantiation is a topic of its own). The name shown in
//! stats and dead letters defaults to the type's name; `#[topic(name = "...")]` sets it.
//! Messages need not be `Clone`: all subscribers share one reference-counted copy of each.
//!
//! ```
//! use eventbus::Topic;
//!
//! #[derive(Topic, Debug)]
//! #[topic(name = "orders.placed")]
//! pub struct OrderPlaced { pub id: u64, pub customer: u64 }
//!
//! #[derive(Topic, Debug)]
//! pub enum Payment { Card { cents: u64 }, Cash { cents: u64 } }
//!
//! assert_eq!(OrderPlaced::name(), "orders.placed");
//! assert_eq!(Payment::name(), "Payment");
//! ```
//!
//! Subscribing to a type that is not a topic does not compile:
//!
//! ```compile_fail
//! use eventbus::subscriber;
//! struct NotATopic;
//! #[subscriber]
//! fn handler(_: &NotATopic) {}
//! ```
//!
//! # 2. Write a subscriber
//!
//! Mark a free function `#[subscriber]`. It takes the message as `&T` or `&Message<T>` (which
//! adds [`Message::seq`], its place in the topic's order), then optionally `&Bus` (to publish
//! more) and any number of [`State<T>`] (values given to the builder, such as a database
//! pool). It returns `()` or `Result<(), E>` with `E: Display` (an `E` that is a
//! `std::error::Error + Send + Sync` is kept whole in its dead letter: see section 4).
//!
//! [`Bus::new`] starts every `#[subscriber]` linked into the binary: those of your
//! dependencies too, not only your own crate's. To start only your own, choose them by
//! module with [`Bus::builder`]: `registered_in("my_app")` takes the subscribers defined in
//! the crate `my_app` and its modules (section 7 says more).
//!
//! ```
//! use eventbus::Bus;
//!
//! let everything = Bus::new(); // every #[subscriber] in the binary, dependencies' included
//! let mine = Bus::builder().registered_in("my_app").build(); // only those in `my_app`
//! # everything.close();
//! # mine.close();
//! ```
//!
//! A subscriber with shared state and a bus to publish on:
//!
//! ```
//! use std::sync::Mutex;
//! use eventbus::{subscriber, Bus, Message, State, Topic};
//!
//! #[derive(Topic)]
//! pub struct OrderPlaced { pub id: u64 }
//! #[derive(Topic)]
//! pub struct StockReserved { pub order: u64 }
//!
//! #[derive(Default)]
//! pub struct Warehouse { reserved: Mutex<Vec<u64>> }
//!
//! #[subscriber]
//! fn reserve(order: &Message<OrderPlaced>, stock: State<Warehouse>, bus: &Bus) {
//!     stock.reserved.lock().unwrap().push(order.id);
//!     bus.publish(StockReserved { order: order.id }).unwrap();
//! }
//!
//! let bus = Bus::builder().state(Warehouse::default()).registered().build();
//! bus.publish(OrderPlaced { id: 41 }).unwrap();
//! bus.close();
//! assert_eq!(*bus.state::<Warehouse>().unwrap().reserved.lock().unwrap(), [41]);
//! ```
//!
//! Closures subscribe at run time with [`Bus::subscribe`] and capture what they need.
//!
//! # 3. Choose an overflow policy
//!
//! Every mailbox is bounded (`capacity`, default 1024). When it is full, [`Overflow`] says
//! what happens: `Block` (the default) makes the publisher wait for room; `DropOldest`
//! discards the oldest queued message (a price feed that wants the latest); `DropNewest`
//! discards the one being published. Every drop is counted.
//!
//! ```
//! use eventbus::{Bus, Message, Options, Overflow, Topic};
//!
//! #[derive(Topic)]
//! struct Price(u64);
//!
//! let bus = Bus::builder().build();
//! let (started, busy) = std::sync::mpsc::channel();
//! let (hold, wait) = std::sync::mpsc::channel::<()>();
//! let (tx, rx) = std::sync::mpsc::channel();
//! let ticker = bus.subscribe::<Price>(
//!     Options::default().capacity(2).overflow(Overflow::DropOldest),
//!     move |m: &Message<Price>| {
//!         if m.0 == 1 {
//!             started.send(()).unwrap();
//!             let _ = wait.recv(); // busy with the first price until let go
//!         }
//!         tx.send(m.0).unwrap();
//!     },
//! );
//! bus.publish(Price(1)).unwrap();
//! busy.recv().unwrap();
//! for price in 2..=5 {
//!     bus.publish(Price(price)).unwrap(); // 2 and 3 make way for 4 and 5
//! }
//! drop(hold);
//! let stats = ticker.unsubscribe();
//! assert_eq!(rx.try_iter().collect::<Vec<_>>(), [1, 4, 5]);
//! assert_eq!(stats.dropped, 2);
//! ```
//!
//! # 4. Retries and dead letters
//!
//! An `Err` or a panic is a failed attempt; the worker lives on. `retries = n` tries again up
//! to `n` times, in place (so the subscriber's order holds), waiting `backoff × 2^(k−1)`
//! before retry `k` (at most 32 × backoff). Then the message becomes a [`DeadLetter`] with
//! its last error, kept in a bounded store (10,000 by default,
//! [`BusBuilder::DEFAULT_DEAD_LETTER_CAPACITY`]); `payload::<T>()` hands the message back for
//! inspection or republishing. `error()` is the error's text; when the handler's error is a
//! `std::error::Error + Send + Sync`, the letter keeps it too, as its
//! [`source()`](std::error::Error::source), with the error's own chain behind it.
//!
//! ```
//! use eventbus::{subscriber, Bus, Topic};
//!
//! #[derive(Topic, Debug)]
//! pub struct Charge { pub cents: u64 }
//!
//! #[subscriber(retries = 2, backoff = "1ms", name = "billing")]
//! fn charge(c: &Charge) -> Result<(), String> {
//!     if c.cents > 1000 { Err(format!("{} cents is over the limit", c.cents)) } else { Ok(()) }
//! }
//!
//! let bus = Bus::new();
//! bus.publish(Charge { cents: 5000 }).unwrap();
//! bus.close();
//! let letter = &bus.dead_letters()[0];
//! assert_eq!((letter.subscriber(), letter.attempts()), ("billing", 3));
//! assert_eq!(letter.error(), "5000 cents is over the limit");
//! assert_eq!(letter.payload::<Charge>().unwrap().cents, 5000);
//! ```
//!
//! [`BusBuilder::on_dead_letter`] shows each dead letter to a callback as it happens, on a
//! thread of its own; with the `tokio` feature, `BusBuilder::on_dead_letter_async` awaits an
//! async hook on the bus's runtime instead (one or the other, not both).
//!
//! # 5. Closing
//!
//! [`Bus::close`] refuses new publishes from outside the bus, delivers everything already
//! accepted (including what handlers publish meanwhile), and returns when every worker has
//! stopped. After it, `publish` hands the message back. [`Bus::close_timeout`] bounds the
//! wait and reports what was left. Dropping the last `Bus` handle closes it too.
//!
//! ```
//! use eventbus::{Bus, Message, Options, PublishError, Topic};
//!
//! #[derive(Topic, Debug, PartialEq)]
//! struct Job(u32);
//!
//! let bus = Bus::builder().build();
//! let (tx, rx) = std::sync::mpsc::channel();
//! bus.subscribe::<Job>(Options::default(), move |m: &Message<Job>| tx.send(m.0).unwrap());
//! for i in 0..100 {
//!     bus.publish(Job(i)).unwrap();
//! }
//! bus.close();
//! assert_eq!(rx.try_iter().count(), 100);
//! assert_eq!(bus.publish(Job(7)), Err(PublishError::Closed(Job(7))));
//! ```
//!
//! **Durability.** An accepted publish is in memory only. `close` delivers everything
//! accepted, but a crash (a kill, an abort, a power cut) loses what was queued: up to
//! `capacity` messages per subscriber, and those in handlers at that moment. Dead letters
//! and log topics are in memory too. A message that must survive the process is kept
//! outside the bus: in the application's database (written by an inline subscriber in the
//! caller's transaction, say), or through the NATS bridge (feature `nats`), whose broker
//! stores exported topics on disk and delivers them at least once to the next run's
//! importer.
//!
//! # 6. Stats
//!
//! [`Bus::stats`] counts, per topic and per subscription, what was received, queued (in the
//! mailbox), in the handler, delivered, failed, retried, dead-lettered and dropped; at rest
//! (after close, say) `received == delivered + dead_lettered + dropped + queued +
//! in_handler`, and `queued` never exceeds the capacity. Its `Display` is a table.
//!
//! ```
//! use eventbus::{Bus, Message, Options, Topic};
//!
//! #[derive(Topic)]
//! struct Reading(u32);
//!
//! let bus = Bus::builder().build();
//! bus.subscribe::<Reading>(Options::default().name("meter"), |_: &Message<Reading>| {});
//! bus.publish(Reading(1)).unwrap();
//! bus.close();
//! let stats = bus.stats();
//! let meter = &stats.subscriptions[0];
//! assert_eq!((meter.received, meter.delivered), (1, 1));
//! println!("{stats}");
//! ```
//!
//! # 7. Applications of many crates
//!
//! Every `#[subscriber]` registers itself when the program starts, whichever crate defines it
//! (through the [`inventory`](https://docs.rs/inventory) crate). [`Bus::new`] (like
//! [`BusBuilder::registered`]) starts every one in the binary, those of dependencies
//! included: that is the design. To start only your own, name your modules:
//! `Bus::builder().registered_in("my_app").build()`.
//!
//! A crate that nothing refers to contributes no subscriber. Say `app` depends on a crate
//! `handlers` of subscribers, but never names any of its items: the linker keeps a library
//! crate only if the program refers to it, so `handlers` is left out, its subscribers never
//! register, and a publish finds none, silently. (See `inventory`'s docs and its issues #7 and
//! #50.) The fix is one line in the binary, which links the crate without naming anything in
//! it:
//!
//! ```text
//! use handlers as _; // links its #[subscriber]s
//! ```
//!
//! Two checks make the omission visible at start-up: [`Bus::registered`] lists every
//! `#[subscriber]` the program holds (name, topic, module, options), to log or assert on; and
//! [`BusBuilder::require`] makes the build fail, with that fix in its message, when a
//! subscriber you count on is missing.
//!
//! ```
//! use eventbus::{subscriber, Bus, BuildError, Topic};
//!
//! #[derive(Topic)]
//! pub struct OrderPlaced { pub id: u64 }
//!
//! #[subscriber(name = "email.receipt")]
//! fn send_receipt(_: &OrderPlaced) {}
//!
//! for s in Bus::registered() {
//!     println!("{} on {}, from {}", s.name, s.topic, s.module_path);
//! }
//! let bus = Bus::builder().registered().require("email.receipt").build();
//! bus.close();
//!
//! let error = Bus::builder()
//!     .registered()
//!     .require("warehouse::reserve") // defined in a crate the binary never names
//!     .try_build()
//!     .unwrap_err();
//! assert!(matches!(error, BuildError::MissingSubscribers { .. }));
//! assert!(error.to_string().contains("add `use warehouse as _;` to the binary"));
//! ```
//!
//! A crate that re-exports `eventbus` (a framework built on it, say) can offer the macros
//! through its own name: `crate = path` tells them where `eventbus` is, and every path of
//! their expansion goes through it. It is a path, resolved where the macro is used.
//!
//! ```
//! mod framework {
//!     pub(crate) use eventbus; // `pub use eventbus;` in `my_framework`
//! }
//!
//! #[derive(framework::eventbus::Topic)]
//! #[topic(crate = framework::eventbus)]
//! pub struct Tick;
//!
//! #[framework::eventbus::subscriber(crate = framework::eventbus)]
//! fn on_tick(_: &Tick) {}
//!
//! let bus = framework::eventbus::Bus::new();
//! bus.publish(Tick).unwrap();
//! bus.close();
//! ```
//!
//! # 8. Async subscribers on tokio (feature `tokio`)
//!
//! With feature `tokio`, a subscriber may be an `async fn`, with the same parameters as a
//! sync one; its worker is one tokio task, which runs it on one message at a time, in order.
//! `publish_async` waits for room by awaiting, never by blocking a runtime thread, and
//! `close_async` closes without blocking one. The bus takes the runtime current at `build()`
//! (or [`BusBuilder::runtime`]). Sync and async subscribers and publishers mix freely, with
//! one order per topic. A subscription can also be read as a `Stream`: [`Bus::stream`].
//!
//! ```
//! # #[cfg(feature = "tokio")] {
//! use std::sync::Mutex;
//! use eventbus::{subscriber, Bus, State, Topic};
//!
//! #[derive(Topic)]
//! pub struct OrderPlaced { pub id: u64 }
//! #[derive(Topic)]
//! pub struct OrderSaved { pub id: u64 }
//!
//! #[derive(Default)]
//! pub struct Db { rows: Mutex<Vec<u64>> }
//!
//! #[subscriber(capacity = 100, retries = 3, backoff = "50ms")]
//! async fn save_order(order: &OrderPlaced, db: State<Db>, bus: &Bus) -> Result<(), String> {
//!     tokio::task::yield_now().await; // a database insert, say
//!     db.rows.lock().unwrap().push(order.id);
//!     bus.publish_async(OrderSaved { id: order.id }).await.map_err(|e| e.to_string())?;
//!     Ok(())
//! }
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let bus = Bus::builder().state(Db::default()).registered().build(); // takes this runtime
//! bus.publish_async(OrderPlaced { id: 1 }).await.unwrap();
//! bus.close_async().await;
//! assert_eq!(*bus.state::<Db>().unwrap().rows.lock().unwrap(), [1]);
//! # });
//! # }
//! ```
//!
//! On a runtime's thread, the sync `publish` and `close` never stop the bus's own tasks: on
//! a multi-thread runtime they wait in `block_in_place`; on a `current_thread` runtime a
//! `publish` that would wait is refused with `WouldDeadlock`, and `close` begins the close
//! and returns. Use the async forms there.
//!
//! **With axum.** A [`Bus`] is `Clone` and goes into axum's state as it is. Import the
//! bus's [`State`] under another name so both can be used: the macro accepts it under any
//! name, a full path or a type alias. Shut down in the order that loses nothing: HTTP
//! first, then the bus (`close_async`), then what the subscribers write through.
//!
//! ```
//! # #[cfg(feature = "tokio")] {
//! use axum::extract::State;                   // axum's
//! use axum::{http::StatusCode, routing::post, Router};
//! use eventbus::State as BusState;            // the bus's
//! use eventbus::{subscriber, Bus, Topic};
//! use std::sync::Mutex;
//!
//! #[derive(Topic, Debug)]
//! pub struct OrderPlaced { pub id: u64 }
//!
//! #[derive(Default)]
//! pub struct Db { rows: Mutex<Vec<u64>> }
//!
//! #[subscriber]
//! async fn save_order(order: &OrderPlaced, db: BusState<Db>) {
//!     db.rows.lock().unwrap().push(order.id);
//! }
//!
//! async fn place(State(bus): State<Bus>, id: String) -> StatusCode {
//!     let Ok(id) = id.parse() else { return StatusCode::BAD_REQUEST };
//!     match bus.publish_async(OrderPlaced { id }).await {
//!         Ok(_) => StatusCode::ACCEPTED,
//!         Err(_) => StatusCode::SERVICE_UNAVAILABLE, // closing: the order is handed back
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let bus = Bus::builder().state(Db::default()).registered_in(module_path!()).build();
//! let app: Router = Router::new().route("/orders", post(place)).with_state(bus.clone());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
//! let address = listener.local_addr().unwrap();
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let server = tokio::spawn(async move {
//!     axum::serve(listener, app)
//!         .with_graceful_shutdown(async { stopped.await.ok(); })
//!         .await
//! });
//! // A client: one POST over a plain socket.
//! let answer = tokio::task::spawn_blocking(move || {
//!     use std::io::{Read, Write};
//!     let mut client = std::net::TcpStream::connect(address).unwrap();
//!     let request = "POST /orders HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\
//!                    Connection: close\r\n\r\n42";
//!     client.write_all(request.as_bytes()).unwrap();
//!     let mut answer = String::new();
//!     client.read_to_string(&mut answer).unwrap();
//!     answer
//! })
//! .await
//! .unwrap();
//! assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
//! stop.send(()).unwrap();
//! server.await.unwrap().unwrap(); // HTTP stopped,
//! bus.close_async().await;        // then the bus: every accepted order handled,
//! assert_eq!(*bus.state::<Db>().unwrap().rows.lock().unwrap(), [42]); // then the store.
//! # });
//! # }
//! ```
//!
//! `examples/orders-service` is a whole service of this shape with sqlx, and a test.
//!
//! # 9. Log topics and replay
//!
//! A topic with `#[topic(retain = N)]` (and, if you like, `retain_for = "1h"`) keeps one log,
//! shared by its subscriptions, each with a position. A subscriber that starts late chooses
//! where: [`Start::Earliest`], [`Start::Seq`], [`Start::Since`] (or [`Start::Now`], the
//! default). It gets the kept history in order, then the live messages, with no gap and no
//! repeat at the seam. On a log topic `Block` makes publishers wait while a subscription is
//! `capacity` messages behind, `DropOldest` loses (and counts) what the trim takes from a
//! subscription that fell behind, and `DropNewest` is refused. A log keeps its messages in
//! blocks of up to 64, each message its payload and 8 bytes; a reference kept to one of them
//! (a dead letter, a clone) keeps its block until it is let go of.
//!
//! ```
//! use eventbus::{Bus, Message, Options, Start, Topic};
//!
//! #[derive(Topic)]
//! #[topic(retain = 1_000)]
//! struct OrderPlaced { id: u64 }
//!
//! let bus = Bus::builder().build();
//! for id in 0..3 {
//!     bus.publish(OrderPlaced { id }).unwrap(); // no subscriber yet: kept in the log
//! }
//! let (tx, rx) = std::sync::mpsc::channel();
//! let report = bus.subscribe::<OrderPlaced>(
//!     Options::default().start(Start::Earliest),
//!     move |m: &Message<OrderPlaced>| tx.send((m.seq(), m.id)).unwrap(),
//! );
//! bus.publish(OrderPlaced { id: 3 }).unwrap();
//! report.unsubscribe();
//! assert_eq!(rx.try_iter().collect::<Vec<_>>(), [(0, 0), (1, 1), (2, 2), (3, 3)]);
//! ```
//!
//! `examples/replay.rs` is a report service that starts late and rebuilds from the log.
//!
//! # 10. Consumer groups: several workers, order per key
//!
//! A subscriber too slow for one worker becomes a group: `workers = N` starts N workers for
//! one subscription, and each message is handled by exactly one of them. With
//! `key = customer_of`, each worker has its own mailbox (of `capacity`, with its own
//! overflow, retries and dead letters) and the key's hash picks it, so all messages with one
//! key are handled in their topic's order by one worker. Without a key, the workers share one
//! mailbox and take whatever is next: each message once, **in no promised order**. A
//! `#[subscriber]` function is called by the workers at once (its `State<T>` is shared); a
//! dynamic group takes an `Fn + Send + Sync` handler ([`Bus::subscribe_group`]). The stats
//! are the group's, with each worker's share in
//! [`workers`](SubscriptionStats::workers): a hot key is one worker far busier than the
//! rest. An async handler makes a group of tasks (`Bus::subscribe_group_async`, feature
//! `tokio`), with the same promises.
//!
//! ```
//! use eventbus::{subscriber, Bus, Topic};
//!
//! #[derive(Topic)]
//! struct OrderPlaced { customer: u64 }
//!
//! fn customer_of(o: &OrderPlaced) -> u64 {
//!     o.customer
//! }
//!
//! #[subscriber(workers = 4, key = customer_of, capacity = 256, name = "reserve_stock")]
//! fn reserve_stock(o: &OrderPlaced) -> Result<(), String> {
//!     // One customer's orders arrive here in order, on one of the four workers.
//!     Ok(())
//! }
//!
//! let bus = Bus::builder().registered().build();
//! for n in 0..100 {
//!     bus.publish(OrderPlaced { customer: if n < 90 { 7 } else { n } }).unwrap();
//! }
//! bus.close();
//! let stats = bus.stats();
//! let group = stats.subscriptions.iter().find(|s| s.name == "reserve_stock").unwrap();
//! assert_eq!((group.delivered, group.workers.len()), (100, 4));
//! // Customer 7 is hot: one worker received at least its 90 orders.
//! assert!(group.workers.iter().any(|w| w.received >= 90));
//! ```
//!
//! On a log topic (section 9) a group replays too, from its [`Options::start`]: with a key
//! each worker reads the log at its own position and takes its keys' messages, history and
//! live, in order; without a key the workers share one position, each taking the next
//! message. `DropOldest` is refused a keyed group on a log (a worker lapped by the trim
//! could not tell which lost messages were its own).
//!
//! ```
//! use eventbus::{Bus, Message, Options, Start, Topic};
//!
//! #[derive(Topic)]
//! #[topic(retain = 1_000)]
//! struct Visit { customer: u64 }
//!
//! let bus = Bus::builder().build();
//! for n in 0..60 {
//!     bus.publish(Visit { customer: n % 5 }).unwrap(); // kept in the log
//! }
//! let (tx, rx) = std::sync::mpsc::channel();
//! let tx = std::sync::Mutex::new(tx);
//! let replay = bus.subscribe_group::<Visit>(
//!     Options::default().workers(3).key(|v: &Visit| v.customer).start(Start::Earliest),
//!     move |m: &Message<Visit>| tx.lock().unwrap().send((m.customer, m.seq())).unwrap(),
//! );
//! bus.publish(Visit { customer: 0 }).unwrap(); // live, after the history
//! replay.unsubscribe();
//! let seen: Vec<(u64, u64)> = rx.try_iter().collect();
//! assert_eq!(seen.len(), 61);
//! // One customer's visits, history then live, in order.
//! let first: Vec<u64> = seen.iter().filter(|v| v.0 == 0).map(|v| v.1).collect();
//! assert!(first.windows(2).all(|w| w[0] < w[1]) && first.last() == Some(&60));
//! ```
//!
//! The other subscription that gives up its topic's order, by its own choice, is a priority
//! mailbox: `#[subscriber(priority = urgency)]` with `fn urgency(m: &T) -> u8`, or
//! [`Options::priority`]. Its worker takes the most urgent message queued first (higher
//! first), and one level's messages in topic order; every other subscriber of the topic keeps
//! the one order. A full one makes room at the least urgent level (`DropOldest` its oldest,
//! `DropNewest` its newest, the arriving one included), never dropping a more urgent message
//! for a less urgent one. It is a mailbox of one worker: refused in a group, inline, or on a
//! log topic.
//!
//! # 11. Observers of many topics
//!
//! An audit log, a debugger or a forwarder wants every topic of a kind, not one type:
//! `#[observer("orders.*")]` (or [`Bus::observe`]) subscribes to every topic whose name
//! matches, topics first published later included. A name is split at `.`: `*` matches one
//! segment, `>` one or more (last only), anything else itself. The handler gets an
//! [`AnyMessage`]: its topic, its seq, [`downcast_ref`](AnyMessage::downcast_ref), and a
//! `Debug` that shows the value (when its type is `Debug`). An observer is a subscriber in
//! every other way (mailbox, worker, overflow, retries, dead letters, stats) and sees each
//! topic's messages in that topic's order. A full `Block` observer holds up every topic it
//! observes, so an audit trail usually takes `DropOldest`. An observer may take a
//! [`priority`](Options::priority) over [`AnyMessage`] (section 10). With feature `tokio`,
//! an `async fn` observer (or `Bus::observe_async`) is one tokio task, with the same
//! promises.
//!
//! ```
//! use eventbus::{observer, AnyMessage, Bus, Topic};
//!
//! #[derive(Topic, Debug)]
//! #[topic(name = "orders.placed")]
//! struct OrderPlaced { id: u64 }
//!
//! #[derive(Topic, Debug)]
//! #[topic(name = "orders.shipped")]
//! struct OrderShipped { id: u64 }
//!
//! static AUDIT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
//!
//! #[observer("orders.*", capacity = 1000, overflow = DropOldest)]
//! fn audit(m: &AnyMessage) {
//!     AUDIT.lock().unwrap().push(format!("{} #{}: {:?}", m.topic(), m.seq(), m));
//! }
//!
//! let bus = Bus::builder().registered().build();
//! bus.publish(OrderPlaced { id: 1 }).unwrap();
//! bus.publish(OrderShipped { id: 1 }).unwrap();
//! bus.close();
//! assert_eq!(
//!     *AUDIT.lock().unwrap(),
//!     [
//!         "orders.placed #0: OrderPlaced { id: 1 }",
//!         "orders.shipped #0: OrderShipped { id: 1 }",
//!     ]
//! );
//! ```
//!
//! # 12. Operating a bus: redelivery, metrics, a live page
//!
//! [`Bus::redeliver`] hands a dead letter's message back to the subscriber that gave up on
//! it, and to no one else (its other subscribers had it already): the same message, its seq
//! kept, nothing published again; the letter leaves the store. Use it once the cause is
//! fixed, as Sidekiq's "retry" on a dead job.
//!
//! With feature `metrics`, [`metrics::install`] samples
//! [`Bus::stats`] on a timer, on a thread of its own, and sets counters and gauges through the
//! [`metrics`](https://docs.rs/metrics) crate's facade, labelled by topic and subscriber:
//! the publish path pays nothing for it. Install the exporter you like (Prometheus, say)
//! first. `examples/metrics.rs` serves `/metrics`; the module's docs list every metric.
//!
//! ```
//! # #[cfg(feature = "metrics")] {
//! use std::time::Duration;
//!
//! let bus = eventbus::Bus::new();
//! let sampler = eventbus::metrics::install(&bus, Duration::from_secs(5));
//! bus.close();
//! sampler.stop(); // one last sample of the closed bus
//! # }
//! ```
//!
//! With feature `dashboard`, [`dashboard::serve`] serves one live
//! page: every topic and subscription with its rates, mailbox depth against capacity, drops
//! and dead letters, and a button per dead letter that redelivers it. The page's assets are
//! in the crate; the server is `std` only. A redelivery is taken only from the address the
//! server is bound to, with the token in the page. `cargo run --example orders
//! --features dashboard -- --dashboard` shows it on the demo.
//!
//! ```
//! # #[cfg(feature = "dashboard")] {
//! let bus = eventbus::Bus::new();
//! let page = eventbus::dashboard::serve(&bus, "127.0.0.1:0")?; // port 0: a free one
//! println!("the bus at {}", page.url());
//! drop(page); // stops the server
//! # bus.close();
//! # }
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # 13. Testing
//!
//! Between a publish and an assert, wait for the bus, not for the clock:
//! [`Bus::wait_idle`] returns once every message accepted so far is handled by every
//! subscription (delivered, dead-lettered or dropped, no retry pending, every log reader at
//! the end), [`Bus::wait_idle_timeout`] gives up after a while (`false`), and
//! `wait_idle_async` (feature `tokio`) awaits. The bus stays open: publish more and wait
//! again.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use eventbus::{Bus, Message, Options, Topic};
//!
//! #[derive(Topic, Debug)]
//! pub struct OrderPlaced { pub id: u64 }
//!
//! let bus = Bus::builder().build();
//! let emails = Arc::new(Mutex::new(Vec::new()));
//! let outbox = Arc::clone(&emails);
//! bus.subscribe::<OrderPlaced>(Options::default(), move |m: &Message<OrderPlaced>| {
//!     outbox.lock().unwrap().push(format!("order {} is placed", m.id));
//! });
//! bus.publish(OrderPlaced { id: 7 }).unwrap();
//! bus.wait_idle(); // no sleep, no polling
//! assert_eq!(*emails.lock().unwrap(), ["order 7 is placed"]);
//! # bus.close();
//! ```
//!
//! # 14. Three ways to deliver, and when to pick each
//!
//! - **A mailbox per subscriber** (the default): the publisher numbers the message and puts
//!   it in each subscriber's bounded mailbox; each subscriber's worker runs its handler. A
//!   slow subscriber delays only itself (and, with `Block`, the publishers of its topic).
//!   Pick it unless one of the two below fits better.
//! - **Inline** ([`Bus::subscribe_inline`], `#[subscriber(inline)]`): the handler runs on the
//!   publisher's thread, inside the publish, before any mailbox gets the message; an `Err` or
//!   a panic refuses the publish whole (`PublishError::Rejected`, the message handed back).
//!   Pick it for what must happen in the caller's transaction: validation, invariants, an
//!   outbox row. While it runs the topic's other publishers wait.
//! - **A dispatcher per topic** (`#[topic(dispatcher)]`, `queue = N`, 1024 by default): the
//!   publisher numbers the message, adds it to the topic's bounded queue and returns; one
//!   thread per topic hands the queue out to every mailbox, in order. Publishers never wait on
//!   the hand-out, only on a full queue (`Block` waits, `try_publish` is `Full`,
//!   `publish_timeout` is bounded). Pick it for many publishers on a topic with many
//!   subscribers, or where a publisher must not spend its time handing out: in
//!   `benches/dispatcher.rs` a publish cost its thread under half the CPU time into 16
//!   subscribers (0.39–0.45× over three runs), no less into 4 (0.99–1.24×), and every
//!   message took longer end to end (1.03–1.64× the wall time: the hand-out is one more
//!   step). A dispatcher topic has no log. Its inline subscribers run in the publish before
//!   the message is queued (in the topic's one order; a refusal queues nothing and takes no
//!   seq), once the queue has room for it: a publish with inline subscribers waits for room
//!   before they run, and they hold up the topic's other publishers while they run.
//!   [`TopicStats::queue_depth`] shows how full its queue is, and
//!   [`TopicStats::handed_out`] how many messages every mailbox has had (equal to
//!   `published`: nothing is left to hand out, whatever the handlers are doing).
//!
//! ```
//! use eventbus::{Bus, Message, Options, Topic};
//!
//! #[derive(Topic, Debug)]
//! #[topic(dispatcher, queue = 256)]
//! pub struct Click { pub x: u32 }
//!
//! let bus = Bus::builder().build();
//! let (tx, rx) = std::sync::mpsc::channel();
//! bus.subscribe::<Click>(Options::default(), move |m: &Message<Click>| tx.send(m.x).unwrap());
//! for x in 0..10 {
//!     bus.publish(Click { x }).unwrap(); // returns once the click is in the queue
//! }
//! bus.wait_idle();
//! assert_eq!(rx.try_iter().collect::<Vec<_>>(), (0..10).collect::<Vec<_>>());
//! let stats = bus.stats();
//! let click = stats.topics.iter().find(|t| t.name == "Click").unwrap();
//! assert_eq!((click.queue_depth, click.queue_capacity), (Some(0), Some(256)));
//! assert_eq!(click.handed_out, Some(click.published));
//! # bus.close();
//! ```
//!
//! # Features
//!
//! - `tokio`: async subscribers (tokio tasks), `publish_async`, `close_async`, streams
//!   (section 8).
//! - `tracing`: a span per delivery attempt; `warn` events for drops, for dead letters and,
//!   once per topic, for a publish to a topic that has never had a subscriber (most likely
//!   its subscribers' crate was not linked in: see section 7); an `info` event on close.
//!   Nothing is compiled in without it.
//! - `serde`: `Serialize` for the stats, close reports and dead-letter metadata, and
//!   `AnyMessage::to_json` for observers.
//! - `metrics`: [`metrics::install`], the stats through the
//!   `metrics` facade (section 12).
//! - `dashboard` (takes `serde`): [`dashboard::serve`], the live page
//!   (section 12).
//! - `nats` (turns on `tokio` and `serde`; needs rustc 1.89 for `async-nats`): a bridge to
//!   NATS JetStream across processes, [`nats::Bridge`]; what crosses the wire, for programs
//!   in other languages, is [`wire_format`] (documented without the feature).
//!
//! # Layout (for contributors)
//!
//! The crate's modules, top to bottom. A module imports only modules below it, by module
//! path (`use crate::options::Options`, never the root's re-export `crate::Options`);
//! `tests/it/layers.rs` reads this list and checks every import against it.
//!
//! 1. `private`: what the macros' expansions name (`eventbus::__private`): the
//!    registration entry points and the autoref-specialisation shims.
//! 2. `nats`: the NATS JetStream bridge (feature `nats`), over the facade only.
//! 3. `dashboard`: the live page (feature `dashboard`), over the facade only.
//! 4. `metrics`: the stats through the `metrics` facade (feature `metrics`), over the
//!    facade only.
//! 5. `bus`: the facade: [`Bus`], its async half, the builder, registration of
//!    `#[subscriber]`s, the [`Subscription`] handle.
//! 6. `engine`: publishing, subscribing (a file per kind of subscription: one subscriber,
//!    a group, an observer), unsubscribing and closing, redelivery, stats; and the lock
//!    order, as a table.
//! 7. `worker`: what a worker does with each message (retries, dead letters, panics), on a
//!    thread or as a tokio task.
//! 8. `topics`: each topic's one order (numbering and hand-out under its order lock), its
//!    subscriber list, and the directory that finds it by type.
//! 9. `lifecycle`: open → draining → closed, and what a close waits for.
//! 10. `delivery`: how a message reaches a worker: a mailbox, a log (ring, reader, slots), a
//!     group, an observer; and the core each subscription shares with its worker.
//! 11. `dead_letter`: dead letters, their bounded store, the hook's thread.
//! 12. `handler`: what a handler returns, what a failed attempt keeps, one attempt run.
//! 13. `error`: what publishing, subscribing and redelivering can refuse.
//! 14. `topic`: the public [`Topic`] trait.
//! 15. `numbering`: a topic's next seq, and the table that numbers a topic no one hears.
//! 16. `trace`: the `tracing` hooks (feature `tracing`; empty without it).
//! 17. `stats`: counters, and the snapshots [`Bus::stats`] returns.
//! 18. `state`: values handed to handlers as [`State<T>`].
//! 19. `options`: [`Options`], [`Overflow`], [`Start`], [`Retention`], a subscription's
//!     filter and a group's key.
//! 20. `message`: [`Message`], [`AnyMessage`], and the blocks they point into (one message's,
//!     or a log's block of many).
//! 21. `deadlock`: the wait graph that refuses a wait that could never end.
//! 22. `util`: leaves: catching panics, waking tasks, cache-line padding, snoozing.
//! 23. `wire_format`: documentation only (no items): the NATS bridge's subjects, streams,
//!     headers and body, for programs in other languages; built without the `nats` feature.

#![deny(missing_docs)]
// On docs.rs (and `RUSTDOCFLAGS="--cfg docsrs" cargo +nightly doc --all-features`), each item
// of an optional feature carries a badge naming the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]
// The README's first program is compiled and run with the doctests, so it cannot rot.
#![cfg_attr(doctest, doc = include_str!("../../README.md"))]
// The guide above links to every feature's items: built with all of them (docs.rs, CI) the
// links are checked; without some, the links to their items cannot resolve and are plain.
#![cfg_attr(
    not(all(
        feature = "tracing",
        feature = "serde",
        feature = "tokio",
        feature = "metrics",
        feature = "dashboard",
        feature = "nats"
    )),
    allow(rustdoc::broken_intra_doc_links)
)]

// In the order of "Layout" above: top to bottom.
#[doc(hidden)]
#[path = "private/mod.rs"]
pub mod __private;
mod bus;
#[cfg(feature = "dashboard")]
pub mod dashboard;
mod dead_letter;
mod deadlock;
mod delivery;
mod engine;
mod error;
mod handler;
mod lifecycle;
mod message;
#[cfg(feature = "metrics")]
pub mod metrics;
#[cfg(feature = "nats")]
pub mod nats;
mod numbering;
mod options;
mod state;
mod stats;
mod topic;
mod topics;
mod trace;
mod util;
pub mod wire_format;
mod worker;

#[cfg(feature = "tokio")]
pub use bus::asynchronous::MessageStream;
pub use bus::builder::{BuildError, BusBuilder};
pub use bus::registry::RegisteredSubscriber;
pub use bus::subscription::Subscription;
pub use bus::Bus;
pub use dead_letter::DeadLetter;
pub use error::{
    MissingState, PublishError, PublishTimeoutError, RedeliverError, Rejection, SubscribeError,
    TryPublishError,
};
pub use eventbus_macros::{observer, subscriber, Topic};
pub use handler::{GroupHandler, Handler, HandlerResult};
pub use message::{AnyMessage, Message};
pub use options::{Options, Overflow, Retention, Start};
pub use state::State;
pub use stats::{BusStats, CloseReport, SubscriptionStats, TopicStats, WorkerStats};
pub use topic::Topic;
