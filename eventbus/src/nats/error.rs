//! The bridge's [`Error`]: what can go wrong connecting, making streams, exporting and
//! importing, each with its source.

use std::fmt;

use crate::error::SubscribeError;

use crate::dead_letter::DeadLetter;

/// Everything that can go wrong with a bridge.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// No server answered at `url` within the deadline, or it refused the connection.
    Connect {
        /// The address given to [`Bridge::connect`](super::Bridge::connect).
        url: String,
        /// What went wrong.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The server refused the credentials (a wrong user, password or token, or none given
    /// to a server that asks for them).
    Auth {
        /// The address given to [`Bridge::connect_with`](super::Bridge::connect_with).
        url: String,
        /// The client's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The server refused to make or update the topic's stream or consumer.
    Server {
        /// The topic.
        topic: &'static str,
        /// What was asked.
        what: &'static str,
        /// What went wrong.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The topic's stream cannot be used as its [`StreamOptions`](super::StreamOptions)
    /// say: options the server cannot take, an existing stream that is missing or holds
    /// other subjects, or options other than this bridge gave the topic before.
    Stream {
        /// The topic.
        topic: &'static str,
        /// The stream's name (empty where the options named none).
        stream: String,
        /// Why.
        why: String,
    },
    /// A consumer name JetStream cannot hold.
    BadName {
        /// The name given.
        name: String,
    },
    /// The topic is already exported, or already imported under that name, by this bridge.
    Twice {
        /// The topic.
        topic: &'static str,
    },
    /// The export subscription could not start (the bus is closed, no runtime, a bad
    /// capacity).
    Subscribe(SubscribeError),
    /// The options given to [`Bridge::export_with`](super::Bridge::export_with) held a filter: the export's filter is
    /// the bridge's own (it keeps imported messages from going back out).
    Filter {
        /// The topic.
        topic: &'static str,
    },
    /// A keyed export or import cannot go as asked: a partition count out of range or other
    /// than the topic's keyed exports declared, or a keyed import of a topic whose stream
    /// was made without partitions.
    Keyed {
        /// The topic.
        topic: &'static str,
        /// Why.
        why: String,
    },
    /// The bus has no tokio runtime for the bridge's tasks.
    NoRuntime,
    /// The bridge was closed with exports the server never acknowledged: each is a dead
    /// letter with its value.
    Unsent {
        /// The export dead letters, oldest first.
        letters: Vec<DeadLetter>,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Connect { url, source } => {
                write!(f, "cannot connect to the NATS server at `{url}`: {source}")
            }
            Error::Auth { url, source } => write!(
                f,
                "the NATS server at `{url}` refused the credentials (authorization failed: \
                 check the user and password, token or credentials file in `ConnectOptions`): \
                 {source}"
            ),
            Error::Server {
                topic,
                what,
                source,
            } => write!(
                f,
                "the NATS server refused to {what} for topic `{topic}`: {source}"
            ),
            Error::Stream { topic, stream, why } => {
                write!(
                    f,
                    "cannot use the stream `{stream}` for topic `{topic}`: {why}"
                )
            }
            Error::BadName { name } => write!(
                f,
                "`{name}` cannot name a JetStream consumer: use letters, digits, `-` and `_` \
                 (no spaces, `.`, `*`, `>`, `/` or `\\`), at most 200 characters"
            ),
            Error::Twice { topic } => write!(f, "topic `{topic}` is already bridged that way"),
            Error::Subscribe(error) => write!(f, "the export cannot subscribe: {error}"),
            Error::Filter { topic } => write!(
                f,
                "the export of `{topic}` cannot take a filter: the bridge filters out imported \
                 messages itself; filter on the importing side, or publish a topic of its own"
            ),
            Error::Keyed { topic, why } => {
                write!(f, "cannot bridge topic `{topic}` keyed: {why}")
            }
            Error::NoRuntime => write!(
                f,
                "the bridge needs a tokio runtime: connect from inside one, or give the bus one \
                 with `BusBuilder::runtime`"
            ),
            Error::Unsent { letters } => write!(
                f,
                "{} exported message(s) were not acknowledged by the NATS server (dead letters)",
                letters.len()
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Connect { source, .. }
            | Error::Auth { source, .. }
            | Error::Server { source, .. } => Some(&**source),
            Error::Subscribe(error) => Some(error),
            _ => None,
        }
    }
}
