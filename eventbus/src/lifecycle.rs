//! The bus's lifecycle (open → draining → closed), and how a draining bus knows it is done.
//!
//! # How close knows it is done
//!
//! Nothing on the publish or delivery path counts work on a shared counter; instead, once the
//! bus is draining, whoever may have made the last move looks (`Inner::poke_if_closing` in
//! `bus.rs`): a worker whose mailbox ran dry, a publisher that let go of its topic's order
//! lock, a subscribe that finished, the close itself. The bus is drained when, twice in a
//! row, every topic's order lock could be taken (no publish under way), no subscribe is under
//! way, and every subscription has finished everything it received, with no counter moved
//! between the two looks. Then no mailbox holds anything and no handler runs, so nothing can
//! publish again: a publish checks the state *under* its topic's order lock, and one that
//! takes the lock after the look took it sees that the bus is draining, so it is refused
//! unless a handler makes it, and none is running.
//!
//! Subscribes are counted (they are rare): a subscribe adds itself before it reads the state,
//! and `begin_close` changes the state before the look reads the count, all sequentially
//! consistent, so a subscribe is either refused or seen.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::SeqCst};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use parking_lot::{Condvar, Mutex};

const OPEN: u8 = 0;
const DRAINING: u8 = 1;
const CLOSED: u8 = 2;

#[derive(Debug)]
pub(crate) struct Lifecycle {
    /// Open, draining or closed. Read on every publish and by workers whose mailbox ran dry;
    /// written three times in the bus's life, so it stays in every core's cache.
    state: AtomicU8,
    /// Subscribes under way (see the module docs).
    subscribing: AtomicU64,
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
            state: AtomicU8::new(OPEN),
            subscribing: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
            stop_tx: Mutex::new(Some(stop_tx)),
            stop_rx,
            closed_lock: Mutex::new(()),
            closed: Condvar::new(),
        }
    }

    #[inline]
    pub(crate) fn is_open(&self) -> bool {
        self.state.load(SeqCst) == OPEN
    }

    #[inline]
    pub(crate) fn is_draining(&self) -> bool {
        self.state.load(SeqCst) == DRAINING
    }

    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.state.load(SeqCst) == CLOSED
    }

    /// Whether a publish may go ahead: always while open; while draining only when `inside`
    /// (a handler of this bus is publishing). Called under the topic's order lock.
    #[inline]
    pub(crate) fn accepts(&self, inside: bool) -> bool {
        match self.state.load(SeqCst) {
            OPEN => true,
            DRAINING => inside,
            _ => false,
        }
    }

    /// Counts a subscribe, if the bus is open; `end_subscribe` takes it off again.
    pub(crate) fn begin_subscribe(&self) -> bool {
        self.subscribing.fetch_add(1, SeqCst);
        if self.is_open() {
            return true;
        }
        self.end_subscribe();
        false
    }

    pub(crate) fn end_subscribe(&self) {
        self.subscribing.fetch_sub(1, SeqCst);
    }

    /// Whether a subscribe is under way.
    pub(crate) fn subscribing(&self) -> bool {
        self.subscribing.load(SeqCst) > 0
    }

    /// Moves `from` to `to`; whether this call did it.
    fn transition(&self, from: u8, to: u8) -> bool {
        self.state
            .compare_exchange(from, to, SeqCst, SeqCst)
            .is_ok()
    }

    /// Moves an open bus to draining; whether this call did it.
    pub(crate) fn begin_close(&self) -> bool {
        self.transition(OPEN, DRAINING)
    }

    /// Moves a draining bus to closed; only one caller wins.
    pub(crate) fn mark_closed(&self) -> bool {
        self.transition(DRAINING, CLOSED)
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

    #[inline]
    pub(crate) fn stopped(&self) -> &AtomicBool {
        &self.stopped
    }

    #[inline]
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
