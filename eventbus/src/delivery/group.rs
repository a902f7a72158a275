//! Consumer groups: one subscription whose messages are shared among several workers
//! (`Options::workers`).
//!
//! A keyed group (`Options::key`) has one mailbox per worker. Every mailbox of the group is
//! on the topic's subscriber list, each knowing its lane (its index and the group's size);
//! a publish offers the message to each, and only the mailbox whose lane the key's hash picks
//! takes it (`mailbox.rs`, `Outbox::offer`), under the topic's order lock like any hand-out,
//! so one key's messages reach one worker in topic order. The group's mailboxes go on the
//! list, and come off it, in one edit: no publish sees part of a group.
//!
//! A group without a key has one mailbox that all its workers take from (a `crossbeam`
//! channel has many receivers): each message is taken once, in no promised order. The
//! mailbox's publisher-side counters live on a core of its own, each worker's on its own
//! core (a counter has one writer), and the group's stats add them up.
//!
//! On a log topic there is no mailbox: a keyed group's workers each read the log at their
//! own position (`log/reader.rs`), and a keyless group's take turns at one reader they share
//! (`log/shared.rs`), whose core stands where the shared mailbox's would.
//!
//! This module holds what the engine needs of a group without its message type: the
//! group's delivery (retiring every member, and the members for stats), and a shared-mailbox
//! worker's delivery.

use std::sync::Arc;

use crate::dead_letter::DeadLetterStore;
use crate::delivery::core::{Members, Retire, Spill, SubscriptionCore};
use crate::handler::Failure;
use crate::message::Message;

/// A group's handler, shared by its workers.
pub(crate) type SharedRun<T> = Arc<dyn Fn(&Message<T>) -> Result<(), Failure> + Send + Sync>;

/// A group's delivery: its workers' cores, and the shared mailbox's core for a group without
/// a key. Retiring it retires every mailbox of the group.
pub(crate) struct Group {
    workers: Vec<Arc<SubscriptionCore>>,
    mailbox: Option<Arc<SubscriptionCore>>,
}

impl Group {
    pub(crate) fn new(
        workers: Vec<Arc<SubscriptionCore>>,
        mailbox: Option<Arc<SubscriptionCore>>,
    ) -> Self {
        Group { workers, mailbox }
    }
}

impl Retire for Group {
    fn retire(&self) {
        if let Some(mailbox) = &self.mailbox {
            mailbox.retire();
        }
        for worker in &self.workers {
            worker.retire();
        }
    }

    fn members(&self) -> Option<Members<'_>> {
        Some(Members {
            workers: &self.workers,
            mailbox: self.mailbox.as_ref(),
        })
    }

    fn close_out(&self, _: &SubscriptionCore, letters: &DeadLetterStore, spill: &mut Spill) {
        for worker in &self.workers {
            worker.close_out(letters, spill);
        }
    }
}

/// The delivery of one worker of a group without a key: the shared mailbox's.
pub(crate) struct Shared(pub(crate) Arc<SubscriptionCore>);

impl Retire for Shared {
    fn retire(&self) {
        self.0.retire();
    }

    fn queued(&self) -> u64 {
        self.0.queued()
    }

    /// The shared mailbox's messages, counted on its own core (which the group's stats add).
    fn close_out(&self, _: &SubscriptionCore, letters: &DeadLetterStore, spill: &mut Spill) {
        self.0.close_out(letters, spill);
    }
}
