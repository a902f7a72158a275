//! What an export or an import may choose beyond the defaults ([`ExportOptions`],
//! [`ImportOptions`]), and how a topic's stream is named and made ([`StreamOptions`]):
//! deployments that name their streams, make them in advance, or need retention limits and
//! replicas.

use super::*;

/// The shortest `max_age` the server takes.
const MIN_AGE: Duration = Duration::from_millis(100);

/// How the bridge names and makes a topic's stream. By default the stream is
/// `eventbus_<topic>` (see the [wire format](crate::wire_format#stream)), made with file
/// storage, no limits and one replica when missing.
///
/// The limits and replicas apply when the bridge makes the stream; a stream that exists is
/// used as it is (an operator's settings are kept). Within one bridge, a topic's export and
/// import share one stream: give the options to either, or the same to both.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use eventbus::nats::StreamOptions;
///
/// // A week of orders, at most a million, on three servers of a cluster.
/// let stream = StreamOptions::new()
///     .name("ORDERS")
///     .max_age(Duration::from_secs(7 * 24 * 3600))
///     .max_messages(1_000_000)
///     .replicas(3);
/// // Or a stream the operators made: use it, never make or change one.
/// let theirs = StreamOptions::new().name("ORDERS").existing();
/// assert_ne!(stream, theirs);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamOptions {
    pub(super) name: Option<String>,
    pub(super) existing: bool,
    pub(super) max_age: Option<Duration>,
    pub(super) max_messages: Option<u64>,
    pub(super) max_bytes: Option<u64>,
    pub(super) replicas: Option<usize>,
}

impl StreamOptions {
    /// The defaults: the stream `eventbus_<topic>`, made when missing, without limits.
    pub fn new() -> StreamOptions {
        StreamOptions::default()
    }

    /// The stream's name (letters, digits, `-` and `_`), instead of `eventbus_<topic>`. It
    /// holds the topic's subject alone: the importer keeps the stream's order, and a message
    /// of another subject would look like one lost on the way. A stream of that name that
    /// exists is used if it holds the subject alone, refused ([`Error::Stream`]) if it holds
    /// others; one bridge cannot keep two topics in one stream.
    pub fn name(mut self, name: impl Into<String>) -> StreamOptions {
        self.name = Some(name.into());
        self
    }

    /// Only use a stream that exists: the bridge never makes nor changes it, and fails
    /// ([`Error::Stream`]) if it is missing or holds other subjects than the topic's.
    pub fn existing(mut self) -> StreamOptions {
        self.existing = true;
        self
    }

    /// How long the stream keeps a message, when the bridge makes it (at least 100 ms). Under
    /// 2 minutes it is also the duplicate window (a `Nats-Msg-Id` is remembered that long).
    pub fn max_age(mut self, age: Duration) -> StreamOptions {
        self.max_age = Some(age);
        self
    }

    /// How many messages the stream keeps (the oldest go first), when the bridge makes it.
    pub fn max_messages(mut self, messages: u64) -> StreamOptions {
        self.max_messages = Some(messages);
        self
    }

    /// How many bytes the stream keeps (the oldest messages go first), when the bridge
    /// makes it.
    pub fn max_bytes(mut self, bytes: u64) -> StreamOptions {
        self.max_bytes = Some(bytes);
        self
    }

    /// On how many servers of a cluster the stream is kept (1 to 5), when the bridge makes
    /// it.
    pub fn replicas(mut self, replicas: usize) -> StreamOptions {
        self.replicas = Some(replicas);
        self
    }

    /// Checks what the server cannot be asked for; `topic` names it in the error.
    pub(super) fn check(&self, topic: &'static str) -> Result<(), Error> {
        let refuse = |why: String| {
            Err(Error::Stream {
                topic,
                stream: self.name.clone().unwrap_or_default(),
                why,
            })
        };
        if let Some(name) = &self.name {
            if !valid_name(name) {
                return refuse(
                    "a stream name is letters, digits, `-` and `_`, at most 200 characters".into(),
                );
            }
        }
        if self.max_age.is_some_and(|age| age < MIN_AGE) {
            return refuse(format!(
                "a max age under {MIN_AGE:?}: the server keeps messages at least that long"
            ));
        }
        if let Some(replicas) = self.replicas {
            if !(1..=5).contains(&replicas) {
                return refuse(format!("{replicas} replicas: JetStream keeps 1 to 5"));
            }
        }
        for (what, value) in [("messages", self.max_messages), ("bytes", self.max_bytes)] {
            if value == Some(0) || value.is_some_and(|v| v > i64::MAX as u64) {
                return refuse(format!("a stream keeps at least 1 of its max {what}"));
            }
        }
        Ok(())
    }

    /// The stream's name for the topic on `subject`.
    pub(super) fn stream_name(&self, subject: &str) -> String {
        self.name.clone().unwrap_or_else(|| stream_name(subject))
    }

    /// The config the bridge makes the stream with: the topic's subject first, then the
    /// partitions' of a keyed topic.
    pub(super) fn config(&self, subjects: Vec<String>) -> stream::Config {
        stream::Config {
            name: self.stream_name(&subjects[0]),
            subjects,
            // The server refuses a duplicate window longer than the stream keeps messages.
            duplicate_window: self
                .max_age
                .map_or(DUPLICATE_WINDOW, |age| age.min(DUPLICATE_WINDOW)),
            storage: stream::StorageType::File,
            max_age: self.max_age.unwrap_or_default(),
            max_messages: self.max_messages.map_or(-1, |m| m as i64),
            max_bytes: self.max_bytes.map_or(-1, |b| b as i64),
            num_replicas: self.replicas.unwrap_or(1),
            ..Default::default()
        }
    }
}

/// An export's choices: the export subscriber's [`Options`] and the topic's stream.
/// [`Options`] alone convert into it, so `export_with::<T>(options)` takes either.
///
/// # Examples
///
/// ```
/// use eventbus::nats::{ExportOptions, StreamOptions};
/// use eventbus::{Options, Overflow};
///
/// let export = ExportOptions::new()
///     .subscriber(Options::default().capacity(10_000).overflow(Overflow::Block))
///     .stream(StreamOptions::new().name("ORDERS").replicas(3));
/// let plain: ExportOptions = Options::default().capacity(64).into();
/// # let _ = (export, plain);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ExportOptions {
    pub(super) subscriber: Options,
    pub(super) stream: StreamOptions,
}

impl ExportOptions {
    /// The defaults: a `Block` subscriber of capacity 1024, the default stream.
    pub fn new() -> ExportOptions {
        ExportOptions::default()
    }

    /// The export subscriber's options: capacity, overflow, retries, backoff, name.
    pub fn subscriber(mut self, options: Options) -> ExportOptions {
        self.subscriber = options;
        self
    }

    /// The topic's stream.
    pub fn stream(mut self, stream: StreamOptions) -> ExportOptions {
        self.stream = stream;
        self
    }
}

impl From<Options> for ExportOptions {
    fn from(subscriber: Options) -> ExportOptions {
        ExportOptions::new().subscriber(subscriber)
    }
}

/// An import's choices: the topic's stream.
///
/// # Examples
///
/// ```
/// use eventbus::nats::{ImportOptions, StreamOptions};
///
/// let import = ImportOptions::new().stream(StreamOptions::new().name("ORDERS").existing());
/// # let _ = import;
/// ```
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    pub(super) stream: StreamOptions,
    pub(super) lease: Option<Duration>,
}

impl ImportOptions {
    /// The defaults: the default stream.
    pub fn new() -> ImportOptions {
        ImportOptions::default()
    }

    /// The topic's stream.
    pub fn stream(mut self, stream: StreamOptions) -> ImportOptions {
        self.stream = stream;
        self
    }

    /// For [`Bridge::import_keyed_with`]: how long a member's lease on a partition lasts
    /// without being renewed (renewed every quarter of it), so how soon the partitions of
    /// a member that crashed go to the others (default 10 s, at least 400 ms). The first
    /// keyed import of a stream fixes it (in its registry stream); later ones use that one.
    pub fn lease(mut self, lease: Duration) -> ImportOptions {
        self.lease = Some(lease);
        self
    }
}
