//! A consumer group without a key on a log topic: its workers share one position in the log.
//! One [`Reader`] for the whole group, behind a lock ([`SharedReader`]): a worker takes the
//! next message out under it, with the reader's rules of a single log subscription (its
//! filter, a lap by the trim counted as dropped, `Block` holding publishers `capacity` behind),
//! and handles it with the lock let go of. So each message, history from `Options::start`
//! included, goes to exactly one worker, in no promised order across them.
//!
//! The position moves past a message as it is handed out, not when its handler finishes: as
//! with a shared mailbox, `capacity` counts what waits for the group, and what is in the
//! workers' handlers is theirs (references of their own: nothing is lent in its cell, so the
//! ring may trim it meanwhile).
//!
//! A worker that finds nothing waits with the lock let go of, on the log's own wake-ups (an
//! append or a retire tells `arrived` sleepers, and `arrived_tasks` for task workers), then
//! takes its turn again: a worker in its handler, or one asking whether the group has
//! anything left (`is_empty`, a closing bus's question), never waits behind a sleeping one.
//!
//! # Locks
//!
//! The reader's lock (row 5a in `engine/mod.rs`) is taken by the group's workers alone, with
//! nothing else held. Inside it: the ring (row 6), and a closing bus's drain look (row 7,
//! through the reader's `idle` when its filter skipped messages).

use super::*;

/// The group's one reader, which its workers take turns at.
pub(crate) struct SharedReader<T> {
    /// Taken for one hand-out at a time, never while waiting.
    reader: Mutex<Reader<T>>,
    log: Arc<Log<T>>,
    cursor: Arc<Cursor>,
    /// Disconnected by a forced stop.
    stop: Receiver<()>,
}

/// A shared reader's subscription's delivery, around its log retirer: the same, and what
/// waits in the log for the group (from its position to the log's end) counted as queued, so
/// a closing bus sees the group's workers as busy until they have taken everything.
struct Unread(Box<dyn Retire>);

impl Retire for Unread {
    fn retire(&self) {
        self.0.retire();
    }

    fn log(&self) -> Option<LogView> {
        self.0.log()
    }

    fn queued(&self) -> u64 {
        self.0.log().map_or(0, |view| view.lag)
    }
}

/// The delivery of a shared reader's subscription, made from its log retirer (for
/// [`reader`]'s `core`).
pub(crate) fn unread(retirer: Box<dyn Retire>) -> Box<dyn Retire> {
    Box::new(Unread(retirer))
}

impl<T: Send + Sync + 'static> SharedReader<T> {
    /// Shares `reader` (joined, or joined before any worker asks) among a group's workers.
    pub(crate) fn new(reader: Reader<T>) -> Self {
        let (log, cursor, stop) = reader.parts();
        SharedReader {
            log,
            cursor,
            stop,
            reader: Mutex::new(reader),
        }
    }

    /// The next message, waiting for one (a thread worker's); `None` once retired and
    /// everything before the retire has been handed out, or stopped.
    pub(crate) fn next(&self) -> Option<Message<T>> {
        loop {
            let read = match self.turn() {
                Turn::Took(message) => return Some(message),
                Turn::Done => return None,
                Turn::Wait(read) => read,
            };
            let log = &self.log;
            // Lock order: row 6 (the log's ring), nothing else held; see engine/mod.rs.
            let mut ring = log.lock_ring();
            // Every append and retire tells the sleepers under the ring lock: none is missed.
            while log.tail.load(Acquire) <= read
                && self.cursor.end.load(Acquire) == OPEN
                && !stopped(&self.stop)
            {
                log.sleep(&mut ring);
            }
        }
    }

    /// The next message, awaiting one (a task worker's); `None` once retired and everything
    /// before the retire has been handed out, or stopped. Holds no lock across an `.await`.
    #[cfg(feature = "tokio")]
    pub(crate) async fn next_async(&self) -> Option<Message<T>> {
        loop {
            let read = match self.turn() {
                Turn::Took(message) => return Some(message),
                Turn::Done => return None,
                Turn::Wait(read) => read,
            };
            let (log, cursor) = (&self.log, &self.cursor);
            // Every append and retire tells a counted waiter, fenced: no time-out is needed.
            log.arrived_tasks
                .wait_unless(None, || {
                    log.tail.load(SeqCst) > read || cursor.end.load(SeqCst) != OPEN
                })
                .await;
        }
    }

    /// The next message in the log now, without waiting.
    #[cfg(feature = "tokio")]
    pub(crate) fn try_next(&self) -> Option<Message<T>> {
        match self.turn() {
            Turn::Took(message) => Some(message),
            Turn::Done | Turn::Wait(_) => None,
        }
    }

    /// Whether nothing is left for the group now.
    pub(crate) fn is_empty(&self) -> bool {
        // Lock order: row 5a (a shared reader), nothing else held; see engine/mod.rs.
        self.reader.lock().is_empty()
    }

    /// One turn at the reader: a message handed out, or where to wait from.
    fn turn(&self) -> Turn<T> {
        // Lock order: row 5a (a shared reader), nothing else held; see engine/mod.rs.
        let mut reader = self.reader.lock();
        if let Some(message) = reader.hand_out() {
            // Counted on the reader's core, under its lock (one writer at a time): its stats
            // read what waits in the log as `received` less what was taken.
            Counters::bump(&reader.core().counters.taken);
            return Turn::Took(message);
        }
        let ended = self.cursor.end.load(Acquire) != OPEN;
        if (ended && reader.is_empty()) || stopped(&self.stop) {
            return Turn::Done;
        }
        Turn::Wait(self.cursor.read.load(Acquire))
    }
}

/// What one turn at the reader found.
enum Turn<T> {
    Took(Message<T>),
    /// Retired and read to the end, or stopped.
    Done,
    /// Nothing now: wait for the log to pass this seq (the reader's `read`), or a retire.
    Wait(u64),
}
