//! Mailboxes: one bounded `crossbeam-channel` per subscription. The publishing side
//! ([`Outbox`]) applies the subscriber's overflow policy; the worker's side ([`Inbox`]) hands
//! out the next message until the subscription is retired or the bus is stopped.
//!
//! Every hand-out to one mailbox happens under its subscription's `accepting` lock, and all
//! hand-outs of a topic are already serialised by the topic's order lock, so that lock is
//! contended only by `retire`, which takes it once to shut the mailbox for good. After that
//! nothing more arrives, which is what lets the worker drain what is left and stop.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Select, Sender, TryRecvError, TrySendError};

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
    tx: Sender<Arc<Message<T>>>,
    /// For `DropOldest`: the publisher takes the oldest message out itself to make room.
    rx: Receiver<Arc<Message<T>>>,
    pub(crate) core: Arc<SubscriptionCore>,
}

pub(crate) struct Inbox<T> {
    rx: Receiver<Arc<Message<T>>>,
    /// Disconnected by `retire`: from then on the mailbox only empties.
    retire: Receiver<()>,
    /// Disconnected by a forced stop.
    stop: Receiver<()>,
    retired: bool,
}

/// A mailbox of `capacity` slots, as its two ends.
pub(crate) fn mailbox<T>(
    capacity: usize,
    stop: Receiver<()>,
    core: impl FnOnce(Receiver<Arc<Message<T>>>, Sender<()>) -> SubscriptionCore,
) -> (Outbox<T>, Inbox<T>)
where
    T: Send + Sync + 'static,
{
    let (tx, rx) = crossbeam_channel::bounded(capacity);
    let (retire_tx, retire) = crossbeam_channel::bounded(0);
    let core = Arc::new(core(rx.clone(), retire_tx));
    let outbox = Outbox {
        tx,
        rx: rx.clone(),
        core,
    };
    let inbox = Inbox {
        rx,
        retire,
        stop,
        retired: false,
    };
    (outbox, inbox)
}

impl<T> Outbox<T> {
    /// Whether a publish would have to wait here: a `Block` mailbox with no room.
    pub(crate) fn would_block(&self) -> bool {
        self.core.options.overflow == Overflow::Block && self.tx.is_full()
    }

    /// Offers one message, waiting for room (with `Block`) until `deadline` or a forced stop.
    pub(crate) fn offer(
        &self,
        message: &Arc<Message<T>>,
        deadline: Option<Instant>,
        stop: &Receiver<()>,
        waits: &TopicWaits,
    ) -> Offer {
        let accepting = self.core.accepting.lock();
        if !*accepting {
            return Offer::Retired;
        }
        let counters = &self.core.counters;
        Counters::bump(&counters.received);
        let offer = match self.core.options.overflow {
            Overflow::Block => self.send_blocking(Arc::clone(message), deadline, stop, waits),
            Overflow::DropNewest => match self.tx.try_send(Arc::clone(message)) {
                Ok(()) => Offer::Accepted { evicted: 0 },
                Err(TrySendError::Full(_)) => Offer::Dropped,
                Err(TrySendError::Disconnected(_)) => Offer::Retired,
            },
            Overflow::DropOldest => self.send_evicting(Arc::clone(message)),
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

    fn send_blocking(
        &self,
        message: Arc<Message<T>>,
        deadline: Option<Instant>,
        stop: &Receiver<()>,
        waits: &TopicWaits,
    ) -> Offer {
        let message = match self.tx.try_send(message) {
            Ok(()) => return Offer::Accepted { evicted: 0 },
            Err(TrySendError::Full(message)) => message,
            // Cannot happen: this outbox holds a receiver. Not counted as accepted.
            Err(TrySendError::Disconnected(_)) => return Offer::Retired,
        };
        let mut select = Select::new();
        let send = select.send(&self.tx);
        select.recv(stop);
        let selected = waits.waiting_on(&self.core, || match deadline {
            None => Some(select.select()),
            Some(deadline) => select.select_deadline(deadline).ok(),
        });
        let Some(operation) = selected else {
            return Offer::TimedOut;
        };
        if operation.index() == send {
            match operation.send(&self.tx, message) {
                Ok(()) => Offer::Accepted { evicted: 0 },
                Err(_) => Offer::Retired,
            }
        } else {
            let _ = operation.recv(stop);
            Offer::Abandoned
        }
    }

    /// `DropOldest`: room is made by taking the oldest message out. Only publishers (one at a
    /// time, under the topic's order lock) put messages in, so once one is taken out the send
    /// succeeds; the loop covers the worker emptying the mailbox in between.
    fn send_evicting(&self, mut message: Arc<Message<T>>) -> Offer {
        let mut evicted = 0;
        loop {
            match self.tx.try_send(message) {
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
    /// The next message, or `None` once the subscription is retired and empty, or the bus was
    /// stopped.
    ///
    /// `busy` is raised before a message leaves the mailbox and stays up while the worker
    /// holds it (the worker lowers it when done), so "in the mailbox or in hand", what stats
    /// call queued, never reads low. Waiting for a message therefore only waits for one to be
    /// *ready* and then takes it with `busy` up.
    pub(crate) fn next(
        &mut self,
        stopped: &AtomicBool,
        busy: &AtomicBool,
    ) -> Option<Arc<Message<T>>> {
        loop {
            if stopped.load(SeqCst) {
                return None;
            }
            busy.store(true, SeqCst);
            match self.rx.try_recv() {
                Ok(message) => return Some(message),
                Err(TryRecvError::Disconnected) => {
                    busy.store(false, SeqCst);
                    return None;
                }
                Err(TryRecvError::Empty) => busy.store(false, SeqCst),
            }
            if self.retired {
                return None;
            }
            let mut ready = Select::new();
            ready.recv(&self.rx);
            let retire = ready.recv(&self.retire);
            let stop = ready.recv(&self.stop);
            match ready.ready() {
                i if i == retire => self.retired = true,
                i if i == stop => return None,
                _ => {}
            }
        }
    }
}
