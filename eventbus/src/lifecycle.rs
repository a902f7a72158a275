//! The bus's lifecycle (open → draining → closed) and the count of work in flight that tells
//! `close` when draining is over.
//!
//! # How close knows it is done
//!
//! `pending` counts publishes under way plus messages that sit in a mailbox or in a handler.
//! A publish adds one for itself before it checks the state, and one per mailbox before it
//! hands the message out; a worker takes one off when it has finished a message; an overflow
//! takes one off for each message it discards. While the bus is open the count can touch zero
//! at any time; once it is draining, zero means no handler is running and no mailbox holds
//! anything, and nothing new can start: publishers outside the bus are refused, and only a
//! running handler may publish. So whoever brings the count to zero while draining (a worker,
//! a publisher, or `close` itself) closes the bus.
//!
//! The state and the count share one atomic word: a publisher's increment returns the state
//! it was made in, and `close` changes the state with a compare-and-swap that returns the
//! count, so a publish is either refused or counted before the close looks. A publish also
//! counts, in that same increment, the mailboxes it expects to hand the message to (and
//! corrects the figure under its topic's lock if the subscriber list changed meanwhile);
//! workers take finished messages off in batches, whenever their mailbox runs dry.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use parking_lot::{Condvar, Mutex};

/// The state sits in the top two bits of `work`, the count in the rest, so that one atomic
/// operation both counts a publish and reads whether it may go ahead.
const STATE: u64 = 0b11 << 62;
const OPEN: u64 = 0;
const DRAINING: u64 = 1 << 62;
const CLOSED: u64 = 2 << 62;

#[derive(Debug)]
pub(crate) struct Lifecycle {
    /// The state (top two bits) and the count of work in flight (see the module docs).
    work: AtomicU64,
    /// Set by a forced stop: workers take no more messages.
    stopped: AtomicBool,
    /// Never sent on; dropped by a forced stop, which wakes every receiver of `stop_rx`:
    /// workers waiting out a retry backoff and publishers waiting for room.
    stop_tx: Mutex<Option<Sender<()>>>,
    stop_rx: Receiver<()>,
    /// Guards nothing but the wait on `closed`; the state is set before the lock is taken
    /// for the notify, so no wake-up is lost.
    closed_lock: Mutex<()>,
    closed: Condvar,
}

impl Lifecycle {
    pub(crate) fn new() -> Self {
        let (stop_tx, stop_rx) = crossbeam_channel::bounded(0);
        Lifecycle {
            work: AtomicU64::new(OPEN),
            stopped: AtomicBool::new(false),
            stop_tx: Mutex::new(Some(stop_tx)),
            stop_rx,
            closed_lock: Mutex::new(()),
            closed: Condvar::new(),
        }
    }

    fn state(&self) -> u64 {
        self.work.load(SeqCst) & STATE
    }

    pub(crate) fn is_open(&self) -> bool {
        self.state() == OPEN
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.state() == CLOSED
    }

    /// Counts `units` of work and says whether they may go ahead: always while open; while
    /// draining only when `inside` (a handler of this bus is publishing). Refused units are
    /// already taken off again; `true` in the second slot means that brought the count to
    /// zero while draining, and the caller must finish the close.
    pub(crate) fn begin(&self, units: u64, inside: impl FnOnce() -> bool) -> (bool, bool) {
        let before = self.work.fetch_add(units, SeqCst);
        match before & STATE {
            OPEN => (true, false),
            DRAINING if inside() => (true, false),
            _ => (false, self.finish_work(units)),
        }
    }

    pub(crate) fn add_work(&self, units: u64) {
        if units > 0 {
            self.work.fetch_add(units, SeqCst);
        }
    }

    /// Takes `units` off the count; `true` means the bus is draining and nothing is left.
    pub(crate) fn finish_work(&self, units: u64) -> bool {
        if units == 0 {
            return false;
        }
        let before = self.work.fetch_sub(units, SeqCst);
        before == DRAINING | units
    }

    /// Moves `from` to `to`, keeping the count; the count it had, if the state was `from`.
    fn transition(&self, from: u64, to: u64) -> Option<u64> {
        let mut current = self.work.load(SeqCst);
        loop {
            if current & STATE != from {
                return None;
            }
            let next = (current & !STATE) | to;
            match self.work.compare_exchange(current, next, SeqCst, SeqCst) {
                Ok(_) => return Some(current & !STATE),
                Err(actual) => current = actual,
            }
        }
    }

    /// Moves an open bus to draining; `true` means nothing was in flight, and the caller must
    /// finish the close.
    pub(crate) fn begin_close(&self) -> bool {
        self.transition(OPEN, DRAINING) == Some(0)
    }

    /// Moves a draining bus to closed; only one caller wins.
    pub(crate) fn mark_closed(&self) -> bool {
        self.transition(DRAINING, CLOSED).is_some()
    }

    pub(crate) fn notify_closed(&self) {
        let _guard = self.closed_lock.lock();
        self.closed.notify_all();
    }

    /// Waits until the bus is closed, or the deadline passes (`false`).
    pub(crate) fn wait_closed(&self, deadline: Option<Instant>) -> bool {
        let mut guard = self.closed_lock.lock();
        while !self.is_closed() {
            match deadline {
                None => self.closed.wait(&mut guard),
                Some(deadline) => {
                    if self.closed.wait_until(&mut guard, deadline).timed_out() {
                        return self.is_closed();
                    }
                }
            }
        }
        true
    }

    /// A forced stop: the bus is closed at once, workers take no more messages, and every
    /// wait on `stop_rx` ends.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, SeqCst);
        let _ = self.transition(OPEN, CLOSED);
        let _ = self.transition(DRAINING, CLOSED);
        self.stop_tx.lock().take();
        self.notify_closed();
    }

    pub(crate) fn stopped(&self) -> &AtomicBool {
        &self.stopped
    }

    pub(crate) fn stop_signal(&self) -> &Receiver<()> {
        &self.stop_rx
    }

    /// Sleeps for `delay` unless a forced stop comes first (`false`).
    pub(crate) fn sleep(&self, delay: Duration) -> bool {
        match self.stop_rx.recv_timeout(delay) {
            Err(RecvTimeoutError::Timeout) => true,
            Ok(()) | Err(RecvTimeoutError::Disconnected) => false,
        }
    }
}
