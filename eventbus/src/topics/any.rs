//! A topic's state without its type ([`AnyTopic`]), for the engine's bookkeeping: its name
//! and counts, redelivery of a dead letter's message and its text, attaching observers, closing.

use std::any::Any;
use std::sync::Arc;

use crate::dead_letter::DeadLetterStore;
use crate::delivery::core::{Spill, SubscriptionCore};
use crate::delivery::observer::Inlet;
use crate::lifecycle::Lifecycle;

/// Why a redelivery handed nothing out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Redelivery {
    /// The topic keeps a log, shared by its subscriptions.
    Log,
    /// The subscription is no longer on the topic.
    Unsubscribed,
    /// No room, or the topic's turn held by a publisher waiting for room.
    Full,
    /// The bus is closing.
    Closed,
    /// The subscription's filter (or group key) did not take it.
    Rejected,
}

/// A topic's state without its type, for the bus's bookkeeping.
pub(crate) trait AnyTopic: Send + Sync {
    /// Hands `message`, a `Message<T>` of this topic's type, to one subscription again (see
    /// `TopicState::redeliver_to`).
    fn redeliver(
        &self,
        message: &(dyn Any + Send + Sync),
        subscription: u64,
        lifecycle: &Lifecycle,
        publisher: Option<&Arc<SubscriptionCore>>,
    ) -> Result<(), Redelivery>;
    /// `message`, a dead letter's `Message<T>` of this topic, as text: its JSON (feature
    /// `serde`, a `Serialize` type) or its `Debug`. `None` if it is not this topic's.
    #[cfg(feature = "dashboard")]
    fn show(&self, message: &(dyn Any + Send + Sync)) -> Option<String>;
    fn as_any(&self) -> &dyn Any;
    /// The same state as `Any`, for the directory's table by topic index.
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
    fn name(&self) -> &'static str;
    fn published(&self) -> u64;
    /// How many messages were numbered, if no publish holds the order lock now. Taking the
    /// lock is what tells a closing bus that no publish is under way (see `lifecycle.rs`).
    fn quiet_published(&self) -> Option<u64>;
    /// From now on the topic numbers only under its order lock: the bus is closing (see
    /// `numbering.rs`).
    fn close_numbering(&self);
    /// For a log topic: how many messages it keeps, and the oldest one's seq.
    fn log_extent(&self) -> Option<(u64, u64)>;
    /// For a dispatcher topic: the messages in its queue now, and the queue's capacity.
    fn queue_depth(&self) -> Option<(usize, usize)>;
    /// For a dispatcher topic: the messages its dispatcher has finished with.
    fn handed_out(&self) -> Option<u64>;
    /// After a forced stop: what a dispatcher topic's queue still holds becomes dead letters
    /// (see `dispatcher.rs`).
    fn close_out(&self, letters: &DeadLetterStore, spill: &mut Spill);
    /// Puts an observer on the topic's list: publishes that take the list after this offer
    /// it their messages.
    fn attach(&self, observer: Arc<Inlet>);
    /// Takes a subscription's mailboxes (by id: one, or a group's) off the list, in one
    /// edit; publishes that already took the list skip them once they are retired.
    fn remove(&self, mailboxes: &[u64]);
    fn clear(&self);
}
