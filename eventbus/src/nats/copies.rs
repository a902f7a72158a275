//! The registry of an import's copies ([`Copies`]): which bridges, in any process, import
//! one topic under one consumer name, so an importer can tell a message lost on its way
//! to it from one the server gave another copy.
//!
//! The registry is the stream `eventbus-copies` (subjects `eventbus-copies.>`, one message
//! kept per subject, each dropped [`TTL`] after it was stored). A copy is the subject
//! `eventbus-copies.<topic stream>.<consumer name>.<bridge id>`; it stores a message there
//! (awaiting the server's ack) before its first pull request, stores one again every
//! [`REFRESH`] while it runs, and purges its subject when it stops. The live copies of an
//! import are the subjects holding a message, one request (stream info with a subject
//! filter). A crashed copy stays listed for up to [`TTL`]: the others think themselves
//! several a while longer, which costs order across copies, never a message.
//! (A stream name built from a topic always starts `eventbus_`, so it never clashes.)

use super::*;

/// The registry stream.
const REGISTRY: &str = "eventbus-copies";
/// How long a copy's registration lasts without being renewed.
pub(super) const TTL: Duration = Duration::from_secs(15);
/// How often a running copy renews its registration (and looks at the others).
pub(super) const REFRESH: Duration = Duration::from_secs(5);

/// One copy's entry in the registry.
pub(super) struct Copies {
    /// This copy's subject.
    subject: String,
    /// The subjects of every copy of this import.
    filter: String,
}

impl Copies {
    /// The entry of the bridge `id`'s import `name` of the topic stream `stream`.
    pub(super) fn new(stream: &str, name: &str, id: &str) -> Copies {
        let filter = format!("{REGISTRY}.{stream}.{name}");
        Copies {
            subject: format!("{filter}.{id}"),
            filter: format!("{filter}.*"),
        }
    }

    /// Stores (or renews) this copy's entry; `Err` unless the server acked it.
    pub(super) async fn register(&self, js: &jetstream::Context) -> Result<(), BoxError> {
        let registry = Self::registry(js).await?;
        drop(registry);
        js.publish(self.subject.clone(), Vec::new().into())
            .await?
            .await?;
        Ok(())
    }

    /// Whether the registry lists a copy besides this one; `None` if it cannot be read.
    pub(super) async fn others(&self, js: &jetstream::Context) -> Option<bool> {
        let registry = js.get_stream(REGISTRY).await.ok()?;
        let mut subjects = registry.info_with_subjects(&self.filter).await.ok()?;
        let mut others = false;
        while let Some(entry) = poll_fn(|cx| Pin::new(&mut subjects).poll_next(cx)).await {
            let (subject, _) = entry.ok()?;
            others |= subject != self.subject;
        }
        Some(others)
    }

    /// Removes this copy's entry (best effort: otherwise it lapses after [`TTL`]).
    pub(super) async fn leave(&self, js: &jetstream::Context) {
        let purge = async {
            if let Ok(registry) = js.get_stream(REGISTRY).await {
                let _ = registry.purge().filter(&self.subject).await;
            }
        };
        let _ = tokio::time::timeout(ACK_TIMEOUT, purge).await;
    }

    /// The registry stream, made if missing.
    async fn registry(js: &jetstream::Context) -> Result<stream::Stream, BoxError> {
        let config = stream::Config {
            name: REGISTRY.to_string(),
            subjects: vec![format!("{REGISTRY}.>")],
            max_messages_per_subject: 1,
            max_age: TTL,
            storage: stream::StorageType::File,
            ..Default::default()
        };
        streams::make_stream(js, config).await.map_err(|(_, e)| e)
    }
}
