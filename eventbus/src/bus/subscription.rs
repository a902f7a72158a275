//! The handle a subscriber's owner holds: its name, its stats, and `unsubscribe`.

use std::fmt;
use std::sync::Arc;

use crate::delivery::core::SubscriptionCore;
use crate::engine::Engine;
use crate::stats::SubscriptionStats;

/// A running subscription: one mailbox and one worker.
///
/// Dropping the handle detaches it: the subscription keeps running until
/// [`unsubscribe`](Subscription::unsubscribe) or the bus closes.
pub struct Subscription {
    engine: Arc<Engine>,
    core: Arc<SubscriptionCore>,
}

impl Subscription {
    pub(crate) fn new(engine: Arc<Engine>, core: Arc<SubscriptionCore>) -> Self {
        Subscription { engine, core }
    }

    /// Its id on the bus.
    #[cfg(feature = "nats")]
    pub(crate) fn id(&self) -> u64 {
        self.core.id
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
    /// queued is delivered, and it returns when the worker has finished. It never waits
    /// behind a publisher blocked on another subscriber's mailbox.
    ///
    /// From a handler of the same bus it cannot always wait: from the subscription's own
    /// handler, or from a handler whose subscription this one's worker waits for (say it is
    /// blocked publishing into the caller's full mailbox, directly or through others), waiting
    /// would never end. There it returns at once, and the worker finishes on its own once its
    /// mailbox is empty; a close still waits for that.
    ///
    /// Returns the subscription's stats (final, unless it returned early as above); it
    /// leaves [`Bus::stats`](crate::Bus::stats) at once.
    pub fn unsubscribe(self) -> SubscriptionStats {
        self.engine.unsubscribe(&self.core);
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
