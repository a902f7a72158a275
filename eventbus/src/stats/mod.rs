//! Counters: what each subscription and topic has done, and the snapshots `stats()` returns.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};

use crate::options::Overflow;

#[cfg(feature = "nats")]
pub(crate) mod bridge;

/// One subscription's counters. Each has one writer at a time: publishers (received, dropped)
/// write under their topic's order lock, the worker writes the rest; so a bump is a load and
/// a store, not a read-modify-write. A message the worker takes out of the mailbox counts as
/// `taken` until it is finished; one a stream's consumer leaves is `abandoned` (reported as
/// dropped: the publishers' counter has another writer). What a forced close empties out of
/// a mailbox is `closed_out`, written by the closing thread: taken and dead-lettered at once
/// (the worker's own `taken` and `dead_lettered` have the worker as their writer). Read without
/// a lock, a snapshot taken while messages move is a moment's view; once the bus is closed
/// they add up.
///
/// The publishers' counters and the worker's sit on different cache lines: sharing one, every
/// hand-out and every delivery would take the line from the other side's core.
#[derive(Debug, Default)]
#[repr(C)]
pub(crate) struct Counters {
    pub(crate) received: AtomicU64,
    pub(crate) dropped: AtomicU64,
    /// Messages its filter rejected: never received.
    pub(crate) filtered: AtomicU64,
    _apart: CacheLines,
    pub(crate) taken: AtomicU64,
    pub(crate) delivered: AtomicU64,
    pub(crate) abandoned: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) retried: AtomicU64,
    pub(crate) dead_lettered: AtomicU64,
    /// Taken out of the mailbox by a forced close and kept as dead letters: the one counter
    /// with more than one writer (closes), so it is added to with a read-modify-write.
    pub(crate) closed_out: AtomicU64,
}

/// Starts what follows it on a fresh pair of cache lines (CPUs prefetch lines in pairs).
#[derive(Debug, Default)]
#[repr(align(128))]
struct CacheLines;

impl Counters {
    /// Adds one; only for the counter's single writer (see above).
    #[inline]
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.store(counter.load(Relaxed) + 1, Release);
    }

    /// Adds `n`; only for the counter's single writer.
    #[inline]
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.store(counter.load(Relaxed) + n, Release);
    }

    /// Takes one off again; only for the counter's single writer.
    #[inline]
    pub(crate) fn unbump(counter: &AtomicU64) {
        counter.store(counter.load(Relaxed) - 1, Release);
    }

    /// `received`, and received less finished, from one reading.
    pub(crate) fn received_unfinished(&self) -> (u64, u64) {
        let (finished, received) = (self.finished(), self.received.load(Acquire));
        (received, received.saturating_sub(finished))
    }

    fn finished(&self) -> u64 {
        self.delivered.load(Acquire)
            + self.dead_lettered.load(Acquire)
            + self.closed_out.load(Acquire)
            + self.abandoned.load(Acquire)
            + self.dropped.load(Acquire)
    }

    /// As `received_unfinished`, for a subscription whose `received` is read elsewhere (a
    /// log subscription's, off its log): outcomes first, then `received`.
    pub(crate) fn received_unfinished_by(&self, received: impl FnOnce() -> u64) -> (u64, u64) {
        let finished = self.finished();
        let received = received();
        (received, received.saturating_sub(finished))
    }
}

/// Where a log subscription stands, read without a lock (a moment's view while messages
/// move; exact at rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogView {
    /// Messages published to it: from its start to the log's end (or to where it was
    /// retired).
    pub(crate) received: u64,
    /// The seq of the first message it has not finished.
    pub(crate) position: u64,
    /// Messages between its position and the log's end (or where it was retired).
    pub(crate) lag: u64,
    /// Messages the log trimmed before its worker read them, not yet counted as dropped.
    pub(crate) lapped: u64,
}

/// What one subscription has done.
///
/// Every message handed to it (`received`) ends as exactly one of `delivered`,
/// `dead_lettered`, `dropped`, or is still `queued` in the mailbox or `in_handler`:
/// `received == delivered + dead_lettered + dropped + queued + in_handler` whenever nothing
/// is moving (after close, say). `queued` never exceeds `capacity` then.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SubscriptionStats {
    /// The subscriber's name.
    pub name: String,
    /// Its topic's name.
    pub topic: &'static str,
    /// Its mailbox's size.
    pub capacity: usize,
    /// What its full mailbox does.
    pub overflow: Overflow,
    /// Messages published to its topic while it was subscribed, dropped ones included. On a
    /// log topic, those that came within its window: at most `capacity` past what its worker
    /// took (the rest of its `lag` is received as it reads on).
    pub received: u64,
    /// Messages waiting in its mailbox.
    pub queued: u64,
    /// Messages its worker has taken and not finished: the one its handler is on (retries
    /// included).
    pub in_handler: u64,
    /// Messages its handler finished without error.
    pub delivered: u64,
    /// Failed attempts (errors and panics), retries included.
    pub failed: u64,
    /// Retries made.
    pub retried: u64,
    /// Messages given up on and kept as dead letters.
    pub dead_lettered: u64,
    /// Messages its filter rejected (not counted in `received`).
    pub filtered: u64,
    /// Messages its overflow policy discarded, or a forced close (a `close_timeout` past its
    /// deadline) left undelivered; on a log topic, also what the log trimmed before this
    /// subscription read it. For an inline subscriber: the messages it refused (each also
    /// `failed`; the publisher has it back, so it is no dead letter).
    pub dropped: u64,
    /// On a log topic: the seq of the first message it has not finished (the one its handler
    /// is on, or the next to read). `None` for a mailbox.
    pub position: Option<u64>,
    /// On a log topic: how many messages it is behind the log's end. `None` for a mailbox.
    pub lag: Option<u64>,
    /// For a consumer group ([`Options::workers`](crate::Options::workers)): each worker's
    /// share, in worker order; the fields above are the group's totals. Empty for a
    /// subscription of one worker.
    pub workers: Vec<WorkerStats>,
}

/// What one worker of a consumer group has done: a hot key shows as one worker whose
/// `received` is far above the others'.
///
/// For a group with a key, each worker has its own mailbox, and
/// `received == delivered + dead_lettered + dropped + queued + in_handler` holds per worker at
/// rest. For a group without a key, the workers share one mailbox: a worker's `received` is
/// what it took from it, and `queued` and `filtered` (the mailbox's) are the group's only.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct WorkerStats {
    /// The worker's place in its group, from 0.
    pub index: usize,
    /// Messages handed to it (taken by it, in a group without a key).
    pub received: u64,
    /// Messages waiting in its mailbox.
    pub queued: u64,
    /// Messages it has taken and not finished.
    pub in_handler: u64,
    /// Messages it finished without error.
    pub delivered: u64,
    /// Its failed attempts, retries included.
    pub failed: u64,
    /// Its retries.
    pub retried: u64,
    /// Messages it gave up on.
    pub dead_lettered: u64,
    /// Messages the filter rejected for its mailbox.
    pub filtered: u64,
    /// Messages its mailbox's overflow policy (or a forced close) discarded.
    pub dropped: u64,
}

impl SubscriptionStats {
    /// A snapshot. Outcomes are read first, then what was taken, then `received`, so while
    /// messages move `queued` and `in_handler` may read high for a moment, never low.
    pub(crate) fn read(
        name: &str,
        topic: &'static str,
        capacity: usize,
        overflow: Overflow,
        counters: &Counters,
        log: impl FnOnce() -> Option<LogView>,
    ) -> Self {
        let delivered = counters.delivered.load(Acquire);
        let closed_out = counters.closed_out.load(Acquire);
        let dead_lettered = counters.dead_lettered.load(Acquire) + closed_out;
        let abandoned = counters.abandoned.load(Acquire);
        let failed = counters.failed.load(Relaxed);
        let retried = counters.retried.load(Relaxed);
        let taken = counters.taken.load(Acquire) + closed_out;
        let dropped = counters.dropped.load(Acquire);
        let view = log();
        let (received, dropped) = match view {
            None => (counters.received.load(Acquire), dropped),
            Some(view) => (view.received, dropped + view.lapped),
        };
        let filtered = counters.filtered.load(Relaxed);
        let finished = delivered + dead_lettered + abandoned;
        let backlog = received.saturating_sub(dropped + taken);
        // A log subscription's mailbox is its window of the log: `capacity` messages past
        // what its worker took. What lies beyond has not reached it yet (`lag` counts it),
        // and is received as it comes within reach; so `queued` never exceeds `capacity`.
        let cap = capacity as u64;
        let (received, queued) = match view {
            Some(_) if backlog > cap => (received - (backlog - cap), cap),
            _ => (received, backlog),
        };
        SubscriptionStats {
            name: name.to_owned(),
            topic,
            capacity,
            overflow,
            received,
            queued,
            in_handler: taken.saturating_sub(finished),
            delivered,
            failed,
            retried,
            dead_lettered,
            filtered,
            dropped: dropped + abandoned,
            position: view.map(|view| view.position),
            lag: view.map(|view| view.lag),
            workers: Vec::new(),
        }
    }

    /// A consumer group's snapshot, from its workers' (and, without a key, its shared
    /// mailbox's): the totals, and each worker's share. The identity holds for the totals:
    /// a shared mailbox's `received` is what it queued, dropped or gave its workers.
    pub(crate) fn group(
        name: &str,
        topic: &'static str,
        overflow: Overflow,
        mailbox: Option<SubscriptionStats>,
        workers: Vec<SubscriptionStats>,
    ) -> Self {
        let sum = |field: fn(&SubscriptionStats) -> u64| workers.iter().map(field).sum::<u64>();
        let mut group = SubscriptionStats {
            name: name.to_owned(),
            topic,
            capacity: workers.iter().map(|w| w.capacity).sum(),
            overflow,
            received: sum(|w| w.received),
            queued: sum(|w| w.queued),
            in_handler: sum(|w| w.in_handler),
            delivered: sum(|w| w.delivered),
            failed: sum(|w| w.failed),
            retried: sum(|w| w.retried),
            dead_lettered: sum(|w| w.dead_lettered),
            filtered: sum(|w| w.filtered),
            dropped: sum(|w| w.dropped),
            position: None,
            lag: None,
            workers: workers
                .iter()
                .enumerate()
                .map(|(index, w)| WorkerStats {
                    index,
                    received: w.received,
                    queued: w.queued,
                    in_handler: w.in_handler,
                    delivered: w.delivered,
                    failed: w.failed,
                    retried: w.retried,
                    dead_lettered: w.dead_lettered,
                    filtered: w.filtered,
                    dropped: w.dropped,
                })
                .collect(),
        };
        if let Some(mailbox) = mailbox {
            // The workers' `received` is what they took; the mailbox's, what it was handed.
            let taken = group.received;
            group.capacity = mailbox.capacity;
            group.received = mailbox.received;
            group.dropped += mailbox.dropped;
            group.filtered = mailbox.filtered;
            // What a forced close emptied out of the shared mailbox is counted on its core.
            group.dead_lettered += mailbox.dead_lettered;
            group.queued = mailbox
                .received
                .saturating_sub(mailbox.dropped)
                .saturating_sub(mailbox.dead_lettered)
                .saturating_sub(taken);
        }
        group
    }
}

/// What one topic has seen.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct TopicStats {
    /// The topic's name.
    pub name: &'static str,
    /// Messages published (numbered) on it.
    pub published: u64,
    /// Its subscriptions not unsubscribed (after close: those it had at the end).
    pub subscribers: usize,
    /// For a log topic: how many messages its log keeps now. `None` without a log.
    pub retained: Option<u64>,
    /// For a log topic: the seq of the oldest message kept (the next one's, when none is).
    pub oldest: Option<u64>,
    /// For a dispatcher topic (`#[topic(dispatcher)]`): the messages in its queue now, not
    /// yet handed out. `None` without a dispatcher, or when its thread could not start (then
    /// the topic has no queue in use: its publishers hand out themselves, as without one).
    pub queue_depth: Option<usize>,
    /// For a dispatcher topic: the most its queue holds (`queue = N`); `None` as for
    /// `queue_depth`.
    pub queue_capacity: Option<usize>,
    /// For a dispatcher topic: the messages its dispatcher has finished with, each handed to
    /// every subscription and observer (or, after a forced close, made their dead letters).
    /// `published - handed_out` are in its queue or being handed out now, so when it equals
    /// `published` every mailbox has had every message published so far. It reads low for a
    /// moment, never high. `None` as for `queue_depth` (a dispatcher whose thread could not
    /// start counts nothing, so no count is shown rather than a wrong one).
    pub handed_out: Option<u64>,
}

/// A snapshot of the whole bus, from [`Bus::stats`](crate::Bus::stats).
///
/// Its `Display` is an aligned table, one row per subscription.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct BusStats {
    /// Every topic the bus has seen, by name.
    pub topics: Vec<TopicStats>,
    /// Every subscription not unsubscribed, in the order they started.
    pub subscriptions: Vec<SubscriptionStats>,
    /// Dead letters held now.
    pub dead_letters: usize,
    /// Dead letters the bounded store had to discard.
    pub dead_letters_discarded: u64,
    /// Dead letters the `on_dead_letter` (or `on_dead_letter_async`) hook was not shown
    /// because it fell behind (they are still in the store, or counted as discarded).
    pub dead_letter_hook_skipped: u64,
    /// Each NATS bridge connected to the bus and not dropped (feature `nats`): its exports
    /// and imports.
    #[cfg(feature = "nats")]
    pub bridges: Vec<bridge::BridgeStats>,
}

impl fmt::Display for BusStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const HEADER: [&str; 11] = [
            "topic",
            "subscriber",
            "capacity",
            "received",
            "queued",
            "handling",
            "delivered",
            "failed",
            "retried",
            "dead",
            "dropped",
        ];
        // One topic's rows together, in the topics' name order; a topic's subscriptions in
        // the order they subscribed.
        let mut subscriptions: Vec<&SubscriptionStats> = self.subscriptions.iter().collect();
        subscriptions.sort_by_key(|s| s.topic);
        let rows: Vec<[String; 11]> = subscriptions
            .into_iter()
            .map(|s| {
                [
                    s.topic.to_owned(),
                    s.name.clone(),
                    s.capacity.to_string(),
                    s.received.to_string(),
                    s.queued.to_string(),
                    s.in_handler.to_string(),
                    s.delivered.to_string(),
                    s.failed.to_string(),
                    s.retried.to_string(),
                    s.dead_lettered.to_string(),
                    s.dropped.to_string(),
                ]
            })
            .collect();
        let mut widths = HEADER.map(str::len);
        for row in &rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let line = |f: &mut fmt::Formatter<'_>, cells: &[&str]| -> fmt::Result {
            for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
                let sep = if i == 0 { "" } else { "  " };
                if i < 2 {
                    write!(f, "{sep}{cell:<width$}")?;
                } else {
                    write!(f, "{sep}{cell:>width$}")?;
                }
            }
            writeln!(f)
        };
        line(f, &HEADER)?;
        for row in &rows {
            line(f, &row.each_ref().map(String::as_str))?;
        }
        for topic in &self.topics {
            write!(
                f,
                "topic {}: {} published, {} subscriber(s)",
                topic.name, topic.published, topic.subscribers
            )?;
            if let (Some(retained), Some(oldest)) = (topic.retained, topic.oldest) {
                write!(f, ", log of {retained} from seq {oldest}")?;
            }
            writeln!(f)?;
        }
        #[cfg(feature = "nats")]
        for bridge in &self.bridges {
            write!(f, "{bridge}")?;
        }
        write!(
            f,
            "dead letters: {} kept, {} discarded",
            self.dead_letters, self.dead_letters_discarded
        )
    }
}

/// What [`Bus::close_timeout`](crate::Bus::close_timeout) (or `close`) left undone.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct CloseReport {
    /// Whether everything accepted was delivered, every worker finished and the
    /// dead-letter hook (`on_dead_letter` or `on_dead_letter_async`) saw every letter, in time.
    pub completed: bool,
    /// Every subscription, unsubscribed ones still running included, as it stood when the
    /// close returned: what was still `queued` and `in_handler`.
    pub subscriptions: Vec<SubscriptionStats>,
    /// Whether the dead-letter hook (`on_dead_letter` or `on_dead_letter_async`) was still
    /// running when the close returned; it finishes on its own thread (or task).
    pub hook_running: bool,
}

impl CloseReport {
    /// The subscriptions that still held something: queued, or in their handler.
    pub fn unfinished(&self) -> impl Iterator<Item = &SubscriptionStats> {
        self.subscriptions
            .iter()
            .filter(|s| s.queued > 0 || s.in_handler > 0)
    }
}
