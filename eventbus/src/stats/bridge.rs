//! What a NATS bridge (feature `nats`) has done, per export and per import: the snapshots
//! [`Bus::stats`](crate::Bus::stats) and `Bridge::stats` return. The bridge keeps the
//! counters; the bus only asks each live bridge for its snapshot.

use std::fmt;

/// How a bridge tells its stats: the bus keeps a weak handle to it, the bridge the strong.
pub(crate) type BridgeLook = dyn Fn() -> BridgeStats + Send + Sync;

/// One bridge's snapshot: its connection and every export and import it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct BridgeStats {
    /// The bridge's id (`Bridge::id`), as its exports' `Eventbus-Origin` header carries it.
    pub id: String,
    /// How many times the client connected to the server again after losing it.
    pub reconnects: u64,
    /// Each topic it exports, in the order the exports started.
    pub exports: Vec<ExportStats>,
    /// Each import it runs, in the order they started.
    pub imports: Vec<ImportStats>,
}

/// One exported topic: what its sender took from the export subscriber and what the server
/// acknowledged. At rest `taken == acked + dead_lettered + pending`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ExportStats {
    /// The topic's name.
    pub topic: &'static str,
    /// The subject it is sent on.
    pub subject: String,
    /// Messages the sender took from the export subscriber.
    pub taken: u64,
    /// Publishes sent to the server, first sends and resends.
    pub sent: u64,
    /// Of those, resends: after a missing ack, a lost connection or a refused expectation.
    pub resent: u64,
    /// Messages the server acknowledged: stored in the stream.
    pub acked: u64,
    /// Messages that could not be sent (refused by the server, or unsent when `close` gave
    /// up): dead letters of the export subscriber.
    pub dead_lettered: u64,
    /// Messages taken and not yet acknowledged nor dead letters: in flight or waiting for
    /// the server.
    pub pending: u64,
}

/// One import: a durable consumer read by this bridge, its messages published on the bus.
/// Every message received is, once settled, imported, skipped, dead-lettered, or held
/// (came ahead of a missing one, and is sent again later); except the one in hand when the
/// import stops (a close, or the bus closing), which is neither and is sent again.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ImportStats {
    /// The topic's name.
    pub topic: &'static str,
    /// The durable consumer's name (`import::<T>(name)`).
    pub name: String,
    /// Messages the server delivered to this bridge, redeliveries included.
    pub received: u64,
    /// Of those, deliveries the server had made before (its delivery count above 1).
    pub redelivered: u64,
    /// Messages published on the bus.
    pub imported: u64,
    /// Acks sent to the server (a message imported, a copy already imported, one skipped).
    pub acked: u64,
    /// Messages acked without being published: copies already imported, and messages this
    /// bridge exported itself.
    pub skipped: u64,
    /// Messages that could not be imported (undecodable, or refused by an inline
    /// subscriber): dead letters of `nats-import:<name>`, terminated on the server.
    pub dead_lettered: u64,
    /// Messages not acked because they came ahead of one still missing: the server sends
    /// them again.
    pub held: u64,
    /// How many times the importer made its pull subscription again because it heard no
    /// heartbeat while the server still answered (see the watchdog in the bridge's docs).
    pub recreated: u64,
    /// Why the import is waiting instead of importing, while it cannot go on and trying
    /// again will not help until someone acts: a keyed import whose stream's partition
    /// count, declared after the import started, is not one the bridge can use. The import
    /// keeps looking and starts once the declaration is readable. `None` while it works.
    pub problem: Option<String>,
}

impl fmt::Display for BridgeStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "bridge {}: {} reconnect(s)", self.id, self.reconnects)?;
        for e in &self.exports {
            writeln!(
                f,
                "  export {} ({}): {} taken, {} sent ({} resent), {} acked, {} pending, {} dead",
                e.topic, e.subject, e.taken, e.sent, e.resent, e.acked, e.pending, e.dead_lettered
            )?;
        }
        for i in &self.imports {
            writeln!(
                f,
                "  import {} as {}: {} received ({} redelivered), {} imported, {} acked, \
                 {} skipped, {} held, {} dead",
                i.topic,
                i.name,
                i.received,
                i.redelivered,
                i.imported,
                i.acked,
                i.skipped,
                i.held,
                i.dead_lettered
            )?;
            if let Some(problem) = &i.problem {
                writeln!(f, "    waiting: {problem}")?;
            }
        }
        Ok(())
    }
}
