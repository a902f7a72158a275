//! What can go wrong when publishing or subscribing, with the message handed back wherever
//! the bus did not take it.

use std::fmt;

/// Why a publish did not fully succeed.
///
/// Where the bus did not accept the message, the error hands it back
/// ([`into_inner`](PublishError::into_inner)), so nothing is lost silently.
#[derive(PartialEq, Eq)]
pub enum PublishError<T> {
    /// The bus is closed (or closing, for publishers outside its handlers); the message was
    /// not accepted and is handed back.
    Closed(T),
    /// A handler published into a full `Block` mailbox whose worker waits, directly or
    /// through other handlers, for the publishing handler itself: waiting could never end.
    /// The message was not published and is handed back.
    WouldDeadlock(T),
    /// [`Bus::publish_timeout`](crate::Bus::publish_timeout): the message was numbered and
    /// delivered to the mailboxes that had room, but `missed` `Block` subscribers still had
    /// none at the deadline; each of them counted it as dropped.
    Timeout {
        /// The message's place in its topic's order.
        seq: u64,
        /// How many subscribers did not get it.
        missed: usize,
    },
    /// The bus was force-stopped ([`Bus::close_timeout`](crate::Bus::close_timeout) ran out)
    /// while this publish waited for room; the `missed` subscribers counted it as dropped.
    Abandoned {
        /// The message's place in its topic's order.
        seq: u64,
        /// How many subscribers did not get it.
        missed: usize,
    },
}

impl<T> PublishError<T> {
    /// The message, if the bus did not accept it.
    pub fn into_inner(self) -> Option<T> {
        match self {
            PublishError::Closed(message) | PublishError::WouldDeadlock(message) => Some(message),
            PublishError::Timeout { .. } | PublishError::Abandoned { .. } => None,
        }
    }
}

impl<T> fmt::Debug for PublishError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PublishError::Closed(_) => f.write_str("Closed(..)"),
            PublishError::WouldDeadlock(_) => f.write_str("WouldDeadlock(..)"),
            PublishError::Timeout { seq, missed } => f
                .debug_struct("Timeout")
                .field("seq", seq)
                .field("missed", missed)
                .finish(),
            PublishError::Abandoned { seq, missed } => f
                .debug_struct("Abandoned")
                .field("seq", seq)
                .field("missed", missed)
                .finish(),
        }
    }
}

impl<T> fmt::Display for PublishError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PublishError::Closed(_) => {
                f.write_str("the bus is closed; the message was not published and is handed back")
            }
            PublishError::WouldDeadlock(_) => f.write_str(
                "a handler's publish would wait forever: a `Block` subscriber of this topic has \
                 a full mailbox and waits (directly or through other handlers) for this \
                 handler's own subscription; the message was not published and is handed back",
            ),
            PublishError::Timeout { seq, missed } => write!(
                f,
                "message {seq} timed out waiting for room: {missed} subscriber(s) missed it \
                 (counted as dropped)"
            ),
            PublishError::Abandoned { seq, missed } => write!(
                f,
                "message {seq} was abandoned by a forced close while waiting for room: \
                 {missed} subscriber(s) missed it (counted as dropped)"
            ),
        }
    }
}

impl<T> std::error::Error for PublishError<T> {}

/// Why a subscription could not be started.
#[derive(Debug)]
#[non_exhaustive]
pub enum SubscribeError {
    /// The capacity was 0 or above [`MAX_CAPACITY`](crate::MAX_CAPACITY).
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
    MissingState {
        /// The subscriber's name.
        name: String,
        /// The state's type.
        state: &'static str,
    },
    /// The bus is closing or closed.
    Closed {
        /// The subscriber's name.
        name: String,
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
                crate::MAX_CAPACITY
            ),
            SubscribeError::OutOfMemory { name, capacity } => write!(
                f,
                "subscriber `{name}`: a mailbox of {capacity} messages needs {} bytes, which \
                 could not be allocated; ask for a smaller capacity",
                capacity.saturating_mul(16)
            ),
            SubscribeError::MissingState { name, state } => write!(
                f,
                "subscriber `{name}` takes `State<{state}>`, but the bus was given no `{state}`: \
                 add `.state(...)` to the builder"
            ),
            SubscribeError::Closed { name } => {
                write!(
                    f,
                    "subscriber `{name}`: the bus is closed; nothing can subscribe"
                )
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
            | SubscribeError::MissingState { .. }
            | SubscribeError::Closed { .. } => None,
        }
    }
}
