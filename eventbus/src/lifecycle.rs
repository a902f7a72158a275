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
//! The state and the count are each one atomic, read and written `SeqCst`: a publisher adds
//! then reads the state, `close` writes the state then reads the count, so at least one of the
//! two sees the other and a publish is either refused or waited for.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use parking_lot::{Condvar, Mutex};

const OPEN: u8 = 0;
const DRAINING: u8 = 1;
const CLOSED: u8 = 2;

#[derive(Debug)]
pub(crate) struct Lifecycle {
    state: AtomicU8,
    /// Publishes under way plus messages not yet finished (see the module docs).
    pending: AtomicUsize,
    /// Set by a forced stop: workers take no more messages.
    stopped: AtomicBool,
    /// Never sent on; dropped by a forced stop, which wakes every receiver of `stop_rx`: idle
    /// workers, workers waiting out a retry backoff, publishers waiting for room.
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
            state: AtomicU8::new(OPEN),
            pending: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
            stop_tx: Mutex::new(Some(stop_tx)),
            stop_rx,
            closed_lock: Mutex::new(()),
            closed: Condvar::new(),
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        self.state.load(SeqCst) == OPEN
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.state.load(SeqCst) == CLOSED
    }

    /// Counts one unit of work and says whether it may go ahead: always while open; while
    /// draining only when `inside` (a handler of this bus is publishing). A refused unit is
    /// already taken off again; `true` in the second slot means that brought the count to
    /// zero while draining, and the caller must finish the close.
    pub(crate) fn begin(&self, inside: impl FnOnce() -> bool) -> (bool, bool) {
        self.pending.fetch_add(1, SeqCst);
        match self.state.load(SeqCst) {
            OPEN => (true, false),
            DRAINING if inside() => (true, false),
            _ => (false, self.finish_work(1)),
        }
    }

    pub(crate) fn add_work(&self, units: usize) {
        self.pending.fetch_add(units, SeqCst);
    }

    /// Takes `units` off the count; `true` means the bus is draining and nothing is left.
    pub(crate) fn finish_work(&self, units: usize) -> bool {
        if units == 0 {
            return false;
        }
        let before = self.pending.fetch_sub(units, SeqCst);
        before == units && self.state.load(SeqCst) == DRAINING
    }

    /// Moves an open bus to draining; `true` means nothing was in flight, and the caller must
    /// finish the close.
    pub(crate) fn begin_close(&self) -> bool {
        let _ = self.state.compare_exchange(OPEN, DRAINING, SeqCst, SeqCst);
        self.pending.load(SeqCst) == 0 && self.state.load(SeqCst) == DRAINING
    }

    /// Moves a draining bus to closed; only one caller wins.
    pub(crate) fn mark_closed(&self) -> bool {
        self.state
            .compare_exchange(DRAINING, CLOSED, SeqCst, SeqCst)
            .is_ok()
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
        self.state.store(CLOSED, SeqCst);
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
