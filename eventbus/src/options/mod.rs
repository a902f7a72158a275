//! How a subscription behaves: mailbox size, what a full mailbox does, retries and their
//! backoff, and the subscriber's name.

pub(crate) mod filter;
pub(crate) mod key;
pub(crate) mod predicate;
pub(crate) mod priority;
pub(crate) mod retry_if;

use std::time::Duration;

/// What a full mailbox does with a new message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum Overflow {
    /// The publisher waits for room: backpressure, chosen by the subscriber.
    #[default]
    Block,
    /// The oldest queued message is discarded to make room; the drop is counted.
    DropOldest,
    /// The message being published is discarded for this subscriber; the drop is counted.
    DropNewest,
}

/// Where a subscription to a log topic (one with `#[topic(retain = N)]`) starts reading.
///
/// A topic without a log has only [`Start::Now`]; any other start is refused at subscribe
/// ([`SubscribeError::NoLog`](crate::SubscribeError::NoLog)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum Start {
    /// With the next message published after the subscribe: no history.
    #[default]
    Now,
    /// With the oldest message the log still keeps.
    Earliest,
    /// With the message numbered `n` ([`Message::seq`](crate::Message::seq)). If the log
    /// has trimmed it, with the oldest kept, and the gap is counted as dropped; if it is not
    /// published yet, with it once it is (what comes before is not this subscription's).
    Seq(u64),
    /// With the first kept message published at most this long ago, or a little more: no
    /// message published within it is left out, and one up to about 20 ms older (at `HZ=250`)
    /// may be in.
    /// A log dates its messages with a clock cheap enough to read on every publish: on Linux
    /// the kernel's coarse clock, which moves on once a timer tick (1 to 4 ms,
    /// `clock_getres(CLOCK_MONOTONIC_COARSE)`) and may run a few milliseconds behind; on a
    /// kernel whose tick is longer, and elsewhere, the fine clock. So `Since` starts three
    /// ticks early: that covers the clock's lag, unless the kernel lets it fall further
    /// behind (a virtual machine's core held up by its host, say), when a message published
    /// just within `age` may be left out. Stamps count milliseconds (seconds, for a message
    /// published more than about 12 days after the first of its block of 64), and a message
    /// whose millisecond (or second) reaches into the age is in.
    Since(Duration),
}

/// How much history a log topic keeps: at most `messages`, and (if given) none older than
/// `max_age`. Written as `#[topic(retain = 10_000, retain_for = "1h")]`; returned by
/// [`Topic::retention`](crate::Topic::retention).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Retention {
    pub(crate) messages: usize,
    pub(crate) max_age: Option<Duration>,
}

impl Retention {
    /// The most messages a log keeps: 2³² (a larger `retain` is taken as this).
    pub const MAX_MESSAGES: usize = 1 << 32;

    /// Keeps at most `messages` (at least 1: 0 is taken as 1; at most
    /// [`MAX_MESSAGES`](Self::MAX_MESSAGES)).
    ///
    /// The log keeps its messages in blocks of 64 (fewer when `messages` is under 64), made
    /// as it fills: a message costs its own size and 8 bytes, a block 64 bytes more, and the
    /// table that finds the blocks 8 bytes per block, made 16,384 entries at a time.
    pub const fn messages(messages: usize) -> Self {
        Retention {
            messages: if messages == 0 {
                1
            } else if messages > Self::MAX_MESSAGES {
                Self::MAX_MESSAGES
            } else {
                messages
            },
            max_age: None,
        }
    }

    /// Keeps nothing older than `max_age` as well (what is older is trimmed as messages are
    /// appended or subscribers join). A message is trimmed only once the log's clock makes
    /// it older by three ticks more (see [`Start::Since`]): so not early, unless the kernel
    /// lets its coarse clock fall further behind than that, and up to about 20 ms late at
    /// `HZ=250`.
    #[must_use = "a retention setter returns the changed retention"]
    pub const fn max_age(mut self, max_age: Duration) -> Self {
        self.max_age = Some(max_age);
        self
    }

    /// The most messages kept.
    pub const fn max_messages(&self) -> usize {
        self.messages
    }

    /// The oldest a kept message may be, if bounded.
    pub const fn max_age_kept(&self) -> Option<Duration> {
        self.max_age
    }
}

/// The retry wait doubles at most this many times: 32 × the backoff is the longest wait.
const MAX_DOUBLINGS: u32 = 5;

/// Options for one subscription, built from [`Options::default()`].
///
/// | option | default |
/// |---|---|
/// | [`capacity`](Options::capacity) | 1024 messages |
/// | [`overflow`](Options::overflow) | [`Overflow::Block`] |
/// | [`retries`](Options::retries) | 0 (one attempt) |
/// | [`backoff`](Options::backoff) | 10 ms |
/// | [`name`](Options::name) | `subscription-N` |
/// | [`start`](Options::start) | [`Start::Now`] (log topics only may start elsewhere) |
/// | [`workers`](Options::workers) | 1 (more make a consumer group) |
/// | [`key`](Options::key) | none (a group's workers share one mailbox) |
/// | [`priority`](Options::priority) | none (the mailbox keeps topic order) |
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use eventbus::{Options, Overflow};
///
/// let options = Options::default()
///     .capacity(100)
///     .overflow(Overflow::DropOldest)
///     .retries(3)
///     .backoff(Duration::from_millis(5))
///     .name("email");
/// assert_eq!(options.retry_delay(1), Duration::from_millis(5));
/// assert_eq!(options.retry_delay(3), Duration::from_millis(20));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub(crate) capacity: usize,
    pub(crate) overflow: Overflow,
    pub(crate) retries: u32,
    pub(crate) backoff: Duration,
    pub(crate) name: Option<String>,
    pub(crate) filter: Option<crate::options::filter::Filter>,
    pub(crate) start: Start,
    pub(crate) workers: usize,
    pub(crate) key: Option<crate::options::key::Key>,
    pub(crate) priority: Option<crate::options::priority::Priority>,
    pub(crate) retry_if: Option<crate::options::retry_if::RetryIf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            capacity: Options::DEFAULT_CAPACITY,
            overflow: Overflow::Block,
            retries: 0,
            backoff: Options::DEFAULT_BACKOFF,
            name: None,
            filter: None,
            start: Start::Now,
            workers: 1,
            key: None,
            priority: None,
            retry_if: None,
        }
    }
}

impl Options {
    /// The mailbox size used when none is given.
    pub const DEFAULT_CAPACITY: usize = 1024;

    /// The largest mailbox a subscription may ask for.
    ///
    /// A mailbox allocates its slots up front, about 16 bytes each (a pointer to the shared
    /// message and a stamp), so this bound is 256 MiB for one subscriber.
    pub const MAX_CAPACITY: usize = 1 << 24;

    /// The most workers a consumer group may have ([`Options::workers`]): each is a thread.
    pub const MAX_WORKERS: usize = 256;

    /// The first retry's wait when none is given.
    pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(10);

    /// How many messages the mailbox holds, from 1 to [`Options::MAX_CAPACITY`]; anything else is
    /// refused when subscribing.
    #[must_use = "an option setter returns the changed options"]
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// What a full mailbox does.
    #[must_use = "an option setter returns the changed options"]
    pub fn overflow(mut self, overflow: Overflow) -> Self {
        self.overflow = overflow;
        self
    }

    /// How many times a failed message is retried after its first attempt: `retries(3)` is up
    /// to 4 attempts in all. Then it becomes a dead letter.
    #[must_use = "an option setter returns the changed options"]
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// The wait before the first retry; each later retry waits twice as long as the one
    /// before, up to 32 × this (see [`Options::retry_delay`]).
    ///
    /// The wait is real time for every kind of subscriber. An async subscriber's is kept by
    /// eventbus's own clock, not the runtime's timer (so a runtime without `enable_time()`
    /// will do): tokio's paused clock (`start_paused`, `time::advance`) does not shorten it.
    #[must_use = "an option setter returns the changed options"]
    pub fn backoff(mut self, backoff: Duration) -> Self {
        self.backoff = backoff;
        self
    }

    /// The subscriber's name, used in stats, dead letters and as the worker thread's name.
    #[must_use = "an option setter returns the changed options"]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Delivers only the messages `accepts` says yes to. It runs at publish, on the
    /// publisher's thread, before the mailbox: a message it rejects takes no slot and is
    /// counted as `filtered`, not `received`. Keep it cheap: every publish of the topic waits
    /// for it. A filter that panics does not break the publish or the other subscribers: that
    /// message is not delivered to this subscription and counts as `dropped`.
    ///
    /// On a log topic (`#[topic(retain = N)]`) every subscription reads the one log, so there
    /// a filter runs on the subscription's own worker as it reads, and costs the publisher
    /// nothing; what it rejects is counted the same way.
    ///
    /// The subscription's topic must be `T`; another is refused at subscribe.
    ///
    /// # Examples
    ///
    /// ```
    /// use eventbus::{Bus, Message, Options, Topic};
    ///
    /// #[derive(Topic)]
    /// struct Order { cents: u64 }
    ///
    /// let bus = Bus::builder().build();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let review = bus.subscribe::<Order>(
    ///     Options::default().filter(|o: &Order| o.cents > 100_000),
    ///     move |m: &Message<Order>| tx.send(m.cents).unwrap(),
    /// );
    /// bus.publish(Order { cents: 5 }).unwrap();
    /// bus.publish(Order { cents: 250_000 }).unwrap();
    /// let stats = review.unsubscribe();
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), [250_000]);
    /// assert_eq!((stats.received, stats.filtered), (1, 1));
    /// ```
    #[must_use = "an option setter returns the changed options"]
    pub fn filter<T: 'static>(
        mut self,
        accepts: impl Fn(&T) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.filter = Some(crate::options::filter::Filter::new(accepts));
        self
    }

    /// Which failures are worth retrying: asked with the handler's error `E` when an attempt
    /// fails; a failure it says `false` for is a dead letter at once (one attempt), as an
    /// error no retry can fix (a constraint the database refuses, a malformed order) should
    /// be. A panic is retried as before, and so is a failure when the predicate itself
    /// panics. Written for another type than the handler's error, it is refused at
    /// subscribe ([`SubscribeError::RetryIf`](crate::SubscribeError::RetryIf)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use eventbus::{Bus, Message, Options, Topic};
    ///
    /// #[derive(Topic, Debug)]
    /// struct Order(i64);
    ///
    /// #[derive(Debug)]
    /// enum SaveError { Busy, Refused }
    /// impl std::fmt::Display for SaveError {
    ///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    ///         write!(f, "{self:?}")
    ///     }
    /// }
    ///
    /// let bus = Bus::builder().build();
    /// let options = Options::default()
    ///     .retries(5)
    ///     .backoff(Duration::from_millis(1))
    ///     .retry_if(|e: &SaveError| matches!(e, SaveError::Busy));
    /// bus.subscribe::<Order>(options, |m: &Message<Order>| {
    ///     if m.0 < 0 { Err(SaveError::Refused) } else { Ok(()) }
    /// });
    /// bus.publish(Order(-1)).unwrap();
    /// bus.wait_idle();
    /// assert_eq!(bus.dead_letters()[0].attempts(), 1); // not retried
    /// # bus.close();
    /// ```
    #[must_use = "an option setter returns the changed options"]
    pub fn retry_if<E: 'static>(
        mut self,
        retry: impl Fn(&E) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.retry_if = Some(crate::options::retry_if::RetryIf::new(retry));
        self
    }

    /// Where a subscription to a log topic starts: its history first, in order, then the
    /// live messages, with no gap and no repeat between them (see [`Start`]).
    #[must_use = "an option setter returns the changed options"]
    pub fn start(mut self, start: Start) -> Self {
        self.start = start;
        self
    }

    /// Makes the subscription a consumer group of `workers` workers, from 1 to
    /// [`Options::MAX_WORKERS`] (anything else is refused at subscribe). A group is one
    /// subscription: each message is handled by exactly one of its workers.
    ///
    /// - With a [`key`](Options::key), the group has one mailbox per worker (each of
    ///   [`capacity`](Options::capacity), with its own overflow, retries and dead letters), and
    ///   a message goes to the mailbox its key's hash picks: all messages with one key are
    ///   handled by one worker, in their topic's order.
    /// - Without a key, the workers share one mailbox: each message is handled once, by
    ///   whichever worker is free; **no order is promised**, not even per key.
    ///
    /// [`SubscriptionStats::workers`](crate::SubscriptionStats::workers) shows each worker's
    /// share, so a hot key shows as one worker far busier than the others. The handler runs on
    /// several threads at once: give [`Bus::subscribe_group`](crate::Bus::subscribe_group) an
    /// `Fn + Send + Sync` handler (with [`Bus::subscribe`](crate::Bus::subscribe), whose
    /// handler is `FnMut`, the workers take turns at it), or
    /// `Bus::subscribe_group_async` (feature `tokio`) an async one. On a log topic (`#[topic(retain = N)]`) a keyed group's workers each read
    /// the log at their own position, and a group without a key shares one position (each
    /// message, the history from [`start`](Options::start) included, to one worker). A
    /// stream cannot be a group (refused at subscribe).
    ///
    /// # Examples
    ///
    /// ```
    /// use eventbus::{Bus, Message, Options, Topic};
    ///
    /// #[derive(Topic)]
    /// struct OrderPlaced { customer: u64 }
    ///
    /// let bus = Bus::builder().build();
    /// let group = bus.subscribe_group::<OrderPlaced>(
    ///     Options::default().workers(4).key(|o: &OrderPlaced| o.customer),
    ///     |m: &Message<OrderPlaced>| println!("customer {}", m.customer),
    /// );
    /// for customer in 0..100 {
    ///     bus.publish(OrderPlaced { customer }).unwrap();
    /// }
    /// let stats = group.unsubscribe();
    /// assert_eq!(stats.workers.len(), 4);
    /// assert_eq!(stats.workers.iter().map(|w| w.delivered).sum::<u64>(), 100);
    /// ```
    #[must_use = "an option setter returns the changed options"]
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// Sends each message of a group ([`workers`](Options::workers) > 1) to the worker its
    /// key's hash picks, so one key's messages are handled in order by one worker. The key
    /// function runs at publish, on the publisher's thread, once per worker; keep it cheap. A
    /// key function that panics drops that message for the group (counted as `dropped` on its
    /// first worker).
    ///
    /// The subscription's topic must be `T`, and it must be a group; anything else is refused
    /// at subscribe.
    #[must_use = "an option setter returns the changed options"]
    pub fn key<T: 'static, K: std::hash::Hash>(
        mut self,
        key: impl Fn(&T) -> K + Send + Sync + 'static,
    ) -> Self {
        self.key = Some(crate::options::key::Key::new(key));
        self
    }

    /// Makes the mailbox a priority mailbox: its worker takes the most urgent message queued
    /// first (the highest `level`), and messages of one level in topic order. The level
    /// function runs at publish, on the publisher's thread, once per message; keep it cheap.
    ///
    /// This subscription gives up its topic's one order, by its own choice: a message may be
    /// handled before an older, less urgent one. Every other subscriber of the topic keeps it.
    ///
    /// When the mailbox is full, room is made at the least urgent level, and a more urgent
    /// message is never dropped to keep a less urgent one:
    ///
    /// - [`Overflow::DropOldest`]: the oldest of the least urgent messages queued is dropped
    ///   (or the arriving one, if it is less urgent than everything queued);
    /// - [`Overflow::DropNewest`]: the newest of the least urgent messages, counting the
    ///   arriving one as the newest: the arriving one when nothing queued is less urgent than
    ///   it, else the newest queued message of the least urgent level;
    /// - [`Overflow::Block`]: the publisher waits for room, as with any mailbox.
    ///
    /// Drops are counted as `dropped`, as for any mailbox. A level function that panics does
    /// not break the publish: that message gets level 0, the least urgent.
    ///
    /// The subscription's topic must be `T`, it must have a mailbox of its own (not a log
    /// topic, `#[topic(retain = N)]`, nor a group, nor an inline subscriber); anything else
    /// is refused at subscribe
    /// ([`SubscribeError::Priority`](crate::SubscribeError::Priority)).
    ///
    /// # Examples
    ///
    /// ```
    /// use eventbus::{Bus, Message, Options, Topic};
    ///
    /// #[derive(Topic)]
    /// struct Alert { severity: u8 }
    ///
    /// let bus = Bus::builder().build();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let (started_tx, started) = std::sync::mpsc::channel();
    /// let (release_tx, release) = std::sync::mpsc::channel::<()>();
    /// let mut first = true;
    /// let pager = bus.subscribe::<Alert>(
    ///     Options::default().priority(|a: &Alert| a.severity),
    ///     move |m: &Message<Alert>| {
    ///         if std::mem::take(&mut first) {
    ///             // Hold the worker on the first alert while the others queue up.
    ///             started_tx.send(()).unwrap();
    ///             release.recv().unwrap();
    ///         }
    ///         tx.send(m.severity).unwrap();
    ///     },
    /// );
    /// bus.publish(Alert { severity: 0 }).unwrap();
    /// started.recv().unwrap();
    /// for severity in [1, 5, 1, 9] {
    ///     bus.publish(Alert { severity }).unwrap();
    /// }
    /// release_tx.send(()).unwrap();
    /// pager.unsubscribe();
    /// // The most urgent first; within a level, in the order published.
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), [0, 9, 5, 1, 1]);
    /// ```
    #[must_use = "an option setter returns the changed options"]
    pub fn priority<T: 'static>(
        mut self,
        level: impl Fn(&T) -> u8 + Send + Sync + 'static,
    ) -> Self {
        self.priority = Some(crate::options::priority::Priority::new(level));
        self
    }

    /// The wait before retry number `retry` (the first retry is 1): `backoff × 2^(retry−1)`,
    /// doubling at most five times, so never more than `32 × backoff`.
    pub fn retry_delay(&self, retry: u32) -> Duration {
        let doublings = retry.saturating_sub(1).min(MAX_DOUBLINGS);
        self.backoff.saturating_mul(1 << doublings)
    }
}
