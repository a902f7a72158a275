//! Logs: the delivery kind of a topic that keeps its history (`#[topic(retain = N)]`), beside
//! `mailbox.rs`. One bounded ring of messages per topic, shared by all its subscriptions;
//! each subscription is a [`Cursor`], a position in it. A publish appends once, whatever the
//! number of subscribers, and writes nothing per subscription: a log subscription's
//! `received` is read off the log (from where it started to the log's end, or to where it
//! was retired), not counted.
//!
//! # The ring, and what each side writes
//!
//! The ring holds the messages themselves, in blocks of up to 64 cells (`slots.rs`,
//! `message/log_block.rs`): a cell is the payload, its place in the block and when it was
//! appended (by the log's clock, `clock.rs`: cheap, and a few milliseconds behind); the seq
//! and topic are the block's. A `Message<T>` of a log topic points at its cell, and a
//! reference to it counts on its block. Publishers append under the topic's
//! order lock, so one at a time, and under the ring lock (or, while no one holds it, in its
//! stead: the fast append, below); each append trims the front to
//! `retain` messages (seq `s - retain` before it writes `s`) and, with `retain_for`, drops
//! what is older, but never past a `Block` subscription's position. A trimmed payload is
//! dropped once no reference holds its block but the log's (else when the last one goes;
//! one with no `Drop` stays in its cell), and a block trimmed whole is let go of. A worker
//! takes references out (a batch for `Block`, one at a time for `DropOldest`, so a stalled
//! `DropOldest` subscription holds nothing beyond the log but the block of the message in
//! its handler), and after each message is finished moves its position on. A worker that
//! finds its next seq trimmed (lapped) counts the gap as dropped and reads on from the
//! oldest kept.
//!
//! A message an inline subscriber kept a reference to while its publish ran (it was made
//! in a block of its own for them) cannot move into its cell: the cell is marked out of
//! line and the ring keeps the message beside it (`Ring::out_of_line`).
//!
//! # Lending
//!
//! The thread worker of a `Block` subscription takes no reference and no lock per message:
//! its handler reads the message in its cell. An atomic increment and decrement per delivery
//! on a line every subscriber writes, and the ring lock held while cloning a batch, were most
//! of a log delivery's cost (BENCHMARKS.md). While the subscription is *protected* (open, and
//! among the ring's cursors) this is sound: a publish of seq `s` waits while `s - position >=
//! capacity`, and `capacity <= retain`, so no trim reaches the worker's position, and the
//! age trim stops at it too. The worker makes handles on a run of messages (up to `LEND_RUN`,
//! all appended already) at once (uncounted: `Message::uncounted`, pointing at their cells)
//! and lends them one by one. Once it has read everything, it pauses before it looks at the
//! log again (`reader.rs`, `CAUGHT_UP_PAUSE`): its looks read the lines each append writes,
//! and looking after every message made the publisher wait for those lines.
//!
//! Retiring or removing the subscription *unprotects* it, under the ring lock: it waits out
//! a copy in progress (the cursor's `lend` state: the worker copies a block between `COPYING`
//! and `IDLE`; a few instructions a message), and if the worker holds a block of copies
//! (`lent..lent_to`), keeps a counted reference to each of those messages still kept in
//! the ring (`held`) until the worker lets go of the block, since they may now be trimmed.
//! After that the worker takes references under the ring lock, as `DropOldest` ones do, and
//! may be lapped.
//!
//! # The seam
//!
//! A subscription joins the log under the ring lock: its start is resolved (`Now` is the
//! log's end) and its cursor added in one step, and every append happens under that lock
//! too; so every message is either before the start (history, or not this subscription's)
//! or after it (read live), never both and never neither.
//!
//! # Overflow as rules for positions
//!
//! `Block`: a publish of seq `s` waits while some `Block` cursor has `s - position >=
//! capacity` (capacity at most `retain`, so a `Block` subscription is never lapped). The
//! publisher keeps a lower bound of `min(position + capacity)` (`Gate::limit`; positions only
//! grow) and looks at the cursors only when it reaches it. To wait, it sets
//! `publisher_waiting`, looks at the positions again, snoozes a few turns (as a caught-up
//! worker does before it sleeps on `arrived`), and sleeps on `advanced`; a worker stores
//! its position, then reads the flag (both sequentially consistent, so one sees the other)
//! and, if set, notifies under the ring lock. A lending worker does so once a block, not
//! once a message: after each message it lends it stores its position and reads the flag
//! (and, if set, the publisher's mark) with no fence, and when it lets go of the block
//! (`Reader::let_go_block`, before it takes another or waits) it stores the position again
//! sequentially consistent and reads the flag. `DropOldest`: the trim laps it. `DropNewest`
//! has no meaning on a shared log and is refused at subscribe.
//!
//! # Retiring
//!
//! `retire` sets the cursor's `end` to the log's end under the ring lock: what was appended
//! before is delivered, nothing after arrives. The worker stops once it has read up to `end`.
//! An unsubscribe also takes the cursor out of the log (`remove`), so publishers no longer
//! wait for it and the trim may pass it: a `Block` cursor's unread messages (at most its
//! capacity) are first saved for its reader, which delivers them before it stops.
//!
//! # The fast append
//!
//! Most appends need nothing the ring lock guards but the exclusion: no wait (the seq is
//! below the limit), no inline subscriber, no reference for observers, no `retain_for` trim
//! and no message kept out of line. Such an append runs without the lock while no one holds
//! it (`Log::append_fast`): the lock's two read-modify-writes, and the wait for the
//! publisher's stores at its release, were a large part of a publish (BENCHMARKS.md,
//! "Appends without the ring lock"). Everyone else takes the ring through `Log::lock_ring`,
//! which counts them in `Gate::lockers` and, once counted, waits out a fast append in
//! progress (`Gate::appending`). The publisher sets `appending`, then reads `lockers`; a
//! locker counts itself, then reads `appending`; all four sequentially consistent, so one
//! of the two sees the other: either the append takes the lock after all, or the locker
//! waits until it ends (and reads its end with acquire, so it sees what the append wrote).
//! So no fast append overlaps a holder of the lock, and what these docs say of appends
//! under the ring lock holds of fast ones too. A fast append that reads a count of none
//! reads the last locker's release of it: it sees what was written under the lock (the
//! limit, the out-of-line flag, the trims). A worker asleep on `arrived` stays counted (its
//! guard is held across the wait), so appends take the lock while one sleeps, and wake it
//! under it. The append that wakes the sleepers also uncounts them
//! (`Log::uncount_sleepers`, `Ring::woken`): a woken worker may wait a while for a core,
//! and every append would take the lock meanwhile. Back with the mutex, a woken worker
//! counts itself again and waits out a fast append in progress before it reads the ring
//! (`Log::sleep`). A worker that snoozes lets go of the lock whole, count and all.
//!
//! # Locks
//!
//! The ring lock is taken after the topic's order lock (by a publisher), or alone (by a
//! worker, a subscribe, a retire, stats); never the other way round. While holding it a
//! publisher may take the wait-graph records (`deadlock.rs`), one at a time. Trimmed messages
//! are let go of after it is released. A holder waits for a fast append in progress, which
//! takes no lock and waits for no other thread, so this adds no cycle.

mod clock;
mod reader;
mod shared;
pub(crate) mod slots;

pub(crate) use reader::{reader, Closing, Reader};
pub(crate) use shared::{unread, SharedReader};

use std::collections::VecDeque;
use std::mem::ManuallyDrop;
use std::sync::atomic::{
    AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::Acquire, Ordering::Relaxed,
    Ordering::Release, Ordering::SeqCst,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError};
use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::deadlock::{self, TopicWaits, WaitNode};
use crate::delivery::core::{Retire, SubscriptionCore};
use crate::delivery::inline::{self, Inline, Said};
use crate::delivery::log::slots::Slots;
use crate::error::Rejection;
use crate::message::log_block::LogBlock;
use crate::message::shared::Pool;
use crate::message::Message;
use crate::message::{Envelope, Taken};
use crate::options::filter::Verdict;
use crate::options::Overflow;
use crate::options::Retention;
use crate::options::Start;
use crate::stats::{Counters, LogView};
use crate::trace;
use crate::util::snooze::Snooze;
use crate::util::unwind::drop_quietly;

/// A cursor's `end` while it is not retired.
const OPEN: u64 = u64::MAX;

/// A cursor's `lent` while its worker holds no copied handle.
const NONE: u64 = u64::MAX;

/// A lending cursor's states (see the module docs).
const IDLE: u8 = 0;
const COPYING: u8 = 1;
const UNPROTECTED: u8 = 2;

/// How often a publisher waiting for a `Block` subscription looks again (for a forced stop,
/// a deadline, or a cycle), besides being woken, once it has waited a while.
const RECHECK: Duration = Duration::from_millis(5);

/// A waiting publisher's first sleep, doubled at each one after, up to [`RECHECK`]. The
/// worker that would wake it may itself have been woken onto a core another process keeps
/// busy, and wait there for that core's next tick (4 ms here) while the other core idles:
/// with one core busy, a 1 → 16 run left the other idle for up to 45% of it, every thread
/// asleep on the ticks' grid. A publisher that looks again soon goes idle again soon, and a
/// core going idle pulls such a worker over (BENCHMARKS.md, "A worker's loop, trimmed").
const FIRST_RECHECK: Duration = Duration::from_micros(200);

/// The most references a `Block` worker takes out of the ring at once, under its lock.
const BATCH: usize = 64;

/// The most handles a lending worker makes at once (see Lending): a run's own work is about
/// 200 instructions, and runs of 64 cost a delivery 3 of them at 16 subscribers; with no
/// lock held and no count taken, a longer run costs only its handles' room, 8 bytes each
/// (BENCHMARKS.md, "A lending worker's copy").
const LEND_RUN: u64 = 256;

/// Why an append did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NoRoom {
    /// A `Block` subscription was `capacity` behind, and the publish would not wait.
    Full,
    /// Still behind at the deadline.
    Timeout,
    /// A forced stop came while waiting.
    Stopped,
    /// The publisher is a handler whose wait would lead back to itself.
    WouldDeadlock,
    /// An inline subscriber refused the message (`delivery/inline.rs`).
    Rejected(Rejection),
}

/// How an append may wait for room: until when (`None`: as long as it takes; `Some(None)`:
/// not at all), until a forced stop (`stop`), and as which publisher in the wait graph.
#[derive(Clone, Copy)]
pub(crate) struct RoomWait<'a> {
    pub(crate) by: Option<Option<Instant>>,
    pub(crate) stop: &'a Receiver<()>,
    pub(crate) waits: &'a TopicWaits,
    pub(crate) publisher: Option<&'a Arc<WaitNode>>,
}

/// One topic's log.
pub(crate) struct Log<T> {
    topic: &'static str,
    retention: Retention,
    /// The clock's slack (`clock::slack`), read once: the age trim asks it on every append.
    slack: Duration,
    /// The messages kept: seqs `oldest..tail`. Written under the ring lock.
    slots: Slots<Envelope<T>>,
    /// Taken through [`Log::lock_ring`], which counts its holders in `gate` (see the module
    /// docs: the fast append).
    ring: Mutex<Ring<T>>,
    /// What a fast append reads and writes besides the ring: on a line of its own, since the
    /// publisher writes it twice a publish.
    gate: crate::util::padded::Padded<Gate>,
    /// Workers that have read everything wait here for an append or their retire.
    arrived: Condvar,
    /// A publisher waiting for a `Block` subscription to move waits here.
    advanced: Condvar,
    /// The next message's seq: written under the ring lock, read without it (views, stats).
    tail: AtomicU64,
    /// The oldest kept message's seq (`tail` when none is): written under the ring lock.
    oldest: AtomicU64,
    /// Set while a publisher waits on `advanced` (see the module docs). On a line of its own:
    /// workers read it for every message, and the publisher writes `tail` for every one.
    publisher_waiting: crate::util::padded::Padded<AtomicBool>,
    /// While a publisher waits: the position at which the subscription it waits for wakes it.
    wake_at: AtomicU64,
    /// How many times workers woke a waiting publisher (`Reader::wake_publisher`), for the
    /// tests of that handshake.
    #[cfg(test)]
    wakes: AtomicU64,
    /// How many appends ran without the ring lock, for the tests that they do.
    #[cfg(test)]
    fast_appends: AtomicU64,
    /// How many woken workers counted themselves again (`Log::sleep`), for the same tests.
    #[cfg(test)]
    recounts: AtomicU64,
    /// `publish_async` calls wait here for a `Block` subscription to move.
    #[cfg(feature = "tokio")]
    room: crate::util::wake::Wake,
    /// Task workers and streams that have read everything wait here for an append or their
    /// retire.
    #[cfg(feature = "tokio")]
    arrived_tasks: crate::util::wake::Wake,
    /// How many readers are tasks or streams: while there are any, an append tells
    /// `arrived_tasks`, fenced so that no waiter is missed (see `wake.rs`).
    #[cfg(feature = "tokio")]
    task_readers: std::sync::atomic::AtomicUsize,
}

/// What trims let go of, dropped once the ring lock is (user code: the payloads' `Drop`).
/// An append trims one message, and one in 64 lets go of a block: those stay out of the
/// heap; an age trim or a late one's catching up may let go of more.
struct Trims<T> {
    value: Option<Envelope<T>>,
    block: Option<LogBlock<Envelope<T>>>,
    rest: Option<Box<Rest<T>>>,
}

struct Rest<T> {
    values: Vec<Envelope<T>>,
    blocks: Vec<LogBlock<Envelope<T>>>,
    messages: Vec<Message<T>>,
}

impl<T> Trims<T> {
    fn new() -> Self {
        Trims {
            value: None,
            block: None,
            rest: None,
        }
    }

    fn rest(&mut self) -> &mut Rest<T> {
        self.rest.get_or_insert_with(|| {
            Box::new(Rest {
                values: Vec::new(),
                blocks: Vec::new(),
                messages: Vec::new(),
            })
        })
    }

    #[inline(always)]
    fn keep_value(&mut self, value: Envelope<T>) {
        match self.value {
            None => self.value = Some(value),
            Some(_) => self.rest().values.push(value),
        }
    }

    #[inline(always)]
    fn keep_block(&mut self, block: LogBlock<Envelope<T>>) {
        match self.block {
            None => self.block = Some(block),
            Some(_) => self.rest().blocks.push(block),
        }
    }

    /// Drops what was trimmed, with no lock held: a panic in a payload's `Drop` stops at it.
    #[inline(always)]
    fn let_go(self) {
        let Trims { value, block, rest } = self;
        if let Some(value) = value {
            if std::mem::needs_drop::<Envelope<T>>() {
                drop_quietly(value);
            }
        }
        // A block's release drops the values left in it quietly itself.
        drop(block);
        if let Some(rest) = rest {
            // One at a time: a second panic while a collection unwinds from the first would
            // abort. (Blocks and messages drop their values quietly themselves.)
            let Rest {
                values,
                blocks,
                messages,
            } = *rest;
            values.into_iter().for_each(|value| {
                drop_quietly(value);
            });
            drop((blocks, messages));
        }
    }
}

/// The fast append's side of the ring lock (see the module docs: the fast append).
struct Gate {
    /// Set while a publisher appends without the ring lock.
    appending: AtomicBool,
    /// Holders of the ring lock (through [`Log::lock_ring`]), counting the workers asleep on
    /// `arrived` but not those an append woke and uncounted (`Ring::woken`): the count plus
    /// `woken` is the guards alive, each changed with the mutex held.
    lockers: AtomicUsize,
    /// A publish of a seq below this needs no look at the cursors: `min(position + capacity)`
    /// over open `Block` cursors as last computed (a lower bound, since positions only grow;
    /// a join lowers it). Written under the ring lock.
    limit: AtomicU64,
    /// Whether messages are kept out of line (`Ring::out_of_line`), which only an append
    /// under the ring lock trims. Written under the ring lock.
    out_of_line: AtomicBool,
}

/// The ring lock, held: counted in `Gate::lockers` until dropped, so that no fast append
/// runs meanwhile.
struct RingGuard<'a, T> {
    guard: MutexGuard<'a, Ring<T>>,
    lockers: &'a AtomicUsize,
}

impl<'a, T> RingGuard<'a, T> {
    /// The mutex's own guard: to wait on a condition variable, or let go of the lock for a
    /// while, still counted (but see `Log::sleep`: an append that wakes a sleeper uncounts
    /// it).
    fn mutex(&mut self) -> &mut MutexGuard<'a, Ring<T>> {
        &mut self.guard
    }
}

impl<T> std::ops::Deref for RingGuard<'_, T> {
    type Target = Ring<T>;

    fn deref(&self) -> &Ring<T> {
        &self.guard
    }
}

impl<T> std::ops::DerefMut for RingGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut Ring<T> {
        &mut self.guard
    }
}

impl<T> Drop for RingGuard<'_, T> {
    fn drop(&mut self) {
        // Sequentially consistent, as the fast append's read: one that reads the count this
        // leaves sees what was written under the lock (a lowered limit, among others).
        self.lockers.fetch_sub(1, SeqCst);
    }
}

/// Clears `Gate::appending` however a fast append ends.
struct Appending<'a>(&'a AtomicBool);

impl Drop for Appending<'_> {
    fn drop(&mut self) {
        self.0.store(false, Release);
    }
}

struct Ring<T> {
    cursors: Vec<Arc<Cursor>>,
    /// Messages kept beside the ring, their cells out of line (see `log_block.rs`), by seq.
    out_of_line: VecDeque<(u64, Message<T>)>,
    /// References to messages whose handles unprotected lending workers still hold, by
    /// subscription (see the module docs: lending).
    held: Vec<(u64, Message<T>)>,
    /// What `Block` subscriptions removed while behind had not read yet, by subscription
    /// (see `Log::remove`): at most `capacity` references each, until their readers take them.
    saved: Vec<(u64, VecDeque<Message<T>>)>,
    /// Workers waiting on `arrived` and counted among the lockers (as a sum: which of the
    /// waiters are counted is not tracked, see `Log::sleep`).
    sleepers: usize,
    /// Workers woken on `arrived` by an append, no longer counted among the lockers (see
    /// `Log::sleep`), that have not taken the lock back yet.
    woken: usize,
}

/// One subscription's place in a log.
pub(crate) struct Cursor {
    /// This subscription in the wait graph.
    node: Arc<WaitNode>,
    /// `Some(capacity)` for a `Block` subscription.
    block: Option<u64>,
    /// Where it started: set at join, under the ring lock.
    start: AtomicU64,
    /// The first seq it has not finished: written by its worker.
    position: AtomicU64,
    /// The next seq its worker takes out of the ring: written by its worker.
    read: AtomicU64,
    /// `OPEN`, or the log's end when it was retired: written under the ring lock.
    end: AtomicU64,
    /// Whether what it had not read was saved for it when it left the log (`Log::remove`):
    /// then the trim no longer laps it. Written under the ring lock.
    saved: AtomicBool,
    /// Messages its filter rejected, which it did not receive: written by its worker.
    filtered: AtomicU64,
    /// For a worker of a keyed group: messages whose key picks another worker, which it did
    /// not receive either: written by its worker.
    elsewhere: AtomicU64,
    /// For a worker of a keyed group other than the first: a lap is counted by the first,
    /// once for the group, and here as another worker's (see `Reader::fill`). Set before
    /// it joins.
    laps_elsewhere: AtomicBool,
    /// Whether its worker reads messages in their cells (a thread worker, `Block`).
    lends: bool,
    /// `IDLE`, `COPYING` or `UNPROTECTED` (see the module docs).
    lend: AtomicU8,
    /// The first seq of the block of handles its worker copied and holds, or `NONE`: written
    /// by its worker while `COPYING`, and set to `NONE` when it lets go of the block.
    lent: AtomicU64,
    /// One past the last seq of that block: written by its worker while `COPYING`.
    lent_to: AtomicU64,
}

fn stopped(stop: &Receiver<()>) -> bool {
    matches!(stop.try_recv(), Err(TryRecvError::Disconnected))
}

impl<T: Send + Sync + 'static> Log<T> {
    pub(crate) fn new(topic: &'static str, retention: Retention) -> Self {
        Log {
            topic,
            retention,
            slack: clock::slack(),
            slots: Slots::new(retention.messages, topic),
            ring: Mutex::new(Ring {
                cursors: Vec::new(),
                out_of_line: VecDeque::new(),
                held: Vec::new(),
                saved: Vec::new(),
                sleepers: 0,
                woken: 0,
            }),
            gate: crate::util::padded::Padded(Gate {
                appending: AtomicBool::new(false),
                lockers: AtomicUsize::new(0),
                limit: AtomicU64::new(u64::MAX),
                out_of_line: AtomicBool::new(false),
            }),
            arrived: Condvar::new(),
            advanced: Condvar::new(),
            tail: AtomicU64::new(0),
            oldest: AtomicU64::new(0),
            publisher_waiting: crate::util::padded::Padded(AtomicBool::new(false)),
            wake_at: AtomicU64::new(0),
            #[cfg(test)]
            wakes: AtomicU64::new(0),
            #[cfg(test)]
            fast_appends: AtomicU64::new(0),
            #[cfg(test)]
            recounts: AtomicU64::new(0),
            #[cfg(feature = "tokio")]
            room: crate::util::wake::Wake::default(),
            #[cfg(feature = "tokio")]
            arrived_tasks: crate::util::wake::Wake::default(),
            #[cfg(feature = "tokio")]
            task_readers: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Messages kept now, and the oldest one's seq.
    pub(crate) fn extent(&self) -> (u64, u64) {
        let oldest = self.oldest.load(Acquire);
        let tail = self.tail.load(Acquire);
        (tail.saturating_sub(oldest), oldest)
    }

    /// Appends message `seq` (the topic's next), waiting as `room_by` allows for `Block`
    /// subscriptions: `None` as long as it takes (a forced stop ends the wait and the message
    /// is appended anyway: accepted, then abandoned with the rest), `Some(None)` not at all,
    /// `Some(Some(deadline))` until then. Called under the topic's order lock. With `share`,
    /// returns another reference to the message, for the topic's observers (made only when
    /// asked: a reference costs an atomic).
    pub(crate) fn append(
        &self,
        pool: &mut Pool<Envelope<T>>,
        seq: u64,
        payload: T,
        wait: RoomWait<'_>,
        share: bool,
        inline: Option<(&[Arc<Inline<T>>], inline::Under<'_>)>,
    ) -> Result<Option<Message<T>>, (T, NoRoom)> {
        let payload = match inline.is_none() && !share {
            true => match self.append_fast(seq, payload) {
                Ok(()) => return Ok(None),
                Err(payload) => payload,
            },
            false => payload,
        };
        let room_by = wait.by;
        // Lock order: row 6 (the ring), under row 4 (and row 5 turns for an all-or-nothing
        // publish); rows 7a and 8 inside it while waiting for room; see engine/mod.rs.
        let mut ring = self.lock_ring();
        if seq >= self.gate.0.limit.load(Relaxed) {
            match self.wait_for_room(&mut ring, seq, wait) {
                Ok(()) => {}
                Err(NoRoom::Stopped) if room_by.is_none() => {
                    // Appended anyway (accepted, then abandoned with the rest), trimming what a
                    // `Block` worker may be at: from here on no worker reads in place, and the
                    // message a worker holds is kept (see the module docs: lending).
                    for cursor in ring.cursors.clone() {
                        self.unprotect(&mut ring, &cursor);
                    }
                }
                Err(why) => return Err((payload, why)),
            }
        }
        // With inline handlers, the message is made in a block of its own for them to see
        // (and perhaps keep), with the ring let go of (so that readers keep reading): the
        // room found stays, since only this publisher, under the order lock, appends. Its
        // value moves into its cell unless a handler kept a reference (see `log_block.rs`).
        let (value, kept) = match inline {
            None => (Some(Envelope::new(payload)), None),
            Some((inline, under)) => {
                let message = match pool
                    .shared(seq, self.topic, Envelope::new(payload), 1)
                    .next()
                {
                    Some(reference) => Message::new(reference),
                    None => unreachable!("`shared` hands out at least one reference"),
                };
                let said =
                    MutexGuard::unlocked(ring.mutex(), || inline::run(inline, &message, under));
                if let Said::Rejected(rejection) = said {
                    drop(ring);
                    return match message.try_into_payload() {
                        Ok(payload) => Err((payload, NoRoom::Rejected(rejection))),
                        Err(kept) => inline::kept(&rejection, kept),
                    };
                }
                match message.into_shared().try_unwrap() {
                    Ok(envelope) => (Some(envelope), None),
                    Err(kept) => (None, Some(Message::new(kept))),
                }
            }
        };
        let now = clock::now();
        // A full ring trims one message per append, `retain` before this one; what it lets go
        // of is dropped once the ring lock is (user code: the payloads' `Drop`).
        let mut trims = Trims::new();
        let retain = self.retention.messages as u64;
        let oldest = self.oldest.load(Relaxed);
        if let Some(lapped) = seq.checked_sub(retain).filter(|&lapped| lapped >= oldest) {
            self.trim_front(&mut ring, lapped, &mut trims);
        }
        // SAFETY: under the ring lock; `seq` is the next, and the trim above took out every
        // seq `retain` or more before it (see `slots.rs`).
        unsafe { self.slots.append(seq, value, now) };
        if let Some(kept) = kept {
            ring.out_of_line.push_back((seq, kept));
            self.gate.0.out_of_line.store(true, Relaxed);
        }
        self.tail.store(seq + 1, Release);
        // Another share of it, for the topic's observers.
        let shared = share.then(|| self.counted(&ring, seq)).flatten();
        self.oldest
            .store(oldest.max((seq + 1).saturating_sub(retain)), Release);
        if self.retention.max_age.is_some() {
            self.trim_expired(&mut ring, now, &mut trims);
        }
        if ring.sleepers > 0 {
            self.arrived.notify_all();
            self.uncount_sleepers(&mut ring);
        }
        drop(ring);
        self.tell_task_readers();
        trims.let_go();
        Ok(shared)
    }

    /// Tells the task workers and streams waiting for an append, if the log has any. After
    /// the append, with the ring lock let go of: a task reader that joined before it is
    /// counted (its join held the lock).
    #[inline(always)]
    fn tell_task_readers(&self) {
        #[cfg(feature = "tokio")]
        if self.task_readers.load(Relaxed) > 0 {
            self.arrived_tasks.notify_now();
        }
    }

    /// Appends `seq` without the ring lock, if no one holds it and the append needs nothing
    /// it guards: room below the limit, no age to trim, no message kept out of line (see the
    /// module docs: the fast append). Gives the payload back where it does not. Called under
    /// the topic's order lock, with no inline subscriber to run and no share to make.
    #[inline(always)]
    pub(crate) fn append_fast(&self, seq: u64, payload: T) -> Result<(), T> {
        if self.retention.max_age.is_some() {
            return Err(payload);
        }
        let gate = &self.gate.0;
        // Made before `appending`, so dropped after it on a panic: a payload's `Drop` (user
        // code) never runs while lockers wait for this append.
        let mut trims = Trims::new();
        // Announced, then the lockers counted (both sequentially consistent, as a locker's
        // count and its read of `appending` in `count_in`): one of the two sees the other.
        gate.appending.store(true, SeqCst);
        let appending = Appending(&gate.appending);
        // A count of none read here is the last locker's release of it (or the start): what
        // was written under the lock (the limit, the out-of-line flag, the front) is seen.
        if gate.lockers.load(SeqCst) != 0
            || seq >= gate.limit.load(Relaxed)
            || gate.out_of_line.load(Relaxed)
        {
            drop(appending);
            return Err(payload);
        }
        let now = clock::now();
        let retain = self.retention.messages as u64;
        let oldest = self.oldest.load(Relaxed);
        if let Some(lapped) = seq.checked_sub(retain).filter(|&lapped| lapped >= oldest) {
            // As under the ring lock: no one holds it until `appending` is cleared.
            self.trim_slot(lapped, &mut trims);
        }
        // SAFETY: as under the ring lock (above); `seq` is the next, and the trim above took
        // out every seq `retain` or more before it (see `slots.rs`).
        unsafe { self.slots.append(seq, Some(Envelope::new(payload)), now) };
        self.tail.store(seq + 1, Release);
        self.oldest
            .store(oldest.max((seq + 1).saturating_sub(retain)), Release);
        // No worker sleeps on `arrived` unwoken: a sleeper counts among the lockers until an
        // append wakes it.
        drop(appending);
        #[cfg(test)]
        self.fast_appends.fetch_add(1, Relaxed);
        self.tell_task_readers();
        trims.let_go();
        Ok(())
    }

    /// Trims `seq`'s cell, the oldest kept, into `trims`. Under the ring lock, or in a fast
    /// append.
    #[inline(always)]
    fn trim_slot(&self, seq: u64, trims: &mut Trims<T>) {
        // SAFETY: under the ring lock, or in a fast append, which no holder of it overlaps;
        // `seq` is the oldest kept, behind every protected position (see the module docs), so
        // no handle on it is used after.
        if let Some(block) = unsafe { self.slots.trim(seq, &mut |value| trims.keep_value(value)) } {
            trims.keep_block(block);
        }
    }

    /// Trims `seq`, the oldest kept, into `trims`. Under the ring lock.
    #[inline(always)]
    fn trim_front(&self, ring: &mut Ring<T>, seq: u64, trims: &mut Trims<T>) {
        self.trim_slot(seq, trims);
        if ring.out_of_line.front().is_some_and(|(of, _)| *of == seq) {
            if let Some((_, message)) = ring.out_of_line.pop_front() {
                trims.rest().messages.push(message);
            }
            if ring.out_of_line.is_empty() {
                self.gate.0.out_of_line.store(false, Relaxed);
            }
        }
    }

    /// A counted reference to message `seq`, if it is kept (appended, not trimmed). Under
    /// the ring lock.
    fn counted(&self, ring: &Ring<T>, seq: u64) -> Option<Message<T>> {
        if seq < self.oldest.load(Relaxed) || seq >= self.tail.load(Relaxed) {
            return None;
        }
        // SAFETY: under the ring lock, which every write takes (or a fast append, which no
        // holder overlaps), and kept; the alias is used only to make the counted reference.
        match unsafe { self.slots.message(seq) } {
            Some(alias) => Some(Message::clone(&Message::uncounted(alias))),
            None => {
                let kept = &ring.out_of_line;
                let at = kept.binary_search_by_key(&seq, |(of, _)| *of).ok()?;
                kept.get(at).map(|(_, message)| message.clone())
            }
        }
    }

    #[cold]
    fn wait_for_room(
        &self,
        ring: &mut RingGuard<'_, T>,
        seq: u64,
        wait: RoomWait<'_>,
    ) -> Result<(), NoRoom> {
        let RoomWait {
            by: room_by,
            stop,
            waits,
            publisher,
        } = wait;
        let _waiting = Waiting(&self.publisher_waiting.0);
        let mut snooze = Snooze::default();
        let mut recheck = FIRST_RECHECK;
        loop {
            // Announced before the positions are read: see the module docs.
            self.publisher_waiting.0.store(true, SeqCst);
            let Some(behind) = ring.recompute_limit(&self.gate.0.limit) else {
                return Ok(());
            };
            if seq < self.gate.0.limit.load(Relaxed) {
                return Ok(());
            }
            let deadline = match room_by {
                Some(None) => return Err(NoRoom::Full),
                Some(Some(deadline)) => Some(deadline),
                None => None,
            };
            let _recorded = match publisher {
                Some(node) => match deadlock::record(node, vec![Arc::clone(&behind.node)]) {
                    Ok(recorded) => Some(recorded),
                    Err(deadlock::WouldDeadlock) => return Err(NoRoom::WouldDeadlock),
                },
                None => None,
            };
            if stopped(stop) {
                return Err(NoRoom::Stopped);
            }
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return Err(NoRoom::Timeout);
            }
            let until = deadline.map_or(now + recheck, |deadline| deadline.min(now + recheck));
            // Woken once the subscription has made room for a few more, not for every message
            // it finishes: a wake-up per message per worker was most of a fan-out's cost.
            // Announced, then the position read again (both sequentially consistent, as the
            // worker's store and read in `advance`): one of the two sees the other.
            let capacity = behind.block.unwrap_or(1);
            let wake_at = (seq + (capacity / 8).clamp(1, 64)).saturating_sub(capacity);
            self.wake_at.store(wake_at, SeqCst);
            if behind.position.load(SeqCst) >= wake_at {
                continue;
            }
            // Snoozes first, as a caught-up worker does: the room often comes within a few
            // turns, and a sleep costs the publisher and the worker that wakes it a system
            // call each.
            if !snooze.is_over() {
                waits.waiting_on(&behind.node, || {
                    MutexGuard::unlocked(ring.mutex(), || {
                        while behind.position.load(SeqCst) < wake_at && snooze.snooze() {}
                    });
                });
                continue;
            }
            waits.waiting_on(&behind.node, || {
                let _ = self.advanced.wait_until(ring.mutex(), until);
            });
            recheck = (recheck * 2).min(RECHECK);
        }
    }

    /// With `retain_for`: drops from the front what is older, but never what a `Block`
    /// subscription has yet to finish.
    fn trim_expired(&self, ring: &mut Ring<T>, now: clock::Time, trims: &mut Trims<T>) {
        // The clock's slack more than `max_age`: `now` and the stamps each lag the time
        // (`clock.rs`), so a message `max_age` old by the log's clock may be younger.
        let Some(cutoff) = (self.retention.max_age)
            .and_then(|age| now.checked_sub(age.saturating_add(self.slack)))
        else {
            return;
        };
        let tail = self.tail.load(Relaxed);
        // Appended before the cutoff for certain (a stamp dates a message to the millisecond
        // rounded down): a message is not trimmed early, and at most the slack, the lags'
        // difference and a millisecond late.
        // SAFETY: under the ring lock, which every write takes (see the module docs: the fast
        // append); only kept seqs are asked.
        let expired = |seq: u64| {
            seq < tail
                && unsafe { self.slots.appended_before(seq) }.is_some_and(|before| before <= cutoff)
        };
        let mut oldest = self.oldest.load(Relaxed);
        if !expired(oldest) {
            return;
        }
        let keep_from = ring
            .cursors
            .iter()
            .filter(|c| c.block.is_some() && c.end.load(Acquire) == OPEN)
            .map(|c| c.position.load(SeqCst))
            .min()
            .unwrap_or(u64::MAX);
        while oldest < keep_from && expired(oldest) {
            self.trim_front(ring, oldest, trims);
            oldest += 1;
        }
        self.oldest.store(oldest, Release);
    }

    /// Adds a subscription at `start` (see the module docs: the seam).
    pub(crate) fn join(&self, cursor: &Arc<Cursor>, start: Start) {
        self.join_all(std::slice::from_ref(cursor), start);
    }

    /// Joins several cursors at one position, in one step (a keyed group's readers: no
    /// message may fall between them).
    pub(crate) fn join_all(&self, cursors: &[Arc<Cursor>], start: Start) {
        let now = clock::now();
        let mut trims = Trims::new();
        // Lock order: row 6 (the ring), nothing else held; see engine/mod.rs.
        let mut ring = self.lock_ring();
        self.trim_expired(&mut ring, now, &mut trims);
        let tail = self.tail.load(Relaxed);
        let oldest = self.oldest.load(Relaxed);
        let at = match start {
            Start::Now => tail,
            Start::Earliest => oldest,
            Start::Seq(seq) => seq,
            // Early by the clock's slack: a stamp may lag more than `now` (`clock.rs`). And
            // by its rounding: a message whose stamp's interval (its millisecond, or second)
            // ends after `from` may have been appended at `from` or after, so none published
            // within `age` is left out.
            Start::Since(age) => match now.checked_sub(age.saturating_add(self.slack)) {
                None => oldest,
                // SAFETY: under the ring lock, which every write takes (see the module docs:
                // the fast append); kept seqs only.
                Some(from) => unsafe { self.slots.first_appended_since(oldest..tail, from) },
            },
        };
        for cursor in cursors {
            cursor.start.store(at, Release);
            cursor.read.store(at, Release);
            cursor.position.store(at, SeqCst);
            if let Some(capacity) = cursor.block {
                let limit = &self.gate.0.limit;
                limit.store(
                    limit.load(Relaxed).min(at.saturating_add(capacity)),
                    Relaxed,
                );
            }
            ring.cursors.push(Arc::clone(cursor));
        }
        drop(ring);
        trims.let_go();
    }

    /// Takes a subscription's cursor out: publishes no longer wait for it.
    pub(crate) fn remove(&self, subscription: u64) {
        // Lock order: row 6 (the ring), under row 1 if an observer leaves; see engine/mod.rs.
        let mut ring = self.lock_ring();
        if let Some(at) = ring.cursors.iter().position(|c| c.node.id == subscription) {
            let cursor = ring.cursors.remove(at);
            self.unprotect(&mut ring, &cursor);
            if cursor.block.is_some() {
                self.save(&mut ring, &cursor);
            }
        }
        self.advanced.notify_all();
    }

    /// Keeps what a `Block` subscription leaving the log had not read (from its read to the
    /// log's end: at most its capacity, since publishers waited for it) for its reader, so
    /// that it still delivers what was queued while publishers no longer wait for it and the
    /// trim moves on. Called under the ring lock, the cursor unprotected.
    fn save(&self, ring: &mut Ring<T>, cursor: &Cursor) {
        if cursor.end.load(Relaxed) == OPEN {
            cursor.end.store(self.tail.load(Relaxed), Release);
        }
        let (read, end) = (cursor.read.load(Acquire), cursor.end.load(Relaxed));
        let unread = (read..end)
            .filter_map(|seq| self.counted(ring, seq))
            .collect();
        ring.saved.push((cursor.node.id, unread));
        cursor.saved.store(true, Release);
    }

    /// Takes every cursor out: a closed bus hands nothing out.
    pub(crate) fn clear(&self) {
        // Lock order: row 6 (the ring), nothing else held; see engine/mod.rs.
        let mut ring = self.lock_ring();
        for cursor in std::mem::take(&mut ring.cursors) {
            self.unprotect(&mut ring, &cursor);
        }
        self.advanced.notify_all();
    }

    /// From here on `cursor`'s worker reads no cell without the ring lock, and the message
    /// whose handle it holds, if any, is kept in `held` (see the module docs: lending).
    /// Called under the ring lock.
    fn unprotect(&self, ring: &mut Ring<T>, cursor: &Cursor) {
        if !cursor.lends {
            return;
        }
        loop {
            match cursor
                .lend
                .compare_exchange(IDLE, UNPROTECTED, SeqCst, SeqCst)
            {
                Ok(_) => break,
                Err(UNPROTECTED) => return,
                // Copying a handle: a few instructions, unless its thread was preempted.
                Err(_) => std::thread::yield_now(),
            }
        }
        // Written before the worker's last `IDLE`, which the exchange above read, or let go
        // of since (see `Reader::let_go_block`). `lent_to` is written only while `COPYING`,
        // which the worker can no longer enter.
        let lent = cursor.lent.load(SeqCst);
        if lent == NONE {
            return;
        }
        let lent_to = cursor.lent_to.load(SeqCst);
        // The worker's unfinished copies (at or past its position) are still kept: until now
        // it was protected. Its finished ones may have been trimmed; it reads them no more.
        for seq in lent..lent_to {
            if let Some(message) = self.counted(ring, seq) {
                ring.held.push((cursor.node.id, message));
            }
        }
    }

    /// The node of a `Block` subscription the next publish would wait for, if any: for
    /// `publish_async`, which waits without the order lock.
    #[cfg(feature = "tokio")]
    pub(crate) fn behind(&self) -> Option<Arc<WaitNode>> {
        // Lock order: row 6 (the ring), nothing else held; see engine/mod.rs.
        let ring = self.lock_ring();
        let behind = ring.recompute_limit(&self.gate.0.limit)?;
        (self.tail.load(Relaxed) >= self.gate.0.limit.load(Relaxed))
            .then(|| Arc::clone(&behind.node))
    }

    /// Waits (as a task) until a `Block` subscription may have moved: woken by its worker, or
    /// after `wake::BACKSTOP`. Holds no lock.
    #[cfg(feature = "tokio")]
    pub(crate) async fn room(&self) {
        let backstop = crate::util::wake::BACKSTOP;
        self.room.wait_unless(Some(backstop), || false).await;
    }
}

impl<T> Log<T> {
    /// Sleeps on `arrived` until an append or a retire, the ring lock let go of meanwhile and
    /// the guard still counted: appends take the lock while a worker sleeps, and so wake it.
    /// The append uncounts the sleepers it woke (`uncount_sleepers`), so that appends run
    /// without the lock while they wait for a core; each counts itself again here.
    ///
    /// Which waiter takes which is not tracked, only the sums: the lockers plus `woken` are
    /// the guards alive. A worker a retire woke may take a token an append left: it is then
    /// counted twice, and the waiter the append woke, finding none, goes on uncounted. That
    /// waiter takes the mutex after this one has counted itself and waited out the fast
    /// append in progress, and the count stays above zero until both guards are gone; so
    /// no fast append overlaps either.
    fn sleep(&self, ring: &mut RingGuard<'_, T>) {
        ring.sleepers += 1;
        self.arrived.wait(ring.mutex());
        if ring.woken > 0 {
            // Uncounted while it waited to run: counted again, it waits out the append in
            // progress before it reads the ring.
            ring.woken -= 1;
            self.count_in();
            #[cfg(test)]
            self.recounts.fetch_add(1, Relaxed);
        } else {
            ring.sleepers -= 1;
        }
    }

    /// The sleepers just woken stop counting among the lockers: a woken worker may wait a
    /// while for a core, and appends would take the lock all that while. Under the ring lock.
    fn uncount_sleepers(&self, ring: &mut Ring<T>) {
        self.gate.0.lockers.fetch_sub(ring.sleepers, SeqCst);
        ring.woken += ring.sleepers;
        ring.sleepers = 0;
    }

    /// Takes the ring lock, counted among the lockers, once no fast append is under way: from
    /// here until the guard is dropped, no append runs but under the lock (see the module
    /// docs: the fast append).
    fn lock_ring(&self) -> RingGuard<'_, T> {
        let guard = self.ring.lock();
        self.count_in();
        RingGuard {
            guard,
            lockers: &self.gate.0.lockers,
        }
    }

    /// Counts this thread among the lockers (the mutex held), then waits out a fast append
    /// that announced itself before: short (it takes no lock and waits for no one; it may
    /// allocate a block), unless the publisher's thread was preempted. Its end is read with
    /// acquire: what it wrote is seen.
    fn count_in(&self) {
        self.gate.0.lockers.fetch_add(1, SeqCst);
        let mut snooze = Snooze::default();
        while self.gate.0.appending.load(SeqCst) {
            if !snooze.snooze() {
                std::thread::yield_now();
            }
        }
    }
}

impl<T> Ring<T> {
    /// Sets `limit` (`Gate::limit`) from the open `Block` cursors; the one furthest behind.
    /// Under the ring lock.
    fn recompute_limit(&self, limit: &AtomicU64) -> Option<Arc<Cursor>> {
        let mut behind: Option<(u64, &Arc<Cursor>)> = None;
        for cursor in &self.cursors {
            let Some(capacity) = cursor.block else {
                continue;
            };
            if cursor.end.load(Acquire) != OPEN {
                continue;
            }
            let limit = cursor.position.load(SeqCst).saturating_add(capacity);
            if behind.map_or(true, |(least, _)| limit < least) {
                behind = Some((limit, cursor));
            }
        }
        limit.store(behind.map_or(u64::MAX, |(limit, _)| limit), Relaxed);
        behind.map(|(_, cursor)| Arc::clone(cursor))
    }
}

/// Clears `publisher_waiting` however the wait ends.
struct Waiting<'a>(&'a AtomicBool);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.store(false, SeqCst);
    }
}
