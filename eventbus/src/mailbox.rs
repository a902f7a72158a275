//! Mailboxes: one bounded `crossbeam-channel` per subscription. The publishing side
//! ([`Outbox`]) applies the subscriber's overflow policy; the worker's side ([`Inbox`]) takes
//! messages until the mailbox is shut and empty.
//!
//! The channel has exactly one sender, kept in a [`Slot`]. Every hand-out to the mailbox holds
//! the slot's lock, and all hand-outs of a topic are already serialised by the topic's order
//! lock, so the slot is contended only by `shut`, which takes it once and drops the sender.
//! From then on nothing arrives, the channel is disconnected, and the worker's receive ends
//! as soon as the mailbox is empty: no separate signal is needed to stop a worker.

use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Select, Sender, TrySendError};
use parking_lot::Mutex;

use crate::deadlock::TopicWaits;
use crate::observe;
use crate::stats::Counters;
use crate::subscription::SubscriptionCore;
use crate::{Message, Overflow};

/// What became of one message offered to one mailbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offer {
    /// Queued; `evicted` older messages were discarded for it (`DropOldest`).
    Accepted { evicted: usize },
    /// Discarded by `DropNewest`.
    Dropped,
    /// No room before the publish deadline.
    TimedOut,
    /// No room before a forced stop.
    Abandoned,
    /// The subscription was unsubscribed after the publisher took its list.
    Retired,
}

pub(crate) struct Outbox<T> {
    /// The mailbox's only sender; `retire` takes it (see the module docs).
    slot: Arc<Slot<T>>,
    /// For `DropOldest`: the publisher takes the oldest message out itself to make room.
    rx: Receiver<Arc<Message<T>>>,
    pub(crate) core: Arc<SubscriptionCore>,
}

/// Holds the mailbox's one sender. Locked by a publisher for the whole of one hand-out to
/// this mailbox (hand-outs of a topic are already serialised by its order lock, so only
/// `shut` contends), and by `shut`, which drops the sender: the channel is then
/// disconnected and the worker, once it has emptied it, sees the end.
pub(crate) struct Slot<T>(Mutex<Option<Sender<Arc<Message<T>>>>>);

/// Shutting a mailbox, without its message type.
pub(crate) trait Shut: Send + Sync {
    /// Nothing arrives after this returns. Waits at most for a publisher blocked on this
    /// very mailbox, which its worker is emptying (or a forced stop has woken).
    fn shut(&self);
    /// Messages in the mailbox.
    fn len(&self) -> usize;
}

struct Shutter<T> {
    slot: Arc<Slot<T>>,
    rx: Receiver<Arc<Message<T>>>,
}

impl<T: Send + Sync> Shut for Shutter<T> {
    fn shut(&self) {
        self.slot.0.lock().take();
    }

    fn len(&self) -> usize {
        self.rx.len()
    }
}

/// The worker's end: the mailbox's receiver.
pub(crate) struct Inbox<T> {
    rx: Receiver<Arc<Message<T>>>,
}

/// A mailbox of `capacity` slots, as its two ends; `core` makes the subscription's shared
/// state around the mailbox's shutter.
pub(crate) fn mailbox<T>(
    capacity: usize,
    core: impl FnOnce(Box<dyn Shut>) -> SubscriptionCore,
) -> (Outbox<T>, Inbox<T>)
where
    T: Send + Sync + 'static,
{
    let (tx, rx) = crossbeam_channel::bounded(capacity);
    let slot = Arc::new(Slot(Mutex::new(Some(tx))));
    let shutter = Shutter {
        slot: Arc::clone(&slot),
        rx: rx.clone(),
    };
    let core = Arc::new(core(Box::new(shutter)));
    let outbox = Outbox {
        slot,
        rx: rx.clone(),
        core,
    };
    (outbox, Inbox { rx })
}

impl<T> Outbox<T> {
    /// Whether a publish would have to wait here: a `Block` mailbox with no room.
    pub(crate) fn would_block(&self) -> bool {
        self.core.options.overflow == Overflow::Block && self.rx.is_full()
    }

    /// Offers one message, waiting for room (with `Block`) until `deadline` or a forced stop.
    pub(crate) fn offer(
        &self,
        message: &Arc<Message<T>>,
        deadline: Option<Instant>,
        stop: &Receiver<()>,
        waits: &TopicWaits,
    ) -> Offer {
        let slot = self.slot.0.lock();
        let Some(tx) = &*slot else {
            return Offer::Retired;
        };
        let counters = &self.core.counters;
        Counters::bump(&counters.received);
        let offer = match self.core.options.overflow {
            Overflow::Block => self.send_blocking(tx, Arc::clone(message), deadline, stop, waits),
            Overflow::DropNewest => match tx.try_send(Arc::clone(message)) {
                Ok(()) => Offer::Accepted { evicted: 0 },
                Err(TrySendError::Full(_)) => Offer::Dropped,
                Err(TrySendError::Disconnected(_)) => Offer::Retired,
            },
            Overflow::DropOldest => self.send_evicting(tx, Arc::clone(message)),
        };
        match offer {
            Offer::Accepted { evicted } => {
                for _ in 0..evicted {
                    Counters::bump(&counters.dropped);
                }
            }
            Offer::Dropped | Offer::TimedOut | Offer::Abandoned => {
                Counters::bump(&counters.dropped);
                let why = match offer {
                    Offer::Dropped => "drop-newest",
                    Offer::TimedOut => "publish timed out",
                    _ => "forced close",
                };
                observe::dropped(message.topic(), message.seq(), &self.core.name, why);
            }
            Offer::Retired => {}
        }
        offer
    }

    /// `Block`. While the publisher waits, the message is not counted as received, so
    /// `queued` does not include it; it is counted again just before it goes in (only this
    /// publisher puts messages in, so once there is room the send succeeds).
    fn send_blocking(
        &self,
        tx: &Sender<Arc<Message<T>>>,
        message: Arc<Message<T>>,
        deadline: Option<Instant>,
        stop: &Receiver<()>,
        waits: &TopicWaits,
    ) -> Offer {
        let received = &self.core.counters.received;
        let mut message = match tx.try_send(message) {
            Ok(()) => return Offer::Accepted { evicted: 0 },
            Err(TrySendError::Full(message)) => message,
            // Cannot happen: this outbox holds a receiver.
            Err(TrySendError::Disconnected(_)) => return Offer::Accepted { evicted: 0 },
        };
        Counters::unbump(received);
        loop {
            let mut select = Select::new();
            let send = select.send(tx);
            select.recv(stop);
            let ready = waits.waiting_on(&self.core, || match deadline {
                None => Some(select.ready()),
                Some(deadline) => select.ready_deadline(deadline).ok(),
            });
            Counters::bump(received);
            match ready {
                None => return Offer::TimedOut,
                Some(index) if index != send => return Offer::Abandoned,
                Some(_) => {}
            }
            match tx.try_send(message) {
                Ok(()) => return Offer::Accepted { evicted: 0 },
                Err(TrySendError::Full(back)) => {
                    message = back;
                    Counters::unbump(received);
                }
                Err(TrySendError::Disconnected(_)) => return Offer::Accepted { evicted: 0 },
            }
        }
    }

    /// `DropOldest`: room is made by taking the oldest message out. Only publishers (one at a
    /// time, under the topic's order lock) put messages in, so once one is taken out the send
    /// succeeds; the loop covers the worker emptying the mailbox in between.
    fn send_evicting(&self, tx: &Sender<Arc<Message<T>>>, mut message: Arc<Message<T>>) -> Offer {
        let mut evicted = 0;
        loop {
            match tx.try_send(message) {
                Ok(()) => return Offer::Accepted { evicted },
                Err(TrySendError::Full(back)) => {
                    message = back;
                    if let Ok(oldest) = self.rx.try_recv() {
                        observe::dropped(
                            oldest.topic(),
                            oldest.seq(),
                            &self.core.name,
                            "drop-oldest",
                        );
                        evicted += 1;
                    }
                }
                Err(TrySendError::Disconnected(_)) => return Offer::Retired,
            }
        }
    }
}

impl<T> Inbox<T> {
    /// Whether the mailbox is empty now.
    pub(crate) fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    /// The next message, waiting for one; `None` once the mailbox is shut and empty.
    pub(crate) fn next(&self) -> Option<Arc<Message<T>>> {
        self.rx.recv().ok()
    }
}
