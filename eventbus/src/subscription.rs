//! Subscriptions: the handle a subscriber's owner holds, and the state a subscription shares
//! between its publishers, its worker and the bus.

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::bus::Inner;
use crate::deadlock::Waits;
use crate::mailbox::Shut;
use crate::stats::Counters;
use crate::{Options, SubscriptionStats};

/// What a subscription's publishers, worker and bus share.
pub(crate) struct SubscriptionCore {
    pub(crate) id: u64,
    pub(crate) name: Arc<str>,
    pub(crate) topic: &'static str,
    pub(crate) options: Options,
    pub(crate) counters: Counters,
    /// What this subscription's worker waits on while its handler publishes: set and cleared
    /// by that worker, read by others looking for a wait that can never end (`deadlock.rs`).
    pub(crate) waits: Mutex<Waits>,
    /// The mailbox, without its message type: to shut it and to count what it holds.
    mailbox: Box<dyn Shut>,
}

impl SubscriptionCore {
    pub(crate) fn new(
        id: u64,
        name: Arc<str>,
        topic: &'static str,
        options: Options,
        mailbox: Box<dyn Shut>,
    ) -> Self {
        SubscriptionCore {
            id,
            name,
            topic,
            options,
            counters: Counters::default(),
            waits: Mutex::new(Waits::default()),
            mailbox,
        }
    }

    /// Whether the worker has stopped.
    pub(crate) fn stopped(&self) -> bool {
        self.mailbox.worker_gone()
    }

    /// Messages received, and how many of them are unfinished (see `queued`).
    pub(crate) fn received_unfinished(&self) -> (u64, u64) {
        self.counters.received_unfinished()
    }

    /// Shuts the mailbox: nothing published after this returns arrives; the worker delivers
    /// what is queued, then stops. `wake` as for [`Shut::shut`].
    pub(crate) fn retire(&self, wake: bool) {
        self.mailbox.shut(wake);
    }

    /// Messages received and not yet finished: in the mailbox, or taken by the worker.
    /// Derived from the counters (outcomes read first), so it may read high for a moment
    /// while messages move, never low.
    pub(crate) fn queued(&self) -> u64 {
        self.counters.unfinished()
    }

    /// Whether the worker holds a message it has not finished.
    pub(crate) fn in_handler(&self) -> bool {
        self.queued() > self.mailbox.len() as u64
    }

    pub(crate) fn stats(&self) -> SubscriptionStats {
        SubscriptionStats::read(
            &self.name,
            self.topic,
            self.options.capacity,
            self.options.overflow,
            &self.counters,
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

/// A running subscription: one mailbox and one worker thread.
///
/// Dropping the handle detaches it: the subscription keeps running until
/// [`unsubscribe`](Subscription::unsubscribe) or the bus closes.
pub struct Subscription {
    inner: Arc<Inner>,
    core: Arc<SubscriptionCore>,
}

impl Subscription {
    pub(crate) fn new(inner: Arc<Inner>, core: Arc<SubscriptionCore>) -> Self {
        Subscription { inner, core }
    }

    /// The subscriber's name.
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// What this subscription has done so far.
    pub fn stats(&self) -> SubscriptionStats {
        self.core.stats()
    }

    /// Stops the subscription: nothing published after this call arrives, what is already
    /// queued is delivered, and it returns when the worker has stopped.
    ///
    /// Called from the subscription's own handler it cannot wait for itself: the worker stops
    /// once that handler returns and the mailbox is empty.
    ///
    /// Returns the subscription's final stats; it leaves [`Bus::stats`](crate::Bus::stats).
    pub fn unsubscribe(self) -> SubscriptionStats {
        self.inner.unsubscribe(&self.core);
        self.core.stats()
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("name", &self.core.name)
            .field("topic", &self.core.topic)
            .finish_non_exhaustive()
    }
}
