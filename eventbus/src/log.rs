//! Logs: the delivery kind of a topic that keeps its history (`#[topic(retain = N)]`), beside
//! `mailbox.rs`. One bounded ring of messages per topic, shared by all its subscriptions;
//! each subscription is a [`Cursor`], a position in it. A publish appends once, whatever the
//! number of subscribers, and writes nothing per subscription: a log subscription's
//! `received` is read off the log (from where it started to the log's end, or to where it
//! was retired), not counted.
//!
//! # The ring, and what each side writes
//!
//! The ring holds `(published at, Message<T>)`, one shared reference per message (workers
//! clone the reference, never the value). Publishers append under the topic's order lock,
//! so one at a time; each append trims the front to `retain` messages and, with `retain_for`,
//! drops what is older, but never past a `Block` subscription's position. A worker takes
//! references out (a batch for `Block`, one at a time for `DropOldest`, so a stalled
//! `DropOldest` subscription holds nothing beyond the log but the message in its handler),
//! and after each message is finished moves its position on. A worker that finds its next
//! seq trimmed (lapped) counts the gap as dropped and reads on from the oldest kept.
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
//! publisher keeps a lower bound of `min(position + capacity)` (`Ring::limit`; positions only
//! grow) and looks at the cursors only when it reaches it. To wait, it sets
//! `publisher_waiting`, looks at the positions again and sleeps on `advanced`; a worker stores
//! its position, then reads the flag (both sequentially consistent, so one sees the other)
//! and, if set, notifies under the ring lock. `DropOldest`: the trim laps it. `DropNewest`
//! has no meaning on a shared log and is refused at subscribe.
//!
//! # Retiring
//!
//! `retire` sets the cursor's `end` to the log's end under the ring lock: what was appended
//! before is delivered, nothing after arrives. The worker stops once it has read up to `end`.
//!
//! # Locks
//!
//! The ring lock is taken after the topic's order lock (by a publisher), or alone (by a
//! worker, a subscribe, a retire, stats); never the other way round. While holding it a
//! publisher may take the wait-graph records (`deadlock.rs`), one at a time. Trimmed messages
//! are let go of after it is released.

use std::collections::VecDeque;
use std::sync::atomic::{
    AtomicBool, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
    Ordering::SeqCst,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError};
use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::deadlock::{self, TopicWaits, WaitNode};
use crate::filter::Verdict;
use crate::message::Envelope;
use crate::observe;
use crate::shared::Pool;
use crate::stats::{Counters, LogView};
use crate::subscriber::{Retire, SubscriptionCore};
use crate::{Message, Overflow, Retention, Start};

/// A cursor's `end` while it is not retired.
const OPEN: u64 = u64::MAX;

/// How often a publisher waiting for a `Block` subscription looks again (for a forced stop,
/// a deadline, or a cycle), besides being woken.
const RECHECK: Duration = Duration::from_millis(5);

/// How many times a worker that caught up yields before it sleeps.
const YIELDS: u32 = 3;

/// The most references a `Block` worker takes out of the ring at once.
const BATCH: usize = 64;

/// Why an append did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoRoom {
    /// A `Block` subscription was `capacity` behind, and the publish would not wait.
    Full,
    /// Still behind at the deadline.
    Timeout,
    /// A forced stop came while waiting.
    Stopped,
    /// The publisher is a handler whose wait would lead back to itself.
    WouldDeadlock,
}

/// One topic's log.
pub(crate) struct Log<T> {
    topic: &'static str,
    retention: Retention,
    ring: Mutex<Ring<T>>,
    /// Workers that have read everything wait here for an append or their retire.
    arrived: Condvar,
    /// A publisher waiting for a `Block` subscription to move waits here.
    advanced: Condvar,
    /// The next message's seq: written under the ring lock, read without it (views, stats).
    tail: AtomicU64,
    /// The oldest kept message's seq (`tail` when none is): written under the ring lock.
    oldest: AtomicU64,
    /// Set while a publisher waits on `advanced` (see the module docs).
    publisher_waiting: AtomicBool,
    /// `publish_async` calls wait here for a `Block` subscription to move.
    #[cfg(feature = "tokio")]
    room: crate::wake::Wake,
    /// Task workers and streams that have read everything wait here for an append or their
    /// retire.
    #[cfg(feature = "tokio")]
    arrived_tasks: crate::wake::Wake,
    /// How many readers are tasks or streams: while there are any, an append tells
    /// `arrived_tasks`, fenced so that no waiter is missed (see `wake.rs`).
    #[cfg(feature = "tokio")]
    task_readers: std::sync::atomic::AtomicUsize,
}

struct Ring<T> {
    entries: VecDeque<(Instant, Message<T>)>,
    cursors: Vec<Arc<Cursor>>,
    /// A publish of a seq below this needs no look at the cursors: `min(position + capacity)`
    /// over open `Block` cursors as last computed (a lower bound, since positions only grow;
    /// a join lowers it).
    limit: u64,
    /// Workers waiting on `arrived`.
    sleepers: usize,
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
    /// Messages its filter rejected, which it did not receive: written by its worker.
    filtered: AtomicU64,
}

fn stopped(stop: &Receiver<()>) -> bool {
    matches!(stop.try_recv(), Err(TryRecvError::Disconnected))
}

impl<T: Send + Sync + 'static> Log<T> {
    pub(crate) fn new(topic: &'static str, retention: Retention) -> Self {
        Log {
            topic,
            retention,
            ring: Mutex::new(Ring {
                entries: VecDeque::new(),
                cursors: Vec::new(),
                limit: u64::MAX,
                sleepers: 0,
            }),
            arrived: Condvar::new(),
            advanced: Condvar::new(),
            tail: AtomicU64::new(0),
            oldest: AtomicU64::new(0),
            publisher_waiting: AtomicBool::new(false),
            #[cfg(feature = "tokio")]
            room: crate::wake::Wake::default(),
            #[cfg(feature = "tokio")]
            arrived_tasks: crate::wake::Wake::default(),
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
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn append(
        &self,
        pool: &mut Pool<Envelope<T>>,
        seq: u64,
        payload: T,
        room_by: Option<Option<Instant>>,
        stop: &Receiver<()>,
        waits: &TopicWaits,
        publisher: Option<&Arc<WaitNode>>,
        share: bool,
    ) -> Result<Option<Message<T>>, (T, NoRoom)> {
        let mut ring = self.ring.lock();
        if seq >= ring.limit {
            match self.wait_for_room(&mut ring, seq, room_by, stop, waits, publisher) {
                Ok(()) | Err(NoRoom::Stopped) if room_by.is_none() => {}
                Ok(()) => {}
                Err(why) => return Err((payload, why)),
            }
        }
        let message = match pool
            .shared(Envelope::new(seq, self.topic, payload), 1)
            .next()
        {
            Some(reference) => Message::new(reference),
            None => unreachable!("`shared` hands out at least one reference"),
        };
        // Another share of it, for the topic's observers.
        let shared = share.then(|| message.clone());
        let now = Instant::now();
        // A full ring trims one message per append: held on the stack, so that the append
        // allocates nothing but the message. `trimmed` allocates only for an age trim.
        let mut lapped = None;
        let mut trimmed = Vec::new();
        while ring.entries.len() >= self.retention.messages {
            match lapped {
                None => lapped = ring.entries.pop_front(),
                Some(_) => trimmed.extend(ring.entries.pop_front()),
            }
        }
        ring.entries.push_back((now, message));
        self.tail.store(seq + 1, Release);
        self.oldest
            .store(seq + 1 - ring.entries.len() as u64, Release);
        self.trim_expired(&mut ring, now, &mut trimmed);
        if ring.sleepers > 0 {
            self.arrived.notify_all();
        }
        drop(ring);
        // After the ring lock: a task reader that joined before this append is counted.
        #[cfg(feature = "tokio")]
        if self.task_readers.load(Relaxed) > 0 {
            self.arrived_tasks.notify_now();
        }
        // User code (the payloads' `Drop`), run with the ring lock let go.
        drop(lapped);
        drop(trimmed);
        Ok(shared)
    }

    #[cold]
    fn wait_for_room(
        &self,
        ring: &mut MutexGuard<'_, Ring<T>>,
        seq: u64,
        room_by: Option<Option<Instant>>,
        stop: &Receiver<()>,
        waits: &TopicWaits,
        publisher: Option<&Arc<WaitNode>>,
    ) -> Result<(), NoRoom> {
        let _waiting = Waiting(&self.publisher_waiting);
        loop {
            // Announced before the positions are read: see the module docs.
            self.publisher_waiting.store(true, SeqCst);
            let Some(behind) = ring.recompute_limit() else {
                return Ok(());
            };
            if seq < ring.limit {
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
            let until = deadline.map_or(now + RECHECK, |deadline| deadline.min(now + RECHECK));
            waits.waiting_on(&behind.node, || {
                let _ = self.advanced.wait_until(ring, until);
            });
        }
    }

    /// With `retain_for`: drops from the front what is older, but never what a `Block`
    /// subscription has yet to finish.
    fn trim_expired(
        &self,
        ring: &mut Ring<T>,
        now: Instant,
        trimmed: &mut Vec<(Instant, Message<T>)>,
    ) {
        let Some(cutoff) = self.retention.max_age.and_then(|age| now.checked_sub(age)) else {
            return;
        };
        if !ring.entries.front().is_some_and(|(at, _)| *at < cutoff) {
            return;
        }
        let keep_from = ring
            .cursors
            .iter()
            .filter(|c| c.block.is_some() && c.end.load(Acquire) == OPEN)
            .map(|c| c.position.load(SeqCst))
            .min()
            .unwrap_or(u64::MAX);
        let tail = self.tail.load(Relaxed);
        let mut oldest = tail - ring.entries.len() as u64;
        while oldest < keep_from && ring.entries.front().is_some_and(|(at, _)| *at < cutoff) {
            trimmed.extend(ring.entries.pop_front());
            oldest += 1;
        }
        self.oldest.store(oldest, Release);
    }

    /// Adds a subscription at `start` (see the module docs: the seam).
    pub(crate) fn join(&self, cursor: &Arc<Cursor>, start: Start) {
        let now = Instant::now();
        let mut trimmed = Vec::new();
        let mut ring = self.ring.lock();
        self.trim_expired(&mut ring, now, &mut trimmed);
        let tail = self.tail.load(Relaxed);
        let oldest = tail - ring.entries.len() as u64;
        let at = match start {
            Start::Now => tail,
            Start::Earliest => oldest,
            Start::Seq(seq) => seq,
            Start::Since(age) => match now.checked_sub(age) {
                None => oldest,
                Some(from) => ring
                    .entries
                    .iter()
                    .position(|(at, _)| *at >= from)
                    .map_or(tail, |i| oldest + i as u64),
            },
        };
        cursor.start.store(at, Release);
        cursor.read.store(at, Release);
        cursor.position.store(at, SeqCst);
        if let Some(capacity) = cursor.block {
            ring.limit = ring.limit.min(at.saturating_add(capacity));
        }
        ring.cursors.push(Arc::clone(cursor));
        drop(ring);
        drop(trimmed);
    }

    /// Takes a subscription's cursor out: publishes no longer wait for it.
    pub(crate) fn remove(&self, subscription: u64) {
        let mut ring = self.ring.lock();
        ring.cursors.retain(|c| c.node.id != subscription);
        self.advanced.notify_all();
    }

    /// Takes every cursor out: a closed bus hands nothing out.
    pub(crate) fn clear(&self) {
        let mut ring = self.ring.lock();
        ring.cursors.clear();
        self.advanced.notify_all();
    }

    /// The node of a `Block` subscription the next publish would wait for, if any: for
    /// `publish_async`, which waits without the order lock.
    #[cfg(feature = "tokio")]
    pub(crate) fn behind(&self) -> Option<Arc<WaitNode>> {
        let mut ring = self.ring.lock();
        let behind = ring.recompute_limit()?;
        (self.tail.load(Relaxed) >= ring.limit).then(|| Arc::clone(&behind.node))
    }

    /// Waits (as a task) until a `Block` subscription may have moved: woken by its worker, or
    /// after `wake::BACKSTOP`. Holds no lock.
    #[cfg(feature = "tokio")]
    pub(crate) async fn room(&self) {
        let backstop = crate::wake::BACKSTOP;
        self.room.wait_unless(Some(backstop), || false).await;
    }
}

impl<T> Ring<T> {
    /// Sets `limit` from the open `Block` cursors; the one furthest behind.
    fn recompute_limit(&mut self) -> Option<Arc<Cursor>> {
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
        self.limit = behind.map_or(u64::MAX, |(limit, _)| limit);
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

/// The bus's handle on a log subscription: retiring it, and reading where it stands.
struct Retirer<T> {
    log: Arc<Log<T>>,
    cursor: Arc<Cursor>,
}

impl<T: Send + Sync + 'static> Retire for Retirer<T> {
    fn retire(&self) {
        let _ring = self.log.ring.lock();
        if self.cursor.end.load(Relaxed) == OPEN {
            self.cursor.end.store(self.log.tail.load(Relaxed), Release);
        }
        self.log.arrived.notify_all();
        self.log.advanced.notify_all();
        #[cfg(feature = "tokio")]
        self.log.arrived_tasks.notify_now();
    }

    fn log(&self) -> Option<LogView> {
        let cursor = &self.cursor;
        let read = cursor.read.load(Acquire);
        let position = cursor.position.load(Acquire);
        let oldest = self.log.oldest.load(Acquire);
        let upto = self.log.tail.load(Acquire).min(cursor.end.load(Acquire));
        let start = cursor.start.load(Acquire);
        let filtered = cursor.filtered.load(Acquire);
        Some(LogView {
            received: upto.saturating_sub(start).saturating_sub(filtered),
            position,
            lag: upto.saturating_sub(position),
            lapped: oldest.min(upto).saturating_sub(read),
        })
    }
}

#[cfg(feature = "tokio")]
impl<T> Drop for Reader<T> {
    fn drop(&mut self) {
        if self.by_task {
            self.log.task_readers.fetch_sub(1, SeqCst);
        }
    }
}

/// The worker's end of a log subscription.
pub(crate) struct Reader<T> {
    log: Arc<Log<T>>,
    cursor: Arc<Cursor>,
    core: Arc<SubscriptionCore>,
    /// References taken out of the ring, not yet handed to the handler.
    batch: VecDeque<Message<T>>,
    batch_size: usize,
    /// The seq of the message last handed out: finished when the next is asked for.
    in_hand: Option<u64>,
    stop: Receiver<()>,
    /// Called, with no lock held, when messages its filter skipped leave it with nothing to
    /// do: a closing bus looks whether it has drained (the engine's `Lifecycle::poke`).
    idle: Box<dyn Fn() + Send + Sync>,
    /// Read by a task or a stream (counted in `Log::task_readers`).
    #[cfg(feature = "tokio")]
    by_task: bool,
}

/// What a reader needs from its bus for closing.
pub(crate) struct Closing {
    /// Disconnected by a forced stop.
    pub(crate) stop: Receiver<()>,
    /// Tells a closing bus to look whether it has drained (`Lifecycle::poke`).
    pub(crate) poke: Box<dyn Fn() + Send + Sync>,
}

/// A log subscription at the log's start position `start`, as its worker's end; `core` makes
/// the subscription's shared state around its retirer. The subscription receives nothing
/// until [`Reader::join`].
pub(crate) fn reader<T: Send + Sync + 'static>(
    log: &Arc<Log<T>>,
    id: u64,
    capacity: usize,
    overflow: Overflow,
    by_task: bool,
    closing: Closing,
    core: impl FnOnce(Box<dyn Retire>) -> SubscriptionCore,
) -> Reader<T> {
    #[cfg(feature = "tokio")]
    if by_task {
        log.task_readers.fetch_add(1, SeqCst);
    }
    #[cfg(not(feature = "tokio"))]
    let _ = by_task;
    let block = (overflow == Overflow::Block).then_some(capacity as u64);
    let cursor = Arc::new(Cursor {
        node: WaitNode::new(id),
        block,
        start: AtomicU64::new(0),
        position: AtomicU64::new(0),
        read: AtomicU64::new(0),
        end: AtomicU64::new(OPEN),
        filtered: AtomicU64::new(0),
    });
    let retirer = Retirer {
        log: Arc::clone(log),
        cursor: Arc::clone(&cursor),
    };
    let mut core = core(Box::new(retirer));
    // One node for the subscription: the cursor's, which publishers record waits on.
    core.node = Arc::clone(&cursor.node);
    Reader {
        log: Arc::clone(log),
        cursor,
        core: Arc::new(core),
        batch: VecDeque::new(),
        batch_size: if block.is_some() {
            BATCH.min(capacity)
        } else {
            1
        },
        in_hand: None,
        stop: closing.stop,
        idle: closing.poke,
        #[cfg(feature = "tokio")]
        by_task,
    }
}

impl<T: Send + Sync + 'static> Reader<T> {
    pub(crate) fn core(&self) -> &Arc<SubscriptionCore> {
        &self.core
    }

    /// Joins the log at `start`: from here on the subscription receives.
    pub(crate) fn join(&self, start: Start) {
        self.log.join(&self.cursor, start);
    }

    /// The next message, waiting for one; `None` once retired and everything before the
    /// retire has been read. Asking for the next finishes the one before.
    pub(crate) fn next(&mut self) -> Option<Message<T>> {
        self.take(true)
    }

    /// The next message, awaiting one (a task worker's or a stream's); `None` once retired and
    /// everything before the retire has been read. Holds no lock across an `.await`.
    #[cfg(feature = "tokio")]
    pub(crate) async fn next_async(&mut self) -> Option<Message<T>> {
        loop {
            if let Some(message) = self.take(false) {
                return Some(message);
            }
            if self.cursor.end.load(Acquire) != OPEN && self.is_empty() {
                return None;
            }
            let read = self.cursor.read.load(Relaxed);
            let (log, cursor) = (&self.log, &self.cursor);
            // Every append and retire tells a counted waiter, fenced: no time-out is needed.
            log.arrived_tasks
                .wait_unless(None, || {
                    log.tail.load(SeqCst) > read || cursor.end.load(SeqCst) != OPEN
                })
                .await;
        }
    }

    /// The next message already in the log, without waiting: after a forced stop.
    pub(crate) fn try_next(&mut self) -> Option<Message<T>> {
        self.take(false)
    }

    /// Whether nothing is left to read now.
    pub(crate) fn is_empty(&self) -> bool {
        let upto = self
            .log
            .tail
            .load(Acquire)
            .min(self.cursor.end.load(Acquire));
        self.batch.is_empty() && self.cursor.read.load(Relaxed) >= upto
    }

    /// Moves the position on to `seq`: everything before it is finished.
    fn advance(&self, seq: u64) {
        self.cursor.position.store(seq, SeqCst);
        if self.log.publisher_waiting.load(SeqCst) {
            let _ring = self.log.ring.lock();
            self.log.advanced.notify_all();
        }
        #[cfg(feature = "tokio")]
        self.log.room.notify();
    }

    /// Whether the subscription's filter lets `message` through. One it rejects is counted
    /// as filtered (and not received); one it panics on, as dropped. A log hands every
    /// message to every subscription, so a log subscription's filter runs here, on its
    /// worker, not on the publisher's thread.
    fn wants(&self, message: &Message<T>) -> bool {
        let Some(filter) = &self.core.options.filter else {
            return true;
        };
        match filter.verdict(message.payload()) {
            Verdict::Accept => true,
            Verdict::Reject => {
                Counters::bump(&self.core.counters.filtered);
                // Before the position moves, so `received` never reads it as unfinished.
                Counters::bump(&self.cursor.filtered);
                false
            }
            Verdict::Panicked => {
                observe::dropped(
                    self.log.topic,
                    message.seq(),
                    &self.core.name,
                    "filter panicked",
                );
                Counters::bump(&self.core.counters.dropped);
                false
            }
        }
    }

    fn take(&mut self, wait: bool) -> Option<Message<T>> {
        if let Some(seq) = self.in_hand.take() {
            self.advance(seq + 1);
        }
        let mut skipped = false;
        loop {
            let message = match self.take_any(false) {
                Some(message) => message,
                None if !wait => {
                    if skipped {
                        (self.idle)();
                    }
                    return None;
                }
                None => {
                    // What the filter skipped finished without the worker seeing it: a
                    // closing bus must hear of it before this worker sleeps.
                    if skipped {
                        (self.idle)();
                    }
                    self.take_any(true)?
                }
            };
            if self.wants(&message) {
                self.in_hand = Some(message.seq());
                return Some(message);
            }
            let next = message.seq() + 1;
            drop(message);
            self.advance(next);
            skipped = true;
        }
    }

    /// The next message in the log, whether the filter wants it or not.
    fn take_any(&mut self, wait: bool) -> Option<Message<T>> {
        if self.batch.is_empty() {
            let log = Arc::clone(&self.log);
            let mut ring = log.ring.lock();
            let mut yields = 0;
            while !self.fill(&mut ring) {
                let ended = self.cursor.end.load(Acquire) != OPEN;
                if !wait || ended || stopped(&self.stop) {
                    return None;
                }
                // A worker that caught up gives the publisher a few turns before it sleeps
                // (as crossbeam's receivers snooze): a sleeping worker must be woken by the
                // next append, and waking many is the one part of an append that grows with
                // the number of subscribers.
                if yields < YIELDS {
                    yields += 1;
                    let read = self.cursor.read.load(Relaxed);
                    MutexGuard::unlocked(&mut ring, || {
                        if log.tail.load(Acquire) <= read {
                            std::thread::yield_now();
                        }
                    });
                    continue;
                }
                ring.sleepers += 1;
                log.arrived.wait(&mut ring);
                ring.sleepers -= 1;
            }
        }
        self.batch.pop_front()
    }

    /// Takes references out of the ring into `batch`, counting a lap as dropped; whether it
    /// took any. Under the ring lock.
    fn fill(&mut self, ring: &mut Ring<T>) -> bool {
        let tail = self.log.tail.load(Relaxed);
        let upto = tail.min(self.cursor.end.load(Acquire));
        let oldest = tail - ring.entries.len() as u64;
        let mut read = self.cursor.read.load(Relaxed);
        let lapped_to = oldest.min(upto);
        if read < lapped_to {
            for seq in read..lapped_to {
                observe::dropped(self.log.topic, seq, &self.core.name, "trimmed from the log");
            }
            // The lap stops showing in the view (`Retirer::log`) before it is counted, so a
            // stats reading sees it once or not yet (`queued` high for a moment), never twice
            // (`queued` low: a reader would think the subscription idle).
            self.cursor.read.store(lapped_to, Release);
            Counters::add(&self.core.counters.dropped, lapped_to - read);
            read = lapped_to;
            // Nothing is in hand: the position moves on with the read.
            self.cursor.position.store(read, SeqCst);
            if self.log.publisher_waiting.load(SeqCst) {
                self.log.advanced.notify_all();
            }
        }
        let n = upto.saturating_sub(read).min(self.batch_size as u64);
        if n == 0 {
            self.cursor.read.store(read, Release);
            return false;
        }
        let from = (read - oldest) as usize;
        self.batch.extend(
            ring.entries
                .range(from..from + n as usize)
                .map(|(_, message)| message.clone()),
        );
        self.cursor.read.store(read + n, Release);
        n > 0
    }
}
