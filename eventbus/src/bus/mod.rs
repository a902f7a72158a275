//! The facade: [`Bus`], the handle applications and handlers hold. It names the operations
//! and their promises; `engine/` does the work.

#[cfg(feature = "tokio")]
pub(crate) mod asynchronous;
pub(crate) mod builder;
pub(crate) mod registry;
pub(crate) mod subscription;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::bus::builder::BusBuilder;
use crate::bus::subscription::Subscription;
use crate::dead_letter::DeadLetter;
use crate::dead_letter::Hook;
use crate::engine::Engine;
use crate::error::PublishError;
use crate::error::PublishTimeoutError;
use crate::error::RedeliverError;
use crate::error::SubscribeError;
use crate::error::TryPublishError;
use crate::handler::Handler;
use crate::handler::HandlerResult;
use crate::handler::{Failure, GroupHandler};
use crate::message::AnyMessage;
use crate::message::Message;
use crate::options::Options;
use crate::state::State;
use crate::state::States;
use crate::stats::BusStats;
use crate::stats::CloseReport;
use crate::topic::Topic;
use crate::topics::state::{Refused, Wait};
use crate::util::deadline::after as deadline_after;

/// A handle to an event bus.
///
/// `Bus` is a cheap handle: clone it to publish from many threads; any clone may close the bus,
/// and dropping the last clone closes it (waiting, as [`close`](Bus::close) does, unless an
/// earlier [`close_timeout`](Bus::close_timeout) ran out). The `&Bus` a handler receives, and
/// its clones, do not keep the bus open; but a clone of the application's `Bus` captured by
/// a [`subscribe`](Bus::subscribe) closure does, until `close` is called explicitly.
///
/// # Examples
///
/// ```
/// use eventbus::{Bus, Message, Options, Topic};
///
/// #[derive(Topic)]
/// struct OrderPlaced { id: u64 }
///
/// let bus = Bus::builder().build();
/// let (tx, rx) = std::sync::mpsc::channel();
/// bus.subscribe::<OrderPlaced>(Options::default(), move |m: &Message<OrderPlaced>| {
///     tx.send(m.id).unwrap();
/// });
///
/// let publisher = bus.clone();
/// std::thread::spawn(move || publisher.publish(OrderPlaced { id: 41 }).unwrap())
///     .join()
///     .unwrap();
/// bus.close();
/// assert_eq!(rx.try_iter().collect::<Vec<_>>(), [41]);
/// ```
#[derive(Clone)]
pub struct Bus {
    pub(crate) engine: Arc<Engine>,
    /// Shared by the application's handles; the last one dropped closes the bus. Handlers'
    /// handles have none, so a worker never keeps its own bus open.
    owner: Option<Arc<Owner>>,
}

struct Owner(Arc<Engine>);

impl Drop for Owner {
    fn drop(&mut self) {
        close(&self.0, None);
    }
}

/// Closes the bus, blocking the calling thread as it must. On a tokio runtime's thread
/// (feature `tokio`) the wait must not stop the bus's own tasks: on a multi-thread runtime
/// the thread hands its other tasks off while it waits (`block_in_place`); on a
/// `current_thread` runtime it cannot wait at all, so the close begins and this returns at
/// once, as from inside a handler.
fn close(engine: &Engine, deadline: Option<Instant>) -> CloseReport {
    #[cfg(feature = "tokio")]
    match crate::bus::asynchronous::on_runtime() {
        Some(tokio::runtime::RuntimeFlavor::CurrentThread) => {
            return engine.close_from(deadline, true)
        }
        Some(_) => return tokio::task::block_in_place(|| engine.close(deadline)),
        None => {}
    }
    engine.close(deadline)
}

impl Bus {
    /// A bus running every `#[subscriber]` in the program.
    ///
    /// `Bus::new()` starts every `#[subscriber]` linked into the binary, those of your
    /// dependencies included, not only your own crate's; to start only your own, use
    /// `Bus::builder().registered_in("my_app").build()`.
    ///
    /// # Panics
    ///
    /// If a subscriber's worker thread cannot be started, or a subscriber takes a
    /// `State<T>` (a bus built this way has none): see [`BusBuilder::try_build`].
    pub fn new() -> Bus {
        Bus::builder().registered().build()
    }

    /// A builder, which starts no registered subscriber unless told to.
    pub fn builder() -> BusBuilder {
        BusBuilder::new()
    }

    pub(crate) fn with_parts(
        dead_letter_capacity: usize,
        states: States,
        hook: Option<Hook>,
    ) -> std::io::Result<Bus> {
        let engine = Engine::new(dead_letter_capacity, states, hook)?;
        Ok(Bus {
            owner: Some(Arc::new(Owner(Arc::clone(&engine)))),
            engine,
        })
    }

    /// Publishes a message to its topic and returns its seq.
    ///
    /// Returns once the message is in every subscriber's mailbox (or dropped by a full one's
    /// policy); with `Block` subscribers it waits for room, one mailbox after another, so
    /// subscribers with room get the message while it waits for the others.
    ///
    /// A forced close ([`close_timeout`](Bus::close_timeout) past its deadline) ends that
    /// wait: the subscribers not reached count the message as dropped, and the publish still
    /// returns its seq (the message was accepted; the close abandoned it, as it abandons
    /// queued ones).
    ///
    /// With feature `tokio`, on a runtime's thread a publish that would wait for room waits
    /// in `block_in_place` (multi-thread runtime), or is refused with `WouldDeadlock`
    /// (`current_thread` runtime, where the bus's tasks could never make room): use
    /// [`publish_async`](Bus::publish_async) there.
    ///
    /// # Errors
    ///
    /// [`PublishError::Closed`], with the message, once the bus is closing; handlers of this
    /// bus may still publish while it drains.
    ///
    /// [`PublishError::WouldDeadlock`], with the message, when a handler publishes into a
    /// full `Block` mailbox whose worker is waiting, directly or through other handlers'
    /// publishes, for this handler's own subscription: its own full mailbox, or a cycle such
    /// as A → B → A. Waiting there could never end, so nothing is published.
    #[inline]
    pub fn publish<T: Topic>(&self, message: T) -> Result<u64, PublishError<T>> {
        // Whether this thread runs a runtime matters only where the publish would wait: it
        // is asked only then.
        #[cfg(feature = "tokio")]
        let message = match self.engine.publish_at_once(message) {
            Ok(seq) => return Ok(seq),
            Err(message) => match crate::bus::asynchronous::on_runtime() {
                Some(flavor) => return self.publish_on_runtime(message, flavor),
                None => message,
            },
        };
        self.engine
            .publish(message, Wait::Forever)
            .map_err(publish_error)
    }

    /// `publish` on a tokio runtime's thread: it must not stop the bus's own tasks by
    /// blocking the thread. Without a wait it publishes as anywhere; where it would have to
    /// wait, on a multi-thread runtime it hands the thread's other tasks off while it waits
    /// (`block_in_place`), and on a `current_thread` runtime it refuses with
    /// `WouldDeadlock`, since the task that would make room could never run.
    #[cfg(feature = "tokio")]
    fn publish_on_runtime<T: Topic>(
        &self,
        message: T,
        flavor: tokio::runtime::RuntimeFlavor,
    ) -> Result<u64, PublishError<T>> {
        let message = match self.engine.publish(message, Wait::Never) {
            Ok(seq) => return Ok(seq),
            Err((message, Refused::Full)) => message,
            Err(refused) => return Err(publish_error(refused)),
        };
        if flavor == tokio::runtime::RuntimeFlavor::CurrentThread {
            return Err(PublishError::WouldDeadlock(message));
        }
        tokio::task::block_in_place(|| {
            self.engine
                .publish(message, Wait::Forever)
                .map_err(publish_error)
        })
    }

    /// Publishes a message only if that needs no wait: every `Block` subscriber has room
    /// now, and no other publisher of the topic is waiting for room. All or nothing: a
    /// refused message is not numbered and comes back.
    ///
    /// # Errors
    ///
    /// [`TryPublishError::Full`] where publishing would wait; [`TryPublishError::Closed`] as
    /// for `publish`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eventbus::{Bus, Message, Options, Topic, TryPublishError};
    ///
    /// #[derive(Topic, Debug, PartialEq)]
    /// struct Job(u32);
    ///
    /// let bus = Bus::builder().build();
    /// let (hold, wait) = std::sync::mpsc::channel::<()>();
    /// let (started, busy) = std::sync::mpsc::channel();
    /// bus.subscribe::<Job>(Options::default().capacity(1), move |m: &Message<Job>| {
    ///     if m.0 == 0 {
    ///         started.send(()).unwrap();
    ///         let _ = wait.recv();
    ///     }
    /// });
    /// bus.publish(Job(0)).unwrap();
    /// busy.recv().unwrap(); // the handler holds Job(0)
    /// bus.publish(Job(1)).unwrap(); // the mailbox of one is full
    /// assert_eq!(bus.try_publish(Job(2)), Err(TryPublishError::Full(Job(2))));
    /// drop(hold);
    /// bus.close();
    /// assert_eq!(bus.stats().topics[0].published, 2);
    /// ```
    pub fn try_publish<T: Topic>(&self, message: T) -> Result<u64, TryPublishError<T>> {
        self.engine
            .publish(message, Wait::Never)
            .map_err(|(message, refused)| match refused {
                Refused::Closed => TryPublishError::Closed(message),
                Refused::Rejected(rejection) => TryPublishError::Rejected { message, rejection },
                Refused::Full | Refused::Timeout | Refused::WouldDeadlock => {
                    TryPublishError::Full(message)
                }
            })
    }

    /// Publishes like [`publish`](Bus::publish), waiting at most `timeout` in all: for the
    /// topic's turn (behind other publishers, even one that is itself waiting for room) and
    /// for room in every `Block` subscriber's mailbox. All or nothing: the message goes to
    /// the subscribers only once every `Block` mailbox has room, so a publish that times out
    /// is not numbered and hands the message back.
    ///
    /// # Errors
    ///
    /// [`PublishTimeoutError::Timeout`] past the deadline; `Closed` and `WouldDeadlock` as
    /// for `publish` (and `Closed` if a forced close comes while it waits). Each hands the
    /// message back.
    pub fn publish_timeout<T: Topic>(
        &self,
        message: T,
        timeout: Duration,
    ) -> Result<u64, PublishTimeoutError<T>> {
        let wait = Wait::Until(deadline_after(timeout));
        self.engine.publish(message, wait).map_err(timeout_error)
    }

    /// Starts a subscription of `T` with a handler of its own.
    ///
    /// The handler is `FnMut(&Message<T>) -> R` where `R` is `()` or `Result<(), E>` with
    /// `E: Display`; name the message type on the closure's parameter.
    ///
    /// With options that make a consumer group ([`Options::workers`]), the group's workers
    /// take turns at this one `FnMut` handler (each message still goes to one worker, and
    /// one key's messages stay in order); for workers that run at once, use
    /// [`subscribe_group`](Bus::subscribe_group) with an `Fn + Send + Sync` handler.
    ///
    /// # Panics
    ///
    /// If the options are refused (a capacity of 0 or above [`Options::MAX_CAPACITY`]), the
    /// bus is closed, or the worker thread cannot start: see
    /// [`try_subscribe`](Bus::try_subscribe).
    ///
    /// # Examples
    ///
    /// ```
    /// use eventbus::{Bus, Message, Options, Overflow, Topic};
    ///
    /// #[derive(Topic)]
    /// struct Price(f64);
    ///
    /// let bus = Bus::builder().build();
    /// let ticker = bus.subscribe::<Price>(
    ///     Options::default().capacity(1).overflow(Overflow::DropOldest).name("ticker"),
    ///     |m: &Message<Price>| println!("{}", m.0),
    /// );
    /// bus.publish(Price(1.5)).unwrap();
    /// ticker.unsubscribe();
    /// ```
    ///
    /// ```should_panic
    /// # use eventbus::{Bus, Message, Options, Topic};
    /// # #[derive(Topic)] struct Price(f64);
    /// let bus = Bus::builder().build();
    /// bus.subscribe::<Price>(Options::default().capacity(0), |_: &Message<Price>| {});
    /// ```
    pub fn subscribe<T: Topic>(&self, options: Options, handler: impl Handler<T>) -> Subscription {
        self.try_subscribe(options, handler)
            .unwrap_or_else(|error| panic!("{error}"))
    }

    /// Starts a subscription like [`subscribe`](Bus::subscribe), saying why it cannot.
    ///
    /// # Errors
    ///
    /// [`SubscribeError`]: a refused capacity, a closed bus, or a worker that could not start.
    pub fn try_subscribe<T: Topic>(
        &self,
        options: Options,
        mut handler: impl Handler<T>,
    ) -> Result<Subscription, SubscribeError> {
        crate::engine::check_retry_if::<T>(&self.engine, &options, handler.error_type())?;
        let core = self
            .engine
            .subscribe(options, move |message: &Message<T>| handler.call(message))?;
        Ok(Subscription::new(Arc::clone(&self.engine), core))
    }

    /// Starts an inline subscriber of `T`: `handler` runs on the publisher's thread, inside
    /// every publish of `T` (`publish`, `try_publish`, `publish_timeout`, `publish_async`),
    /// after the message is numbered and before any mailbox, log or observer gets it. The
    /// handler is `FnMut(&Message<T>) -> R` where `R` is `()` or `Result<(), E>` with
    /// `E: Display`, as for [`subscribe`](Bus::subscribe).
    ///
    /// It is the synchronous bus inside the application: validation, invariants, an outbox
    /// row written in the caller's database transaction. An `Err` or a panic **rejects the
    /// publish whole**: no one gets the message, its seq is not used (the next accepted
    /// message takes it), and the publisher gets [`PublishError::Rejected`] (or
    /// [`TryPublishError::Rejected`], [`PublishTimeoutError::Rejected`]) with the message
    /// back and the handler's error (its `source()`). Several inline subscribers of a topic
    /// run in the order they subscribed; the first refusal stops the rest. The subscription's
    /// stats count `received`, `delivered` and `failed`.
    ///
    /// The handler sees the topic's one order: while it runs, the topic's other publishers
    /// wait (and with a log, its readers keep reading). It may publish to other topics (a
    /// synchronous cascade); a publish to its own topic, or to one whose inline handlers its
    /// thread is running further up the cascade, would wait for itself and is refused with
    /// `WouldDeadlock`. A handler that keeps a clone of a message it refuses makes the publish
    /// panic: that message cannot be handed back.
    ///
    /// An inline subscriber has no mailbox, worker, retries or start: options that set them
    /// are refused ([`SubscribeError::Inline`]). A filter is asked first, as for any
    /// subscriber. Which to pick: an inline subscriber when the publisher must know the
    /// outcome (and can wait for it); a mailbox subscriber (the default) when it must not.
    ///
    /// # Panics
    ///
    /// If the options are refused or the bus is closed: see
    /// [`try_subscribe_inline`](Bus::try_subscribe_inline).
    ///
    /// # Examples
    ///
    /// ```
    /// use eventbus::{Bus, Message, Options, PublishError, Topic};
    ///
    /// #[derive(Topic, Debug, PartialEq)]
    /// struct Transfer { cents: i64 }
    ///
    /// let bus = Bus::builder().build();
    /// bus.subscribe_inline::<Transfer>(
    ///     Options::default().name("limits"),
    ///     |m: &Message<Transfer>| -> Result<(), String> {
    ///         if m.cents > 10_000 {
    ///             return Err(format!("{} cents is over the limit", m.cents));
    ///         }
    ///         Ok(())
    ///     },
    /// );
    /// assert_eq!(bus.publish(Transfer { cents: 500 }), Ok(0));
    /// let refused = bus.publish(Transfer { cents: 50_000 }).unwrap_err();
    /// assert!(refused.to_string().contains("50000 cents is over the limit"));
    /// assert!(matches!(refused, PublishError::Rejected { .. }));
    /// assert_eq!(refused.into_inner(), Transfer { cents: 50_000 });
    /// // The refused message used no seq.
    /// assert_eq!(bus.publish(Transfer { cents: 700 }), Ok(1));
    /// ```
    pub fn subscribe_inline<T: Topic>(
        &self,
        options: Options,
        handler: impl Handler<T>,
    ) -> Subscription {
        self.try_subscribe_inline(options, handler)
            .unwrap_or_else(|error| panic!("{error}"))
    }

    /// Starts an inline subscriber like [`subscribe_inline`](Bus::subscribe_inline), saying
    /// why it cannot.
    ///
    /// # Errors
    ///
    /// [`SubscribeError::Inline`] for `workers`, `key`, a capacity or overflow policy,
    /// `retries` or a start; [`SubscribeError::Filter`] for a filter of another topic;
    /// [`SubscribeError::Closed`] once the bus is closing.
    pub fn try_subscribe_inline<T: Topic>(
        &self,
        options: Options,
        mut handler: impl Handler<T>,
    ) -> Result<Subscription, SubscribeError> {
        let handler = Box::new(move |message: &Message<T>| handler.call(message));
        let core = self.engine.subscribe_inline(options, handler)?;
        Ok(Subscription::new(Arc::clone(&self.engine), core))
    }

    /// Starts a registered `#[subscriber(inline)]`, whose handler also gets the bus.
    pub(crate) fn subscribe_registered_inline<T, H>(
        &self,
        options: Options,
        handler: H,
    ) -> Result<Subscription, SubscribeError>
    where
        T: Topic,
        H: Fn(&Message<T>, &Bus) -> Result<(), Failure> + Send + Sync + 'static,
    {
        let bus = self.worker_handle();
        let handler = Box::new(move |message: &Message<T>| handler(message, &bus));
        let core = self.engine.subscribe_inline(options, handler)?;
        Ok(Subscription::new(Arc::clone(&self.engine), core))
    }

    /// Starts a consumer group of `T` ([`Options::workers`], [`Options::key`]) whose
    /// workers run `handler` at once, each on its own thread: an
    /// `Fn(&Message<T>) -> R + Send + Sync` where `R` is `()` or `Result<(), E>` with
    /// `E: Display`. With options that ask for no group, it is a subscription like
    /// [`subscribe`](Bus::subscribe)'s.
    ///
    /// # Panics
    ///
    /// If the options are refused (see [`try_subscribe_group`](Bus::try_subscribe_group)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    /// use eventbus::{Bus, Message, Options, Topic};
    ///
    /// #[derive(Topic)]
    /// struct Resize { image: u64 }
    ///
    /// let bus = Bus::builder().build();
    /// let done = Arc::new(AtomicU64::new(0));
    /// let counted = Arc::clone(&done);
    /// // No key: the four workers share one mailbox, in no promised order.
    /// let resizers = bus.subscribe_group::<Resize>(
    ///     Options::default().workers(4).name("resize"),
    ///     move |_: &Message<Resize>| {
    ///         counted.fetch_add(1, Ordering::Relaxed);
    ///     },
    /// );
    /// for image in 0..40 {
    ///     bus.publish(Resize { image }).unwrap();
    /// }
    /// let stats = resizers.unsubscribe();
    /// assert_eq!(done.load(Ordering::Relaxed), 40);
    /// assert_eq!((stats.received, stats.delivered, stats.workers.len()), (40, 40, 4));
    /// ```
    ///
    /// On a log topic, a group started late shares the replay: without a key its workers
    /// share one position in the log, each taking the next message (history included).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    /// use eventbus::{Bus, Message, Options, Start, Topic};
    ///
    /// #[derive(Topic)]
    /// #[topic(retain = 100)]
    /// struct Upload { file: u64 }
    ///
    /// let bus = Bus::builder().build();
    /// for file in 0..30 {
    ///     bus.publish(Upload { file }).unwrap();
    /// }
    /// let done = Arc::new(AtomicU64::new(0));
    /// let counted = Arc::clone(&done);
    /// let scanners = bus.subscribe_group::<Upload>(
    ///     Options::default().workers(3).start(Start::Earliest),
    ///     move |_: &Message<Upload>| {
    ///         counted.fetch_add(1, Ordering::Relaxed);
    ///     },
    /// );
    /// for file in 30..40 {
    ///     bus.publish(Upload { file }).unwrap();
    /// }
    /// let stats = scanners.unsubscribe();
    /// assert_eq!(done.load(Ordering::Relaxed), 40);
    /// assert_eq!((stats.received, stats.delivered), (40, 40));
    /// ```
    pub fn subscribe_group<T: Topic>(
        &self,
        options: Options,
        handler: impl GroupHandler<T>,
    ) -> Subscription {
        self.try_subscribe_group(options, handler)
            .unwrap_or_else(|error| panic!("{error}"))
    }

    /// Starts a consumer group like [`subscribe_group`](Bus::subscribe_group), saying why it
    /// cannot.
    ///
    /// # Errors
    ///
    /// [`SubscribeError`]: as [`try_subscribe`](Bus::try_subscribe), and
    /// [`SubscribeError::Workers`] (0 or more than [`Options::MAX_WORKERS`]),
    /// [`SubscribeError::Key`] (a key for another topic), [`SubscribeError::Group`]
    /// (`DropOldest` on a keyed group on a log topic, or a key with one worker).
    pub fn try_subscribe_group<T: Topic>(
        &self,
        options: Options,
        handler: impl GroupHandler<T>,
    ) -> Result<Subscription, SubscribeError> {
        crate::engine::check_retry_if::<T>(&self.engine, &options, handler.error_type())?;
        let handler = Arc::new(move |message: &Message<T>| handler.call(message));
        let core = self.engine.subscribe_shared(options, handler)?;
        Ok(Subscription::new(Arc::clone(&self.engine), core))
    }

    /// Starts an observer: a subscriber of every topic whose name matches `pattern`, those
    /// made later included, whose handler gets each message as an [`AnyMessage`].
    ///
    /// A pattern is a topic name split at `.`: `*` matches one segment, `>` one or more
    /// (last only), anything else that segment: `"orders.*"` matches `orders.placed`, not
    /// `orders.placed.eu`; `"payments.>"` matches both `payments.refunded` and
    /// `payments.card.declined`; `"orders.placed"` that topic only. A segment that holds a
    /// `<` is a name, its `>` included: a generic topic's name (`"Gen<u8>"`,
    /// `"jobs.Envelope<u64>"`) is observed as written.
    ///
    /// An observer is a subscriber in every other way: its own bounded mailbox, worker,
    /// overflow policy, retries, dead letters and stats (its stats' `topic` is the pattern).
    /// It sees each topic's messages in that topic's order; messages of different topics in
    /// the order they reached it. A topic made after the observer is observed from its first
    /// message; one made before, from the next message published after `observe` returns.
    /// A `Block` observer that is full holds up the publishers of every topic it observes.
    ///
    /// # Errors
    ///
    /// [`SubscribeError::Pattern`] for a malformed pattern (empty, an empty segment as in
    /// `orders..x`, `>` not last); [`SubscribeError::Group`] for `workers`;
    /// [`SubscribeError::NoLog`] for a start other than now; [`SubscribeError::RetryIf`] for
    /// a `retry_if` of another type than the handler's error; otherwise as
    /// [`try_subscribe`](Bus::try_subscribe). A filter on an observer takes `&AnyMessage`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eventbus::{AnyMessage, Bus, Options, Topic};
    ///
    /// #[derive(Topic, Debug)]
    /// #[topic(name = "payments.card.declined")]
    /// struct Declined { order: u64 }
    ///
    /// let bus = Bus::builder().build();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let watch = bus
    ///     .observe("payments.>", Options::default(), move |m: &AnyMessage| {
    ///         tx.send(format!("{} #{}: {:?}", m.topic(), m.seq(), m)).unwrap()
    ///     })
    ///     .unwrap();
    /// bus.publish(Declined { order: 9 }).unwrap(); // its topic is made now, and observed
    /// watch.unsubscribe();
    /// assert_eq!(rx.recv().unwrap(), "payments.card.declined #0: Declined { order: 9 }");
    /// assert!(bus.observe("orders..x", Options::default(), |_: &AnyMessage| {}).is_err());
    /// ```
    pub fn observe<F, R>(
        &self,
        pattern: &str,
        options: Options,
        mut handler: F,
    ) -> Result<Subscription, SubscribeError>
    where
        F: FnMut(&AnyMessage) -> R + Send + 'static,
        R: HandlerResult,
    {
        self.engine
            .check_observer_retry_if(pattern, &options, R::error_type())?;
        let core =
            self.engine
                .observe(pattern, options, move |message: &Message<AnyMessage>| {
                    handler(message.payload()).into_result()
                })?;
        Ok(Subscription::new(Arc::clone(&self.engine), core))
    }

    /// Starts a registered observer, whose handler also gets a handle to the bus.
    pub(crate) fn observe_registered<H>(
        &self,
        pattern: &str,
        options: Options,
        handler: H,
    ) -> Result<Subscription, SubscribeError>
    where
        H: Fn(&AnyMessage, &Bus) -> Result<(), Failure> + Send + 'static,
    {
        let bus = self.worker_handle();
        let core =
            self.engine
                .observe(pattern, options, move |message: &Message<AnyMessage>| {
                    handler(message.payload(), &bus)
                })?;
        Ok(Subscription::new(Arc::clone(&self.engine), core))
    }

    /// Starts a registered subscriber, whose handler also gets a handle to the bus.
    pub(crate) fn subscribe_registered<T, H>(
        &self,
        options: Options,
        handler: H,
    ) -> Result<Subscription, SubscribeError>
    where
        T: Topic,
        H: Fn(&Message<T>, &Bus) -> Result<(), Failure> + Send + Sync + 'static,
    {
        let bus = self.worker_handle();
        let handler = Arc::new(move |message: &Message<T>| handler(message, &bus));
        let core = self.engine.subscribe_shared(options, handler)?;
        Ok(Subscription::new(Arc::clone(&self.engine), core))
    }

    /// Closes the bus: refuses new publishes from outside it, delivers everything already
    /// accepted (and what handlers publish meanwhile), and returns when every mailbox is empty
    /// and every worker has stopped, unsubscribed ones included.
    ///
    /// Called from inside one of this bus's handlers, it starts the close and returns at once,
    /// since it cannot wait for its own handler. After a `close_timeout` that ran out, it
    /// returns at once too. With feature `tokio`, on a `current_thread` runtime's thread it
    /// starts the close and returns at once (waiting would stop the bus's tasks: use
    /// `close_async`); on a multi-thread runtime's thread it waits in `block_in_place`.
    pub fn close(&self) {
        close(&self.engine, None);
    }

    /// Closes like [`close`](Bus::close), returning within `timeout` whatever handlers,
    /// message `Drop`s and the `on_dead_letter` hook do (plus the time to stop the bus and
    /// read the report: a lock per subscription and topic, no waiting).
    ///
    /// If the deadline passes, the bus stops where it is: workers take no more messages,
    /// retries end (their messages become dead letters), publishers waiting for room give
    /// up. The report lists every subscription with what it still held at the deadline, and
    /// whether the hook was still running. What was left finishes on its own threads: a
    /// handler still running, the hook; nothing waits for them, not even dropping the last
    /// `Bus`.
    ///
    /// Nothing queued is lost: before this returns, each message still in a mailbox becomes
    /// a dead letter of its subscription, with its payload, 0 attempts and an error saying
    /// the close gave up on it, counted as `dead_lettered` (not `dropped`). So a service can
    /// keep them ([`take_dead_letters`](Bus::take_dead_letters), the dead-letter hook while
    /// it runs) and publish them again after a restart, and the stats read right after this
    /// returns are the ones read later (but for a handler still running, which finishes on
    /// its own). A log topic's subscription is different: its unread messages are the
    /// topic's history, not handed to it yet, so they stay in the log (the subscription's
    /// `queued`) and are neither dead letters nor drops; they go with the bus (see the
    /// crate guide's "Durability"). A publisher still waiting for room when the bus stops
    /// gets its seq back, and its message counts as dropped for that subscription.
    ///
    /// ```
    /// use std::time::Duration;
    /// use eventbus::{Bus, Message, Options, Topic};
    ///
    /// #[derive(Topic, Debug)]
    /// struct Order(u32);
    ///
    /// let bus = Bus::builder().build();
    /// let (started_tx, started) = std::sync::mpsc::channel();
    /// let (release, released) = std::sync::mpsc::channel::<()>();
    /// bus.subscribe::<Order>(Options::default(), move |m: &Message<Order>| {
    ///     if m.0 == 0 {
    ///         started_tx.send(()).unwrap();
    ///         released.recv().ok(); // stuck until released
    ///     }
    /// });
    /// for i in 0..3 {
    ///     bus.publish(Order(i)).unwrap();
    /// }
    /// started.recv().unwrap();
    /// let report = bus.close_timeout(Duration::from_millis(10));
    /// assert!(!report.completed);
    /// let letters = bus.take_dead_letters();
    /// let kept: Vec<u32> = letters.iter().map(|l| l.payload::<Order>().unwrap().0).collect();
    /// assert_eq!(kept, [1, 2]); // to publish again after a restart
    /// drop(release);
    /// ```
    pub fn close_timeout(&self, timeout: Duration) -> CloseReport {
        close(&self.engine, Instant::now().checked_add(timeout))
    }

    /// Waits until the bus is idle: every message accepted before and during the wait has
    /// been handled by every subscription (delivered, dead-lettered or dropped), no handler
    /// is running, no retry is pending, every log subscription has read to the end, and no
    /// publish is under way. What tests need between a publish and an assert, with no sleep:
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use eventbus::{Bus, Message, Options, Topic};
    ///
    /// #[derive(Topic, Debug)]
    /// struct OrderPlaced { id: u64 }
    ///
    /// let bus = Bus::builder().build();
    /// let saved = Arc::new(Mutex::new(Vec::new()));
    /// let rows = Arc::clone(&saved);
    /// bus.subscribe::<OrderPlaced>(Options::default(), move |m: &Message<OrderPlaced>| {
    ///     rows.lock().unwrap().push(m.id);
    /// });
    /// bus.publish(OrderPlaced { id: 7 }).unwrap();
    /// bus.wait_idle();
    /// assert_eq!(*saved.lock().unwrap(), [7]);
    /// # bus.close();
    /// ```
    ///
    /// It waits as long as handlers keep working: a handler that never returns, or one that
    /// publishes forever, keeps it waiting (use [`wait_idle_timeout`](Bus::wait_idle_timeout)).
    /// A stream counts as idle once its consumer has taken everything. It looks every few
    /// milliseconds (1, growing to 16), so it returns up to that long after the last
    /// delivery.
    ///
    /// # Panics
    ///
    /// Called inside one of this bus's handlers (it would wait for itself), or, with
    /// feature `tokio`, on a `current_thread` runtime's thread, where waiting would stop the
    /// bus's own tasks: use `wait_idle_async` there.
    pub fn wait_idle(&self) {
        self.wait_idle_until(None);
    }

    /// Waits like [`wait_idle`](Bus::wait_idle), at most `timeout`; whether the bus became
    /// idle (false when it gave up).
    ///
    /// # Panics
    ///
    /// As [`wait_idle`](Bus::wait_idle).
    pub fn wait_idle_timeout(&self, timeout: Duration) -> bool {
        self.wait_idle_until(Instant::now().checked_add(timeout))
    }

    fn wait_idle_until(&self, deadline: Option<Instant>) -> bool {
        self.refuse_to_wait_on_itself("wait_idle");
        let lifecycle = &self.engine.lifecycle;
        #[cfg(feature = "tokio")]
        match crate::bus::asynchronous::on_runtime() {
            Some(tokio::runtime::RuntimeFlavor::CurrentThread) => panic!(
                "`Bus::wait_idle` on a tokio `current_thread` runtime's thread would stop the \
                 bus's own tasks: use `wait_idle_async`"
            ),
            Some(_) => return tokio::task::block_in_place(|| lifecycle.wait_idle(deadline)),
            None => {}
        }
        lifecycle.wait_idle(deadline)
    }

    /// Panics if the caller is one of this bus's handlers, which a wait for idle would wait
    /// for: a worker's, or an inline one's (which holds its topic's order lock).
    pub(crate) fn refuse_to_wait_on_itself(&self, what: &str) {
        if crate::worker::current(self.engine.id).is_some() || crate::delivery::inline::inside() {
            panic!(
                "`Bus::{what}` inside one of this bus's handlers would wait for itself: a \
                 handler is never idle while it runs"
            );
        }
    }

    /// Whether the bus has stopped accepting publishes from outside its handlers.
    pub fn is_closed(&self) -> bool {
        !self.engine.lifecycle.is_open()
    }

    /// Whether the bus has finished closing: everything accepted was delivered (or, after a
    /// deadline, kept as a dead letter and reported) and every worker has stopped. [`is_closed`] is
    /// true from the moment a close begins; this one only once it is over.
    ///
    /// [`is_closed`]: Bus::is_closed
    ///
    /// # Examples
    ///
    /// ```
    /// let bus = eventbus::Bus::builder().build();
    /// assert!(!bus.is_drained());
    /// bus.close();
    /// assert!(bus.is_closed() && bus.is_drained());
    /// ```
    pub fn is_drained(&self) -> bool {
        self.engine.lifecycle.is_closed()
    }

    /// A snapshot of every topic and subscription.
    pub fn stats(&self) -> BusStats {
        self.engine.stats()
    }

    /// The value of type `T` the bus was built with ([`BusBuilder::state`]), if any.
    pub fn state<T: Send + Sync + 'static>(&self) -> Option<State<T>> {
        self.engine.states.get::<T>()
    }

    /// The dead letters held now, oldest first.
    pub fn dead_letters(&self) -> Vec<DeadLetter> {
        self.engine.dead_letters.snapshot()
    }

    /// A dead letter's message as text, for the dashboard: its JSON when its topic's type
    /// implements `serde::Serialize` (feature `serde`), else its `Debug`. `None` for a letter
    /// whose message no topic of this bus carries.
    #[cfg(feature = "dashboard")]
    pub(crate) fn show_dead_letter(&self, letter: &DeadLetter) -> Option<String> {
        self.engine.show_dead_letter(letter)
    }

    /// Takes the dead letters out of the store, oldest first (to republish them, say).
    pub fn take_dead_letters(&self) -> Vec<DeadLetter> {
        self.engine.dead_letters.take()
    }

    /// Hands a dead letter's message back to the subscriber that gave up on it (that one
    /// alone: the topic's other subscribers had it already), and takes the letter out of the
    /// store: a retry from the dead set, as Sidekiq's. The message is the same one, with its
    /// seq: it is not published again, so the topic's `published` does not move, its other
    /// subscribers do not see it, and its subscriber may see it after later messages (the
    /// seq tells). That subscription counts it `received` once more, and it ends as any
    /// message does: delivered, or a dead letter again. Use it once the cause is fixed.
    ///
    /// It never waits, drops or evicts: for a full mailbox (whatever its overflow policy) it
    /// says `Full`.
    ///
    /// # Errors
    ///
    /// [`RedeliverError`]: the letter is no longer in the store (`NotFound`), its subscriber
    /// has been unsubscribed, its mailbox is full, its topic keeps a log (whose subscriptions
    /// cannot be sent a message alone), its filter rejects the message now (`Rejected`), or
    /// the bus is closed. But for `NotFound`, the letter
    /// stays in the store, in its place.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// use eventbus::{Bus, Message, Options, Topic};
    ///
    /// #[derive(Topic)]
    /// struct Charge(u32);
    ///
    /// let bus = Bus::builder().build();
    /// let fixed = Arc::new(AtomicBool::new(false));
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let billing = {
    ///     let fixed = Arc::clone(&fixed);
    ///     bus.subscribe::<Charge>(Options::default().name("billing"), move |m: &Message<Charge>| {
    ///         if !fixed.load(Ordering::SeqCst) {
    ///             return Err("card service down");
    ///         }
    ///         tx.send((m.seq(), m.0)).unwrap();
    ///         Ok(())
    ///     })
    /// };
    /// bus.publish(Charge(30)).unwrap();
    /// while bus.dead_letters().is_empty() {
    ///     std::thread::yield_now();
    /// }
    ///
    /// fixed.store(true, Ordering::SeqCst); // the card service is back
    /// let letter = bus.dead_letters().remove(0);
    /// bus.redeliver(&letter).unwrap();
    /// assert_eq!(rx.recv().unwrap(), (0, 30)); // the same message, seq 0
    /// assert!(bus.dead_letters().is_empty());
    /// let stats = billing.unsubscribe();
    /// assert_eq!((stats.received, stats.dead_lettered, stats.delivered), (2, 1, 1));
    /// ```
    pub fn redeliver(&self, letter: &DeadLetter) -> Result<(), RedeliverError> {
        self.engine.redeliver(letter)
    }

    /// Keeps a dead letter made outside a worker (an integration's: the NATS bridge's export
    /// that cannot send a message) with the bus's own, hook included.
    #[cfg(feature = "nats")]
    pub(crate) fn record_dead_letter(&self, letter: DeadLetter) {
        self.engine.record_dead_letter(letter);
    }

    /// Makes [`stats`](Bus::stats) show a NATS bridge's stats, asked of `look` for as long
    /// as the bridge keeps it alive.
    #[cfg(feature = "nats")]
    pub(crate) fn add_bridge(&self, look: std::sync::Weak<crate::stats::bridge::BridgeLook>) {
        self.engine.add_bridge(look);
    }

    /// A handle for a worker: it does not keep the bus open.
    pub(crate) fn worker_handle(&self) -> Bus {
        Bus {
            engine: Arc::clone(&self.engine),
            owner: None,
        }
    }
}

impl Default for Bus {
    /// The same as [`Bus::new`].
    fn default() -> Self {
        Bus::new()
    }
}

impl fmt::Debug for Bus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bus")
            .field("id", &self.engine.id)
            .field("open", &self.engine.lifecycle.is_open())
            .field("keeps_open", &self.owner.is_some())
            .finish()
    }
}

/// What a publish's refusal is to `publish` and `publish_async`.
pub(crate) fn publish_error<T>((message, refused): (T, Refused)) -> PublishError<T> {
    match refused {
        Refused::WouldDeadlock => PublishError::WouldDeadlock(message),
        Refused::Rejected(rejection) => PublishError::Rejected { message, rejection },
        Refused::Closed | Refused::Timeout | Refused::Full => PublishError::Closed(message),
    }
}

/// What a publish's refusal is to `publish_timeout` and `publish_timeout_async`.
pub(crate) fn timeout_error<T>((message, refused): (T, Refused)) -> PublishTimeoutError<T> {
    match refused {
        Refused::Closed => PublishTimeoutError::Closed(message),
        Refused::WouldDeadlock => PublishTimeoutError::WouldDeadlock(message),
        Refused::Rejected(rejection) => PublishTimeoutError::Rejected { message, rejection },
        Refused::Timeout | Refused::Full => PublishTimeoutError::Timeout(message),
    }
}
