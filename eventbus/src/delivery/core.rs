//! What one subscription's publishers, worker and bus share: its name and options, its
//! counters, its node in the wait graph, a way to retire its mailbox, and whether its worker
//! has finished.
//!
//! A leaf: the delivery kinds (mailbox, log, group) implement [`Retire`]; the engine, the lifecycle
//! and the workers hold the core.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

use crate::dead_letter::{DeadLetter, DeadLetterStore};
use crate::deadlock::WaitNode;
use crate::options::Options;
use crate::stats::{Counters, LogView, SubscriptionStats};
use crate::util::unwind::drop_quietly;

/// Retiring a subscription's delivery, without its message type.
pub(crate) trait Retire: Send + Sync {
    /// Nothing handed out after this returns arrives; the worker delivers what is queued,
    /// then stops. Never waits.
    fn retire(&self);

    /// For a subscription reading a topic's log (`delivery/log/`): where it stands. A mailbox
    /// counts what it receives; a log subscription's `received` is read off the log instead,
    /// so a publish writes nothing per subscription.
    fn log(&self) -> Option<LogView> {
        None
    }

    /// For a consumer group (`group.rs`): its members.
    fn members(&self) -> Option<Members<'_>> {
        None
    }

    /// For a mailbox: how many items wait in it now. Read for a worker that shares its
    /// mailbox with others (a group without a key), whose own counters cannot say.
    fn queued(&self) -> u64 {
        0
    }

    /// After a forced close: takes every message still queued and keeps it as a dead letter
    /// of `core`'s (counted there as `closed_out`), so the application can keep it and
    /// publish it again.
    /// Letters the store discards to make room go to `spill`: their messages' `Drop` is user
    /// code, which the closing thread must not run. Nothing for a log subscription, whose
    /// unread messages are the topic's history, not its own (see `Bus::close_timeout`).
    fn close_out(&self, core: &SubscriptionCore, letters: &DeadLetterStore, spill: &mut Spill) {
        let _ = (core, letters, spill);
    }
}

/// Dead letters a forced close pushed out of the store, to be dropped away from the closing
/// thread.
pub(crate) type Spill = Vec<DeadLetter>;

/// Why a forced close made a queued message a dead letter.
pub(crate) const NOT_HANDLED: &str =
    "not handled before the bus's close gave up (close_timeout): kept so it can be published again";

/// A consumer group's members: its workers, and for a group without a key the mailbox they
/// share (whose core counts what publishers hand it).
pub(crate) struct Members<'a> {
    pub(crate) workers: &'a [Arc<SubscriptionCore>],
    pub(crate) mailbox: Option<&'a Arc<SubscriptionCore>>,
}

/// Who consumes a subscription's mailbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Consumer {
    /// A thread worker of the bus's, which a close waits for.
    Worker,
    /// A task worker of the bus's (feature `tokio`), which a close waits for.
    #[cfg(feature = "tokio")]
    Task,
    /// The application itself (a stream): a close waits until it has taken everything
    /// accepted, not for it to go away.
    Caller,
    /// The publishers, who run an inline subscriber's handler inside each publish
    /// (`inline.rs`): nothing is queued, so there is nothing to wait for.
    Publisher,
}

/// What a subscription's publishers, worker and bus share.
pub(crate) struct SubscriptionCore {
    pub(crate) id: u64,
    pub(crate) name: Arc<str>,
    pub(crate) topic: &'static str,
    pub(crate) options: Options,
    pub(crate) consumer: Consumer,
    pub(crate) counters: Counters,
    /// This subscription in the wait graph (`deadlock.rs`).
    pub(crate) node: Arc<WaitNode>,
    /// The delivery, without its message type: to retire it.
    delivery: Box<dyn Retire>,
    /// Set by the worker as the very last thing it does.
    finished: AtomicBool,
    /// Its index in the lifecycle's running list while it is there, so that a worker's
    /// finish takes it out in one step (`lifecycle.rs`; written under that list's lock).
    pub(crate) running_at: std::sync::atomic::AtomicUsize,
    /// A worker of a group without a key: it takes from a mailbox other workers share, so
    /// it counts as `received` what it takes (`worker/mod.rs`).
    pub(crate) shares_mailbox: bool,
}

impl SubscriptionCore {
    pub(crate) fn new(
        id: u64,
        name: Arc<str>,
        topic: &'static str,
        options: Options,
        consumer: Consumer,
        delivery: Box<dyn Retire>,
    ) -> Self {
        SubscriptionCore {
            id,
            name,
            topic,
            options,
            consumer,
            counters: Counters::default(),
            node: WaitNode::new(id),
            delivery,
            finished: AtomicBool::new(false),
            running_at: std::sync::atomic::AtomicUsize::new(usize::MAX),
            shares_mailbox: false,
        }
    }

    /// Retires the delivery: nothing handed out after this returns arrives; the worker
    /// delivers what is queued, then stops. Never waits.
    pub(crate) fn retire(&self) {
        self.delivery.retire();
    }

    /// After a forced close: its queued messages as dead letters (see [`Retire::close_out`]).
    pub(crate) fn close_out(&self, letters: &DeadLetterStore, spill: &mut Spill) {
        self.delivery.close_out(self, letters, spill);
    }

    /// A message taken out of the mailbox: counted as taken, and, by a worker that shares
    /// its mailbox (a group without a key), as received too (the mailbox's own core counts
    /// what publishers handed it).
    #[inline]
    pub(crate) fn took(&self) {
        if self.shares_mailbox {
            Counters::bump(&self.counters.received);
        }
        Counters::bump(&self.counters.taken);
    }

    /// A message its worker took and gives up on, kept as a dead letter and counted (by
    /// the worker: see `Counters`).
    pub(crate) fn keep_dead_letter(&self, letters: &DeadLetterStore, letter: DeadLetter) {
        drop_quietly(letters.push_keeping(letter));
        Counters::bump(&self.counters.dead_lettered);
    }

    /// Marks the worker finished; only the worker calls it, last.
    pub(crate) fn mark_finished(&self) {
        self.finished.store(true, SeqCst);
    }

    /// Whether the worker has finished; for a group, every worker.
    pub(crate) fn is_finished(&self) -> bool {
        match self.delivery.members() {
            Some(members) => members.workers.iter().all(|w| w.is_finished()),
            None => self.finished.load(SeqCst),
        }
    }

    /// Whether `id` is this subscription or one of its group's members.
    pub(crate) fn is_or_holds(&self, id: u64) -> bool {
        self.id == id
            || self.delivery.members().is_some_and(|members| {
                members.workers.iter().any(|w| w.id == id)
                    || members.mailbox.is_some_and(|m| m.id == id)
            })
    }

    /// The ids its topic knows its mailboxes by: its own, or its group's mailboxes'.
    /// For a group without a key, whose workers share one mailbox: that mailbox's id, if
    /// `worker` is one of them (a worker's dead letter goes back to the shared mailbox).
    pub(crate) fn shared_mailbox_of(&self, worker: u64) -> Option<u64> {
        let members = self.delivery.members()?;
        let mailbox = members.mailbox?;
        members
            .workers
            .iter()
            .any(|w| w.id == worker)
            .then_some(mailbox.id)
    }

    /// What reached it and was neither taken nor dropped: its mailbox's queue, or on a log
    /// topic its whole backlog, past its window too (counted as dropped when a stream is
    /// dropped with it).
    #[cfg(feature = "tokio")]
    pub(crate) fn backlog(&self) -> u64 {
        use std::sync::atomic::Ordering::Acquire;
        let taken = self.counters.taken.load(Acquire) + self.counters.closed_out.load(Acquire);
        let dropped = self.counters.dropped.load(Acquire);
        match self.delivery.log() {
            Some(view) => view.received.saturating_sub(dropped + view.lapped + taken),
            None => self
                .counters
                .received
                .load(Acquire)
                .saturating_sub(dropped + taken),
        }
    }

    pub(crate) fn mailbox_ids(&self) -> Vec<u64> {
        match self.delivery.members() {
            None => vec![self.id],
            Some(Members {
                mailbox: Some(mailbox),
                ..
            }) => vec![mailbox.id],
            Some(members) => members.workers.iter().map(|w| w.id).collect(),
        }
    }

    /// Its nodes in the wait graph: its own, or its group's workers'.
    pub(crate) fn nodes(&self) -> Vec<Arc<WaitNode>> {
        match self.delivery.members() {
            None => vec![Arc::clone(&self.node)],
            Some(members) => members
                .workers
                .iter()
                .map(|w| Arc::clone(&w.node))
                .collect(),
        }
    }

    /// How many items wait in its mailbox (see [`Retire::queued`]).
    pub(crate) fn queued(&self) -> u64 {
        self.delivery.queued()
    }

    /// Messages received, and how many of them are not finished (queued or in the handler).
    pub(crate) fn received_unfinished(&self) -> (u64, u64) {
        if self.shares_mailbox {
            let (received, unfinished) = self.counters.received_unfinished();
            return (received, unfinished + self.delivery.queued());
        }
        match self.delivery.log() {
            None => self.counters.received_unfinished(),
            Some(_) => self
                .counters
                .received_unfinished_by(|| self.delivery.log().map_or(0, |view| view.received)),
        }
    }

    pub(crate) fn stats(&self) -> SubscriptionStats {
        if let Some(members) = self.delivery.members() {
            return SubscriptionStats::group(
                &self.name,
                self.topic,
                self.options.overflow,
                members.mailbox.map(|m| m.stats()),
                members.workers.iter().map(|w| w.stats()).collect(),
            );
        }
        SubscriptionStats::read(
            &self.name,
            self.topic,
            self.options.capacity,
            self.options.overflow,
            &self.counters,
            || self.delivery.log(),
        )
    }
}

impl fmt::Debug for SubscriptionCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubscriptionCore")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}
