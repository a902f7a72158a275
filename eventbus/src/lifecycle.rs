//! The close/drain protocol, in one place: the bus's states (open → draining → closed), which
//! publishes a closing bus still accepts, how it knows it has drained, the subscriptions whose
//! workers it waits for, and the forced stop when a deadline passes.
//!
//! # What close waits for
//!
//! Every subscription whose worker has not finished is *running*, from its subscribe until
//! its worker's very last step, however it is retired (unsubscribed from its own handler,
//! from another thread, or by the close itself). A close waits until the bus has drained and
//! then until no subscription is running. Workers are never joined: each says it has finished
//! ([`Lifecycle::finished`]), so a close with a deadline waits for exactly as long as it may,
//! and what it leaves behind goes on on its own threads.
//!
//! # How close knows the bus has drained
//!
//! Nothing on the publish or delivery path counts work on a shared counter; instead, once the
//! bus is draining, whoever may have made the last move looks ([`Lifecycle::poke`]): a worker
//! whose mailbox ran dry or that finished, a publisher that let go of its topic's order lock,
//! a subscribe that finished, the close itself. The bus has drained when, twice in a row,
//! every topic's order lock could be taken (no publish under way), no subscribe is under way,
//! and every running subscription has finished everything it received, with no counter moved
//! between the two looks. Then no mailbox holds anything and no handler runs, so nothing can
//! publish again: a publish checks the state *under* its topic's order lock, and one that
//! takes the lock after the look took it sees that the bus is draining, so it is refused
//! unless a handler makes it, and none is running. A worker counts a message finished only
//! after it has let go of it, so a message's `Drop` is part of the drain, bounded by a close's
//! deadline like a handler.
//!
//! Looks take turns (`looking`): a look that found an order lock taken must have found a
//! publish (which pokes once it lets go) or a worker's or `publish_async`'s brief `is_free`
//! (each pokes after), never another look, or both could fail with no one left to look again.
//!
//! Subscribes are counted (they are rare): a subscribe adds itself before it reads the state,
//! and `begin_close` changes the state before the look reads the count, all sequentially
//! consistent, so a subscribe is either refused or seen.
//!
//! A publish to a topic no one has ever heard numbers without the order lock, while the bus is
//! open (`numbering.rs`). The first drain look makes every topic number under it before it
//! reads a number, so a publish that saw the bus open just before the close began is either
//! counted or refused; a topic made after that look does so itself.
//!
//! # Locks
//!
//! `looking` is taken by a poke, never while holding `running`, and `running` inside it.
//! `running` is taken briefly, never while waiting, and never with a topic's order lock
//! wanted (the drain look takes order locks only with `try_lock`, before it takes `running`);
//! a waiter may take it inside `changed_lock`, never the reverse.
//! `changed_lock` guards nothing but the waits on `changed`: every state it announces is
//! written before the lock is taken for the notify, so no wake-up is lost.

use std::sync::atomic::{
    fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use parking_lot::{Condvar, Mutex};

use crate::delivery::core::{Consumer, SubscriptionCore};

/// The longest a `wait_idle` waits between two looks.
pub(crate) const IDLE_RECHECK: Duration = Duration::from_millis(16);

const OPEN: u8 = 0;
const DRAINING: u8 = 1;
const CLOSED: u8 = 2;

/// The bus's topics, as the drain look sees them.
pub(crate) trait Topics: Send + Sync {
    /// Pushes every topic's count of numbered messages onto `seen`; `false` if some publish
    /// holds a topic's order lock now (then the bus has not drained).
    fn quiet(&self, seen: &mut Vec<u64>) -> bool;
    /// Empties every topic's subscriber list: a closed bus hands nothing out.
    fn clear(&self);
    /// From now on every topic numbers under its order lock, where a publish sees that the
    /// bus is closing (see `numbering.rs`).
    fn close_numbering(&self);
}

/// How a close ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Closed {
    /// Everything accepted was delivered and every worker finished.
    Completed,
    /// Called from one of the bus's handlers: the close has begun and goes on without it.
    Begun,
    /// The deadline passed: the caller reads what was left, then stops the bus.
    TimedOut,
    /// An earlier close's deadline passed: the bus was stopped where it was.
    Stopped,
}

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
    topics: Arc<dyn Topics>,
    /// Every subscription whose worker has not finished (see the module docs).
    running: Mutex<Vec<Arc<SubscriptionCore>>>,
    /// Held through a drain look (see the module docs); whether a look has made every topic
    /// number under its order lock.
    looking: Mutex<bool>,
    /// Where the last drain look found a subscription busy.
    hint: AtomicUsize,
    /// How many of `running` have a worker (not a stream's caller): written under its lock.
    workers: AtomicUsize,
    changed_lock: Mutex<()>,
    /// Notified when the bus closes and when a worker finishes.
    changed: Condvar,
    /// Tasks waiting out a retry's backoff wait here for a forced stop.
    #[cfg(feature = "tokio")]
    stop_wake: crate::util::wake::Wake,
}

impl std::fmt::Debug for Lifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lifecycle")
            .field("state", &self.state)
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

impl Lifecycle {
    pub(crate) fn new(topics: Arc<dyn Topics>) -> Self {
        let (stop_tx, stop_rx) = crossbeam_channel::bounded(0);
        Lifecycle {
            state: AtomicU8::new(OPEN),
            subscribing: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
            stop_tx: Mutex::new(Some(stop_tx)),
            stop_rx,
            topics,
            running: Mutex::new(Vec::new()),
            looking: Mutex::new(false),
            hint: AtomicUsize::new(0),
            workers: AtomicUsize::new(0),
            changed_lock: Mutex::new(()),
            changed: Condvar::new(),
            #[cfg(feature = "tokio")]
            stop_wake: crate::util::wake::Wake::default(),
        }
    }

    #[inline]
    pub(crate) fn is_open(&self) -> bool {
        self.state.load(SeqCst) == OPEN
    }

    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.state.load(SeqCst) == CLOSED
    }

    /// Whether a forced stop ended the bus: workers take no more messages. An open bus is
    /// never stopped (`stop` leaves `OPEN` before it sets the flag), so while it is open the
    /// state's one load answers: a worker asks this for every message it takes.
    #[inline]
    pub(crate) fn is_stopped(&self) -> bool {
        self.state.load(SeqCst) != OPEN && self.stopped.load(SeqCst)
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

    /// Ends a subscribe begun with `begin_subscribe`.
    pub(crate) fn end_subscribe(&self) {
        self.subscribing.fetch_sub(1, SeqCst);
        self.poke();
    }

    /// A subscription whose worker is about to start: a close waits for it to finish. Called
    /// between `begin_subscribe` and `end_subscribe`, before the worker can run (so its
    /// `finished` always comes after); if the worker cannot start, call `finished` for it.
    pub(crate) fn started(&self, core: Arc<SubscriptionCore>) {
        {
            // Lock order: row 7 (`running`), nothing else held; see engine/mod.rs.
            let mut running = self.running.lock();
            core.running_at.store(running.len(), Relaxed);
            if core.consumer != Consumer::Caller {
                self.workers.fetch_add(1, SeqCst);
            }
            running.push(Arc::clone(&core));
        }
        // A forced stop that retired every running subscription before this one was pushed
        // left it open: retire it now. `stop` sets the flag before it reads `running`.
        if self.is_stopped() {
            core.retire();
        }
    }

    /// Called by a worker as its last step: its subscription no longer holds up a close.
    pub(crate) fn finished(&self, core: &SubscriptionCore) {
        core.mark_finished();
        {
            // Out in one step, wherever it is (a close of a hundred thousand subscriptions
            // would otherwise take as many looks at the list per finish): the last one takes
            // its place.
            // Lock order: row 7 (`running`), nothing else held; see engine/mod.rs.
            let mut running = self.running.lock();
            let at = core.running_at.load(Relaxed);
            if running.get(at).is_some_and(|there| there.id == core.id) {
                running.swap_remove(at);
                if let Some(moved) = running.get(at) {
                    moved.running_at.store(at, Relaxed);
                }
                if core.consumer != Consumer::Caller {
                    self.workers.fetch_sub(1, SeqCst);
                }
            }
        }
        self.notify();
        self.poke();
    }

    /// Every subscription still running, unsubscribed ones included.
    pub(crate) fn running(&self) -> Vec<Arc<SubscriptionCore>> {
        // Lock order: row 7 (`running`), nothing else held; see engine/mod.rs.
        self.running.lock().clone()
    }

    /// A closing bus looks whether it has drained, and if so finishes the close. Called by
    /// whoever may have made the last move (see the module docs).
    #[inline]
    pub(crate) fn poke(&self) {
        if self.state.load(SeqCst) == DRAINING {
            self.finish_if_drained();
        }
    }

    #[cold]
    fn finish_if_drained(&self) {
        // One look at a time: a look's `try_lock` on an order lock must fail only because a
        // publish holds it (and will poke), never because another look does.
        // Lock order: row 7 (`looking`); `running` inside, row 4 only tried; see engine/mod.rs.
        let mut looking = self.looking.lock();
        if !*looking {
            // The first look: from now on every topic numbers under its order lock, before
            // its number is read. A topic made later sees the state (`Engine::topic` fences
            // the same way; see `numbering.rs`).
            fence(SeqCst);
            self.topics.close_numbering();
            *looking = true;
        }
        let closed = self.drained()
            && self
                .state
                .compare_exchange(DRAINING, CLOSED, SeqCst, SeqCst)
                .is_ok();
        drop(looking);
        if closed {
            // Nothing is in flight: every mailbox is empty and every worker idle. Retiring
            // the subscriptions lets the workers finish.
            self.retire_all();
            self.notify();
        }
    }

    /// Whether nothing is under way, in two looks that saw the same.
    fn drained(&self) -> bool {
        // A cheap look first, from where the last one found something busy: while a
        // thousand workers empty their mailboxes, each that runs dry stops at the first busy
        // one instead of reading all.
        if !self.idle_from_hint() {
            return false;
        }
        match self.activity() {
            Some(first) => self.activity() == Some(first),
            None => false,
        }
    }

    /// Whether everything accepted so far is finished by every subscription, no publish or
    /// subscribe under way (`Bus::wait_idle`): the drain look, with none of a close's side
    /// effects. Takes its turn with the close's looks (see the module docs: a look's
    /// `try_lock` on an order lock must never fail because of another look).
    pub(crate) fn is_idle(&self) -> bool {
        // Lock order: row 7 (`looking`); `running` inside, row 4 only tried; see engine/mod.rs.
        let _looking = self.looking.lock();
        self.drained()
    }

    /// Waits until [`is_idle`](Self::is_idle), or the deadline; whether it got there. Nothing
    /// on the delivery path announces idleness (it would cost every message), so it looks
    /// again after 1 ms, then ever less often, up to every 16 ms.
    pub(crate) fn wait_idle(&self, deadline: Option<Instant>) -> bool {
        let mut pause = Duration::from_millis(1);
        loop {
            if self.is_idle() {
                return true;
            }
            let now = Instant::now();
            let until = match deadline {
                Some(deadline) if now >= deadline => return false,
                Some(deadline) => deadline.min(now + pause),
                None => now + pause,
            };
            std::thread::sleep(until.saturating_duration_since(now));
            pause = (pause * 2).min(IDLE_RECHECK);
        }
    }

    fn idle_from_hint(&self) -> bool {
        // Lock order: row 7 (`running`), under `looking`; see engine/mod.rs.
        let running = self.running.lock();
        let start = self.hint.load(SeqCst).min(running.len());
        let busy = (start..running.len())
            .chain(0..start)
            .find(|&at| running[at].received_unfinished().1 > 0);
        match busy {
            Some(at) => {
                self.hint.store(at, SeqCst);
                false
            }
            None => true,
        }
    }

    /// What the drain look reads: every topic's count of numbered messages and every running
    /// subscription's count of received ones; `None` while a publish or subscribe is under
    /// way or a subscription has something unfinished.
    fn activity(&self) -> Option<Vec<u64>> {
        if self.subscribing.load(SeqCst) > 0 {
            return None;
        }
        let mut seen = Vec::new();
        if !self.topics.quiet(&mut seen) {
            return None;
        }
        // Lock order: row 7 (`running`), under `looking`; see engine/mod.rs.
        for core in self.running.lock().iter() {
            let (received, unfinished) = core.received_unfinished();
            if unfinished > 0 {
                return None;
            }
            seen.push(received);
        }
        Some(seen)
    }

    fn retire_all(&self) {
        for core in self.running() {
            core.retire();
        }
        self.topics.clear();
    }

    fn notify(&self) {
        // Lock order: row 7 (`changed_lock`); see engine/mod.rs.
        let _guard = self.changed_lock.lock();
        self.changed.notify_all();
    }

    /// Waits until `done` holds or the deadline passes; whether it holds. `done` is looked at
    /// again whenever the bus closes or a worker finishes, and at least every `recheck`.
    pub(crate) fn wait_until(
        &self,
        deadline: Option<Instant>,
        recheck: Option<Duration>,
        mut done: impl FnMut() -> bool,
    ) -> bool {
        // Lock order: row 7 (`changed_lock`); `done` runs under it, and an unsubscribe's
        // `done` takes rows 7a and 8 (`engine/close.rs`); see engine/mod.rs.
        let mut guard = self.changed_lock.lock();
        loop {
            if done() {
                return true;
            }
            let now = Instant::now();
            let until = match (deadline, recheck) {
                (Some(deadline), _) if now >= deadline => return false,
                (Some(deadline), Some(recheck)) => deadline.min(now + recheck),
                (Some(deadline), None) => deadline,
                (None, Some(recheck)) => now + recheck,
                (None, None) => {
                    self.changed.wait(&mut guard);
                    continue;
                }
            };
            let _ = self.changed.wait_until(&mut guard, until);
        }
    }

    /// Closes the bus: refuses publishes from outside it, waits until everything accepted is
    /// delivered and every worker has finished, all before `deadline` if given; past it, the
    /// caller stops the bus ([`stop`](Self::stop)) once it has read what was left. `inside`:
    /// called from one of the bus's handlers, which cannot wait for its own worker.
    pub(crate) fn close(&self, deadline: Option<Instant>, inside: bool) -> Closed {
        let _ = self.state.compare_exchange(OPEN, DRAINING, SeqCst, SeqCst);
        self.poke();
        if self.is_stopped() {
            return Closed::Stopped;
        }
        if inside {
            return Closed::Begun;
        }
        let drained = self.wait_until(deadline, None, || self.is_closed());
        // A forced stop by another close ends this wait too: it leaves stuck workers behind.
        let finished = drained
            && self.wait_until(deadline, None, || {
                self.workers_finished() || self.is_stopped()
            });
        if self.is_stopped() {
            return Closed::Stopped;
        }
        if !finished {
            return Closed::TimedOut;
        }
        Closed::Completed
    }

    /// Whether every running subscription's worker has finished; a stream's consumer is the
    /// application, which a close does not wait for once it has drained.
    fn workers_finished(&self) -> bool {
        self.workers.load(SeqCst) == 0
    }

    /// A forced stop: the bus is closed at once, workers take no more messages (what their
    /// mailboxes hold is dropped, counted), and every wait on `stop_rx` ends.
    pub(crate) fn stop(&self) {
        // Out of `OPEN` first (a close has always left it already: `Engine::close_from`), so
        // that `is_stopped` may ask the state before the flag.
        let _ = self.state.compare_exchange(OPEN, DRAINING, SeqCst, SeqCst);
        self.stopped.store(true, SeqCst);
        self.state.store(CLOSED, SeqCst);
        // Lock order: row 9 (`stop_tx`), a leaf; see engine/mod.rs.
        self.stop_tx.lock().take();
        #[cfg(feature = "tokio")]
        self.stop_wake.notify_now();
        self.retire_all();
        self.notify();
    }

    #[inline]
    pub(crate) fn stop_signal(&self) -> &Receiver<()> {
        &self.stop_rx
    }

    /// Sleeps (as a task) for `delay` unless a forced stop comes first (`false`).
    #[cfg(feature = "tokio")]
    pub(crate) async fn sleep_async(&self, delay: Duration) -> bool {
        // Real time, as the wait below keeps it (the ticker's, not the runtime's timer).
        let until = crate::util::deadline::after(delay);
        loop {
            let now = std::time::Instant::now();
            if self.is_stopped() {
                return false;
            }
            if now >= until {
                return true;
            }
            // A forced stop announces itself fenced: no wake-up is missed.
            self.stop_wake
                .wait_unless(Some(until - now), || self.is_stopped())
                .await;
        }
    }

    /// Sleeps for `delay` unless a forced stop comes first (`false`).
    pub(crate) fn sleep(&self, delay: Duration) -> bool {
        match self.stop_rx.recv_timeout(delay) {
            Err(RecvTimeoutError::Timeout) => true,
            Ok(()) | Err(RecvTimeoutError::Disconnected) => false,
        }
    }
}
