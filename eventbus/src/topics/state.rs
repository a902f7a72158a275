//! A topic's runtime state ([`TopicState`]): its one order (numbering and hand-out to every
//! mailbox, as one step under the topic's order lock), its subscriber and observer lists,
//! and its log if it keeps one.
//!
//! A topic is found by its `TypeId` on the publish path (`directory.rs`); the name is for
//! people (stats, dead letters, thread names), never for lookup.
//!
//! # Locks
//!
//! A topic's order lock is held while one message is numbered and handed out, and while a
//! publisher waits for room in its `Block` mailboxes; it is the only lock a publish holds
//! while it waits. Publishers take it through `deadlock::lock_order`, which bounds the wait by
//! the publish's patience and refuses a handler whose wait would lead back to itself. Others
//! only look (`try_lock`): a closing bus looking whether publishing is over
//! (`lifecycle.rs`), a worker whose mailbox was retired (`mailbox.rs`). `edit` serialises
//! changes to the subscriber list and is never held with the order lock. While holding the
//! order lock a publisher takes, one at a time and briefly, the wait-graph records
//! (`deadlock.rs`) and the mailboxes' channel locks (inside `crossbeam-channel`).

use std::any::Any;
use std::sync::atomic::{
    AtomicU64, AtomicUsize, Ordering::Acquire, Ordering::Release, Ordering::SeqCst,
};
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::dead_letter::DeadLetterStore;
use crate::deadlock::{self, NoLock, Patience, TopicWaits};
use crate::delivery::core::{Spill, SubscriptionCore};
use crate::delivery::inline::{self, Inline, Said};
use crate::delivery::log::{Log, NoRoom, RoomWait};
use crate::delivery::mailbox::{Handouts, Offer, OrderLock, Outbox, Room};
use crate::delivery::observer::{self, Entered, Inlet, NoTurn};
use crate::error::Rejection;
use crate::lifecycle::Lifecycle;
use crate::message::shared::Pool;
use crate::message::Envelope;
use crate::message::{AnyMessage, Message};
use crate::numbering::Numbering;
use crate::topic::Topic;
use crate::topics::any::{AnyTopic, Redelivery};
use crate::topics::dispatcher::Queue;
use crate::topics::subscribers::Subscribers;

/// One topic's runtime state: its order and its subscribers' mailboxes.
///
/// The subscriber list is copy-on-write behind an `ArcSwap`: subscribing or unsubscribing
/// swaps in a new list without waiting behind a publish, even one blocked on a full mailbox.
/// Publishers keep the list they last used under the order lock and load the snapshot again
/// only when `version` says it changed, which on the publish path is one plain load instead
/// of the snapshot's read-modify-writes.
pub(crate) struct TopicState<T> {
    pub(super) name: &'static str,
    /// The topic's order: held while one message is numbered and handed to every mailbox, so
    /// every subscriber sees the same order whatever number of threads publish.
    pub(super) order: Arc<Mutex<Order<T>>>,
    /// The mailboxes, copy-on-write.
    pub(super) subscribers: ArcSwap<Subscribers<T>>,
    /// The observers whose pattern matches the topic's name (`observer.rs`), in the order
    /// they were added; copy-on-write, written under `edit` with `version` like `subscribers`.
    pub(super) observers: ArcSwap<Vec<Arc<Inlet>>>,
    /// The inline subscribers (`delivery/inline.rs`), in the order they subscribed;
    /// copy-on-write, written under `edit` with `version` like `subscribers`.
    pub(super) inline: ArcSwap<Vec<Arc<Inline<T>>>>,
    /// Bumped after each change to `subscribers`, so a publish can keep using the list it
    /// had without loading the snapshot again; written under `edit`.
    pub(super) version: AtomicU64,
    /// The next message's number, shared with the bus's table of numberings: while the
    /// topic has never been heard a publish numbers without the order lock; after, only
    /// under it, with a plain load and store (a read-modify-write costs a publish ~5 ns).
    /// See `numbering.rs`.
    pub(super) numbering: Arc<Numbering>,
    /// The length of `subscribers`, `observers` and `inline`, readable without loading the lists;
    /// written under `edit`.
    pub(super) count: AtomicUsize,
    /// Serialises changes to the subscriber list (never held by a publish).
    pub(super) edit: Mutex<()>,
    /// What the order lock's holder waits on (see `deadlock.rs`).
    pub(super) waits: Arc<TopicWaits>,
    /// A log topic's log (`delivery/log/`): then every subscription reads it, and `subscribers`
    /// stays empty.
    pub(super) log: Option<Arc<Log<T>>>,
    /// A dispatcher topic's queue (`dispatcher.rs`): then publishers add to it, and its
    /// dispatcher hands out. Never beside a log.
    pub(super) queue: Option<Queue<T>>,
    /// `publish_async` calls wait here for the topic's turn.
    #[cfg(feature = "tokio")]
    pub(super) turn: crate::util::wake::Wake,
}

/// What the order lock guards, besides the numbering and hand-out: the subscriber list as of
/// `version`.
pub(crate) struct Order<T> {
    pub(super) subscribers: Arc<Subscribers<T>>,
    pub(super) observers: Arc<Vec<Arc<Inlet>>>,
    inline: Arc<Vec<Arc<Inline<T>>>>,
    version: u64,
    /// The blocks this topic's messages are made in (see `message/shared.rs`).
    pub(super) pool: Pool<Envelope<T>>,
    /// How many more publishes `TopicState::publish_at_once` may hand out before it looks at
    /// the mailboxes' room again: the least room among them when it last looked, counted
    /// down at each of its hand-outs (each puts at most one message in each mailbox). Any
    /// other hand-out, and a change of the list, sets it to 0 (`TopicState::current`,
    /// [`Order::forget_room`]), so it never counts room that is not there.
    #[cfg(feature = "tokio")]
    room: usize,
}

impl<T> Order<T> {
    /// Something may have been put in the mailboxes other than by `publish_at_once`: the
    /// room counted is no longer sure.
    #[inline(always)]
    pub(super) fn forget_room(&mut self) {
        #[cfg(feature = "tokio")]
        {
            self.room = 0;
        }
    }
}

impl<T: Send + Sync> OrderLock for Mutex<Order<T>> {
    fn is_free(&self) -> bool {
        // Lock order: row 4, only tried: safe under any lock; see engine/mod.rs.
        self.try_lock().is_some()
    }
}

/// How long a publish may wait, for its topic's turn and for room in `Block` mailboxes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// As long as it takes: messages go into mailboxes one by one, waiting at each full one.
    Forever,
    /// Until the deadline; all or nothing: every `Block` mailbox has room before any gets the
    /// message.
    Until(Instant),
    /// Not for room at all: all or nothing, as `Until`.
    Never,
}

/// One publish's circumstances, which every step after the order lock needs: how long it
/// may wait, the bus's lifecycle, and the subscription whose handler publishes, if any.
#[derive(Clone, Copy)]
struct Publishing<'a> {
    wait: Wait,
    lifecycle: &'a Lifecycle,
    publisher: Option<&'a Arc<SubscriptionCore>>,
}

/// Why a publish handed nothing out; the payload comes back with it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The bus is closing, and the publisher is not one of its handlers; or a forced stop
    /// came while an all-or-nothing publish waited.
    Closed,
    /// Waiting could never end (see `deadlock.rs`).
    WouldDeadlock,
    /// The deadline passed before the topic's turn or room in every `Block` mailbox.
    Timeout,
    /// A `Block` mailbox had no room, or the topic's turn was held by a publisher waiting
    /// for room.
    Full,
    /// An inline subscriber refused the message (`delivery/inline.rs`).
    Rejected(Rejection),
}

impl<T: Topic> TopicState<T> {
    pub(crate) fn new() -> Self {
        // A log has no hand-out, so no dispatcher (the derive refuses both).
        let queue = T::dispatcher()
            .filter(|_| T::retention().is_none())
            .map(|capacity| Queue::new(capacity.max(1)));
        TopicState {
            name: T::name(),
            order: Arc::new(Mutex::new(Order {
                subscribers: Arc::new(Subscribers::new()),
                observers: Arc::new(Vec::new()),
                inline: Arc::new(Vec::new()),
                version: 0,
                pool: Pool::new(),
                #[cfg(feature = "tokio")]
                room: 0,
            })),
            version: AtomicU64::new(0),
            subscribers: ArcSwap::from_pointee(Subscribers::new()),
            observers: ArcSwap::from_pointee(Vec::new()),
            inline: ArcSwap::from_pointee(Vec::new()),
            // Numbered only under a lock: a log's order lock, a queue's own.
            numbering: Arc::new(Numbering::new(
                T::name(),
                T::retention().is_some() || queue.is_some(),
            )),
            count: AtomicUsize::new(0),
            edit: Mutex::new(()),
            waits: Arc::default(),
            log: T::retention().map(|retention| Arc::new(Log::new(T::name(), retention))),
            queue,
            #[cfg(feature = "tokio")]
            turn: crate::util::wake::Wake::default(),
        }
    }

    /// A publish found no subscriber: if the topic never had one, says so once.
    #[inline]
    pub(super) fn unheard(&self) {
        self.numbering.unheard();
    }

    /// The topic's numbering, for the bus's table (`numbering.rs`); `None` for a log topic,
    /// which numbers only under its order lock, and a dispatcher topic, under its queue's.
    pub(crate) fn numbering(&self) -> Option<&Arc<Numbering>> {
        (self.log.is_none() && self.queue.is_none()).then_some(&self.numbering)
    }

    /// The order lock and its waits, for the topic's mailboxes (see `mailbox.rs`).
    pub(crate) fn handouts(&self) -> Handouts {
        Handouts {
            order: Arc::clone(&self.order) as Arc<dyn OrderLock>,
            waits: Arc::clone(&self.waits),
        }
    }

    /// The topic's log, if it keeps one.
    pub(crate) fn log(&self) -> Option<&Arc<Log<T>>> {
        self.log.as_ref()
    }

    /// How many subscribers a publish can expect to hand its message to.
    pub(crate) fn subscriber_count(&self) -> usize {
        self.count.load(SeqCst)
    }

    /// Numbers a message for a topic that has no subscribers, if the order lock is free and
    /// the list still empty: nothing is handed out or allocated. `None` sends the publish the
    /// full way.
    #[inline]
    pub(crate) fn number_unheard(&self, lifecycle: &Lifecycle) -> Option<u64> {
        // A log keeps what is published for subscriptions to come; a queue numbers in order
        // with what it holds.
        if self.log.is_some() || self.queue.is_some() {
            return None;
        }
        // Lock order: row 4 (the order lock), only tried; nothing inside; see engine/mod.rs.
        let _order = self.order.try_lock()?;
        // A subscribe that finished before the lock was taken is heard from; a close that
        // began is too (the state is decided under the order lock, as in `publish`).
        if self.subscriber_count() != 0 || !lifecycle.is_open() {
            return None;
        }
        let seq = self.numbering.take();
        self.unheard();
        Some(seq)
    }

    /// Numbers `payload` and hands it to every mailbox, as one step under the order lock;
    /// its seq.
    ///
    /// Whether the bus accepts it is decided under that lock too, which is what lets a
    /// closing bus tell when publishing is over (see `lifecycle.rs`). `publisher` is the
    /// subscription whose handler is publishing, if any.
    ///
    /// With [`Wait::Forever`], a forced stop while waiting for room ends the wait: the
    /// mailboxes not reached count the message as dropped, and the seq is still returned (the
    /// message was accepted; the forced close abandoned it, as it abandons queued ones).
    ///
    /// In line, the full way out of line (`publish_fully`): as a call of its own, its frame
    /// and the copy of its result cost a publish about 20 instructions (BENCHMARKS.md, "The
    /// mailbox path's drift").
    #[inline(always)]
    pub(crate) fn publish(
        &self,
        payload: T,
        wait: Wait,
        lifecycle: &Lifecycle,
        publisher: Option<&Arc<SubscriptionCore>>,
    ) -> Result<u64, (T, Refused)> {
        if let Some(queue) = self.queue.as_ref().filter(|queue| queue.is_running()) {
            return self.enqueue(queue, payload, wait, lifecycle, publisher);
        }
        // Most publishes: from outside a handler, waiting as long as it takes, the order lock
        // free, the bus open. Nothing to record or wait for before the hand-out or append.
        if matches!(wait, Wait::Forever) && publisher.is_none() {
            #[cfg(feature = "tokio")]
            let _turn = TurnOver(self);
            // Lock order: row 4, tried; rows 5, 6, 8 and channel locks inside; see engine/mod.rs.
            if let Some(mut order) = self.order.try_lock() {
                let order = self.current(&mut order);
                // Inline handlers: the full way, out of line.
                if lifecycle.is_open() && order.inline.is_empty() {
                    let how = Publishing {
                        wait,
                        lifecycle,
                        publisher: None,
                    };
                    if let Some(log) = &self.log {
                        // No observer to share it with: the append without the ring lock,
                        // tried here, spares the common log publish the full append's
                        // arguments and outcomes.
                        let payload = match order.observers.is_empty() {
                            true => match self.append_at_once(log, payload) {
                                Ok(seq) => return Ok(seq),
                                Err(payload) => payload,
                            },
                            false => payload,
                        };
                        let (observers, pool) = (&order.observers, &mut order.pool);
                        let entered = std::iter::empty();
                        return self.log_out(log, observers, pool, payload, how, entered, None);
                    }
                    let (subscribers, observers) = (&order.subscribers, &order.observers);
                    let (pool, entered) = (&mut order.pool, std::iter::empty());
                    return Ok(self.hand_out(subscribers, observers, pool, payload, entered, how));
                }
            }
        }
        self.publish_fully(payload, wait, lifecycle, publisher)
    }

    /// Publishes as [`publish`](Self::publish) does from outside a handler with
    /// `Wait::Forever`, if that needs no wait: the order lock free, the bus open, a topic
    /// without observers or inline subscribers, and room in every `Block` mailbox, or, on a
    /// log topic, the append without the ring lock (`Log::append_fast`, which never waits).
    /// Otherwise the payload comes back, not numbered.
    ///
    /// With feature `tokio` a sync publish comes here first, so that it asks whether its
    /// thread runs a runtime (a thread-local look and a reference count, about 40
    /// instructions) only where the answer matters: where it may wait. The topic counts the
    /// publishes its mailboxes surely have room for (`Order::room`), so knowing that they
    /// have room costs a load and a store, however many mailboxes there are; they are looked
    /// at again only when the count runs out.
    #[cfg(feature = "tokio")]
    #[inline]
    pub(crate) fn publish_at_once(&self, payload: T, lifecycle: &Lifecycle) -> Result<u64, T> {
        if self.queue.is_some() {
            return Err(payload);
        }
        let _turn = TurnOver(self);
        // Lock order: row 4, tried; channel locks inside; see engine/mod.rs.
        let Some(mut order) = self.order.try_lock() else {
            return Err(payload);
        };
        if !lifecycle.is_open() {
            return Err(payload);
        }
        let order = self.current_counted(&mut order);
        if !order.observers.is_empty() || !order.inline.is_empty() {
            return Err(payload);
        }
        // Where a log topic's sync publish was sent back every time, each asked then whether
        // its thread ran a runtime and found its topic again: about 140 instructions a 1 → 1
        // delivery (BENCHMARKS.md, "No tokio tax on log topics either").
        if let Some(log) = &self.log {
            return self.append_at_once(log, payload);
        }
        if order.room == 0 && !Self::look_for_room(order) {
            return Err(payload);
        }
        order.room -= 1;
        let how = Publishing {
            wait: Wait::Forever,
            lifecycle,
            publisher: None,
        };
        let (subscribers, pool) = (&order.subscribers, &mut order.pool);
        Ok(self.hand_out(subscribers, &[], pool, payload, std::iter::empty(), how))
    }

    /// Appends `payload` to the log without the ring lock (`Log::append_fast`), numbered as
    /// the full append numbers it: its seq, or the payload back, not numbered, where the
    /// append must go the full way. Under the order lock.
    #[inline(always)]
    fn append_at_once(&self, log: &Log<T>, payload: T) -> Result<u64, T> {
        log.append_fast(self.numbering.next(), payload)?;
        Ok(self.numbering.take())
    }

    /// Whether another publisher has the topic's turn now (its order lock): a task waits for
    /// the turn, not for the lock. A topic with a dispatcher says no: its publishers wait for
    /// room in its queue instead. So does an inline handler of this topic (or one up its
    /// cascade) publishing: the turn is its own thread's, and the try refuses it with
    /// `WouldDeadlock` (a wait for the turn would never end).
    #[cfg(feature = "tokio")]
    pub(crate) fn turn_taken(&self) -> bool {
        self.queue.is_none() && self.order.is_locked() && !inline::running(self.order_address())
    }

    /// `publish_at_once`'s count of room ran out: looks at every mailbox's room again;
    /// whether there is room for one more publish.
    #[cfg(feature = "tokio")]
    #[cold]
    fn look_for_room(order: &mut Order<T>) -> bool {
        order.room = order.subscribers.room();
        order.room != 0
    }

    /// [`publish`](Self::publish), every case. Out of line, so that the common case does not
    /// pay for this one's frame.
    #[inline(never)]
    fn publish_fully(
        &self,
        payload: T,
        wait: Wait,
        lifecycle: &Lifecycle,
        publisher: Option<&Arc<SubscriptionCore>>,
    ) -> Result<u64, (T, Refused)> {
        let node = publisher.map(|publisher| &publisher.node);
        let patience = match wait {
            Wait::Forever => Patience::Forever,
            Wait::Until(deadline) => Patience::Until(deadline),
            Wait::Never => Patience::WhileMoving,
        };
        // An inline handler of this topic (or one up its cascade) publishing: the order lock
        // is its own thread's.
        if inline::running(self.order_address()) {
            return Err((payload, Refused::WouldDeadlock));
        }
        // Declared before the guard, so dropped after it: tasks waiting for the turn hear.
        #[cfg(feature = "tokio")]
        let _turn = TurnOver(self);
        // Lock order: row 4; rows 5, 6, 8 and channel locks inside, and an all-or-nothing log
        // publish holds its observers' turns (row 5) across the append (row 6); see engine/mod.rs.
        let mut order = match deadlock::lock_order(&*self.order, &self.waits, node, patience) {
            Ok(order) => order,
            Err(NoLock::WouldDeadlock) => return Err((payload, Refused::WouldDeadlock)),
            Err(NoLock::GaveUp) if wait == Wait::Never => return Err((payload, Refused::Full)),
            Err(NoLock::GaveUp) => return Err((payload, Refused::Timeout)),
        };
        if !lifecycle.accepts(publisher.is_some()) {
            return Err((payload, Refused::Closed));
        }
        let order = self.current(&mut order);
        let (subscribers, observers) = (&order.subscribers, &order.observers);
        let stop = lifecycle.stop_signal();
        // An all-or-nothing publish takes its observers' turns first, to find room in them
        // that stays (see `observer.rs`); so does a handler's, so that an observer full now
        // stays full until its hand-out, and a wait for it that would lead back to the handler
        // is refused below, before anything is numbered (another topic's publisher could
        // fill it after a look without the turn). Others take each turn at its hand-out, so
        // that no observer waits behind this topic's own mailboxes.
        let mut entered = Vec::new();
        if (wait != Wait::Forever || publisher.is_some()) && !observers.is_empty() {
            let (turn_wait, room_by) = match wait {
                Wait::Until(deadline) => (observer::TurnWait::Until(deadline), Some(deadline)),
                Wait::Never => (observer::TurnWait::Never, None),
                Wait::Forever => (observer::TurnWait::Forever, None),
            };
            for inlet in observers.iter() {
                let mut inside = match inlet.enter(turn_wait, node, &self.waits) {
                    Ok(inside) => inside,
                    Err(NoTurn::WouldDeadlock) => return Err((payload, Refused::WouldDeadlock)),
                    Err(NoTurn::GaveUp) if wait == Wait::Never => {
                        return Err((payload, Refused::Full))
                    }
                    Err(NoTurn::GaveUp) => return Err((payload, Refused::Timeout)),
                };
                // Held across this publish's waits from here on.
                inside.held_across_waits(&self.waits);
                // A handler's `Forever` publish waits for room at the hand-out, recorded.
                let all_or_nothing = wait != Wait::Forever;
                match all_or_nothing.then(|| inside.wait_for_room(room_by, stop, &self.waits)) {
                    None | Some(Room::Ready) => {}
                    Some(Room::Full) if wait == Wait::Never => {
                        return Err((payload, Refused::Full))
                    }
                    Some(Room::Full) => return Err((payload, Refused::Timeout)),
                    Some(Room::Stopped) => return Err((payload, Refused::Closed)),
                }
                entered.push(inside);
            }
        }
        let how = Publishing {
            wait,
            lifecycle,
            publisher,
        };
        if let Some(log) = &self.log {
            let (pool, inline) = (&mut order.pool, &order.inline);
            let inline = (!inline.is_empty()).then_some(&inline[..]);
            return self.log_out(log, observers, pool, payload, how, entered, inline);
        }
        // Checked before numbering, so a refused message leaves no trace. Only this thread
        // adds to these mailboxes while it holds the order lock, so a mailbox with room now
        // keeps it, and a full one can only get emptier.
        let _recorded = match (publisher, wait) {
            (Some(publisher), Wait::Forever | Wait::Until(_)) => {
                let mut full: Vec<_> = subscribers
                    .iter()
                    .filter(|outbox| outbox.would_block() && outbox.wants(&payload))
                    .map(|outbox| Arc::clone(&outbox.core.node))
                    .collect();
                // Full observers too, their turns held (above): a handler whose wait would
                // lead back to it is refused before anything is numbered.
                full.extend(
                    observers
                        .iter()
                        .filter(|inlet| inlet.outbox.would_block())
                        .map(|inlet| Arc::clone(&inlet.outbox.core.node)),
                );
                match deadlock::record(&publisher.node, full) {
                    Ok(recorded) => Some(recorded),
                    Err(deadlock::WouldDeadlock) => return Err((payload, Refused::WouldDeadlock)),
                }
            }
            _ => None,
        };
        let room_by = match wait {
            Wait::Forever => None,
            Wait::Until(deadline) => Some(Some(deadline)),
            Wait::Never => Some(None),
        };
        if let Some(deadline) = room_by {
            for outbox in subscribers.iter().filter(|outbox| outbox.wants(&payload)) {
                match outbox.wait_for_room(deadline, stop, &self.waits) {
                    Room::Ready => {}
                    Room::Full if wait == Wait::Never => return Err((payload, Refused::Full)),
                    Room::Full => return Err((payload, Refused::Timeout)),
                    Room::Stopped => return Err((payload, Refused::Closed)),
                }
            }
        }
        if !order.inline.is_empty() {
            let (inline, pool) = (&order.inline, &mut order.pool);
            return self.hand_out_inline(
                subscribers,
                observers,
                inline,
                pool,
                payload,
                entered,
                how,
            );
        }
        let (subscribers, observers) = (&order.subscribers, &order.observers);
        Ok(self.hand_out(
            subscribers,
            observers,
            &mut order.pool,
            payload,
            entered,
            how,
        ))
    }

    /// The order lock's address: which topic a thread running inline handlers holds (its
    /// order lock, or on a dispatcher topic its queue's).
    pub(super) fn order_address(&self) -> usize {
        Arc::as_ptr(&self.order) as *const () as usize
    }

    /// The order lock, as the inline handlers run under it see it.
    fn inline_under(&self) -> inline::Under<'_> {
        inline::Under {
            order: self.order_address(),
            waits: &self.waits,
        }
    }

    /// Numbers `payload`, runs the inline handlers on it, and if none refuses it hands it to
    /// every mailbox and observer (those `entered` already have room for it); its seq. Called
    /// under the order lock, once the bus accepted it and room for it was found.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn hand_out_inline<'a>(
        &self,
        subscribers: &Subscribers<T>,
        observers: &[Arc<Inlet>],
        inline: &[Arc<Inline<T>>],
        pool: &mut Pool<Envelope<T>>,
        payload: T,
        entered: impl IntoIterator<Item = Entered<'a>>,
        how: Publishing<'_>,
    ) -> Result<u64, (T, Refused)> {
        let seq = self.numbering.next();
        // One reference for the handlers, besides the mailboxes' and observers': whatever a
        // handler keeps of it, the others are handed out as they were made.
        let count = 1 + subscribers.len() + usize::from(!observers.is_empty());
        let mut references = pool
            .shared(seq, self.name, Envelope::new(payload), count)
            .map(Message::new);
        let Some(lent) = references.next() else {
            unreachable!("`shared` hands out at least one reference")
        };
        if let Said::Rejected(rejection) = inline::run(inline, &lent, self.inline_under()) {
            drop(references);
            return match lent.try_into_payload() {
                Ok(payload) => Err((payload, Refused::Rejected(rejection))),
                Err(kept) => {
                    // Its seq is used: a message with it is out there.
                    let _ = self.numbering.take();
                    inline::kept(&rejection, kept)
                }
            };
        }
        let taken = self.numbering.take();
        debug_assert_eq!(taken, seq, "numbered under the order lock only");
        let stop = how.lifecycle.stop_signal();
        self.deliver(
            subscribers,
            observers,
            references,
            entered,
            how.publisher,
            stop,
        );
        Ok(seq)
    }

    /// Appends `payload` to the log and hands it to the observers (those `entered` already
    /// have room for it); its seq. Called under the order lock, once the bus accepted it.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn log_out<'a>(
        &self,
        log: &Log<T>,
        observers: &[Arc<Inlet>],
        pool: &mut Pool<Envelope<T>>,
        payload: T,
        how: Publishing<'_>,
        entered: impl IntoIterator<Item = Entered<'a>>,
        inline: Option<&[Arc<Inline<T>>]>,
    ) -> Result<u64, (T, Refused)> {
        let seq = self.numbering.next();
        let share = !observers.is_empty();
        let inline = inline.map(|inline| (inline, self.inline_under()));
        let appended = self.append(log, pool, payload, how, share, inline)?;
        if let Some(message) = appended {
            let stop = how.lifecycle.stop_signal();
            self.to_observers(observers, entered, message, how.publisher, stop);
        }
        Ok(seq)
    }

    /// The order lock's state, with the subscriber lists as they are now, for a hand-out
    /// other than `publish_at_once`'s: the room it counted is forgotten.
    #[inline(always)]
    pub(super) fn current<'a>(&self, order: &'a mut Order<T>) -> &'a mut Order<T> {
        let order = self.current_counted(order);
        order.forget_room();
        order
    }

    /// [`current`](Self::current), keeping the room counted while the list is the same.
    #[inline(always)]
    fn current_counted<'a>(&self, order: &'a mut Order<T>) -> &'a mut Order<T> {
        let version = self.version.load(Acquire);
        if order.version != version {
            order.subscribers = self.subscribers.load_full();
            order.observers = self.observers.load_full();
            order.inline = self.inline.load_full();
            order.version = version;
            order.forget_room();
        }
        order
    }

    /// Numbers `payload` and hands it to every mailbox and observer (those `entered` already
    /// have room for it); its seq. Called under the order lock, once the bus accepted it.
    #[inline(always)]
    fn hand_out<'a>(
        &self,
        subscribers: &Subscribers<T>,
        observers: &[Arc<Inlet>],
        pool: &mut Pool<Envelope<T>>,
        payload: T,
        entered: impl IntoIterator<Item = Entered<'a>>,
        how: Publishing<'_>,
    ) -> u64 {
        let Publishing {
            lifecycle,
            publisher,
            ..
        } = how;
        let seq = self.numbering.take();
        if subscribers.is_empty() && observers.is_empty() {
            self.unheard();
            return seq;
        }
        let stop = lifecycle.stop_signal();
        // One reference per mailbox, made at once (see `message/shared.rs`), and one the observers
        // share.
        let count = subscribers.len() + usize::from(!observers.is_empty());
        let references = pool
            .shared(seq, self.name, Envelope::new(payload), count)
            .map(Message::new);
        self.deliver(subscribers, observers, references, entered, publisher, stop);
        seq
    }

    /// Hands one of `references` to each mailbox and the next to the observers (those
    /// `entered` already have room for it).
    #[inline(always)]
    pub(super) fn deliver<'a>(
        &self,
        subscribers: &Subscribers<T>,
        observers: &[Arc<Inlet>],
        mut references: impl Iterator<Item = Message<T>>,
        entered: impl IntoIterator<Item = Entered<'a>>,
        publisher: Option<&Arc<SubscriptionCore>>,
        stop: &crossbeam_channel::Receiver<()>,
    ) {
        // Loops over the chunks, not `iter()`'s flattened iterator: that costs a publish more.
        for chunk in &subscribers.chunks {
            for (outbox, message) in chunk.iter().zip(&mut references) {
                // Every outcome is counted on the subscription (see `Offer`).
                let _: Offer = outbox.offer(message, stop, &self.waits);
            }
        }
        if let Some(message) = references.next() {
            self.to_observers(observers, entered, message, publisher, stop);
        }
    }

    /// Offers a numbered message to the topic's observers, in their order, taking the turn of
    /// each not `entered` yet. A forced stop (or a wait that would never end) while waiting
    /// for a turn leaves that observer out, counted as dropped: the message is published.
    fn to_observers<'a>(
        &self,
        observers: &[Arc<Inlet>],
        entered: impl IntoIterator<Item = Entered<'a>>,
        message: Message<T>,
        publisher: Option<&Arc<SubscriptionCore>>,
        stop: &crossbeam_channel::Receiver<()>,
    ) {
        let node = publisher.map(|publisher| &publisher.node);
        let mut entered = entered.into_iter();
        for inlet in observers {
            let inside = match entered.next() {
                Some(inside) => inside,
                None => match inlet.enter(observer::TurnWait::Forever, node, &self.waits) {
                    Ok(inside) => inside,
                    Err(_) => {
                        inlet.left_out(&message, "its turn would never come");
                        continue;
                    }
                },
            };
            let _recorded = match publisher {
                Some(publisher) if inside.would_block() => {
                    match deadlock::record(&publisher.node, vec![Arc::clone(inside.node())]) {
                        Ok(recorded) => Some(recorded),
                        Err(deadlock::WouldDeadlock) => {
                            inlet.left_out(&message, "waiting for room would never end");
                            continue;
                        }
                    }
                }
                _ => None,
            };
            let _: Offer = inside.offer(message.clone(), stop, &self.waits);
        }
    }

    /// Numbers `payload` and appends it to the topic's log; called under the order lock.
    fn append(
        &self,
        log: &Log<T>,
        pool: &mut Pool<Envelope<T>>,
        payload: T,
        how: Publishing<'_>,
        share: bool,
        inline: Option<(&[Arc<Inline<T>>], inline::Under<'_>)>,
    ) -> Result<Option<Message<T>>, (T, Refused)> {
        let Publishing {
            wait,
            lifecycle,
            publisher,
        } = how;
        let seq = self.numbering.next();
        let room_by = match wait {
            Wait::Forever => None,
            Wait::Until(deadline) => Some(Some(deadline)),
            Wait::Never => Some(None),
        };
        let node = publisher.map(|publisher| &publisher.node);
        let room = RoomWait {
            by: room_by,
            stop: lifecycle.stop_signal(),
            waits: &self.waits,
            publisher: node,
        };
        let appended = log.append(pool, seq, payload, room, share, inline);
        match appended {
            Ok(shared) => {
                let taken = self.numbering.take();
                debug_assert_eq!(taken, seq, "numbered under the order lock only");
                Ok(shared)
            }
            Err((payload, NoRoom::Full)) => Err((payload, Refused::Full)),
            Err((payload, NoRoom::Timeout)) => Err((payload, Refused::Timeout)),
            Err((payload, NoRoom::Stopped)) => Err((payload, Refused::Closed)),
            Err((payload, NoRoom::WouldDeadlock)) => Err((payload, Refused::WouldDeadlock)),
            Err((payload, NoRoom::Rejected(rejection))) => {
                Err((payload, Refused::Rejected(rejection)))
            }
        }
    }

    /// Publishes like [`publish`](Self::publish) with [`Wait::Forever`], awaiting the topic's
    /// turn and room instead of blocking, with no lock held across an `.await`: each try is
    /// all or nothing ([`Wait::Never`]), and between tries the task waits for what stopped
    /// it (the turn, a full mailbox's room), or, where that gives no wake (an observer's turn
    /// held by another topic's publisher), for `wake::BACKSTOP`. Cancel-safe: dropped while
    /// waiting, it has published nothing. With a `deadline`, a wait that reaches it ends the
    /// publish with [`Refused::Timeout`], the payload handed back.
    #[cfg(feature = "tokio")]
    pub(crate) async fn publish_async(
        &self,
        mut payload: T,
        lifecycle: &Lifecycle,
        publisher: Option<Arc<SubscriptionCore>>,
        deadline: Option<Instant>,
    ) -> Result<u64, (T, Refused)> {
        // Each wait below is bounded by the deadline (`until`: false once it has passed).
        use crate::util::{ticker, wake::until};
        loop {
            // A try while another publisher has the turn would wait on the lock, holding up
            // the runtime thread (see `Engine::publish_now`): the task waits for the turn.
            if self.turn_taken() {
                if let Err(refused) = self.turn_over(publisher.as_ref(), deadline).await {
                    return Err((payload, refused));
                }
                continue;
            }
            match self.publish(payload, Wait::Never, lifecycle, publisher.as_ref()) {
                Err((back, Refused::Full)) => payload = back,
                done => return done,
            }
            if let Some(queue) = self.queue.as_ref().filter(|queue| queue.is_running()) {
                // The queue is full, or another publisher holds it: wait for the dispatcher
                // to take one, unless it waits (through others) on this handler.
                if let Some(publisher) = &publisher {
                    if queue.leads_back(&publisher.node, &self.waits) {
                        return Err((payload, Refused::WouldDeadlock));
                    }
                }
                let backstop = crate::util::wake::BACKSTOP;
                let room = queue
                    .room
                    .wait_unless(Some(backstop), || queue.may_have_room());
                if !until(deadline, room).await {
                    return Err((payload, Refused::Timeout));
                }
                continue;
            }
            if self.log.is_none() {
                // A `Block` mailbox is full: wait for its room, unless that leads back to this
                // handler.
                let subscribers = self.subscribers.load_full();
                let full: Vec<&Arc<Outbox<T>>> = subscribers
                    .iter()
                    .filter(|o| o.would_block() && o.wants(&payload))
                    .collect();
                if let Some(outbox) = full.first() {
                    let mut on: Vec<_> = full.iter().map(|o| Arc::clone(&o.core.node)).collect();
                    // A handler's wait records the full observers too, as a sync publish does:
                    // a cycle through one is found now, not once these have room.
                    if publisher.is_some() {
                        on.extend(self.full_observers().map_or_else(Vec::new, |(_, on)| on));
                    }
                    let room = outbox.room();
                    if let Err(refused) = wait_for(publisher.as_ref(), on, deadline, room).await {
                        return Err((payload, refused));
                    }
                    continue;
                }
            }
            // Looked at after the mailboxes, the common wait, which then does not pay for it.
            if let Some((inlet, on)) = self.full_observers() {
                // An observer's mailbox is full: wait for its room as a task (its worker may
                // be a task on this runtime thread), unless that, or the wait for any other
                // full one after it, leads back to this handler.
                let room = inlet.room();
                if let Err(refused) = wait_for(publisher.as_ref(), on, deadline, room).await {
                    return Err((payload, refused));
                }
                continue;
            }
            if let Some(log) = &self.log {
                // A `Block` subscription is `capacity` behind: wait for it to move, unless
                // that leads back to this handler.
                let on = log.behind().into_iter().collect();
                if let Err(refused) = wait_for(publisher.as_ref(), on, deadline, log.room()).await {
                    return Err((payload, refused));
                }
                continue;
            }
            // The turn is held by a publisher waiting for room: wait for it.
            if self.order.is_locked() {
                if let Err(refused) = self.turn_over(publisher.as_ref(), deadline).await {
                    return Err((payload, refused));
                }
                continue;
            }
            // An observer's turn is held by another topic's publisher, which may keep it while
            // it waits for room elsewhere (a `publish_timeout` takes its observers' turns
            // first): no wake comes when it lets go, so the task looks again after the
            // backstop, unless the holder waits, through the others, on this handler. Or
            // nothing is in the way now (it was a moment ago): the task lets the others on its
            // runtime thread run first. Neither waits past the deadline.
            let observer_turn_taken = {
                let observers = self.observers.load();
                let taken = observers.iter().any(|inlet| inlet.turn_taken());
                if let Some(publisher) = publisher.as_ref().filter(|_| taken) {
                    let node = &publisher.node;
                    if observers.iter().any(|inlet| inlet.turn_leads_back(node)) {
                        return Err((payload, Refused::WouldDeadlock));
                    }
                }
                taken
            };
            let pause = async {
                match observer_turn_taken {
                    true => ticker::Sleep::after(crate::util::wake::BACKSTOP).await,
                    false => tokio::task::yield_now().await,
                }
            };
            if !until(deadline, pause).await {
                return Err((payload, Refused::Timeout));
            }
        }
    }

    /// The first of the topic's observers whose mailbox a publish would wait for now, and the
    /// wait-graph nodes of all of them (as a sync publish records every full one).
    #[cfg(feature = "tokio")]
    fn full_observers(&self) -> Option<(Arc<Inlet>, Vec<Arc<deadlock::WaitNode>>)> {
        let observers = self.observers.load();
        let mut full = observers.iter().filter(|inlet| inlet.would_block());
        let first = Arc::clone(full.next()?);
        let mut on = vec![Arc::clone(first.node())];
        on.extend(full.map(|inlet| Arc::clone(inlet.node())));
        Some((first, on))
    }

    /// Waits (as a task) until the turn another publisher has is over, or the deadline
    /// (`Timeout`). A handler waits only if that does not lead back to it (`WouldDeadlock`).
    #[cfg(feature = "tokio")]
    async fn turn_over(
        &self,
        publisher: Option<&Arc<SubscriptionCore>>,
        deadline: Option<Instant>,
    ) -> Result<(), Refused> {
        if let Some(publisher) = publisher {
            if deadlock::turn_leads_back(&publisher.node, &self.waits) {
                return Err(Refused::WouldDeadlock);
            }
        }
        let backstop = crate::util::wake::BACKSTOP;
        let turn = self
            .turn
            .wait_unless(Some(backstop), || self.order.is_free());
        match crate::util::wake::until(deadline, turn).await {
            true => Ok(()),
            false => Err(Refused::Timeout),
        }
    }

    pub(crate) fn add(&self, outbox: Arc<Outbox<T>>) {
        self.add_all(vec![outbox]);
    }

    /// Adds mailboxes in one edit: a publish sees all of them or none (a consumer group's).
    pub(crate) fn add_all(&self, outboxes: Vec<Arc<Outbox<T>>>) {
        // Before the mailboxes are on the list: from here on, every message is numbered
        // under the order lock, where the list is read (see `numbering.rs`).
        self.numbering.heard();
        // Lock order: row 3 (`edit`), nothing else held; see engine/mod.rs.
        let _edit = self.edit.lock();
        let next = self.subscribers.load().with(outboxes);
        let others = self.observers.load().len() + self.inline.load().len();
        self.count.store(next.len() + others, SeqCst);
        self.subscribers.store(Arc::new(next));
        self.version.fetch_add(1, Release);
    }

    /// Adds an inline subscriber, after those already there.
    pub(crate) fn add_inline(&self, inline: Arc<Inline<T>>) {
        // Before it is on the list, as in `add_all`.
        self.numbering.heard();
        // Lock order: row 3 (`edit`), nothing else held; see engine/mod.rs.
        let _edit = self.edit.lock();
        let mut next = Vec::clone(&self.inline.load());
        next.push(inline);
        let others = self.subscribers.load().len() + self.observers.load().len();
        self.count.store(next.len() + others, SeqCst);
        self.inline.store(Arc::new(next));
        self.version.fetch_add(1, Release);
    }
}

/// Tells tasks waiting for the topic's turn that it is over, once the order lock is let go.
#[cfg(feature = "tokio")]
pub(super) struct TurnOver<'a, T>(pub(super) &'a TopicState<T>);

#[cfg(feature = "tokio")]
impl<T> Drop for TurnOver<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.0.turn.notify();
    }
}

/// `publish_async`'s wait for `room` (a full mailbox's, an observer's, a log's), bounded by
/// `deadline` (`Timeout`), with the publishing handler, if any, recorded as waiting on the
/// workers of `on`, unless that leads back to it (`WouldDeadlock`).
#[cfg(feature = "tokio")]
async fn wait_for(
    publisher: Option<&Arc<SubscriptionCore>>,
    on: Vec<Arc<deadlock::WaitNode>>,
    deadline: Option<Instant>,
    room: impl std::future::Future<Output = ()>,
) -> Result<(), Refused> {
    let _recorded = match publisher {
        Some(publisher) => match deadlock::record(&publisher.node, on) {
            Ok(recorded) => Some(recorded),
            Err(deadlock::WouldDeadlock) => return Err(Refused::WouldDeadlock),
        },
        None => None,
    };
    match crate::util::wake::until(deadline, room).await {
        true => Ok(()),
        false => Err(Refused::Timeout),
    }
}

impl<T: Topic> AnyTopic for TopicState<T> {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }

    fn redeliver(
        &self,
        message: &(dyn Any + Send + Sync),
        subscription: u64,
        lifecycle: &Lifecycle,
        publisher: Option<&Arc<SubscriptionCore>>,
    ) -> Result<(), Redelivery> {
        if let Some(message) = message.downcast_ref::<Message<T>>() {
            return self.redeliver_to(message.clone(), subscription, lifecycle, publisher);
        }
        match message.downcast_ref::<Message<AnyMessage>>() {
            Some(observed) => {
                let observed = observed.clone();
                self.redeliver_to_observer(observed, subscription, lifecycle, publisher)
            }
            None => unreachable!("a dead letter's message is found by its topic's TypeId"),
        }
    }

    #[cfg(feature = "dashboard")]
    fn show(&self, message: &(dyn Any + Send + Sync)) -> Option<String> {
        super::show::show::<T>(message)
    }

    fn name(&self) -> &'static str {
        self.name
    }

    fn published(&self) -> u64 {
        self.numbering.next()
    }

    fn quiet_published(&self) -> Option<u64> {
        // Lock order: row 4, only tried: the drain look holds row 7 here; see engine/mod.rs.
        let _order = self.order.try_lock()?;
        // A dispatcher topic: its queue's lock too, and nothing queued or being handed out.
        if self.queue.as_ref().is_some_and(|queue| !queue.is_quiet()) {
            return None;
        }
        Some(self.numbering.next())
    }

    // A dispatcher whose thread could not start has no queue in use: its publishers hand
    // out themselves, and nothing counts their hand-outs. `None`, as for a topic without one.
    fn queue_depth(&self) -> Option<(usize, usize)> {
        self.running_queue().map(Queue::depth)
    }

    fn handed_out(&self) -> Option<u64> {
        self.running_queue().map(Queue::handed_out)
    }

    fn close_out(&self, letters: &DeadLetterStore, spill: &mut Spill) {
        self.close_out_queue(letters, spill);
    }

    fn close_numbering(&self) {
        self.numbering.lock();
    }

    fn log_extent(&self) -> Option<(u64, u64)> {
        self.log.as_ref().map(|log| log.extent())
    }

    fn attach(&self, observer: Arc<Inlet>) {
        // Before the observer is on the list, as in `add_all`.
        self.numbering.heard();
        // Lock order: row 3 (`edit`), under row 1 (the engine's `observers`); see engine/mod.rs.
        let _edit = self.edit.lock();
        let mut next = Vec::clone(&self.observers.load());
        next.push(observer);
        let others = self.subscribers.load().len() + self.inline.load().len();
        self.count.store(next.len() + others, SeqCst);
        self.observers.store(Arc::new(next));
        self.version.fetch_add(1, Release);
    }

    fn remove(&self, mailboxes: &[u64]) {
        if let Some(log) = &self.log {
            for &subscription in mailboxes {
                log.remove(subscription);
            }
        }
        // Lock order: row 3 (row 6 let go above), under row 1 for an observer; see engine/mod.rs.
        let _edit = self.edit.lock();
        let next = self.subscribers.load().without(mailboxes);
        let observers: Vec<_> = self
            .observers
            .load()
            .iter()
            .filter(|inlet| !mailboxes.contains(&inlet.id()))
            .cloned()
            .collect();
        let inline: Vec<_> = self
            .inline
            .load()
            .iter()
            .filter(|entry| !mailboxes.contains(&entry.core.id))
            .cloned()
            .collect();
        self.count
            .store(next.len() + observers.len() + inline.len(), SeqCst);
        self.subscribers.store(Arc::new(next));
        self.observers.store(Arc::new(observers));
        self.inline.store(Arc::new(inline));
        self.version.fetch_add(1, Release);
    }

    fn clear(&self) {
        if let Some(log) = &self.log {
            log.clear();
        }
        // Its dispatcher ends once the queue is empty (a forced close abandons what it holds).
        if let Some(queue) = &self.queue {
            queue.close(self.subscribers.load_full(), self.observers.load_full());
        }
        // Lock order: row 3 (row 6 let go above), nothing else held; see engine/mod.rs.
        let _edit = self.edit.lock();
        self.count.store(0, SeqCst);
        self.subscribers.store(Arc::new(Subscribers::new()));
        self.observers.store(Arc::new(Vec::new()));
        self.inline.store(Arc::new(Vec::new()));
        self.version.fetch_add(1, Release);
    }
}
