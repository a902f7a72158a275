//! Priority mailboxes (`Options::priority`): a bounded mailbox whose worker takes the most
//! urgent message queued first (the highest level its priority function gives), and the
//! messages of one level in topic order. The publishing side is the plain mailbox's
//! [`Outbox`], which hands its messages to this file's [`Levels`] (a [`Queue`]); the worker's
//! side is a [`PriorityInbox`].
//!
//! # The structure
//!
//! One mutex over a queue per level that holds messages (a `BTreeMap<u8, VecDeque>`, so the
//! most and least urgent levels are its ends), and two one-slot token channels for the
//! wake-ups: `arrived` (something went in, or the mailbox was retired: a thread worker waits
//! on it) and `room` (something was taken out: a `Block` publisher waits on it, with the
//! forced-stop signal, through a `Select`). A token left in its slot is never lost: a waiter
//! looks at the queues, then waits for a token, and whatever changes them after the look
//! leaves one. A task consumer and `publish_async` wait on the mailbox's [`Flags`] instead, as
//! with a plain mailbox.
//!
//! # Lock order
//!
//! The queues' mutex is a leaf (row 9 of the table in `engine/mod.rs`): no other lock is
//! taken, no user code runs (the priority function runs before it is taken) and no message
//! is dropped while it is held.
//!
//! # Retiring
//!
//! As a plain mailbox (`mailbox.rs`): `retire` sets the shared flag and leaves an `arrived`
//! token; the worker goes on taking messages until no publisher of the topic can still be at
//! the mailbox, then takes what is left, most urgent first, and stops.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering::{Acquire, Release, SeqCst};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, RecvTimeoutError, Select, Sender};
use parking_lot::Mutex;

use crate::dead_letter::{DeadLetter, DeadLetterStore};
use crate::deadlock::TopicWaits;
use crate::delivery::core::{Retire, Spill, SubscriptionCore, NOT_HANDLED};
use crate::delivery::mailbox::{outbox_of, Flags, Handouts, Offer, Outbox, Queue, Room, RECHECK};
use crate::handler::Failure;
use crate::message::Message;
use crate::options::priority::Priority;
use crate::options::Overflow;
use crate::stats::Counters;
use crate::trace;

/// The messages queued, by level.
struct Queued<T> {
    /// Per level that holds messages, oldest first (topic order).
    levels: BTreeMap<u8, VecDeque<Message<T>>>,
    /// How many in all.
    len: usize,
}

/// Which message a full mailbox lets go of to make room.
enum Evicted<T> {
    /// The arriving one: it is among the least urgent (see [`Queued::make_room`]).
    Arriving(Message<T>),
    /// A queued one; the arriving one went in in its place.
    Queued(Message<T>),
}

impl<T> Queued<T> {
    fn push(&mut self, level: u8, message: Message<T>) {
        self.levels.entry(level).or_default().push_back(message);
        self.len += 1;
    }

    /// The most urgent message, the oldest of its level.
    fn pop(&mut self) -> Option<Message<T>> {
        let mut most = self.levels.last_entry()?;
        let message = most.get_mut().pop_front();
        if most.get().is_empty() {
            most.remove();
        }
        self.len -= message.is_some() as usize;
        message
    }

    /// A full mailbox makes room for `message` of `level` at the least urgent level: with
    /// `newest`, the newest message of it, counting the arriving one as the newest of all;
    /// else the oldest queued message of it, or the arriving one if it is less urgent than
    /// everything queued. A more urgent message is never let go of to keep a less urgent one.
    fn make_room(&mut self, level: u8, message: Message<T>, newest: bool) -> Evicted<T> {
        // A full mailbox holds something (its capacity is at least 1).
        let Some(mut least) = self.levels.first_entry() else {
            return Evicted::Arriving(message);
        };
        let least_level = *least.key();
        if level < least_level || (level == least_level && newest) {
            return Evicted::Arriving(message);
        }
        let at = least.get_mut();
        let evicted = match newest {
            true => at.pop_back(),
            false => at.pop_front(),
        };
        if at.is_empty() {
            least.remove();
        }
        match evicted {
            Some(evicted) => {
                self.levels.entry(level).or_default().push_back(message);
                Evicted::Queued(evicted)
            }
            None => Evicted::Arriving(message),
        }
    }
}

/// What a priority mailbox's ends share.
pub(crate) struct Levels<T> {
    /// Lock order: row 9, a leaf (see the module docs).
    queued: Mutex<Queued<T>>,
    capacity: usize,
    priority: Priority,
    /// The shut flag, and the wake-ups of a task consumer and of `publish_async`.
    flags: Arc<Flags>,
    /// A token: something went in, or the mailbox was retired.
    arrived: (Sender<()>, Receiver<()>),
    /// A token: something was taken out.
    room: (Sender<()>, Receiver<()>),
}

impl<T> Levels<T> {
    fn len(&self) -> usize {
        // Lock order: row 9, a leaf; see the module docs.
        self.queued.lock().len
    }

    /// Something went in (or the mailbox was retired): wakes its consumer.
    fn arrived(&self) {
        let _ = self.arrived.0.try_send(());
        self.flags.arrived();
    }

    /// The most urgent message queued, if any.
    fn take(&self) -> Option<Message<T>> {
        // Lock order: row 9, a leaf; see the module docs.
        let message = self.queued.lock().pop()?;
        let _ = self.room.0.try_send(());
        // A task waiting for room here waits for one slot (`Outbox::room`).
        self.flags.made_room(|| true);
        Some(message)
    }

    /// Puts the message in if there is room; else hands it back.
    fn try_put(&self, level: u8, message: Message<T>) -> Result<(), Message<T>> {
        // Lock order: row 9, a leaf; see the module docs.
        let mut queued = self.queued.lock();
        if queued.len >= self.capacity {
            return Err(message);
        }
        queued.push(level, message);
        drop(queued);
        self.arrived();
        Ok(())
    }

    /// Waits for a `room` token or a forced stop, the publisher's wait recorded in the
    /// topic's wait graph; `false` at the stop or at `deadline`.
    fn wait_room(
        &self,
        core: &SubscriptionCore,
        deadline: Option<Instant>,
        stop: &Receiver<()>,
        waits: &TopicWaits,
    ) -> Result<(), Room> {
        let mut select = Select::new();
        let room = select.recv(&self.room.1);
        select.recv(stop);
        let ready = waits.waiting_on(&core.node, || match deadline {
            Some(deadline) => select.ready_deadline(deadline),
            None => Ok(select.ready()),
        });
        match ready {
            Err(_) => Err(Room::Full),
            Ok(index) if index != room => Err(Room::Stopped),
            Ok(_) => {
                let _ = self.room.1.try_recv();
                Ok(())
            }
        }
    }

    /// `Block`, once the mailbox was full (`message` counted as received): waits for room
    /// until a forced stop. While it waits the message is not counted, so `queued` does not
    /// include it. Only the order lock's holder puts messages in, so room found stays.
    fn put_blocking(
        &self,
        core: &SubscriptionCore,
        level: u8,
        mut message: Message<T>,
        stop: &Receiver<()>,
        waits: &TopicWaits,
    ) -> Offer {
        let received = &core.counters.received;
        loop {
            Counters::unbump(received);
            // Retired meanwhile, the mailbox still gets this message, numbered before the
            // unsubscribe: its worker goes on taking while this publisher is at it.
            let waited = self.wait_room(core, None, stop, waits);
            Counters::bump(received);
            if waited.is_err() {
                return Offer::Abandoned;
            }
            match self.try_put(level, message) {
                Ok(()) => return Offer::Accepted,
                Err(back) => message = back,
            }
        }
    }
}

impl<T: Send + Sync + 'static> Queue<T> for Levels<T> {
    fn len_and_capacity(&self) -> (usize, usize) {
        (self.len(), self.capacity)
    }

    fn offer(
        &self,
        core: &SubscriptionCore,
        message: Message<T>,
        stop: &Receiver<()>,
        waits: &TopicWaits,
    ) -> Offer {
        let level = self.priority.level(message.payload());
        let counters = &core.counters;
        Counters::bump(&counters.received);
        let message = match self.try_put(level, message) {
            Ok(()) => return Offer::Accepted,
            Err(message) => message,
        };
        let newest = match core.options.overflow {
            Overflow::Block => return self.put_blocking(core, level, message, stop, waits),
            Overflow::DropNewest => true,
            Overflow::DropOldest => false,
        };
        let why = if newest { "drop-newest" } else { "drop-oldest" };
        // Lock order: row 9, a leaf; see the module docs.
        let mut queued = self.queued.lock();
        if queued.len < self.capacity {
            // The worker took one meanwhile.
            queued.push(level, message);
            drop(queued);
            self.arrived();
            return Offer::Accepted;
        }
        let evicted = queued.make_room(level, message, newest);
        drop(queued);
        match evicted {
            Evicted::Arriving(message) => {
                if self.flags.shut.load(Acquire) {
                    // Published after the unsubscribe began: not this subscription's.
                    Counters::unbump(&counters.received);
                    return Offer::Retired;
                }
                trace::dropped(message.topic(), message.seq(), &core.name, why);
                Counters::bump(&counters.dropped);
                Offer::Dropped
            }
            Evicted::Queued(evicted) => {
                trace::dropped(evicted.topic(), evicted.seq(), &core.name, why);
                Counters::bump(&counters.dropped);
                drop(evicted);
                self.arrived();
                Offer::Accepted
            }
        }
    }

    fn wait_for_room(
        &self,
        core: &SubscriptionCore,
        deadline: Instant,
        stop: &Receiver<()>,
        waits: &TopicWaits,
    ) -> Room {
        while !self.flags.shut.load(Acquire) && self.len() >= self.capacity {
            if let Err(room) = self.wait_room(core, Some(deadline), stop, waits) {
                return room;
            }
        }
        Room::Ready
    }
}

/// The bus's handle on a priority mailbox: retiring it, and emptying it after a forced close.
struct Retirer<T> {
    levels: Arc<Levels<T>>,
}

impl<T: Send + Sync + 'static> Retire for Retirer<T> {
    fn retire(&self) {
        if self.levels.flags.shut.swap(true, SeqCst) {
            return;
        }
        self.levels.arrived();
    }

    fn queued(&self) -> u64 {
        self.levels.len() as u64
    }

    fn close_out(&self, core: &SubscriptionCore, letters: &DeadLetterStore, spill: &mut Spill) {
        // The worker may take from the queues meanwhile: each message is taken once, by one
        // of them, and both keep it as a dead letter.
        while let Some(message) = self.levels.take() {
            let failure = Failure::text(NOT_HANDLED);
            let letter = DeadLetter::new(message, core.id, Arc::clone(&core.name), failure, 0);
            spill.extend(letters.push_keeping(letter));
            core.counters.closed_out.fetch_add(1, Release);
        }
    }
}

/// The worker's end of a priority mailbox.
pub(crate) struct PriorityInbox<T> {
    levels: Arc<Levels<T>>,
    handouts: Handouts,
    subscription: u64,
    phase: Phase,
}

/// Where the worker stands, as with a plain mailbox (`mailbox.rs`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Open,
    /// Shut, and a publisher may still be at the mailbox.
    Shut,
    /// Shut, and nothing more can arrive: what is left is taken, then the worker stops.
    Settled,
}

/// What one look at the mailbox found.
enum Step<T> {
    Took(Message<T>),
    /// Nothing more can arrive.
    Done,
    /// Open and empty: wait for a message (or the retire's token).
    Empty,
    /// Retired, empty, and a publisher may still be at it: look again shortly.
    Recheck,
}

/// A priority mailbox of `capacity` slots ordered by `priority`, as its two ends; `core`
/// makes the subscription's shared state around the mailbox's retirer.
pub(crate) fn mailbox<T>(
    capacity: usize,
    priority: Priority,
    handouts: Handouts,
    by_task: bool,
    core: impl FnOnce(Box<dyn Retire>) -> SubscriptionCore,
) -> (Outbox<T>, PriorityInbox<T>)
where
    T: Send + Sync + 'static,
{
    let levels = Arc::new(Levels {
        queued: Mutex::new(Queued {
            levels: BTreeMap::new(),
            len: 0,
        }),
        capacity,
        priority,
        flags: Arc::new(Flags::new(by_task)),
        arrived: crossbeam_channel::bounded(1),
        room: crossbeam_channel::bounded(1),
    });
    let retirer = Retirer {
        levels: Arc::clone(&levels),
    };
    let core = Arc::new(core(Box::new(retirer)));
    let inbox = PriorityInbox {
        levels: Arc::clone(&levels),
        handouts,
        subscription: core.id,
        phase: Phase::Open,
    };
    let flags = Arc::clone(&levels.flags);
    (outbox_of(levels, flags, core), inbox)
}

impl<T> PriorityInbox<T> {
    /// Whether the mailbox is empty now.
    pub(crate) fn is_empty(&self) -> bool {
        self.levels.len() == 0
    }

    /// The most urgent message there now, without waiting: after a forced stop.
    pub(crate) fn try_next(&self) -> Option<Message<T>> {
        self.levels.take()
    }

    /// One look at the mailbox, without waiting (see the module docs of `mailbox.rs`).
    fn step(&mut self) -> Step<T> {
        loop {
            match self.phase {
                Phase::Open => {
                    if self.levels.flags.shut.load(Acquire) {
                        self.phase = Phase::Shut;
                        continue;
                    }
                    return match self.levels.take() {
                        Some(message) => Step::Took(message),
                        None => Step::Empty,
                    };
                }
                Phase::Shut => {
                    if self.handouts.none_at(self.subscription) {
                        self.phase = Phase::Settled;
                        continue;
                    }
                    return match self.levels.take() {
                        Some(message) => Step::Took(message),
                        None => Step::Recheck,
                    };
                }
                Phase::Settled => {
                    return match self.levels.take() {
                        Some(message) => Step::Took(message),
                        None => Step::Done,
                    }
                }
            }
        }
    }

    /// The next message, most urgent first, waiting for one; `None` once the mailbox is shut
    /// and nothing more can arrive.
    pub(crate) fn next(&mut self) -> Option<Message<T>> {
        loop {
            match self.step() {
                Step::Took(message) => return Some(message),
                Step::Done => return None,
                // A token left after the look above wakes it at once.
                Step::Empty => {
                    let _ = self.levels.arrived.1.recv();
                }
                Step::Recheck => match self.levels.arrived.1.recv_timeout(RECHECK) {
                    Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                    // Cannot happen: the mailbox holds the sender.
                    Err(RecvTimeoutError::Disconnected) => return None,
                },
            }
        }
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
                    let levels = &self.levels;
                    let ready = || levels.len() > 0 || levels.flags.shut.load(Acquire);
                    // A task's mailbox announces every arrival, fenced (see `mailbox.rs`).
                    self.levels.flags.arrived.wait_unless(None, ready).await;
                }
                Step::Recheck => crate::util::ticker::Sleep::after(RECHECK).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn levels_of(queued: &mut Queued<u8>) -> Vec<u8> {
        std::iter::from_fn(|| queued.pop().map(|m| *m.payload())).collect()
    }

    #[test]
    fn room_is_made_at_the_least_urgent_level() {
        let message = |level: u8| Message::alone(u64::from(level), "t", level);
        let full = || {
            let mut queued = Queued {
                levels: BTreeMap::new(),
                len: 0,
            };
            for level in [1, 3, 1] {
                queued.push(level, message(level));
            }
            queued
        };
        let mut queued = full();
        assert!(matches!(
            queued.make_room(0, message(0), false),
            Evicted::Arriving(_)
        ));
        assert!(matches!(
            queued.make_room(1, message(1), true),
            Evicted::Arriving(_)
        ));
        assert!(matches!(
            queued.make_room(2, message(2), true),
            Evicted::Queued(_)
        ));
        assert_eq!(levels_of(&mut queued), [3, 2, 1]);
    }
}
