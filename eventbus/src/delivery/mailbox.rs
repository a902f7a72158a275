//! Mailboxes: one bounded `crossbeam-channel` per subscription. The publishing side
//! ([`Outbox`]) applies the subscriber's overflow policy; the worker's side ([`Inbox`]) takes
//! messages until the mailbox is retired and nothing more can arrive.
//!
//! # Retiring a mailbox without a lock on the publish path
//!
//! All hand-outs of a topic are serialised by its order lock, so a mailbox has at most one
//! publisher at a time and needs no lock of its own; retiring it is the only thing a publish
//! can race with. `retire` sets the mailbox's flag, which a publisher reads before each
//! hand-out, and wakes the worker if it waits on an empty mailbox (a `None` in the channel,
//! sent only if there is room: a full mailbox has a worker that is not waiting, and it reads
//! the flag before it waits again). So retiring never waits.
//!
//! A publisher may have read the flag just before it was set, so the worker, once it sees the
//! flag, goes on taking messages until no publisher can still be at this mailbox: the topic's
//! order lock is free (a publish that takes it later loads the new subscriber list, without
//! this mailbox), or its holder is blocked on *another* mailbox (it reads the flag again when
//! it wakes: see `TopicWaits`). Then the worker empties the mailbox and stops. Nothing is left
//! in a mailbox whose worker has gone.
//!
//! A publisher already waiting for room in a mailbox when it is retired goes on waiting: its
//! message was numbered before the unsubscribe, so it is the subscription's, and the worker
//! goes on taking messages while the order lock's holder is at this mailbox (room comes, even
//! if the retire's wake-up signal took the last slot).
//!
//! # Other kinds of mailbox
//!
//! A subscription with a priority (`Options::priority`) has a mailbox of another kind
//! (`priority.rs`) behind the same [`Outbox`]: the outbox checks the group's key and the
//! filter, then hands the message to its [`Queue`]. A plain mailbox pays nothing for it: the
//! outbox's one `screened` flag, which a key or a filter already set, sends both out of line.

#[cfg(feature = "tokio")]
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, Ordering::Acquire, Ordering::Release, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Select, Sender, TryRecvError, TrySendError};

use crate::dead_letter::{DeadLetter, DeadLetterStore};
use crate::deadlock::TopicWaits;
use crate::delivery::core::{Retire, Spill, SubscriptionCore, NOT_HANDLED};
use crate::handler::Failure;
use crate::message::Message;
use crate::options::filter::Verdict;
use crate::options::Overflow;
use crate::stats::Counters;
use crate::trace;

/// How often a worker whose mailbox is retired looks again whether a publisher may still be
/// at it.
pub(crate) const RECHECK: Duration = Duration::from_millis(1);

/// What the channel carries: a message, or `None` to wake a worker whose mailbox was shut.
type Item<T> = Option<Message<T>>;

/// What became of one message offered to one mailbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offer {
    /// Queued (with `DropOldest`, perhaps in place of older messages, counted as dropped).
    Accepted,
    /// Discarded by `DropNewest`.
    Dropped,
    /// No room before a forced stop.
    Abandoned,
    /// The subscription was unsubscribed after the publisher took its list.
    Retired,
    /// Its filter rejected the message.
    Filtered,
    /// The message is for another mailbox of its group (`group.rs`): nothing counted here.
    Elsewhere,
}

/// Whether a `Block` mailbox has room for one more message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Room {
    Ready,
    /// Still full at the deadline.
    Full,
    /// A forced stop came first.
    Stopped,
}

/// A topic's order lock, without its message type.
pub(crate) trait OrderLock: Send + Sync {
    /// Whether no one holds it now.
    fn is_free(&self) -> bool;
}

/// A topic's order lock and what its holder waits on: enough to tell whether a publisher of
/// the topic may be at a given mailbox.
#[derive(Clone)]
pub(crate) struct Handouts {
    pub(crate) order: Arc<dyn OrderLock>,
    pub(crate) waits: Arc<TopicWaits>,
}

impl Handouts {
    /// Whether no publisher of the topic can be at `mailbox` now, or come to it with a
    /// subscriber list that still holds it (see the module docs).
    pub(crate) fn none_at(&self, mailbox: u64) -> bool {
        self.order.is_free() || self.waits.blocked_elsewhere(mailbox)
    }
}

/// What a mailbox's three ends share.
#[derive(Default)]
pub(crate) struct Flags {
    /// Set by `retire`; read by the publisher before each hand-out and by the worker.
    pub(crate) shut: AtomicBool,
    /// A task consuming this mailbox waits here for a message (or the retire's signal).
    #[cfg(feature = "tokio")]
    pub(crate) arrived: crate::util::wake::Wake,
    /// Whether the consumer is a task: then every arrival is announced, fenced.
    #[cfg(feature = "tokio")]
    by_task: std::sync::atomic::AtomicBool,
    /// `publish_async` calls wait here for room.
    #[cfg(feature = "tokio")]
    room: crate::util::wake::Wake,
    /// A mailbox that several workers share (a group without a key): dropped by `retire`, so
    /// that every worker waiting on the empty mailbox wakes (the `None` signal wakes one).
    closing: parking_lot::Mutex<Option<Sender<()>>>,
}

impl Flags {
    /// The flags of a mailbox whose consumer is a task if `by_task`.
    pub(crate) fn new(by_task: bool) -> Self {
        let flags = Flags::default();
        #[cfg(feature = "tokio")]
        flags.by_task.store(by_task, Relaxed);
        #[cfg(not(feature = "tokio"))]
        let _ = by_task;
        flags
    }

    /// A message (or the retire's signal) went in.
    #[inline]
    pub(crate) fn arrived(&self) {
        #[cfg(feature = "tokio")]
        if self.by_task.load(Relaxed) {
            self.arrived.notify_now();
        }
    }

    /// The consumer took a message out: room for one. A task waiting for room is woken only
    /// if `enough` (asked only while one waits) says the room is what it waits for.
    #[inline]
    pub(crate) fn made_room(&self, enough: impl FnOnce() -> bool) {
        #[cfg(feature = "tokio")]
        self.room.notify_if(enough);
        #[cfg(not(feature = "tokio"))]
        let _ = enough;
    }
}

/// Whether a mailbox of `capacity` holding `len` has the room a task waiting to publish into
/// it waits for: a quarter of it, at least one slot. A publisher faster than its subscriber
/// is then woken once for a run of messages rather than once a message (a wake-up, a
/// listener and a failed try each), while the subscriber goes on with the rest. A `Block`
/// publish still never waits past the room for its one message: the wait's backstop
/// (`wake::BACKSTOP`) ends in a try that needs one slot.
#[cfg(feature = "tokio")]
fn room_for_a_run(len: usize, capacity: usize) -> bool {
    len + (capacity / 4).max(1) <= capacity
}

/// A mailbox of another kind (`priority.rs`), which an [`Outbox`] hands its messages to once
/// the group's key and the filter have let them through.
pub(crate) trait Queue<T>: Send + Sync {
    /// How many messages it holds now, and at most.
    fn len_and_capacity(&self) -> (usize, usize);

    /// Puts `message` in by the subscription's overflow policy, waiting for room (with
    /// `Block`) until a forced stop; counts as [`Outbox::offer`] does.
    fn offer(
        &self,
        core: &SubscriptionCore,
        message: Message<T>,
        stop: &Receiver<()>,
        waits: &TopicWaits,
    ) -> Offer;

    /// Waits until it has room, until `deadline` or a forced stop, putting nothing in (see
    /// [`Outbox::wait_for_room`]).
    fn wait_for_room(
        &self,
        core: &SubscriptionCore,
        deadline: Instant,
        stop: &Receiver<()>,
        waits: &TopicWaits,
    ) -> Room;
}

pub(crate) struct Outbox<T> {
    /// The channel; for a mailbox of another kind (`queue`), an unused one of no capacity.
    tx: Sender<Item<T>>,
    /// For `DropOldest`: the publisher takes the oldest message out itself to make room.
    rx: Receiver<Item<T>>,
    flags: Arc<Flags>,
    pub(crate) core: Arc<SubscriptionCore>,
    /// In a group with a key: this mailbox's lane and the group's size (`group.rs`).
    lane: Option<(usize, usize)>,
    /// A mailbox of another kind, which takes the messages instead of the channel.
    queue: Option<Arc<dyn Queue<T>>>,
    /// Whether a message takes the way out of line: a group's key, a filter or a `queue`.
    screened: bool,
}

/// Whether a message is this mailbox's, by its group's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    Mine,
    Elsewhere,
    /// The key function panicked: the message is no mailbox's of the group.
    Panicked,
}

/// The bus's handle on a mailbox: retiring it, and emptying it after a forced close.
struct Retirer<T> {
    tx: Sender<Item<T>>,
    rx: Receiver<Item<T>>,
    flags: Arc<Flags>,
}

impl<T: Send + Sync + 'static> Retire for Retirer<T> {
    fn retire(&self) {
        if self.flags.shut.swap(true, SeqCst) {
            return;
        }
        // Fails only when the mailbox is full: then its worker is not waiting, and reads the
        // flag before it waits again.
        let _ = self.tx.try_send(None);
        // Lock order: row 9 (the mailbox's `closing`), a leaf; see engine/mod.rs.
        drop(self.flags.closing.lock().take());
        self.flags.arrived();
    }

    fn queued(&self) -> u64 {
        self.tx.len() as u64
    }

    fn close_out(&self, core: &SubscriptionCore, letters: &DeadLetterStore, spill: &mut Spill) {
        let mut woken = false;
        // The worker may take from the other end meanwhile: each message is taken once, by
        // one of them, and both keep it as a dead letter.
        while let Ok(item) = self.rx.try_recv() {
            let Some(message) = item else {
                woken = true;
                continue;
            };
            let failure = Failure::text(NOT_HANDLED);
            let letter = DeadLetter::new(message, core.id, Arc::clone(&core.name), failure, 0);
            spill.extend(letters.push_keeping(letter));
            core.counters.closed_out.fetch_add(1, Release);
        }
        // The retire's wake-up signal, if this took it: a worker waiting on the empty
        // mailbox must still see it.
        if woken || self.flags.shut.load(SeqCst) {
            let _ = self.tx.try_send(None);
        }
    }
}

/// The worker's end.
pub(crate) struct Inbox<T> {
    rx: Receiver<Item<T>>,
    flags: Arc<Flags>,
    handouts: Handouts,
    subscription: u64,
    phase: Phase,
    /// For a mailbox that several workers share: disconnected when it is retired.
    closed: Option<Receiver<()>>,
}

/// Another worker's end of a shared mailbox, starting where a fresh one does.
impl<T> Clone for Inbox<T> {
    fn clone(&self) -> Self {
        Inbox {
            rx: self.rx.clone(),
            flags: Arc::clone(&self.flags),
            handouts: self.handouts.clone(),
            subscription: self.subscription,
            phase: Phase::Open,
            closed: self.closed.clone(),
        }
    }
}

/// What one look at the mailbox found.
enum Step<T> {
    Took(Message<T>),
    /// Nothing more can arrive.
    Done,
    /// Open and empty: wait for a message (or the retire's signal).
    Empty,
    /// Retired, empty, and a publisher may still be at it: look again shortly.
    Recheck,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Open,
    /// Shut, and a publisher may still be at the mailbox.
    Shut,
    /// Shut, and nothing more can arrive: what is left is taken, then the worker stops.
    Settled,
}

/// A mailbox of `capacity` slots, as its two ends; `core` makes the subscription's shared
/// state around the mailbox's retirer.
pub(crate) fn mailbox<T>(
    capacity: usize,
    handouts: Handouts,
    by_task: bool,
    core: impl FnOnce(Box<dyn Retire>) -> SubscriptionCore,
) -> (Outbox<T>, Inbox<T>)
where
    T: Send + Sync + 'static,
{
    let (tx, rx) = crossbeam_channel::bounded(capacity);
    let flags = Arc::new(Flags::new(by_task));
    let retirer = Retirer {
        tx: tx.clone(),
        rx: rx.clone(),
        flags: Arc::clone(&flags),
    };
    let core = Arc::new(core(Box::new(retirer)));
    let inbox = Inbox {
        rx: rx.clone(),
        flags: Arc::clone(&flags),
        handouts,
        subscription: core.id,
        phase: Phase::Open,
        closed: None,
    };
    let screened = core.options.filter.is_some();
    (
        Outbox {
            tx,
            rx,
            flags,
            core,
            lane: None,
            queue: None,
            screened,
        },
        inbox,
    )
}

/// The outbox of a mailbox of another kind: `queue`, with its `flags`, for the subscription
/// `core`.
pub(crate) fn outbox_of<T>(
    queue: Arc<dyn Queue<T>>,
    flags: Arc<Flags>,
    core: Arc<SubscriptionCore>,
) -> Outbox<T> {
    let (tx, rx) = crossbeam_channel::bounded(0);
    Outbox {
        tx,
        rx,
        flags,
        core,
        lane: None,
        queue: Some(queue),
        screened: true,
    }
}

/// A mailbox that several workers take from (a group without a key): clone the `Inbox` for
/// each. Task workers (`by_task`) all wait on its `arrived`, which wakes every waiter.
pub(crate) fn shared_mailbox<T>(
    capacity: usize,
    handouts: Handouts,
    by_task: bool,
    core: impl FnOnce(Box<dyn Retire>) -> SubscriptionCore,
) -> (Outbox<T>, Inbox<T>)
where
    T: Send + Sync + 'static,
{
    let (outbox, mut inbox) = mailbox(capacity, handouts, by_task, core);
    let (closing, closed) = crossbeam_channel::bounded(0);
    // Lock order: row 9 (the mailbox's `closing`), a leaf; see engine/mod.rs.
    *outbox.flags.closing.lock() = Some(closing);
    inbox.closed = Some(closed);
    (outbox, inbox)
}

impl<T: 'static> Outbox<T> {
    /// Makes this the mailbox of lane `index` of a group of `of` with a key.
    pub(crate) fn route(&mut self, index: usize, of: usize) {
        self.lane = Some((index, of));
        self.screened = true;
    }

    /// Whether the mailbox holds as many messages as it can.
    #[inline]
    fn full_now(&self) -> bool {
        match &self.queue {
            None => self.rx.is_full(),
            Some(queue) => {
                let (len, capacity) = queue.len_and_capacity();
                len >= capacity
            }
        }
    }

    /// Whether the message is this mailbox's, by its group's key.
    #[inline]
    fn lane(&self, payload: &T) -> Lane {
        let (Some((index, of)), Some(key)) = (self.lane, &self.core.options.key) else {
            return Lane::Mine;
        };
        match key.lane(payload, of) {
            Some(lane) if lane == index => Lane::Mine,
            Some(_) => Lane::Elsewhere,
            None => Lane::Panicked,
        }
    }

    /// Whether `payload` is for this subscription: its group's key picks this mailbox, and
    /// its filter, if any, accepts it. Asked before a publish waits for room here
    /// (all-or-nothing publishes, the deadlock check), so a message the filter will reject
    /// never waits for a slot it will not take.
    pub(crate) fn wants(&self, payload: &T) -> bool {
        if self.lane(payload) != Lane::Mine {
            return false;
        }
        match &self.core.options.filter {
            None => true,
            Some(filter) => filter.verdict(payload) == Verdict::Accept,
        }
    }

    /// Whether the mailbox has no room now, whatever its overflow policy: a redelivery
    /// must neither drop its message nor evict a queued one.
    pub(crate) fn is_full(&self) -> bool {
        !self.flags.shut.load(Acquire) && self.full_now()
    }

    /// Whether a publish would have to wait here: a `Block` mailbox with no room.
    pub(crate) fn would_block(&self) -> bool {
        self.core.options.overflow == Overflow::Block
            && !self.flags.shut.load(Acquire)
            && self.full_now()
    }

    /// How many more messages a publish can surely put in without waiting: the room now,
    /// less the slot the retire's wake-up signal may take; `usize::MAX` for a policy that
    /// never waits. Only the topic's order lock's holder puts messages in, so the room it
    /// finds stays at least this until it puts them (see `TopicState::publish_at_once`).
    #[cfg(feature = "tokio")]
    pub(crate) fn room_now(&self) -> usize {
        match self.core.options.overflow {
            Overflow::Block => match &self.queue {
                None => {
                    let capacity = self.tx.capacity().unwrap_or(usize::MAX);
                    capacity.saturating_sub(self.tx.len()).saturating_sub(1)
                }
                Some(queue) => {
                    let (len, capacity) = queue.len_and_capacity();
                    capacity.saturating_sub(len)
                }
            },
            Overflow::DropOldest | Overflow::DropNewest => usize::MAX,
        }
    }

    /// Waits until a `Block` mailbox has room, without putting anything in: for publishes
    /// that hand out all or nothing. `deadline` `None` does not wait. Only the order lock's
    /// holder puts messages in, so room found stays until it does.
    pub(crate) fn wait_for_room(
        &self,
        deadline: Option<Instant>,
        stop: &Receiver<()>,
        waits: &TopicWaits,
    ) -> Room {
        if !self.would_block() {
            return Room::Ready;
        }
        let Some(deadline) = deadline else {
            return Room::Full;
        };
        if let Some(queue) = &self.queue {
            return queue.wait_for_room(&self.core, deadline, stop, waits);
        }
        let mut select = Select::new();
        let send = select.send(&self.tx);
        select.recv(stop);
        let ready = waits.waiting_on(&self.core.node, || select.ready_deadline(deadline));
        match ready {
            Err(_) => Room::Full,
            Ok(index) if index != send => Room::Stopped,
            Ok(_) => Room::Ready,
        }
    }

    /// Waits (as a task) until a full `Block` mailbox may have room: woken by its consumer
    /// once a quarter of it is free (`room_for_a_run`), or after `wake::BACKSTOP`, when one
    /// free slot will do. Holds no lock.
    #[cfg(feature = "tokio")]
    pub(crate) async fn room(&self) {
        let backstop = crate::util::wake::BACKSTOP;
        self.flags
            .room
            .wait_unless(Some(backstop), || self.room_to_wake_for())
            .await;
    }

    /// Whether a task waiting for room here has what it waits for: no wait at all (not
    /// `Block`, or retired), or room for a run of messages (one, in a mailbox of another
    /// kind); what the consumer's `made_room` asks before it wakes one.
    #[cfg(feature = "tokio")]
    fn room_to_wake_for(&self) -> bool {
        self.core.options.overflow != Overflow::Block
            || self.flags.shut.load(Acquire)
            || match &self.queue {
                None => room_for_a_run(self.tx.len(), self.tx.capacity().unwrap_or(usize::MAX)),
                Some(_) => !self.full_now(),
            }
    }

    /// Offers one message (this mailbox's reference to it), waiting for room (with `Block`)
    /// until a forced stop.
    #[inline(always)]
    pub(crate) fn offer(
        &self,
        message: Message<T>,
        stop: &Receiver<()>,
        waits: &TopicWaits,
    ) -> Offer {
        if self.flags.shut.load(Acquire) {
            return Offer::Retired;
        }
        if self.screened {
            return self.offer_screened(message, stop, waits);
        }
        self.put(message, stop, waits)
    }

    /// [`offer`](Self::offer) with a group's key, a filter or a mailbox of another kind.
    #[inline(never)]
    fn offer_screened(
        &self,
        message: Message<T>,
        stop: &Receiver<()>,
        waits: &TopicWaits,
    ) -> Offer {
        if let Some(refused) = self.refuses(&message) {
            return refused;
        }
        match &self.queue {
            None => self.put(message, stop, waits),
            Some(queue) => queue.offer(&self.core, message, stop, waits),
        }
    }

    /// Puts a message the subscription takes into the channel.
    #[inline(always)]
    fn put(&self, message: Message<T>, stop: &Receiver<()>, waits: &TopicWaits) -> Offer {
        let received = &self.core.counters.received;
        Counters::bump(received);
        // Most offers find room at the first try, whatever the policy; a full mailbox is
        // handled out of line.
        match self.tx.try_send(Some(message)) {
            Ok(()) => {
                self.flags.arrived();
                Offer::Accepted
            }
            Err(TrySendError::Full(Some(message))) => self.full(message, stop, waits),
            // Cannot happen: this outbox holds a receiver, and sent a message.
            Err(TrySendError::Full(None) | TrySendError::Disconnected(_)) => {
                Counters::unbump(received);
                Offer::Retired
            }
        }
    }

    /// Whether a group's key or the filter keeps `message` out of this mailbox, and what was
    /// counted if so.
    #[inline(never)]
    fn refuses(&self, message: &Message<T>) -> Option<Offer> {
        let (topic, seq) = (message.topic(), message.seq());
        let counters = &self.core.counters;
        match self.lane(message.payload()) {
            Lane::Mine => {}
            // Counted once for the group, on its first mailbox.
            Lane::Panicked if self.lane.is_some_and(|(index, _)| index == 0) => {
                Counters::bump(&counters.received);
                Counters::bump(&counters.dropped);
                trace::dropped(topic, seq, &self.core.name, "key panicked");
                return Some(Offer::Dropped);
            }
            Lane::Panicked | Lane::Elsewhere => return Some(Offer::Elsewhere),
        }
        let filter = self.core.options.filter.as_ref()?;
        match filter.verdict(message.payload()) {
            Verdict::Accept => None,
            Verdict::Reject => {
                Counters::bump(&counters.filtered);
                Some(Offer::Filtered)
            }
            Verdict::Panicked => {
                Counters::bump(&counters.received);
                Counters::bump(&counters.dropped);
                trace::dropped(topic, seq, &self.core.name, "filter panicked");
                Some(Offer::Dropped)
            }
        }
    }

    /// The mailbox was full at the first try (`message` counted as received): what its
    /// policy does.
    #[inline(never)]
    fn full(&self, message: Message<T>, stop: &Receiver<()>, waits: &TopicWaits) -> Offer {
        let (topic, seq) = (message.topic(), message.seq());
        let tx = &self.tx;
        let counters = &self.core.counters;
        let offer = match self.core.options.overflow {
            Overflow::Block => self.send_blocking(tx, Some(message), stop, waits),
            Overflow::DropNewest if self.flags.shut.load(Acquire) => Offer::Retired,
            Overflow::DropNewest => Offer::Dropped,
            Overflow::DropOldest => self.send_evicting(tx, Some(message)),
        };
        match offer {
            Offer::Accepted => self.flags.arrived(),
            // Published after the unsubscribe began: not this subscription's.
            Offer::Retired => Counters::unbump(&counters.received),
            Offer::Filtered | Offer::Elsewhere => {}
            Offer::Dropped | Offer::Abandoned => {
                Counters::bump(&counters.dropped);
                let why = match offer {
                    Offer::Dropped => "drop-newest",
                    _ => "forced close",
                };
                trace::dropped(topic, seq, &self.core.name, why);
            }
        }
        offer
    }

    /// `Block`. While the publisher waits, the message is not counted as received, so
    /// `queued` does not include it; it is counted again just before it goes in (only this
    /// publisher puts messages in, so once there is room the send succeeds).
    fn send_blocking(
        &self,
        tx: &Sender<Item<T>>,
        message: Item<T>,
        stop: &Receiver<()>,
        waits: &TopicWaits,
    ) -> Offer {
        let received = &self.core.counters.received;
        let mut message = match tx.try_send(message) {
            Ok(()) => return Offer::Accepted,
            Err(TrySendError::Full(message)) => message,
            // Cannot happen: this outbox holds a receiver.
            Err(TrySendError::Disconnected(_)) => return Offer::Accepted,
        };
        Counters::unbump(received);
        loop {
            // Retired meanwhile (even if the retire's wake-up signal took the last slot), the
            // mailbox still gets this message, numbered before the unsubscribe: its worker
            // goes on taking messages while this publisher holds the order lock at it.
            let mut select = Select::new();
            let send = select.send(tx);
            select.recv(stop);
            let ready = waits.waiting_on(&self.core.node, || select.ready());
            Counters::bump(received);
            if ready != send {
                return Offer::Abandoned;
            }
            match tx.try_send(message) {
                Ok(()) => return Offer::Accepted,
                Err(TrySendError::Full(back)) => {
                    message = back;
                    Counters::unbump(received);
                }
                Err(TrySendError::Disconnected(_)) => return Offer::Accepted,
            }
        }
    }

    /// `DropOldest`: room is made by taking the oldest message out. Only publishers (one at a
    /// time, under the topic's order lock) put messages in, so once one is taken out the send
    /// succeeds; the loop covers the worker emptying the mailbox in between.
    fn send_evicting(&self, tx: &Sender<Item<T>>, mut message: Item<T>) -> Offer {
        loop {
            match tx.try_send(message) {
                Ok(()) => return Offer::Accepted,
                Err(TrySendError::Full(back)) => {
                    message = back;
                    // A wake-up signal taken out is no message: its worker is busy and will
                    // see the flag.
                    if let Ok(Some(oldest)) = self.rx.try_recv() {
                        trace::dropped(
                            oldest.topic(),
                            oldest.seq(),
                            &self.core.name,
                            "drop-oldest",
                        );
                        Counters::bump(&self.core.counters.dropped);
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

    /// Takes whatever is in the mailbox now, without waiting: after a forced stop.
    pub(crate) fn try_next(&self) -> Option<Message<T>> {
        loop {
            match self.rx.try_recv() {
                Ok(Some(message)) => return Some(self.took(message)),
                Ok(None) => {}
                Err(_) => return None,
            }
        }
    }

    /// One look at the mailbox, without waiting: the phase machine both consumers share
    /// (see the module docs).
    fn step(&mut self) -> Step<T> {
        loop {
            match self.phase {
                Phase::Open => {
                    if self.flags.shut.load(Acquire) {
                        self.phase = Phase::Shut;
                        continue;
                    }
                    match self.rx.try_recv() {
                        Ok(Some(message)) => return Step::Took(self.took(message)),
                        Ok(None) => self.phase = Phase::Shut,
                        Err(TryRecvError::Empty) => return Step::Empty,
                        Err(TryRecvError::Disconnected) => return Step::Done,
                    }
                }
                Phase::Shut => {
                    if self.handouts.none_at(self.subscription) {
                        self.phase = Phase::Settled;
                        continue;
                    }
                    match self.rx.try_recv() {
                        Ok(Some(message)) => return Step::Took(self.took(message)),
                        Ok(None) => {}
                        Err(TryRecvError::Empty) => return Step::Recheck,
                        Err(TryRecvError::Disconnected) => return Step::Done,
                    }
                }
                Phase::Settled => match self.rx.try_recv() {
                    Ok(Some(message)) => return Step::Took(self.took(message)),
                    Ok(None) => {}
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => return Step::Done,
                },
            }
        }
    }

    /// The next message, waiting for one; `None` once the mailbox is shut and nothing more
    /// can arrive (see the module docs).
    #[inline]
    pub(crate) fn next(&mut self) -> Option<Message<T>> {
        // Most calls: the mailbox open and a message in it. The first look of `step`, inlined
        // into the worker's loop; anything else goes the full way.
        if self.phase == Phase::Open && !self.flags.shut.load(Acquire) {
            match self.rx.try_recv() {
                Ok(Some(message)) => return Some(self.took(message)),
                Ok(None) => self.phase = Phase::Shut,
                Err(_) => {}
            }
        }
        self.wait_next()
    }

    /// [`next`](Self::next), every case.
    #[inline(never)]
    fn wait_next(&mut self) -> Option<Message<T>> {
        loop {
            match self.step() {
                Step::Took(message) => return Some(message),
                Step::Done => return None,
                Step::Empty => match &self.closed {
                    None => match self.rx.recv() {
                        Ok(Some(message)) => return Some(self.took(message)),
                        Ok(None) => self.phase = Phase::Shut,
                        Err(_) => return None,
                    },
                    // A shared mailbox: wait for a message or the retire, whichever first.
                    Some(closed) => {
                        let mut select = Select::new();
                        let message = select.recv(&self.rx);
                        select.recv(closed);
                        let ready = select.select();
                        if ready.index() == message {
                            match ready.recv(&self.rx) {
                                Ok(Some(message)) => return Some(self.took(message)),
                                Ok(None) => self.phase = Phase::Shut,
                                Err(_) => return None,
                            }
                        } else {
                            let _ = ready.recv(closed);
                            self.phase = Phase::Shut;
                        }
                    }
                },
                Step::Recheck => match self.rx.recv_timeout(RECHECK) {
                    Ok(Some(message)) => return Some(self.took(message)),
                    Ok(None) | Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return None,
                },
            }
        }
    }

    #[inline]
    fn took(&self, message: Message<T>) -> Message<T> {
        #[cfg(feature = "tokio")]
        self.flags.made_room(|| self.room_for_a_run());
        #[cfg(not(feature = "tokio"))]
        self.flags.made_room(|| true);
        message
    }

    /// Whether a task waiting for room should be woken (see [`room_for_a_run`]). Out of
    /// line: asked only while a task waits, it stays off a take's common path.
    #[cfg(feature = "tokio")]
    #[cold]
    #[inline(never)]
    fn room_for_a_run(&self) -> bool {
        room_for_a_run(self.rx.len(), self.rx.capacity().unwrap_or(usize::MAX))
    }

    /// The next message, as [`next`](Self::next) gives it, awaiting instead of blocking: for
    /// a consumer that is a task. Cancel-safe: a message is taken only when it is returned.
    #[cfg(feature = "tokio")]
    pub(crate) async fn next_async(&mut self) -> Option<Message<T>> {
        loop {
            match self.step() {
                Step::Took(message) => return Some(message),
                Step::Done => return None,
                Step::Empty => {
                    let (rx, flags) = (&self.rx, &self.flags);
                    let ready = || !rx.is_empty() || flags.shut.load(Acquire);
                    // A task's mailbox announces every arrival, fenced (`by_task` is set
                    // before any publisher can see the mailbox): no wake-up is missed, so no
                    // timer is needed.
                    self.flags.arrived.wait_unless(None, ready).await;
                }
                Step::Recheck => crate::util::ticker::Sleep::after(RECHECK).await,
            }
        }
    }
}
