//! The bridge's counters ([`Board`]): one set per export and per import, bumped by the
//! export's sender and the importer, read by [`Bridge::stats`] and the bus's `stats()`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::*;
use crate::stats::bridge::{BridgeStats, ExportStats, ImportStats};

/// One export's counters (see [`ExportStats`]), each written by its sender task alone.
#[derive(Default)]
pub(super) struct ExportCounters {
    pub(super) taken: AtomicU64,
    pub(super) sent: AtomicU64,
    pub(super) resent: AtomicU64,
    pub(super) acked: AtomicU64,
    pub(super) dead_lettered: AtomicU64,
}

/// One import's counters (see [`ImportStats`]), each written by its importer task alone.
#[derive(Default)]
pub(super) struct ImportCounters {
    pub(super) received: AtomicU64,
    pub(super) redelivered: AtomicU64,
    pub(super) imported: AtomicU64,
    pub(super) acked: AtomicU64,
    pub(super) skipped: AtomicU64,
    pub(super) dead_lettered: AtomicU64,
    pub(super) held: AtomicU64,
    pub(super) recreated: AtomicU64,
    /// See [`ImportStats::problem`]; written by the importer task alone.
    /// Lock order: a leaf.
    pub(super) problem: Mutex<Option<String>>,
}

/// Adds one to a counter that has one writer.
pub(super) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Relaxed);
}

/// Every export's and import's counters, in the order they started; the bridge and the
/// bus's `stats()` read it.
pub(super) struct Board {
    id: String,
    client: async_nats::Client,
    /// Lock order: a leaf (row 9 of `engine/mod.rs`, inside `Engine::bridges`).
    exports: Mutex<Vec<(&'static str, Arc<ExportCounters>)>>,
    /// Lock order: a leaf, as `exports` (never held with it).
    imports: Mutex<Vec<(&'static str, String, Arc<ImportCounters>)>>,
}

impl Board {
    pub(super) fn new(id: String, client: async_nats::Client) -> Board {
        Board {
            id,
            client,
            exports: Mutex::new(Vec::new()),
            imports: Mutex::new(Vec::new()),
        }
    }

    /// New counters for an export of `topic`.
    pub(super) fn export(&self, topic: &'static str) -> Arc<ExportCounters> {
        let counters = Arc::new(ExportCounters::default());
        self.exports.lock().push((topic, Arc::clone(&counters)));
        counters
    }

    /// New counters for the import of `topic` under `name`.
    pub(super) fn import(&self, topic: &'static str, name: &str) -> Arc<ImportCounters> {
        let counters = Arc::new(ImportCounters::default());
        self.imports
            .lock()
            .push((topic, name.to_string(), Arc::clone(&counters)));
        counters
    }

    /// A snapshot: a moment's view while messages move.
    pub(super) fn stats(&self) -> BridgeStats {
        let exports = self
            .exports
            .lock()
            .iter()
            .map(|(topic, c)| {
                let (acked, dead) = (c.acked.load(Relaxed), c.dead_lettered.load(Relaxed));
                let taken = c.taken.load(Relaxed);
                ExportStats {
                    topic,
                    subject: subject(topic),
                    taken,
                    sent: c.sent.load(Relaxed),
                    resent: c.resent.load(Relaxed),
                    acked,
                    dead_lettered: dead,
                    pending: taken.saturating_sub(acked + dead),
                }
            })
            .collect();
        let imports = self
            .imports
            .lock()
            .iter()
            .map(|(topic, name, c)| ImportStats {
                topic,
                name: name.clone(),
                received: c.received.load(Relaxed),
                redelivered: c.redelivered.load(Relaxed),
                imported: c.imported.load(Relaxed),
                acked: c.acked.load(Relaxed),
                skipped: c.skipped.load(Relaxed),
                dead_lettered: c.dead_lettered.load(Relaxed),
                held: c.held.load(Relaxed),
                recreated: c.recreated.load(Relaxed),
                problem: c.problem.lock().clone(),
            })
            .collect();
        let connects = self.client.statistics().connects.load(Relaxed);
        BridgeStats {
            id: self.id.clone(),
            reconnects: connects.saturating_sub(1),
            exports,
            imports,
        }
    }
}
