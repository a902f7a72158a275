//! Finding waits that could never end, so that a handler's publish is refused
//! ([`PublishError::WouldDeadlock`](crate::PublishError::WouldDeadlock)) and a handler's
//! unsubscribe of another subscription stops waiting, instead of freezing the bus.
//!
//! # The wait graph
//!
//! Each subscription is a node ([`WaitNode`]). A worker can wait in three ways on behalf of
//! its handler: for a topic's order lock (held by another publisher, which may itself be
//! waiting for room), for room in full `Block` mailboxes (which only their own workers can
//! make), and, in `unsubscribe`, for another subscription's worker to finish. Each wait is
//! recorded on the waiting node before it starts and cleared when it ends; a topic records the
//! node whose mailbox its order lock's holder is blocked on ([`TopicWaits`], recorded by every
//! publisher, handler or not, only while it is blocked). An observer's turn has its own, and
//! while a publisher holds the turn across its other waits (an all-or-nothing or a handler's
//! publish takes its observers' turns first) the turn's points at its topic's. A thread
//! running a topic's inline handlers holds its order lock: while a publish of theirs waits,
//! the topic's record says its holder waits on the same ([`running_inline`]). A wait can
//! never end when, following these records, it leads back to the waiting node: its own full
//! mailbox, a cycle A → B → A, a cycle through a publisher that holds a topic's lock or an
//! observer's turn, or an unsubscribe of a subscription whose worker waits for the
//! unsubscriber.
//!
//! # Who finds a cycle, and when
//!
//! A handler about to wait records what it will wait on, then follows the records from there
//! (each under its own lock, one at a time, never nested). Of two handlers closing a cycle at
//! once, the one whose walk takes the other's lock second sees the other's record, so at
//! least one finds it before it has numbered or handed out anything. A handler waiting for an
//! order lock, a dispatcher queue (its lock or room) or a worker to finish keeps its record
//! for the whole wait and follows the records again every [`RECHECK`], so a cycle that forms
//! through a lock holder (say a publisher outside the bus, blocked on a mailbox) or through
//! another such waiter is found within one interval. Only handlers are refused: a cycle
//! always passes through one (a thread outside the bus holds no mailbox).
//!
//! One of the waiters that find the same cycle at once is refused, not all: each makes sure
//! under one lock ([`REFUSING`]), walking again and, if the cycle is still there, clearing its
//! own record before it lets go, so the next finds the cycle broken at that node and waits on
//! while the refused one moves. (A walk that reaches the refused one's wait through a topic's
//! record instead, one its thread keeps while it runs that topic's inline handlers, still
//! finds it until the wait unwinds.)
//!
//! This module is a leaf: it knows nodes by id, not subscriptions.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

/// How often a handler waiting for an order lock or a worker looks for a cycle again.
pub(crate) const RECHECK: Duration = Duration::from_millis(5);

/// Waiting would never end.
#[derive(Debug)]
pub(crate) struct WouldDeadlock;

/// One subscription in the wait graph.
#[derive(Debug)]
pub(crate) struct WaitNode {
    pub(crate) id: u64,
    /// What this subscription's worker waits on, while its handler publishes or unsubscribes:
    /// set and cleared by that worker, read by others walking the graph.
    waits: Mutex<Waits>,
}

#[derive(Debug, Default)]
struct Waits {
    /// Nodes whose worker must move first: full mailboxes, or a worker to finish.
    on: Vec<Arc<WaitNode>>,
    /// A topic whose order lock this worker waits for.
    topic: Option<Arc<TopicWaits>>,
}

/// What the holder of one topic's order lock (or of an observer's turn) waits on.
#[derive(Debug, Default)]
pub(crate) struct TopicWaits {
    holder: Mutex<Holder>,
}

#[derive(Debug, Default)]
struct Holder {
    /// What the holder is blocked on: full mailboxes, a log's subscription that is behind,
    /// or an observer whose turn it waits for (then `turn` is set).
    on: Vec<Arc<WaitNode>>,
    /// While the holder waits for an observer's turn: that turn's waits. The walk follows
    /// them, not the observer's node: the turn comes when its holder is done, whether or not
    /// the observer's worker moves. Or, while one of its inline handlers' publishes waits for
    /// another topic's order lock (or a turn, or a dispatcher queue's lock or room), that
    /// record ([`running_inline`]). Or, in a dispatcher queue's record while its lock's holder
    /// waits for room, the dispatcher's ([`TopicWaits::following`]).
    turn: Option<Arc<TopicWaits>>,
    /// For an observer's turn held across other waits: the waits of the topic whose publisher
    /// holds it, so that a walk through the turn reaches whatever that publisher waits on.
    under: Option<Arc<TopicWaits>>,
}

impl WaitNode {
    pub(crate) fn new(id: u64) -> Arc<Self> {
        Arc::new(WaitNode {
            id,
            waits: Mutex::new(Waits::default()),
        })
    }
}

/// How long a wait for an order lock may last.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Patience {
    /// Until the lock is free.
    Forever,
    /// Until the lock is free or the deadline passes.
    Until(Instant),
    /// While the lock's holder is not blocked on a mailbox: such a wait has no bound.
    WhileMoving,
}

/// Why a wait for an order lock ended without it.
#[derive(Debug)]
pub(crate) enum NoLock {
    /// Waiting would never end.
    WouldDeadlock,
    /// The deadline passed, or (with [`Patience::WhileMoving`]) the holder is blocked.
    GaveUp,
}

/// Takes a topic's order lock. A handler (`publisher`) that has to wait records so, and is
/// refused if the wait leads back to it.
#[inline]
pub(crate) fn lock_order<'a, S>(
    lock: &'a Mutex<S>,
    topic: &Arc<TopicWaits>,
    publisher: Option<&Arc<WaitNode>>,
    patience: Patience,
) -> Result<MutexGuard<'a, S>, NoLock> {
    // Lock order: row 4 or 5 (an order lock or an observer's turn), tried; see engine/mod.rs.
    match lock.try_lock() {
        Some(guard) => Ok(guard),
        None => wait_for_order(lock, topic, publisher, patience),
    }
}

/// The wait of [`lock_order`], out of line: the publish path rarely waits.
#[cold]
fn wait_for_order<'a, S>(
    lock: &'a Mutex<S>,
    topic: &Arc<TopicWaits>,
    publisher: Option<&Arc<WaitNode>>,
    patience: Patience,
) -> Result<MutexGuard<'a, S>, NoLock> {
    let _clear = publisher.map(|publisher| {
        // Lock order: row 8 (`waits`), here and when cleared, never nested; see engine/mod.rs.
        publisher.waits.lock().topic = Some(Arc::clone(topic));
        Cleared(move || publisher.waits.lock().topic = None)
    });
    // Inside inline handlers: the topics whose handlers they are wait for this lock too.
    let _outer = Outer::waiting_for(topic);
    loop {
        if publisher.is_some_and(|publisher| leads_back(publisher)) {
            return Err(NoLock::WouldDeadlock);
        }
        let slice = match patience {
            // Lock order: row 4 or 5, no row 8 held; see engine/mod.rs.
            Patience::Forever if publisher.is_none() => return Ok(lock.lock()),
            Patience::Forever => Instant::now() + RECHECK,
            Patience::Until(deadline) => deadline.min(Instant::now() + RECHECK),
            Patience::WhileMoving => {
                if topic.holder_blocked() {
                    return Err(NoLock::GaveUp);
                }
                // Short: the holder may block on a mailbox at any moment.
                Instant::now() + Duration::from_micros(50)
            }
        };
        // Lock order: row 4 or 5, no row 8 held; see engine/mod.rs.
        if let Some(guard) = lock.try_lock_until(slice) {
            return Ok(guard);
        }
        if let Patience::Until(deadline) = patience {
            if Instant::now() >= deadline {
                return Err(NoLock::GaveUp);
            }
        }
    }
}

/// Whether `waiter` waiting for a topic's turn (the order lock's holder blocked on a
/// mailbox) leads back to it. For a task, which waits for the turn without taking the lock
/// and asks again each time it wakes: its record lasts for the look only.
#[cfg(any(feature = "tokio", test))]
pub(crate) fn turn_leads_back(waiter: &WaitNode, topic: &Arc<TopicWaits>) -> bool {
    // A `waiting_on` whose guard drops as soon as it has looked.
    waiting_on(Some(waiter), topic).leads_back()
}

/// A wait of a handler's worker (`waiter`, `None` for a publisher outside the bus) on
/// whatever the holder of `topic`'s record waits on: a dispatcher topic's queue, for its lock
/// (the queue's record) or for room (the dispatcher's, the topic's). Recorded at its first
/// look ([`leads_back`](WaitingOn::leads_back)), so that a wait that never looks (a try, or
/// one that ends within its first slice) writes nothing, and kept until the guard drops, as a
/// wait for an order lock's is ([`wait_for_order`]): another handler's walk that reaches
/// `waiter` goes on from there whenever it looks, not only while `waiter`'s own walk runs.
pub(crate) fn waiting_on<'a>(
    waiter: Option<&'a WaitNode>,
    topic: &'a Arc<TopicWaits>,
) -> WaitingOn<'a> {
    WaitingOn {
        waiter,
        topic,
        recorded: Cell::new(false),
    }
}

/// The record of [`waiting_on`], cleared when dropped (also on unwind). Dropped by the
/// waiter's thread before it runs anything that could wait again (inline handlers), whose
/// waits write the same record.
pub(crate) struct WaitingOn<'a> {
    waiter: Option<&'a WaitNode>,
    topic: &'a Arc<TopicWaits>,
    recorded: Cell<bool>,
}

impl WaitingOn<'_> {
    /// Whether the wait now leads back to its waiter; records it first, at the first look.
    pub(crate) fn leads_back(&self) -> bool {
        let Some(waiter) = self.waiter else {
            return false;
        };
        if !self.recorded.replace(true) {
            // Lock order: row 8 (`waits`), let go before the walk; see engine/mod.rs.
            waiter.waits.lock().topic = Some(Arc::clone(self.topic));
        }
        leads_back(waiter)
    }
}

impl Drop for WaitingOn<'_> {
    fn drop(&mut self) {
        if let (Some(waiter), true) = (self.waiter, self.recorded.get()) {
            // Lock order: row 8 (`waits`), never nested; see engine/mod.rs.
            waiter.waits.lock().topic = None;
        }
    }
}

/// Records that `waiter`'s worker is about to wait on the workers of `on` (full mailboxes,
/// or one to finish), and refuses if that leads back to it. The record lasts as long as the
/// guard.
pub(crate) fn record(
    waiter: &WaitNode,
    on: Vec<Arc<WaitNode>>,
) -> Result<Recorded<'_>, WouldDeadlock> {
    if on.is_empty() {
        return Ok(Recorded(None));
    }
    // Lock order: row 8 (`waits`), let go before the walk; see engine/mod.rs.
    waiter.waits.lock().on = on;
    let recorded = Recorded(Some(waiter));
    if leads_back(waiter) {
        return Err(WouldDeadlock);
    }
    Ok(recorded)
}

/// Clears what [`record`] recorded.
#[derive(Debug)]
pub(crate) struct Recorded<'a>(Option<&'a WaitNode>);

impl Recorded<'_> {
    /// Whether the recorded wait now leads back to its waiter (for waits that recheck).
    pub(crate) fn leads_back(&self) -> bool {
        self.0.is_some_and(leads_back)
    }
}

impl Drop for Recorded<'_> {
    fn drop(&mut self) {
        if let Some(waiter) = self.0 {
            // Lock order: row 8 (`waits`), never nested; see engine/mod.rs.
            waiter.waits.lock().on.clear();
        }
    }
}

impl TopicWaits {
    /// Whether the order lock's holder is blocked on a mailbox other than `mailbox`. It
    /// clears its record under this same lock when it wakes, so whatever was done before this
    /// call is seen by the rest of its hand-out (`mailbox.rs` relies on it).
    ///
    /// An observer's turn held across a publish's other waits ([`held_under`](Self::held_under))
    /// records those waits in its topic's record, not here: then this asks that record. The
    /// publisher clears it there when it wakes, so the same holds. And if it has let go of the
    /// turn since this look (`under` is cleared before the turn is let go, under this lock),
    /// whoever takes the turn next does so after this call, and sees what was done before it.
    pub(crate) fn blocked_elsewhere(&self, mailbox: u64) -> bool {
        // Lock order: row 8 (`holder`), let go before the topic's is taken, never nested; see
        // engine/mod.rs.
        let under = {
            let holder = self.holder.lock();
            if !holder.on.is_empty() {
                return holder.on.iter().all(|node| node.id != mailbox);
            }
            holder.under.clone()
        };
        // One level: only a turn's record has an `under`.
        under.is_some_and(|topic| topic.blocked_elsewhere(mailbox))
    }

    /// Whether the order lock's holder is blocked on a mailbox.
    pub(crate) fn holder_blocked(&self) -> bool {
        // Lock order: row 8 (`holder`), never nested; see engine/mod.rs.
        !self.holder.lock().on.is_empty()
    }

    /// Records that the order lock's holder waits for room in `mailbox`, until `f` returns.
    pub(crate) fn waiting_on<R>(&self, mailbox: &Arc<WaitNode>, f: impl FnOnce() -> R) -> R {
        self.blocked_on(mailbox, None, f)
    }

    /// Records that the order lock's holder waits for an observer's turn (`observer` its
    /// node, `turn` the turn's waits), until `f` returns. A walk follows the turn's holder;
    /// `holder_blocked` and `blocked_elsewhere` still count this holder as blocked on the
    /// observer, as on a mailbox.
    pub(crate) fn waiting_for_turn<R>(
        &self,
        observer: &Arc<WaitNode>,
        turn: &Arc<TopicWaits>,
        f: impl FnOnce() -> R,
    ) -> R {
        self.blocked_on(observer, Some(turn), f)
    }

    /// Records that the holder of this record waits for room that only the holder of
    /// `other`'s lock makes (a dispatcher topic's queue, which its dispatcher empties), until
    /// the guard drops: a walk follows `other`.
    pub(crate) fn following<'a>(&'a self, other: &Arc<TopicWaits>) -> Following<'a> {
        // Lock order: row 8 (`holder`), here and when cleared, never nested; see engine/mod.rs.
        self.holder.lock().turn = Some(Arc::clone(other));
        Following {
            record: self,
            _outer: Outer::waiting_for(other),
        }
    }

    /// The record of [`waiting_on`](Self::waiting_on) and
    /// [`waiting_for_turn`](Self::waiting_for_turn), cleared when `f` returns.
    fn blocked_on<R>(
        &self,
        node: &Arc<WaitNode>,
        turn: Option<&Arc<TopicWaits>>,
        f: impl FnOnce() -> R,
    ) -> R {
        // Lock order: row 8 (`holder`), here and when cleared, not across `f`; see engine/mod.rs.
        {
            let mut holder = self.holder.lock();
            holder.on = vec![Arc::clone(node)];
            holder.turn = turn.cloned();
        }
        let _clear = Cleared(|| {
            let mut holder = self.holder.lock();
            holder.on.clear();
            holder.turn = None;
        });
        // Inside inline handlers: the topics whose handlers they are wait on it too.
        let _outer = Outer::blocked_on(self, node, turn);
        f()
    }

    /// Records, in an observer's turn's waits, that the turn is held by the publisher holding
    /// the order lock of the topic whose waits are `topic`, which may wait elsewhere before it
    /// lets go: a handler waiting for the turn then follows that publisher's waits too. Until
    /// the guard drops, which its holder does before it lets go of the turn.
    ///
    /// The guard is this thread's (a turn is let go where it was taken), and so is the turn
    /// while it lives: see [`held_here`](Self::held_here).
    pub(crate) fn held_under(&self, topic: &Arc<TopicWaits>) -> HeldUnder<'_> {
        // Lock order: row 8 (`holder`), here and when cleared, never nested; see engine/mod.rs.
        self.holder.lock().under = Some(Arc::clone(topic));
        // `try_with`: a publish from a thread-local's destructor finds the list gone.
        let _ = HELD_HERE.try_with(|held| held.borrow_mut().push(self.address()));
        HeldUnder(self, PhantomData)
    }

    /// Whether this thread holds this turn across its publish's other waits: a publish of
    /// its own further in (from an inline handler) that needs the turn would wait for itself.
    pub(crate) fn held_here(&self) -> bool {
        HELD_HERE
            .try_with(|held| held.borrow().contains(&self.address()))
            .unwrap_or(false)
    }

    fn address(&self) -> usize {
        self as *const TopicWaits as usize
    }
}

thread_local! {
    /// The turns this thread holds across its publishes' waits ([`TopicWaits::held_under`]),
    /// by the address of their records.
    static HELD_HERE: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// Clears what [`TopicWaits::following`] recorded.
pub(crate) struct Following<'a> {
    record: &'a TopicWaits,
    /// Inside inline handlers: their topics' holder waits for the same.
    _outer: Option<Outer>,
}

impl Drop for Following<'_> {
    fn drop(&mut self) {
        // Lock order: row 8 (`holder`), never nested; see engine/mod.rs.
        self.record.holder.lock().turn = None;
    }
}

/// Clears what [`TopicWaits::held_under`] recorded. Not `Send`: dropped on the thread that
/// holds the turn.
pub(crate) struct HeldUnder<'a>(&'a TopicWaits, PhantomData<*const ()>);

impl Drop for HeldUnder<'_> {
    fn drop(&mut self) {
        let address = self.0.address();
        let _ = HELD_HERE.try_with(|held| {
            let mut held = held.borrow_mut();
            if let Some(at) = held.iter().rposition(|&turn| turn == address) {
                held.swap_remove(at);
            }
        });
        // Lock order: row 8 (`holder`), never nested; see engine/mod.rs.
        self.0.holder.lock().under = None;
    }
}

thread_local! {
    /// The records of the topics whose order lock this thread holds while it runs their
    /// inline handlers, outermost first ([`running_inline`]).
    static INLINE_UNDER: RefCell<Vec<Arc<TopicWaits>>> = const { RefCell::new(Vec::new()) };
}

/// Notes, until the guard drops, that this thread runs the inline handlers of the topic
/// whose record is `topic`, holding its order lock. While a publish of theirs waits (for
/// room, a turn or another topic's order lock), the topic's record says its holder waits on
/// the same (see [`Outer`]): a handler waiting for that topic's lock finds a cycle through
/// them, and a retired mailbox's worker and a `try_publish` see the holder blocked (it hands
/// out nothing before it wakes, and clears the record under its lock when it does).
pub(crate) fn running_inline(topic: &Arc<TopicWaits>) -> RunningInline {
    // `try_with`: a publish from a thread-local's destructor finds the stack gone.
    let _ = INLINE_UNDER.try_with(|under| under.borrow_mut().push(Arc::clone(topic)));
    RunningInline(PhantomData)
}

/// Clears what [`running_inline`] noted. Not `Send`: dropped on the thread that noted it.
pub(crate) struct RunningInline(PhantomData<*const ()>);

impl Drop for RunningInline {
    fn drop(&mut self) {
        let _ = INLINE_UNDER.try_with(|under| under.borrow_mut().pop());
    }
}

/// Records, until the guard drops, that this thread waits for the holder of the lock whose
/// record is `topic` (or for room only that holder makes), in the records of the topics
/// whose inline handlers it runs ([`running_inline`]): for waits not recorded through
/// [`TopicWaits`] (a dispatcher topic's queue). `None` outside inline handlers.
pub(crate) fn nested_wait(topic: &Arc<TopicWaits>) -> Option<Outer> {
    Outer::waiting_for(topic)
}

/// A wait of this thread recorded in the records of the topics whose inline handlers it
/// runs ([`running_inline`]) too, until dropped; those it set, it clears.
pub(crate) struct Outer(Vec<Arc<TopicWaits>>);

impl Outer {
    /// The holder of `inner` (this thread) is blocked on `node` (and waits for `turn`).
    fn blocked_on(
        inner: &TopicWaits,
        node: &Arc<WaitNode>,
        turn: Option<&Arc<TopicWaits>>,
    ) -> Option<Outer> {
        Outer::record(|outer, holder| {
            if std::ptr::eq(outer, inner) {
                return false;
            }
            holder.on = vec![Arc::clone(node)];
            holder.turn = turn.cloned();
            true
        })
    }

    /// This thread waits for the lock whose record is `topic`. Where an outer record already
    /// says what its holder waits on (this wait is part of a wait for a turn), it stays.
    fn waiting_for(topic: &Arc<TopicWaits>) -> Option<Outer> {
        Outer::record(|_, holder| {
            if !holder.on.is_empty() || holder.turn.is_some() {
                return false;
            }
            holder.turn = Some(Arc::clone(topic));
            true
        })
    }

    fn record(mut set: impl FnMut(&TopicWaits, &mut Holder) -> bool) -> Option<Outer> {
        let outer = INLINE_UNDER.try_with(|under| {
            let under = under.borrow();
            // Most waits: no inline handler running on this thread.
            if under.is_empty() {
                return Vec::new();
            }
            under
                .iter()
                // Lock order: row 8 (`holder`), one at a time, never nested; see
                // engine/mod.rs.
                .filter(|outer| set(outer, &mut outer.holder.lock()))
                .cloned()
                .collect()
        });
        let outer = outer.unwrap_or_default();
        (!outer.is_empty()).then_some(Outer(outer))
    }
}

impl Drop for Outer {
    fn drop(&mut self) {
        for outer in &self.0 {
            // Lock order: row 8 (`holder`), never nested; see engine/mod.rs.
            let mut holder = outer.holder.lock();
            holder.on.clear();
            holder.turn = None;
        }
    }
}

struct Cleared<F: FnMut()>(F);

impl<F: FnMut()> Drop for Cleared<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// Held by a waiter whose walk found a cycle while it walks again and, if it finds it still,
/// clears its own record: the others on the cycle, waiting here, then find it broken at its
/// node and wait on (it is refused, and moves).
static REFUSING: Mutex<()> = Mutex::new(());

/// Whether following the records from what `waiter` waits on leads back to it; if so, its
/// record is cleared (see [`REFUSING`]): the caller refuses the wait.
fn leads_back(waiter: &WaitNode) -> bool {
    if !walk(waiter) {
        return false;
    }
    // Lock order: row 7a (`REFUSING`), row 8 inside, one record at a time; see engine/mod.rs.
    let _refusing = REFUSING.lock();
    if !walk(waiter) {
        return false;
    }
    // Lock order: row 8 (`waits`), under 7a, never nested; see engine/mod.rs.
    let mut waits = waiter.waits.lock();
    waits.on.clear();
    waits.topic = None;
    true
}

/// Whether following the records from what `waiter` waits on leads back to it.
fn walk(waiter: &WaitNode) -> bool {
    let mut nodes: Vec<Arc<WaitNode>> = Vec::new();
    let mut topics: Vec<Arc<TopicWaits>> = Vec::new();
    let mut seen_nodes = HashSet::new();
    let mut seen_topics = HashSet::new();
    let follow = |waits: &Waits, nodes: &mut Vec<_>, topics: &mut Vec<_>| {
        nodes.extend(waits.on.iter().cloned());
        topics.extend(waits.topic.iter().cloned());
    };
    // Lock order: row 8, one record at a time, never nested; see engine/mod.rs.
    follow(&waiter.waits.lock(), &mut nodes, &mut topics);
    loop {
        if let Some(node) = nodes.pop() {
            if node.id == waiter.id {
                return true;
            }
            if seen_nodes.insert(node.id) {
                // Lock order: row 8 (`waits`), never nested; see engine/mod.rs.
                let waits = node.waits.lock();
                follow(&waits, &mut nodes, &mut topics);
            }
        } else if let Some(topic) = topics.pop() {
            if seen_topics.insert(Arc::as_ptr(&topic) as usize) {
                // Lock order: row 8 (`holder`), never nested; see engine/mod.rs.
                let holder = topic.holder.lock();
                match &holder.turn {
                    Some(turn) => topics.push(Arc::clone(turn)),
                    None => nodes.extend(holder.on.iter().cloned()),
                }
                topics.extend(holder.under.iter().cloned());
            }
        } else {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{turn_leads_back, TopicWaits, WaitNode};
    use std::sync::Arc;

    /// The shape of a wait through a dispatcher topic's queue: thread T runs topic X's inline
    /// handlers, and one of them waits for the queue's lock (`adding`); its holder waits for
    /// room, which only the dispatcher makes (the topic's record, D), and the dispatcher
    /// waits at S's mailbox. S waiting for X's lock waits on itself.
    #[test]
    fn a_wait_for_a_queues_lock_inside_inline_handlers_follows_its_holder_to_the_dispatcher() {
        use super::{nested_wait, running_inline};
        use std::sync::mpsc;

        let (x, adding, d) = (
            Arc::new(TopicWaits::default()),
            Arc::new(TopicWaits::default()),
            Arc::new(TopicWaits::default()),
        );
        let s = WaitNode::new(3);
        let (recorded, done) = (mpsc::channel(), mpsc::channel::<()>());
        let t = {
            let (x, adding) = (Arc::clone(&x), Arc::clone(&adding));
            std::thread::spawn(move || {
                let _running = running_inline(&x);
                let _waiting = nested_wait(&adding);
                recorded.0.send(()).unwrap();
                done.1.recv().unwrap();
            })
        };
        recorded.1.recv().unwrap();
        d.waiting_on(&s, || {
            assert!(
                !turn_leads_back(&s, &x),
                "the queue's holder waits on nothing"
            );
            let following = adding.following(&d);
            assert!(turn_leads_back(&s, &x), "through the queue's holder to D");
            drop(following);
            assert!(
                adding.holder.lock().turn.is_none(),
                "cleared when its wait ended"
            );
            assert!(!turn_leads_back(&s, &x), "and the walk stops there again");
        });
        done.0.send(()).unwrap();
        t.join().unwrap();
        assert!(
            x.holder.lock().turn.is_none(),
            "cleared when the wait ended"
        );
    }

    /// Two handlers each waiting on a dispatcher queue whose dispatcher waits at the other's
    /// mailbox: each record lasts for the whole wait, so either walk finds the cycle; the one
    /// refused clears its record, so the other's next walk finds it broken and waits on.
    #[test]
    fn of_two_waits_closing_a_cycle_one_is_refused_and_the_other_waits_on() {
        use super::waiting_on;

        let (d1, d2) = (
            Arc::new(TopicWaits::default()),
            Arc::new(TopicWaits::default()),
        );
        let (w1, w2) = (WaitNode::new(1), WaitNode::new(2));
        d1.waiting_on(&w2, || {
            d2.waiting_on(&w1, || {
                let one = waiting_on(Some(&w1), &d1);
                let two = waiting_on(Some(&w2), &d2);
                assert!(!one.leads_back(), "W2 has not recorded its wait yet");
                assert!(two.leads_back(), "W1's record is still there");
                assert!(w2.waits.lock().topic.is_none(), "refused: cleared");
                assert!(!one.leads_back(), "broken at W2");
                drop(two);
                assert!(w1.waits.lock().topic.is_some(), "W1 waits on");
                drop(one);
                assert!(
                    w1.waits.lock().topic.is_none(),
                    "cleared when its wait ended"
                );
            });
        });
    }

    /// An observer's turn held across a publish's waits is blocked where that publish is,
    /// as its topic's record says: what a retired observer's worker asks (`mailbox.rs`).
    #[test]
    fn a_turn_held_across_waits_is_blocked_where_its_topics_holder_is() {
        let (x, turn) = (
            Arc::new(TopicWaits::default()),
            Arc::new(TopicWaits::default()),
        );
        let (observer, other) = (WaitNode::new(1), WaitNode::new(7));
        assert!(!turn.blocked_elsewhere(1), "no one holds it");
        let held = turn.held_under(&x);
        assert!(!turn.blocked_elsewhere(1), "its holder is not blocked");
        x.waiting_on(&other, || {
            assert!(turn.blocked_elsewhere(1), "its holder waits on another");
            assert!(!turn.blocked_elsewhere(7), "that one is not elsewhere");
            turn.waiting_on(&observer, || {
                assert!(!turn.blocked_elsewhere(1), "its own record comes first");
            });
        });
        x.waiting_on(&observer, || {
            assert!(
                !turn.blocked_elsewhere(1),
                "its holder waits on the observer"
            );
        });
        drop(held);
        x.waiting_on(&other, || {
            assert!(
                !turn.blocked_elsewhere(1),
                "let go: X's holder is someone else's"
            );
        });
    }

    /// The shape of a wait for an observer's turn: a publisher of topic X holds observer O1's
    /// turn across its waits and waits for O2's turn, held by another publisher that waits on
    /// nothing. O2's worker, waiting for O1's turn, waits on nothing that waits on it: the
    /// turn comes once O2's holder is done. Refusing it would be wrong.
    #[test]
    fn a_wait_for_a_turn_follows_the_turns_holder_not_the_observer() {
        let (x, o1, o2) = (
            Arc::new(TopicWaits::default()),
            Arc::new(TopicWaits::default()),
            Arc::new(TopicWaits::default()),
        );
        let o2_worker = WaitNode::new(2);
        let _held = o1.held_under(&x);
        let o2_node = Arc::clone(&o2_worker);
        x.waiting_for_turn(&o2_node, &o2, || {
            assert!(
                !turn_leads_back(&o2_worker, &o1),
                "O2's holder waits on nothing"
            );
            // Once O2's holder waits for room in O2's mailbox, the cycle is real.
            o2.waiting_on(&o2_node, || {
                assert!(turn_leads_back(&o2_worker, &o1), "O2's holder waits on O2");
            });
            // Or it holds O2 across its own waits, under topic Y, blocked on O2's mailbox.
            let y = Arc::new(TopicWaits::default());
            let _also = o2.held_under(&y);
            y.waiting_on(&o2_node, || {
                assert!(turn_leads_back(&o2_worker, &o1), "through Y to O2");
            });
        });
        assert!(
            !turn_leads_back(&o2_worker, &o1),
            "X's holder waits for nothing"
        );
    }
}
