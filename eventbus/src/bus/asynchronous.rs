//! The facade's async half (feature `tokio`): async subscribers and observers as tokio
//! tasks, `publish_async`, `close_async`, and a subscription as a [`Stream`].
//!
//! Nothing here holds a lock across an `.await`: a task waits for its mailbox, for room, or
//! for its topic's turn by listening, looking again, then sleeping (`wake.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_core::Stream;

use crate::bus::subscription::Subscription;
use crate::bus::Bus;
use crate::delivery::core::SubscriptionCore;
use crate::engine::Engine;
use crate::error::SubscribeError;
use crate::error::{PublishError, PublishTimeoutError};
use crate::handler::HandlerResult;
use crate::message::{AnyMessage, Message};
use crate::options::Options;
use crate::stats::CloseReport;
use crate::stats::Counters;
use crate::stats::SubscriptionStats;
use crate::topic::Topic;
use crate::worker::Source;

impl Bus {
    /// Starts an async subscription of `T`: its worker is one tokio task, which runs the
    /// handler on one message at a time, in order. The handler takes the message by value
    /// (its own share of it, so its future may hold it across `.await`s) and returns a
    /// `Send` future whose output is `()` or `Result<(), E: Display>`. An `Err` or a panic
    /// (while making the future or polling it) is a failed attempt; retries wait (with the
    /// bus's own clock, not the runtime's timer); dead letters as for any subscriber.
    ///
    /// # Panics
    ///
    /// As [`try_subscribe_async`](Bus::try_subscribe_async) would fail.
    ///
    /// # Examples
    ///
    /// ```
    /// use eventbus::{Bus, Message, Options, Topic};
    ///
    /// #[derive(Topic)]
    /// struct OrderPlaced(u64);
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let bus = Bus::builder().build(); // takes the current runtime
    /// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    /// bus.subscribe_async::<OrderPlaced, _, _, _>(Options::default(), move |m: Message<OrderPlaced>| {
    ///     let tx = tx.clone();
    ///     async move {
    ///         tokio::task::yield_now().await;
    ///         tx.send(m.0).unwrap();
    ///     }
    /// });
    /// bus.publish_async(OrderPlaced(7)).await.unwrap();
    /// bus.close_async().await;
    /// assert_eq!(rx.recv().await, Some(7));
    /// # });
    /// ```
    pub fn subscribe_async<T, F, A, R>(&self, options: Options, handler: F) -> Subscription
    where
        T: Topic,
        F: FnMut(Message<T>) -> A + Send + 'static,
        A: Future<Output = R> + Send + 'static,
        R: HandlerResult,
    {
        self.try_subscribe_async(options, handler)
            .unwrap_or_else(|error| panic!("{error}"))
    }

    /// Starts an async subscription like [`subscribe_async`](Bus::subscribe_async), saying
    /// why it cannot.
    ///
    /// # Errors
    ///
    /// [`SubscribeError::NoRuntime`] when the bus has no tokio runtime; otherwise as
    /// [`try_subscribe`](Bus::try_subscribe).
    pub fn try_subscribe_async<T, F, A, R>(
        &self,
        options: Options,
        mut handler: F,
    ) -> Result<Subscription, SubscribeError>
    where
        T: Topic,
        F: FnMut(Message<T>) -> A + Send + 'static,
        A: Future<Output = R> + Send + 'static,
        R: HandlerResult,
    {
        crate::engine::check_retry_if::<T>(&self.engine, &options, R::error_type())?;
        let core = self
            .engine
            .subscribe_task(options, move |message: Message<T>| {
                let attempt = handler(message);
                async move { attempt.await.into_result() }
            })?;
        Ok(Subscription::new(Arc::clone(&self.engine), core))
    }

    /// Starts an async consumer group of `T` ([`Options::workers`], [`Options::key`]): each
    /// worker is a tokio task, and the workers run `handler` at once, so it is an
    /// `Fn(Message<T>) -> impl Future + Send` that is `Send + Sync`, whose output is `()` or
    /// `Result<(), E: Display>`. The promises of [`subscribe_group`](Bus::subscribe_group)
    /// hold: each message goes to one worker; with a key, one key's messages go to one worker,
    /// handled in topic order; each worker has its own mailbox (a key) or they share one (no
    /// key), with its overflow policy, retries and dead letters; stats per worker; a close
    /// drains them. With options that ask for no group, it is a subscription like
    /// [`subscribe_async`](Bus::subscribe_async)'s.
    ///
    /// # Panics
    ///
    /// As [`try_subscribe_group_async`](Bus::try_subscribe_group_async) would fail.
    ///
    /// # Examples
    ///
    /// ```
    /// use eventbus::{Bus, Message, Options, Topic};
    ///
    /// #[derive(Topic)]
    /// struct OrderPlaced { customer: u64, n: u64 }
    ///
    /// fn customer_of(o: &OrderPlaced) -> u64 {
    ///     o.customer
    /// }
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let bus = Bus::builder().build(); // takes the current runtime
    /// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    /// // Four tasks; one customer's orders go to one of them, in the order published.
    /// let reserve = bus.subscribe_group_async::<OrderPlaced, _, _, _>(
    ///     Options::default().workers(4).key(customer_of).name("reserve"),
    ///     move |m: Message<OrderPlaced>| {
    ///         let tx = tx.clone();
    ///         async move {
    ///             tokio::task::yield_now().await; // a call to the stock service
    ///             tx.send((m.customer, m.n)).unwrap();
    ///         }
    ///     },
    /// );
    /// for n in 0..12 {
    ///     bus.publish_async(OrderPlaced { customer: n % 3, n }).await.unwrap();
    /// }
    /// bus.close_async().await;
    /// let mut last = [None; 3];
    /// while let Ok((customer, n)) = rx.try_recv() {
    ///     assert!(last[customer as usize] < Some(n)); // in order, per customer
    ///     last[customer as usize] = Some(n);
    /// }
    /// assert_eq!(reserve.stats().delivered, 12);
    /// assert_eq!(reserve.stats().workers.len(), 4);
    /// # });
    /// ```
    pub fn subscribe_group_async<T, F, A, R>(&self, options: Options, handler: F) -> Subscription
    where
        T: Topic,
        F: Fn(Message<T>) -> A + Send + Sync + 'static,
        A: Future<Output = R> + Send + 'static,
        R: HandlerResult,
    {
        self.try_subscribe_group_async(options, handler)
            .unwrap_or_else(|error| panic!("{error}"))
    }

    /// Starts an async consumer group like
    /// [`subscribe_group_async`](Bus::subscribe_group_async), saying why it cannot.
    ///
    /// # Errors
    ///
    /// [`SubscribeError::NoRuntime`] when the bus has no tokio runtime; otherwise as
    /// [`try_subscribe_group`](Bus::try_subscribe_group).
    pub fn try_subscribe_group_async<T, F, A, R>(
        &self,
        options: Options,
        handler: F,
    ) -> Result<Subscription, SubscribeError>
    where
        T: Topic,
        F: Fn(Message<T>) -> A + Send + Sync + 'static,
        A: Future<Output = R> + Send + 'static,
        R: HandlerResult,
    {
        crate::engine::check_retry_if::<T>(&self.engine, &options, R::error_type())?;
        let core = self
            .engine
            .subscribe_shared_task(options, move |message: Message<T>| {
                let attempt = handler(message);
                async move { attempt.await.into_result() }
            })?;
        Ok(Subscription::new(Arc::clone(&self.engine), core))
    }

    /// Starts an async observer: like [`observe`](Bus::observe), a subscriber of every
    /// topic whose name matches `pattern` (those made later included), whose worker is one
    /// tokio task on the bus's runtime. The handler takes the message by value, an
    /// [`AnyMessage`] (its own share, so its future may hold it across `.await`s), and
    /// returns a `Send` future whose output is `()` or `Result<(), E: Display>`.
    ///
    /// The promises of `observe` hold: each topic's messages in that topic's order, one at
    /// a time; its own bounded mailbox with its overflow policy; an `Err` or a panic is a
    /// failed attempt, retried after its delay, then a dead letter; a close
    /// delivers everything accepted.
    ///
    /// # Errors
    ///
    /// [`SubscribeError::NoRuntime`] when the bus has no tokio runtime; otherwise as
    /// [`observe`](Bus::observe).
    ///
    /// # Examples
    ///
    /// ```
    /// use eventbus::{AnyMessage, Bus, Options, Topic};
    ///
    /// #[derive(Topic, Debug)]
    /// #[topic(name = "orders.placed")]
    /// struct Placed { id: u64 }
    ///
    /// #[derive(Topic, Debug)]
    /// #[topic(name = "orders.shipped")]
    /// struct Shipped { id: u64 }
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let bus = Bus::builder().build(); // takes the current runtime
    /// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    /// bus.observe_async("orders.*", Options::default().name("audit"), move |m: AnyMessage| {
    ///     let tx = tx.clone();
    ///     async move {
    ///         tokio::task::yield_now().await; // a write to the audit log
    ///         tx.send(format!("{} #{}: {:?}", m.topic(), m.seq(), m)).unwrap();
    ///     }
    /// })
    /// .unwrap();
    /// bus.publish_async(Placed { id: 7 }).await.unwrap();
    /// bus.publish_async(Shipped { id: 7 }).await.unwrap();
    /// bus.close_async().await;
    /// assert_eq!(rx.recv().await.unwrap(), "orders.placed #0: Placed { id: 7 }");
    /// assert_eq!(rx.recv().await.unwrap(), "orders.shipped #0: Shipped { id: 7 }");
    /// # });
    /// ```
    pub fn observe_async<F, A, R>(
        &self,
        pattern: &str,
        options: Options,
        mut handler: F,
    ) -> Result<Subscription, SubscribeError>
    where
        F: FnMut(AnyMessage) -> A + Send + 'static,
        A: Future<Output = R> + Send + 'static,
        R: HandlerResult,
    {
        self.engine
            .check_observer_retry_if(pattern, &options, R::error_type())?;
        let core =
            self.engine
                .observe_task(pattern, options, move |message: Message<AnyMessage>| {
                    let attempt = handler(message.payload().share());
                    async move { attempt.await.into_result() }
                })?;
        Ok(Subscription::new(Arc::clone(&self.engine), core))
    }

    /// Starts a registered async observer, whose handler also gets a handle to the bus.
    pub(crate) fn observe_registered_async<H, A>(
        &self,
        pattern: &str,
        options: Options,
        handler: H,
    ) -> Result<Subscription, SubscribeError>
    where
        H: Fn(AnyMessage, Bus) -> A + Send + 'static,
        A: Future<Output = Result<(), crate::handler::Failure>> + Send + 'static,
    {
        let bus = self.worker_handle();
        let core =
            self.engine
                .observe_task(pattern, options, move |message: Message<AnyMessage>| {
                    handler(message.payload().share(), bus.clone())
                })?;
        Ok(Subscription::new(Arc::clone(&self.engine), core))
    }

    /// Starts a registered async subscriber, whose handler also gets a handle to the bus: a
    /// group of tasks if its options ask for one.
    pub(crate) fn subscribe_registered_async<T, F, A>(
        &self,
        options: Options,
        handler: F,
    ) -> Result<Subscription, SubscribeError>
    where
        T: Topic,
        F: Fn(Message<T>, Bus) -> A + Send + Sync + 'static,
        A: Future<Output = Result<(), crate::handler::Failure>> + Send + 'static,
    {
        let bus = self.worker_handle();
        let core = self
            .engine
            .subscribe_shared_task(options, move |message: Message<T>| {
                handler(message, bus.clone())
            })?;
        Ok(Subscription::new(Arc::clone(&self.engine), core))
    }

    /// Publishes like [`publish`](Bus::publish), waiting for the topic's turn and for room
    /// in `Block` mailboxes by awaiting, never by blocking the thread.
    ///
    /// All or nothing: the message goes to the subscribers only once every `Block` mailbox
    /// has room, an observer's too, so publishers of the topic never wait behind a task.
    ///
    /// Like any future it does nothing until polled. A publish that needs no wait (no one
    /// hears the topic, or every `Block` mailbox has room) is done by the first poll, the
    /// same way as a [`publish`](Bus::publish): only a wait for room builds more.
    ///
    /// It awaits on the caller's runtime, which needs no time driver (a runtime built without
    /// `enable_time()` will do): a wait for room looks again every millisecond, woken for
    /// that by one thread of eventbus for all buses (running only while some task waits),
    /// not by the runtime's timer. A full mailbox's subscriber wakes it sooner, once a
    /// quarter of the mailbox is free, so that a fast publisher is woken once for a run of
    /// messages rather than once a message.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropped while it waits, it holds no lock and has published nothing (no
    /// seq taken, no subscriber reached, nothing counted), as a `publish_timeout` that ran
    /// out; the message is dropped with the future.
    ///
    /// # Errors
    ///
    /// As [`publish`](Bus::publish): `Closed` and `WouldDeadlock`, with the message.
    pub fn publish_async<T: Topic>(
        &self,
        message: T,
    ) -> impl Future<Output = Result<u64, PublishError<T>>> + Send + '_ {
        self.engine
            .publish_async(message, (), crate::bus::publish_error)
    }

    /// Publishes like [`publish_async`](Bus::publish_async), giving up after `timeout`: the
    /// async form of [`publish_timeout`](Bus::publish_timeout). It never blocks the thread;
    /// all or nothing, as `publish_async`.
    ///
    /// # Cancel safety
    ///
    /// As `publish_async`'s: dropped while it waits, it has published nothing. Unlike
    /// `tokio::time::timeout` around `publish_async`, which drops the message when it fires,
    /// this hands the message back.
    ///
    /// # Errors
    ///
    /// [`PublishTimeoutError::Timeout`] when the topic's turn or room in every `Block`
    /// mailbox did not come in time, `Closed` and `WouldDeadlock` as
    /// [`publish`](Bus::publish); each with the message, unpublished.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use eventbus::{Bus, Message, Options, PublishTimeoutError, Topic};
    ///
    /// #[derive(Topic, Debug, PartialEq)]
    /// struct Job(u32);
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let bus = Bus::builder().build();
    /// let (hold, wait) = std::sync::mpsc::channel::<()>();
    /// let (started, busy) = std::sync::mpsc::channel();
    /// let wait = std::sync::Mutex::new(wait);
    /// bus.subscribe::<Job>(Options::default().capacity(1), move |m: &Message<Job>| {
    ///     if m.0 == 1 {
    ///         started.send(()).unwrap();
    ///         let _ = wait.lock().unwrap().recv(); // busy until let go
    ///     }
    /// });
    /// bus.publish_async(Job(1)).await.unwrap();
    /// busy.recv().unwrap();
    /// bus.publish_async(Job(2)).await.unwrap(); // fills the mailbox
    /// let late = bus.publish_timeout_async(Job(3), Duration::from_millis(20)).await;
    /// assert_eq!(late, Err(PublishTimeoutError::Timeout(Job(3)))); // handed back
    /// drop(hold);
    /// bus.close_async().await;
    /// # });
    /// ```
    pub fn publish_timeout_async<T: Topic>(
        &self,
        message: T,
        timeout: Duration,
    ) -> impl Future<Output = Result<u64, PublishTimeoutError<T>>> + Send + '_ {
        self.engine
            .publish_async(message, timeout, crate::bus::timeout_error)
    }

    /// A subscription of `T` as a [`Stream`] of its messages: the application pulls them.
    ///
    /// The mailbox is the stream's buffer, and `options`' overflow policy applies to it as
    /// for any subscriber (retries do not: a message is delivered when the stream yields it).
    /// Dropping the stream unsubscribes; what its mailbox still holds counts as dropped. A
    /// close ends it once it has yielded everything accepted.
    ///
    /// # Panics
    ///
    /// As [`try_stream`](Bus::try_stream) would fail.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    /// use std::pin::Pin;
    /// use eventbus::{Bus, Options, Topic};
    /// use futures_core::Stream;
    ///
    /// #[derive(Topic)]
    /// struct Tick(u32);
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let bus = Bus::builder().build();
    /// let mut ticks = bus.stream::<Tick>(Options::default());
    /// bus.publish_async(Tick(1)).await.unwrap();
    /// bus.publish_async(Tick(2)).await.unwrap();
    /// let closer = bus.clone();
    /// tokio::spawn(async move { closer.close_async().await });
    /// let mut seen = Vec::new();
    /// while let Some(m) = poll_fn(|cx| Pin::new(&mut ticks).poll_next(cx)).await {
    ///     seen.push(m.0);
    /// }
    /// assert_eq!(seen, [1, 2]);
    /// # });
    /// ```
    pub fn stream<T: Topic>(&self, options: Options) -> MessageStream<T> {
        self.try_stream(options)
            .unwrap_or_else(|error| panic!("{error}"))
    }

    /// A subscription as a stream, like [`stream`](Bus::stream), saying why it cannot.
    ///
    /// # Errors
    ///
    /// As [`try_subscribe`](Bus::try_subscribe): a refused capacity or a closed bus.
    pub fn try_stream<T: Topic>(
        &self,
        options: Options,
    ) -> Result<MessageStream<T>, SubscribeError> {
        let (core, inbox) = self.engine.subscribe_stream::<T>(options)?;
        Ok(MessageStream {
            engine: Arc::clone(&self.engine),
            core,
            inbox: Some(inbox),
            next: None,
            ended: false,
        })
    }

    /// Waits like [`wait_idle`](Bus::wait_idle), awaiting instead of blocking the thread:
    /// on any runtime, a `current_thread` one included.
    ///
    /// # Panics
    ///
    /// Awaited inside one of this bus's handlers, which it would wait for.
    ///
    /// # Examples
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use eventbus::{Bus, Message, Options, Topic};
    /// use std::sync::{atomic::{AtomicU64, Ordering}, Arc};
    ///
    /// #[derive(Topic, Debug)]
    /// struct Saved(u64);
    ///
    /// let bus = Bus::builder().build(); // takes this runtime
    /// let total = Arc::new(AtomicU64::new(0));
    /// let sum = Arc::clone(&total);
    /// bus.subscribe_async(Options::default(), move |m: Message<Saved>| {
    ///     let sum = Arc::clone(&sum);
    ///     async move {
    ///         tokio::task::yield_now().await;
    ///         sum.fetch_add(m.0, Ordering::SeqCst);
    ///     }
    /// });
    /// for i in 1..=4 {
    ///     bus.publish_async(Saved(i)).await.unwrap();
    /// }
    /// bus.wait_idle_async().await;
    /// assert_eq!(total.load(Ordering::SeqCst), 10);
    /// bus.close_async().await;
    /// # });
    /// ```
    pub async fn wait_idle_async(&self) {
        self.refuse_to_wait_on_itself("wait_idle_async");
        let mut pause = std::time::Duration::from_millis(1);
        while !self.engine.lifecycle.is_idle() {
            crate::util::ticker::Sleep::after(pause).await;
            pause = (pause * 2).min(crate::lifecycle::IDLE_RECHECK);
        }
    }

    /// Closes like [`close`](Bus::close), awaiting instead of blocking the thread.
    pub async fn close_async(&self) {
        self.close_async_within(None).await;
    }

    /// Closes like [`close_timeout`](Bus::close_timeout), awaiting instead of blocking the
    /// thread.
    pub async fn close_timeout_async(&self, timeout: Duration) -> CloseReport {
        self.close_async_within(Instant::now().checked_add(timeout))
            .await
    }

    async fn close_async_within(&self, deadline: Option<Instant>) -> CloseReport {
        // Asked here: the blocking thread that waits is no worker of the bus's.
        let inside = self.engine.inside();
        let engine = Arc::clone(&self.engine);
        let close = move || engine.close_from(deadline, inside);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => match runtime.spawn_blocking(close).await {
                Ok(report) => report,
                Err(error) => std::panic::resume_unwind(error.into_panic()),
            },
            Err(_) => close(),
        }
    }
}

/// Whether the calling thread runs a `current_thread` tokio runtime, where waiting would stop
/// the bus's own tasks; and whether it runs any runtime at all.
pub(crate) fn on_runtime() -> Option<tokio::runtime::RuntimeFlavor> {
    tokio::runtime::Handle::try_current()
        .ok()
        .map(|runtime| runtime.runtime_flavor())
}

/// A subscription as a [`Stream`] of its messages, from [`Bus::stream`].
///
/// Dropping it unsubscribes: what it had received and not yet yielded is let go of and
/// counted as dropped on the subscription (with a `tracing` event for each one it still
/// held in its mailbox), as a forced close counts what it abandons.
pub struct MessageStream<T: Send + Sync + 'static> {
    engine: Arc<Engine>,
    core: Arc<SubscriptionCore>,
    /// The mailbox (or its place in the topic's log), while no `next` holds it.
    inbox: Option<Source<T>>,
    /// The wait for the next message, holding the mailbox.
    next: Option<Pin<Box<Next<T>>>>,
    ended: bool,
}

type Next<T> = dyn Future<Output = (Source<T>, Option<Message<T>>)> + Send;

impl<T: Send + Sync + 'static> MessageStream<T> {
    /// The subscriber's name.
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// What this subscription has done so far.
    pub fn stats(&self) -> SubscriptionStats {
        self.core.stats()
    }
}

// Nothing in it is pinned in place: the wait that borrows the mailbox is boxed.
impl<T: Send + Sync + 'static> Unpin for MessageStream<T> {}

impl<T: Send + Sync + 'static> Stream for MessageStream<T> {
    type Item = Message<T>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Message<T>>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        if this.next.is_none() {
            let Some(mut inbox) = this.inbox.take() else {
                return Poll::Ready(None);
            };
            this.next = Some(Box::pin(async move {
                let message = inbox.next_async().await;
                (inbox, message)
            }));
        }
        let Some(next) = this.next.as_mut() else {
            return Poll::Ready(None);
        };
        let (inbox, message) = match next.as_mut().poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(done) => done,
        };
        this.next = None;
        let lifecycle = &this.engine.lifecycle;
        let counters = &this.core.counters;
        let Some(message) = message else {
            this.inbox = Some(inbox);
            this.ended = true;
            lifecycle.finished(&this.core);
            return Poll::Ready(None);
        };
        // Handed to the application: delivered.
        Counters::bump(&counters.taken);
        Counters::bump(&counters.delivered);
        if !lifecycle.is_open() && inbox.is_empty() {
            lifecycle.poke();
        }
        this.inbox = Some(inbox);
        Poll::Ready(Some(message))
    }
}

impl<T: Send + Sync + 'static> Drop for MessageStream<T> {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        self.engine.detach(&self.core);
        // A pending wait holds the mailbox; dropping it lets go of the mailbox too, and of
        // what was in it, which is counted as dropped (nothing arrives after the detach).
        if self.next.take().is_some() {
            Counters::add(&self.core.counters.dropped, self.core.backlog());
        }
        if let Some(mut inbox) = self.inbox.take() {
            crate::worker::abandon_rest(&self.core, || inbox.try_next(), "stream dropped");
        }
        self.engine.lifecycle.finished(&self.core);
    }
}

impl<T: Send + Sync + 'static> std::fmt::Debug for MessageStream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageStream")
            .field("name", &self.core.name)
            .field("topic", &self.core.topic)
            .finish_non_exhaustive()
    }
}
