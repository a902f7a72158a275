//! Redelivery: a dead letter's message handed again to the one subscription (a mailbox, or
//! an observer) that gave up on it, under the topic's order lock, without waiting.

use std::sync::Arc;

use crate::deadlock::{self, Patience, WaitNode};
use crate::delivery::core::SubscriptionCore;
use crate::delivery::mailbox::Offer;
use crate::delivery::observer;
use crate::lifecycle::Lifecycle;
use crate::message::{AnyMessage, Message};
use crate::topic::Topic;
use crate::topics::any::Redelivery;
use crate::topics::state::TopicState;
#[cfg(feature = "tokio")]
use crate::topics::state::TurnOver;

impl<T: Topic> TopicState<T> {
    /// Hands `message` (a dead letter's) to subscription `subscription` alone, again, under
    /// the order lock, without waiting: for the lock only while its holder is moving, not at
    /// all for room. It keeps its seq; the subscription counts it received once more.
    pub(super) fn redeliver_to(
        &self,
        message: Message<T>,
        subscription: u64,
        lifecycle: &Lifecycle,
        publisher: Option<&Arc<SubscriptionCore>>,
    ) -> Result<(), Redelivery> {
        if self.log.is_some() {
            return Err(Redelivery::Log);
        }
        self.under_order(lifecycle, publisher, |_| {
            let subscribers = self.subscribers.load();
            let Some(outbox) = subscribers.iter().find(|o| o.core.id == subscription) else {
                return Err(Redelivery::Unsubscribed);
            };
            // Any policy: with `DropNewest` the message would be dropped, with `DropOldest` a
            // queued one evicted, with `Block` the redelivery would wait. Only the order
            // lock's holder puts messages in, so room found here stays until the offer.
            if outbox.is_full() {
                return Err(Redelivery::Full);
            }
            redelivered(outbox.offer(message, lifecycle.stop_signal(), &self.waits))
        })
    }

    /// Hands `message` (an observer's dead letter, of this topic) to observer `observer`
    /// alone, again, under the order lock and the observer's turn, without waiting, as
    /// [`redeliver_to`](Self::redeliver_to) does for a mailbox. A log topic's observers have
    /// mailboxes, so this works on log topics too.
    pub(super) fn redeliver_to_observer(
        &self,
        message: Message<AnyMessage>,
        observer: u64,
        lifecycle: &Lifecycle,
        publisher: Option<&Arc<SubscriptionCore>>,
    ) -> Result<(), Redelivery> {
        self.under_order(lifecycle, publisher, |node| {
            let observers = self.observers.load();
            let Some(inlet) = observers.iter().find(|inlet| inlet.id() == observer) else {
                return Err(Redelivery::Unsubscribed);
            };
            // Lock order: row 5 (the observer's turn), only tried, under row 4.
            let Ok(inside) = inlet.enter(observer::TurnWait::Never, node, &self.waits) else {
                return Err(Redelivery::Full);
            };
            if inside.is_full() {
                return Err(Redelivery::Full);
            }
            redelivered(inside.offer_again(message, lifecycle.stop_signal(), &self.waits))
        })
    }

    /// Runs `hand` under the order lock, taken only while its holder is moving, once the bus
    /// accepts the publisher's messages; `hand` gets the publisher's node in the wait graph.
    fn under_order(
        &self,
        lifecycle: &Lifecycle,
        publisher: Option<&Arc<SubscriptionCore>>,
        hand: impl FnOnce(Option<&Arc<WaitNode>>) -> Result<(), Redelivery>,
    ) -> Result<(), Redelivery> {
        let node = publisher.map(|publisher| &publisher.node);
        // Declared before the guard, so dropped after it: tasks waiting for the turn hear.
        #[cfg(feature = "tokio")]
        let _turn = TurnOver(self);
        // Lock order: row 4 (the order lock); see engine/mod.rs.
        let Ok(mut order) =
            deadlock::lock_order(&*self.order, &self.waits, node, Patience::WhileMoving)
        else {
            return Err(Redelivery::Full);
        };
        // A message put in past `publish_at_once`'s count of room.
        order.forget_room();
        if !lifecycle.accepts(publisher.is_some()) {
            return Err(Redelivery::Closed);
        }
        hand(node)
    }
}

/// What an offer of a redelivered message came to.
fn redelivered(offer: Offer) -> Result<(), Redelivery> {
    match offer {
        Offer::Accepted => Ok(()),
        // `Elsewhere`: a group's key now picks another worker's mailbox (a key function that
        // answers differently for the same message); this one no longer takes it.
        Offer::Retired | Offer::Elsewhere => Err(Redelivery::Unsubscribed),
        // Its filter rejects it now, or its filter or key panicked (counted as dropped): not
        // handed out, so the letter must stay.
        Offer::Filtered | Offer::Dropped => Err(Redelivery::Rejected),
        Offer::Abandoned => Err(Redelivery::Closed),
    }
}
