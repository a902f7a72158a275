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
//! This module holds what the engine needs of a group without its message type: the key, the
//! group's delivery (retiring every member, and the members for stats), and a shared-mailbox
//! worker's delivery.

use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::handler::Failure;
use crate::message_fn::MessageFn;
use crate::subscriber::{Members, Retire, SubscriptionCore};
use crate::Message;

/// A group's handler, shared by its workers.
pub(crate) type SharedRun<T> = Arc<dyn Fn(&Message<T>) -> Result<(), Failure> + Send + Sync>;

/// A group's key function, without its topic's type (which it checks), as a hash.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Key(MessageFn<u64>);

impl Key {
    pub(crate) fn new<T: 'static, K: Hash>(key: impl Fn(&T) -> K + Send + Sync + 'static) -> Self {
        Key(MessageFn::new(move |message: &T| {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            key(message).hash(&mut hasher);
            hasher.finish()
        }))
    }

    /// Whether it was written for topic `T`; else the type it was written for.
    pub(crate) fn check<T: 'static>(&self) -> Result<(), &'static str> {
        self.0.check::<T>()
    }

    /// The lane (of `of`) the message's key picks; `None` if the key function panicked. The
    /// same key always picks the same lane (the hasher's keys are fixed).
    #[inline]
    pub(crate) fn lane(&self, message: &dyn Any, of: usize) -> Option<usize> {
        self.0.call(message).map(|hash| (hash % of as u64) as usize)
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.show("Key", f)
    }
}

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
}
