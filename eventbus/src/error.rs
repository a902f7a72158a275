//! What can go wrong when publishing or subscribing, with the message handed back wherever
//! the bus did not take it.

use std::fmt;
use std::sync::Arc;

/// Why [`Bus::publish`](crate::Bus::publish) did not publish a message. The message was not
/// numbered nor handed to any subscriber, and comes back ([`into_inner`](Self::into_inner)),
/// so nothing is lost silently.
#[derive(PartialEq, Eq)]
#[non_exhaustive]
pub enum PublishError<T> {
    /// The bus is closed (or closing, for publishers outside its handlers).
    Closed(T),
    /// Waiting could never end, so the publish did not wait:
    /// - a handler published into a full `Block` mailbox whose worker waits, directly or
    ///   through other handlers, for the publishing handler itself;
    /// - a sync publish on a tokio `current_thread` runtime's thread found a full `Block`
    ///   mailbox: waiting would stop the tasks that make room. Use
    ///   `publish_async` there (feature `tokio`), or a multi-thread runtime;
    /// - an inline subscriber's handler published to a topic whose inline handlers its
    ///   thread is running (its own topic, or one further up the cascade), or one that
    ///   needs an observer's turn its thread holds (an all-or-nothing publish, or a
    ///   handler's, takes its observers' turns before its inline handlers run).
    WouldDeadlock(T),
    /// An inline subscriber ([`Bus::subscribe_inline`](crate::Bus::subscribe_inline))
    /// refused the message: its handler returned an `Err` or panicked. Nothing got the
    /// message and its seq was not used. `source()` is the handler's error when it is a
    /// `std::error::Error`.
    Rejected {
        /// The message, handed back.
        message: T,
        /// Who refused it, and why.
        rejection: Rejection,
    },
}

/// Why [`Bus::try_publish`](crate::Bus::try_publish) did not publish a message. The message
/// was not numbered nor handed to any subscriber, and comes back.
#[derive(PartialEq, Eq)]
#[non_exhaustive]
pub enum TryPublishError<T> {
    /// A `Block` subscriber's mailbox was full, or the topic's turn was held by a publisher
    /// waiting for room: publishing would have waited.
    Full(T),
    /// The bus is closed (or closing, for publishers outside its handlers).
    Closed(T),
    /// As [`PublishError::Rejected`].
    Rejected {
        /// The message, handed back.
        message: T,
        /// Who refused it, and why.
        rejection: Rejection,
    },
}

/// Why [`Bus::publish_timeout`](crate::Bus::publish_timeout) did not publish a message. The
/// message was not numbered nor handed to any subscriber, and comes back.
#[derive(PartialEq, Eq)]
#[non_exhaustive]
pub enum PublishTimeoutError<T> {
    /// The deadline passed before the topic's turn came, or before every `Block`
    /// subscriber's mailbox had room.
    Timeout(T),
    /// The bus is closed (or closing, for publishers outside its handlers), or a forced close
    /// came while the publish waited.
    Closed(T),
    /// As [`PublishError::WouldDeadlock`].
    WouldDeadlock(T),
    /// As [`PublishError::Rejected`].
    Rejected {
        /// The message, handed back.
        message: T,
        /// Who refused it, and why.
        rejection: Rejection,
    },
}

/// An inline subscriber's refusal of a message: the subscriber's name and its handler's
/// error (or panic message). Its `source()` is the handler's error when that is a
/// `std::error::Error`.
#[derive(Clone)]
pub struct Rejection {
    subscriber: Arc<str>,
    reason: String,
    error: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Rejection {
    pub(crate) fn new(
        subscriber: Arc<str>,
        reason: String,
        error: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        Rejection {
            subscriber,
            reason,
            error,
        }
    }

    /// The name of the inline subscriber that refused the message.
    pub fn subscriber(&self) -> &str {
        &self.subscriber
    }

    /// The handler's error text (for a panic, `panicked: ` and the panic's message).
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The handler's error itself, when it is a `std::error::Error`.
    pub fn error(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.error.as_deref()
    }
}

impl PartialEq for Rejection {
    fn eq(&self, other: &Self) -> bool {
        self.subscriber == other.subscriber && self.reason() == other.reason()
    }
}

impl Eq for Rejection {}

impl fmt::Debug for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejection")
            .field("subscriber", &self.subscriber)
            .field("reason", &self.reason())
            .finish()
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "inline subscriber `{}` rejected the message: {}",
            self.subscriber,
            self.reason()
        )
    }
}

impl std::error::Error for Rejection {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error()
            .map(|error| error as &(dyn std::error::Error + 'static))
    }
}

/// `into_inner`, `Debug` (without the message) and `Error` for a publish error.
macro_rules! publish_error {
    ($error:ident { $($variant:ident),* }) => {
        impl<T> $error<T> {
            /// The message, handed back.
            pub fn into_inner(self) -> T {
                match self {
                    $($error::$variant(message))|* => message,
                    $error::Rejected { message, .. } => message,
                }
            }

            /// The inline subscriber's refusal, for a rejected message.
            pub fn rejection(&self) -> Option<&Rejection> {
                match self {
                    $error::Rejected { rejection, .. } => Some(rejection),
                    _ => None,
                }
            }
        }

        impl<T> fmt::Debug for $error<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $($error::$variant(_) => f.write_str(concat!(stringify!($variant), "(..)")),)*
                    $error::Rejected { rejection, .. } => f
                        .debug_struct("Rejected")
                        .field("rejection", rejection)
                        .finish_non_exhaustive(),
                }
            }
        }

        impl<T> std::error::Error for $error<T> {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.rejection()
                    .and_then(Rejection::error)
                    .map(|error| error as &(dyn std::error::Error + 'static))
            }
        }
    };
}

publish_error!(PublishError {
    Closed,
    WouldDeadlock
});
publish_error!(TryPublishError { Full, Closed });
publish_error!(PublishTimeoutError {
    Timeout,
    Closed,
    WouldDeadlock
});

const CLOSED: &str = "the bus is closed; the message was not published and is handed back";
const WOULD_DEADLOCK: &str = "this publish would wait forever, so it was refused and the \
     message is handed back. Either the caller runs on a tokio `current_thread` runtime, where \
     waiting for room in a full `Block` mailbox would stop the very tasks that make room: use \
     `publish_async` (or `try_publish`), or a multi-thread runtime; or a handler published to \
     a topic whose `Block` subscriber has a full mailbox and waits, directly or through other \
     handlers, for this handler's own subscription; or an inline handler published to a topic \
     whose inline handlers its thread is running";
const REJECTED: &str = "; the message was not published and is handed back";

impl<T> fmt::Display for PublishError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PublishError::Closed(_) => f.write_str(CLOSED),
            PublishError::WouldDeadlock(_) => f.write_str(WOULD_DEADLOCK),
            PublishError::Rejected { rejection, .. } => write!(f, "{rejection}{REJECTED}"),
        }
    }
}

impl<T> fmt::Display for TryPublishError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryPublishError::Full(_) => f.write_str(
                "a `Block` subscriber's mailbox is full (or another publisher of the topic waits \
                 for room); the message was not published and is handed back",
            ),
            TryPublishError::Closed(_) => f.write_str(CLOSED),
            TryPublishError::Rejected { rejection, .. } => write!(f, "{rejection}{REJECTED}"),
        }
    }
}

impl<T> fmt::Display for PublishTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PublishTimeoutError::Timeout(_) => f.write_str(
                "the publish timed out waiting for the topic's turn or for room in a `Block` \
                 subscriber's mailbox; the message was not published and is handed back",
            ),
            PublishTimeoutError::Closed(_) => f.write_str(CLOSED),
            PublishTimeoutError::WouldDeadlock(_) => f.write_str(WOULD_DEADLOCK),
            PublishTimeoutError::Rejected { rejection, .. } => {
                write!(f, "{rejection}{REJECTED}")
            }
        }
    }
}

impl<T> From<PublishError<T>> for PublishTimeoutError<T> {
    fn from(error: PublishError<T>) -> Self {
        match error {
            PublishError::Closed(message) => PublishTimeoutError::Closed(message),
            PublishError::WouldDeadlock(message) => PublishTimeoutError::WouldDeadlock(message),
            PublishError::Rejected { message, rejection } => {
                PublishTimeoutError::Rejected { message, rejection }
            }
        }
    }
}

/// Why a subscription could not be started.
#[derive(Debug)]
#[non_exhaustive]
pub enum SubscribeError {
    /// The capacity was 0 or above [`Options::MAX_CAPACITY`](crate::Options::MAX_CAPACITY).
    Capacity {
        /// The subscriber's name.
        name: String,
        /// The capacity asked for.
        capacity: usize,
    },
    /// The mailbox's slots (16 bytes each) could not be allocated.
    OutOfMemory {
        /// The subscriber's name.
        name: String,
        /// The capacity asked for.
        capacity: usize,
    },
    /// The handler takes a `State<T>` that the bus was not given.
    MissingState(MissingState),
    /// An async subscriber, and no tokio runtime: none was given to the builder
    /// (`BusBuilder::runtime`) nor current at `build()`.
    #[cfg(feature = "tokio")]
    NoRuntime {
        /// The subscriber's name.
        name: String,
    },
    /// The options' filter was written for another type than the subscription's topic.
    Filter {
        /// The subscriber's name.
        name: String,
        /// The subscription's topic.
        topic: &'static str,
        /// The type the filter takes.
        written_for: &'static str,
    },
    /// The options' `retry_if` was written for another type than the handler's error (or
    /// the handler cannot fail).
    RetryIf {
        /// The subscriber's name.
        name: String,
        /// The subscription's topic.
        topic: &'static str,
        /// The type the `retry_if` takes.
        written_for: &'static str,
        /// The handler's error type (`()` for a handler that cannot fail).
        error: &'static str,
    },
    /// A consumer group of 0 workers, or of more than
    /// [`Options::MAX_WORKERS`](crate::Options::MAX_WORKERS).
    Workers {
        /// The subscriber's name.
        name: String,
        /// The number of workers asked for.
        workers: usize,
    },
    /// The options' key was written for another type than the subscription's topic.
    Key {
        /// The subscriber's name.
        name: String,
        /// The subscription's topic.
        topic: &'static str,
        /// The type the key function takes.
        written_for: &'static str,
    },
    /// A consumer group where there cannot be one: `DropOldest` on a keyed group on a log
    /// topic, an `FnMut` async subscriber or a stream, or a key without a group.
    Group {
        /// The subscriber's name.
        name: String,
        /// The topic's name.
        topic: &'static str,
        /// Why not.
        why: &'static str,
    },
    /// A malformed observer pattern: empty, an empty segment (`orders..x`), or `>` not
    /// last.
    Pattern {
        /// The subscriber's name.
        name: String,
        /// The pattern as given.
        pattern: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The bus is closing or closed.
    Closed {
        /// The subscriber's name.
        name: String,
    },
    /// A start other than [`Start::Now`](crate::Start::Now) on a topic that keeps no log.
    NoLog {
        /// The subscriber's name.
        name: String,
        /// The topic's name.
        topic: &'static str,
    },
    /// [`Overflow::DropNewest`](crate::Overflow::DropNewest) on a log topic, where it has no
    /// meaning: the log is shared, so a message cannot be left out for one subscriber.
    DropNewestOnLog {
        /// The subscriber's name.
        name: String,
        /// The topic's name.
        topic: &'static str,
    },
    /// A priority ([`Options::priority`](crate::Options::priority)) where there cannot be
    /// one: written for another type than the subscription's topic, on a log topic (whose
    /// subscriptions all read the one log, in its order), on a consumer group, or on an
    /// inline subscriber (no mailbox to reorder).
    Priority {
        /// The subscriber's name.
        name: String,
        /// The subscription's topic.
        topic: &'static str,
        /// Why not.
        why: String,
    },
    /// An option an inline subscriber ([`Bus::subscribe_inline`](crate::Bus::subscribe_inline))
    /// cannot take: it has no mailbox (so no capacity nor overflow policy), no worker (so no
    /// group nor key), no retries (its refusal is the publisher's to handle), and it runs at
    /// the publish (so it starts now).
    Inline {
        /// The subscriber's name.
        name: String,
        /// The topic's name.
        topic: &'static str,
        /// The option, and why not.
        why: &'static str,
    },
    /// The operating system would not start the worker thread.
    Spawn {
        /// The subscriber's name.
        name: String,
        /// What the operating system said.
        source: std::io::Error,
    },
}

impl fmt::Display for SubscribeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubscribeError::Capacity { name, capacity } => write!(
                f,
                "subscriber `{name}`: capacity {capacity} is not allowed; a mailbox holds \
                 from 1 to {} messages",
                crate::options::Options::MAX_CAPACITY
            ),
            SubscribeError::OutOfMemory { name, capacity } => write!(
                f,
                "subscriber `{name}`: a mailbox of {capacity} messages needs {} bytes, which \
                 could not be allocated; ask for a smaller capacity",
                capacity.saturating_mul(16)
            ),
            SubscribeError::MissingState(missing) => write!(f, "{missing}"),
            #[cfg(feature = "tokio")]
            SubscribeError::NoRuntime { name } => write!(
                f,
                "subscriber `{name}` is async, but the bus has no tokio runtime: build the bus \
                 inside one, or give one with `Bus::builder().runtime(handle)`"
            ),
            SubscribeError::Filter {
                name,
                topic,
                written_for,
            } => write!(
                f,
                "subscriber `{name}`: its filter takes `&{written_for}`, but it subscribes to \
                 `{topic}`: a filter takes a reference to the subscription's own topic"
            ),
            SubscribeError::RetryIf {
                name,
                topic,
                written_for,
                error,
            } => write!(
                f,
                "subscriber `{name}` of `{topic}`: its retry_if takes `&{written_for}`, but the \
                 handler's error is `{error}`: retry_if takes a reference to the handler's own \
                 error type"
            ),
            SubscribeError::Workers { name, workers } => write!(
                f,
                "subscriber `{name}`: a group of {workers} workers is not allowed; a group has \
                 from 1 to {} workers",
                crate::options::Options::MAX_WORKERS
            ),
            SubscribeError::Key {
                name,
                topic,
                written_for,
            } => write!(
                f,
                "subscriber `{name}`: its key takes `&{written_for}`, but it subscribes to \
                 `{topic}`: a key function takes a reference to the subscription's own topic"
            ),
            SubscribeError::Group { name, topic, why } => write!(
                f,
                "subscriber `{name}` of `{topic}` cannot be a consumer group: {why}"
            ),
            SubscribeError::Pattern { name, pattern, why } => write!(
                f,
                "observer `{name}`: pattern {pattern:?} is malformed: {why}; a pattern is \
                 topic-name segments split by `.`, where `*` matches one segment and `>` the \
                 rest (last only), e.g. \"orders.*\" or \"payments.>\""
            ),
            SubscribeError::Closed { name } => {
                write!(
                    f,
                    "subscriber `{name}`: the bus is closed; nothing can subscribe"
                )
            }
            SubscribeError::NoLog { name, topic } => write!(
                f,
                "subscriber `{name}`: topic `{topic}` keeps no log, so it can only start now; \
                 give it one with `#[topic(retain = N)]` to start earlier"
            ),
            SubscribeError::DropNewestOnLog { name, topic } => write!(
                f,
                "subscriber `{name}`: `DropNewest` has no meaning on log topic `{topic}`: its \
                 subscriptions share one log, so a message cannot be left out for one of them; \
                 use `DropOldest` (a subscription that falls behind loses what the log trims, \
                 counted as dropped) or `Block` (publishers wait for it)"
            ),
            SubscribeError::Priority { name, topic, why } => write!(
                f,
                "subscriber `{name}` of `{topic}` cannot have a priority: {why}"
            ),
            SubscribeError::Inline { name, topic, why } => {
                write!(f, "inline subscriber `{name}` of `{topic}`: {why}")
            }
            SubscribeError::Spawn { name, source } => {
                write!(
                    f,
                    "subscriber `{name}`: could not start its worker thread: {source}"
                )
            }
        }
    }
}

impl std::error::Error for SubscribeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SubscribeError::Spawn { source, .. } => Some(source),
            SubscribeError::Capacity { .. }
            | SubscribeError::OutOfMemory { .. }
            | SubscribeError::MissingState(_)
            | SubscribeError::Filter { .. }
            | SubscribeError::RetryIf { .. }
            | SubscribeError::Workers { .. }
            | SubscribeError::Key { .. }
            | SubscribeError::Group { .. }
            | SubscribeError::Pattern { .. }
            | SubscribeError::Closed { .. }
            | SubscribeError::NoLog { .. }
            | SubscribeError::DropNewestOnLog { .. }
            | SubscribeError::Priority { .. }
            | SubscribeError::Inline { .. } => None,
            #[cfg(feature = "tokio")]
            SubscribeError::NoRuntime { .. } => None,
        }
    }
}

/// A subscriber takes a `State<T>` that the bus was not given: what both
/// [`BuildError::MissingState`](crate::BuildError::MissingState) and
/// [`SubscribeError::MissingState`] hold.
///
/// # Examples
///
/// ```
/// use eventbus::{subscriber, Bus, BuildError, State, Topic};
///
/// #[derive(Topic)]
/// struct Ping;
/// struct Db;
///
/// #[subscriber(name = "pinger")]
/// fn ping(_: &Ping, _db: State<Db>) {}
///
/// let Err(BuildError::MissingState(missing)) = Bus::builder().registered().try_build() else {
///     panic!("the build should fail")
/// };
/// assert_eq!(missing.subscriber, "pinger");
/// assert_eq!(missing.state, std::any::type_name::<Db>());
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MissingState {
    /// The subscriber's name.
    pub subscriber: String,
    /// The state's type, as [`std::any::type_name`] gives it.
    pub state: &'static str,
}

impl fmt::Display for MissingState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let MissingState { subscriber, state } = self;
        write!(
            f,
            "subscriber `{subscriber}` takes `State<{state}>`, but the bus was given no \
             `{state}`: add `.state(...)` with one to the builder"
        )
    }
}

impl std::error::Error for MissingState {}

/// Why [`Bus::redeliver`](crate::Bus::redeliver) did not hand a dead letter back to its
/// subscriber. The letter stays in the store (except for `NotFound`, where it was not there).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedeliverError {
    /// The letter is not in the bus's store: already redelivered, taken
    /// ([`Bus::take_dead_letters`](crate::Bus::take_dead_letters)), discarded to make room,
    /// or from another bus.
    NotFound,
    /// The subscription that gave up on it has been unsubscribed (or the bus closed).
    Unsubscribed {
        /// The subscriber's name.
        subscriber: String,
        /// The topic's name.
        topic: &'static str,
    },
    /// The subscriber's mailbox is full (whatever its overflow policy: a redelivery neither
    /// drops its message nor evicts a queued one), or its topic's turn is held by a publisher
    /// waiting for room: a redelivery never waits. Try again later.
    Full {
        /// The subscriber's name.
        subscriber: String,
    },
    /// Its topic keeps a log (`#[topic(retain = ..)]`), whose subscriptions read one shared
    /// log: a message cannot go to one of them alone. Publish the payload again instead.
    LogTopic {
        /// The topic's name.
        topic: &'static str,
    },
    /// The bus is closing or closed.
    Closed,
    /// The subscription's filter rejects the message now (or its filter or group key
    /// panicked on it, counted as a drop): it was not handed out.
    Rejected {
        /// The subscriber's name.
        subscriber: String,
    },
}

impl fmt::Display for RedeliverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedeliverError::NotFound => write!(
                f,
                "the dead letter is no longer kept: it was redelivered, taken or discarded"
            ),
            RedeliverError::Unsubscribed { subscriber, topic } => write!(
                f,
                "subscriber `{subscriber}` of `{topic}` is no longer subscribed; nothing to \
                 redeliver to"
            ),
            RedeliverError::Full { subscriber } => write!(
                f,
                "subscriber `{subscriber}` has no room in its mailbox now; try again later"
            ),
            RedeliverError::LogTopic { topic } => write!(
                f,
                "`{topic}` is a log topic: its subscriptions share one log, so a message \
                 cannot be redelivered to one of them; publish its payload again instead"
            ),
            RedeliverError::Closed => write!(f, "the bus is closed; nothing can be redelivered"),
            RedeliverError::Rejected { subscriber } => write!(
                f,
                "subscriber `{subscriber}` did not take the message (its filter rejects it now)"
            ),
        }
    }
}

impl std::error::Error for RedeliverError {}
