//! A topic's dispatcher (`#[topic(dispatcher, queue = N)]`): the bounded queue publishers add
//! to and return, and the one thread that hands each queued message to every subscription
//! and observer, in queue order.
//!
//! # Order
//!
//! A publish numbers its message and adds it to the queue as one step under the queue's lock
//! (`sender`), which plays the order lock's part for the topic's publishers: the queue holds
//! the messages in seq order, and the dispatcher, its only reader, hands them out in that
//! order under the topic's order lock, exactly as a publisher of a topic without a
//! dispatcher does. The hand-out waits at a full `Block` mailbox as a publisher would; its
//! publishers wait only when the queue is full.
//!
//! # Inline subscribers
//!
//! A dispatcher topic's inline subscribers (`delivery/inline.rs`) run in the publish, under
//! the queue's lock, after the message is numbered and before it is queued: in the topic's
//! one order, and their refusal leaves no trace (the seq is not taken, nothing is queued).
//! Room in the queue is found first, without adding, so a message they accept is always
//! queued: only the holder of the queue's lock adds, so room found under it stays. A
//! publisher waits for that room on `room_lock`/`room_freed`, which the dispatcher signals
//! when it takes a message while one waits (`waiting`); a wake-up missed at that instant
//! costs at most a slice ([`RECHECK`]), after which the publisher looks again. What they
//! accepted is queued as the message they saw (`Queued::Seen`): a clone they keep stays the
//! message every subscription gets.
//!
//! # Close
//!
//! A message is `pending` from its numbering until the dispatcher has let go of the order
//! lock after handing it out; the drain look (`lifecycle.rs`) sees a dispatcher topic quiet
//! only with both locks free and nothing pending, so a close drains the queue, then the
//! mailboxes. After a forced stop the dispatcher hands nothing more out: each message still
//! queued becomes a dead letter of every subscription that would have had it (`close_out`),
//! as a mailbox's queued messages do.
//!
//! The dispatcher and a forced close both take from the queue; each takes under `taking`.
//! The dispatcher waits for a message without taking it (`Select::ready`), then takes it
//! under `taking` and, if the bus is stopped by then, makes it dead letters there, before
//! letting go. A forced close stops the bus first, then empties the queue under `taking`:
//! once it has, every message the dispatcher took after the stop is accounted for, so the
//! dead letters and stats read right after `close_timeout` returns are final. (A message the
//! dispatcher took before the stop is being handed out: the stop ends its waits at full
//! `Block` mailboxes, counted as dropped there, as for a publisher.)
//!
//! # Locks
//!
//! `sender` is row 4 of the bus's table (engine/mod.rs), beside the order lock and never held
//! with it: a publisher holds `sender` only, the dispatcher the order lock only. Under
//! `sender` a publisher runs the inline handlers (row 4a) and waits on `room_lock` (row 9, a
//! leaf); the dispatcher takes `room_lock` with nothing else held. The topic's wait-graph
//! record is the order lock's holder's (the dispatcher's); what the holder of `sender` waits
//! on (room, which points it at the dispatcher's, or what its inline handlers' publishes wait
//! on) is in the queue's own (`adding`). A handler waiting for `sender` or for room says so on
//! its own node for the whole wait (`deadlock::waiting_on`), so that a cycle of such waits
//! (handlers each waiting on a queue whose dispatcher waits at the next's mailbox) is found.
//! `taking` is row 4b: held by the dispatcher or a forced close while it takes one message
//! (or, after a stop, all that is left) and abandons it, with nothing else held; inside, the
//! subscriptions' filters (user code) and the leaves of row 9 (`last`, the dead-letter
//! store).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Weak};
use std::time::Instant;

use crossbeam_channel::{Receiver, Select, SendTimeoutError, Sender, TryRecvError, TrySendError};
use parking_lot::{Condvar, Mutex};

use crate::dead_letter::{DeadLetter, DeadLetterStore};
use crate::deadlock::{self, TopicWaits, WaitNode, RECHECK};
use crate::delivery::core::{Spill, SubscriptionCore, NOT_HANDLED};
use crate::delivery::inline::{self, Inline, Said};
use crate::delivery::observer::Inlet;
use crate::handler::Failure;
use crate::lifecycle::Lifecycle;
use crate::message::shared;
use crate::message::{Envelope, Message};
use crate::topic::Topic;
use crate::topics::state::{Refused, TopicState, Wait};
use crate::topics::subscribers::Subscribers;

/// What a dispatcher topic's queue holds.
pub(crate) enum Queued<T> {
    /// A message as its publisher made it, with its seq and topic: the hand-out makes its
    /// references at once.
    Made(u64, &'static str, Envelope<T>),
    /// A message the topic's inline subscribers have seen and accepted (and may keep a clone
    /// of): the hand-out shares it.
    Seen(Message<T>),
}

impl<T> Queued<T> {
    /// The message, for an abandoned one's dead letters.
    fn into_message(self) -> Message<T> {
        match self {
            Queued::Made(seq, topic, envelope) => {
                match shared::shared(seq, topic, envelope, 1)
                    .map(Message::new)
                    .next()
                {
                    Some(message) => message,
                    None => unreachable!("`shared` hands out at least one reference"),
                }
            }
            Queued::Seen(message) => message,
        }
    }

    /// The payload of a message the queue refused, for its publisher.
    fn into_payload(self) -> T {
        match self {
            Queued::Made(_, _, envelope) => envelope.into_payload(),
            Queued::Seen(_) => {
                unreachable!("an accepted message is queued where room was found for it")
            }
        }
    }
}

/// A dispatcher topic's queue.
pub(crate) struct Queue<T> {
    /// Held while one message is numbered, seen by the inline subscribers and added; `None`
    /// once the bus has closed.
    sender: Mutex<Option<Sender<Queued<T>>>>,
    /// What the holder of `sender` waits on: the dispatcher, while it waits for room (this
    /// points at the topic's record, `TopicWaits::following`), or what its inline handlers'
    /// publishes wait on (`deadlock::running_inline`). The topic's own record is the
    /// dispatcher's, which holds the order lock. A publisher waiting for `sender` follows
    /// this one; one waiting for room, the topic's.
    adding: Arc<TopicWaits>,
    /// The dispatcher's end; a forced close takes what is left from it too.
    receiver: Receiver<Queued<T>>,
    /// Held by whoever takes from `receiver` (the dispatcher, or a forced close) until what
    /// it took after a stop is abandoned: see the module docs.
    taking: Mutex<()>,
    capacity: usize,
    /// Numbered and not yet handed out (see the module docs).
    pending: AtomicUsize,
    /// Handed out (or abandoned), counted after the hand-out: `TopicStats::handed_out`.
    handed_out: AtomicU64,
    /// Whether the dispatcher thread started: without it, publishers hand out themselves.
    running: AtomicBool,
    /// A publisher with inline subscribers waits here for room (see the module docs);
    /// `waiting` while it does.
    room_lock: Mutex<()>,
    room_freed: Condvar,
    waiting: AtomicBool,
    /// The subscriber and observer lists as they were when the bus cleared them: whom a
    /// forced close makes the queue's messages dead letters of.
    #[allow(clippy::type_complexity)]
    last: Mutex<Option<(Arc<Subscribers<T>>, Arc<Vec<Arc<Inlet>>>)>>,
    /// `publish_async` calls wait here for room in the queue.
    #[cfg(feature = "tokio")]
    pub(super) room: crate::util::wake::Wake,
}

impl<T> Queue<T> {
    pub(crate) fn new(capacity: usize) -> Self {
        let (sender, receiver) = crossbeam_channel::bounded(capacity);
        Queue {
            sender: Mutex::new(Some(sender)),
            adding: Arc::default(),
            receiver,
            taking: Mutex::new(()),
            capacity,
            pending: AtomicUsize::new(0),
            handed_out: AtomicU64::new(0),
            running: AtomicBool::new(false),
            room_lock: Mutex::new(()),
            room_freed: Condvar::new(),
            waiting: AtomicBool::new(false),
            last: Mutex::new(None),
            #[cfg(feature = "tokio")]
            room: crate::util::wake::Wake::default(),
        }
    }

    /// Whether publishes go through the queue: its dispatcher runs.
    #[inline]
    pub(crate) fn is_running(&self) -> bool {
        self.running.load(SeqCst)
    }

    /// Whether a task of `waiter`, waiting for room in the queue or for its lock (it cannot
    /// tell which), waits on itself: through the dispatcher (`topic`, the topic's record) or
    /// through the holder of the queue's lock (`adding`).
    #[cfg(feature = "tokio")]
    pub(crate) fn leads_back(&self, waiter: &deadlock::WaitNode, topic: &Arc<TopicWaits>) -> bool {
        deadlock::turn_leads_back(waiter, topic) || deadlock::turn_leads_back(waiter, &self.adding)
    }

    /// Messages queued now, and the most the queue holds.
    pub(crate) fn depth(&self) -> (usize, usize) {
        (self.receiver.len(), self.capacity)
    }

    /// Messages the dispatcher has finished with: handed out, or abandoned after a forced
    /// close. Counted after the hand-out, so it never reads high.
    pub(crate) fn handed_out(&self) -> u64 {
        self.handed_out.load(SeqCst)
    }

    /// Whether nothing is being added or handed out, and nothing waits in the queue: with the
    /// order lock free too, the topic is quiet (see the module docs).
    pub(crate) fn is_quiet(&self) -> bool {
        // Lock order: row 4 (`sender`), only tried; see engine/mod.rs.
        let Some(_adding) = self.sender.try_lock() else {
            return false;
        };
        self.pending.load(SeqCst) == 0
    }

    /// A message taken from the queue is handed out or abandoned: counted.
    fn finished(&self) {
        self.handed_out.fetch_add(1, SeqCst);
        self.pending.fetch_sub(1, SeqCst);
    }

    /// The dispatcher took a message: wakes a publisher waiting for room, if one waits.
    fn freed(&self) {
        #[cfg(feature = "tokio")]
        self.room.notify();
        if self.waiting.load(SeqCst) {
            // Lock order: row 9 (`room_lock`), a leaf, nothing else held; see engine/mod.rs.
            let _room = self.room_lock.lock();
            self.room_freed.notify_all();
        }
    }

    /// Waits until `sender`'s queue has room or `until` comes, whichever is first; called
    /// under `sender`, so no one else adds meanwhile.
    fn wait_for_room(&self, sender: &Sender<Queued<T>>, until: Instant) {
        // Lock order: row 9 (`room_lock`), a leaf, under row 4 (`sender`); see engine/mod.rs.
        let mut room = self.room_lock.lock();
        self.waiting.store(true, SeqCst);
        // Looked at after `waiting` is set: a message taken after this look wakes it.
        if sender.is_full() {
            let _ = self.room_freed.wait_until(&mut room, until);
        }
        self.waiting.store(false, SeqCst);
    }

    /// Whether a publish waiting for room may try again: the queue has room and no other
    /// publisher holds it.
    #[cfg(feature = "tokio")]
    pub(crate) fn may_have_room(&self) -> bool {
        !self.receiver.is_full() && !self.sender.is_locked()
    }

    /// A closed bus adds nothing more; the dispatcher ends once it has emptied the queue.
    /// `subscribers` and `observers`: the lists the bus is clearing, kept for a forced
    /// close's dead letters.
    pub(crate) fn close(&self, subscribers: Arc<Subscribers<T>>, observers: Arc<Vec<Arc<Inlet>>>) {
        // Lock order: row 9 (`last`), a leaf; see engine/mod.rs.
        *self.last.lock() = Some((subscribers, observers));
        // Lock order: row 4 (`sender`), nothing else held; see engine/mod.rs.
        self.sender.lock().take();
    }
}

/// Starts the topic's dispatcher thread, if the topic has a queue. Should the thread not
/// start, the topic hands out as one without a dispatcher does, on the publisher's thread:
/// the same order, only without the queue.
pub(crate) fn start<T: Topic>(
    topic: &Arc<TopicState<T>>,
    lifecycle: &Arc<Lifecycle>,
    letters: &Arc<DeadLetterStore>,
) {
    let Some(queue) = &topic.queue else { return };
    let weak = Arc::downgrade(topic);
    let receiver = queue.receiver.clone();
    let (lifecycle, letters) = (Arc::clone(lifecycle), Arc::clone(letters));
    let started = std::thread::Builder::new()
        .name(format!("eventbus-dispatch-{}", T::name()))
        .spawn(move || run(&weak, &receiver, &lifecycle, &letters));
    match started {
        Ok(_) => queue.running.store(true, SeqCst),
        Err(error) => crate::trace::dispatcher_not_started(T::name(), &error),
    }
}

/// The dispatcher's loop: until the queue is closed and empty, or the topic gone.
fn run<T: Topic>(
    topic: &Weak<TopicState<T>>,
    receiver: &Receiver<Queued<T>>,
    lifecycle: &Lifecycle,
    letters: &DeadLetterStore,
) {
    // What a stopped bus's abandoned messages push out of the dead-letter store; reused.
    let mut spill = Vec::new();
    let mut ready = Select::new();
    ready.recv(receiver);
    loop {
        // A message, or the queue closed and empty; taken below, under `taking`. (It may
        // also return for nothing, or a forced close may take the message first: then it
        // looks again.)
        let _ = ready.ready();
        let Some(topic) = topic.upgrade() else { return };
        let Some(queue) = &topic.queue else { return };
        // Lock order: row 4b (`taking`), nothing else held; row 9 and user code (filters)
        // inside; see engine/mod.rs.
        let taking = queue.taking.lock();
        let queued = match receiver.try_recv() {
            Ok(queued) => queued,
            Err(TryRecvError::Empty) => continue,
            Err(TryRecvError::Disconnected) => return,
        };
        queue.freed();
        // Stopped: abandoned under `taking`, so a forced close, which stops the bus before it
        // empties the queue, returns only after this. Else handed out with `taking` let go.
        let stopped = lifecycle.is_stopped();
        let taking = if stopped {
            Some(taking)
        } else {
            drop(taking);
            None
        };
        // A filter, a key or a message's `Drop` is user code: its panic is the handler's to
        // see (the mailboxes count what they could not take), never the end of the topic.
        let _ = catch_unwind(AssertUnwindSafe(|| {
            if stopped {
                topic.abandon(queued, letters, &mut spill);
                spill.clear();
            } else {
                topic.dispatch(queued, lifecycle);
            }
        }));
        queue.finished();
        drop(taking);
        drop(topic);
        lifecycle.poke();
    }
}

impl<T: Topic> TopicState<T> {
    /// The topic's queue, if it has one and its dispatcher runs.
    pub(super) fn running_queue(&self) -> Option<&Queue<T>> {
        self.queue.as_ref().filter(|queue| queue.is_running())
    }

    /// Numbers `payload` and adds it to the topic's queue, waiting for room as `wait`
    /// allows; its seq. `publisher` is the subscription whose handler publishes, if any: its
    /// waits are refused where they would lead back to it (the dispatcher waiting on its
    /// mailbox).
    pub(super) fn enqueue(
        &self,
        queue: &Queue<T>,
        payload: T,
        wait: Wait,
        lifecycle: &Lifecycle,
        publisher: Option<&Arc<SubscriptionCore>>,
    ) -> Result<u64, (T, Refused)> {
        // An inline handler of this topic (or one up its cascade) publishing: the queue's
        // lock is its own thread's.
        if inline::running(self.order_address()) {
            return Err((payload, Refused::WouldDeadlock));
        }
        let node = publisher.map(|publisher| &*publisher.node);
        // The queue's turn: another publisher holds it while it waits for room.
        // Lock order: row 4 (`sender`), nothing else held; channel locks inside; see engine/mod.rs.
        // A publisher outside the bus cannot be part of a cycle: it may wait in longer slices.
        let long = publisher.is_none();
        let mut nested = None;
        let mut on_lock = None;
        let adding = loop {
            let adding = match slice(wait, long) {
                None => queue.sender.try_lock(),
                Some(until) => queue.sender.try_lock_until(until),
            };
            if let Some(adding) = adding {
                break adding;
            }
            // Inside inline handlers: their topics' holder waits for this lock's too.
            nested.get_or_insert_with(|| deadlock::nested_wait(&queue.adding));
            // On this handler's node for the whole wait, not one look: another handler's walk
            // that reaches it goes on through the queue's holder.
            let on_lock = on_lock.get_or_insert_with(|| deadlock::waiting_on(node, &queue.adding));
            if let Some(refused) = stop_waiting(wait, lifecycle, || on_lock.leads_back()) {
                return Err((payload, refused));
            }
        };
        drop(on_lock);
        drop(nested);
        // Decided under the queue's lock, where the drain look looks (see `lifecycle.rs`).
        if !lifecycle.accepts(publisher.is_some()) {
            return Err((payload, Refused::Closed));
        }
        let Some(sender) = adding.as_ref() else {
            return Err((payload, Refused::Closed));
        };
        let inline = self.inline.load();
        if !inline.is_empty() {
            return self.enqueue_seen(queue, sender, &inline, payload, wait, lifecycle, node);
        }
        let seq = self.numbering.next();
        let mut envelope = Queued::Made(seq, self.name, Envelope::new(payload));
        // Counted before it is in the queue: the dispatcher takes it off after its hand-out.
        queue.pending.fetch_add(1, SeqCst);
        let mut following = None;
        let mut on_room = None;
        let sent = loop {
            envelope = match slice(wait, false) {
                None => match sender.try_send(envelope) {
                    Ok(()) => break Ok(()),
                    Err(TrySendError::Full(back) | TrySendError::Disconnected(back)) => {
                        break Err((back, Refused::Full))
                    }
                },
                Some(until) => match sender.send_deadline(envelope, until) {
                    Ok(()) => break Ok(()),
                    Err(SendTimeoutError::Timeout(back) | SendTimeoutError::Disconnected(back)) => {
                        back
                    }
                },
            };
            // The queue's record points at the dispatcher's while its holder waits for room
            // (and, inside inline handlers, their topics' too).
            following.get_or_insert_with(|| queue.adding.following(&self.waits));
            // On this handler's node for the whole wait: another's walk that reaches it goes
            // on to the dispatcher.
            let on_room = on_room.get_or_insert_with(|| deadlock::waiting_on(node, &self.waits));
            if let Some(refused) = stop_waiting(wait, lifecycle, || on_room.leads_back()) {
                break Err((envelope, refused));
            }
        };
        drop(on_room);
        drop(following);
        match sent {
            Ok(()) => {
                let taken = self.numbering.take();
                debug_assert_eq!(taken, seq, "numbered under the queue's lock only");
                Ok(seq)
            }
            Err((envelope, refused)) => {
                queue.pending.fetch_sub(1, SeqCst);
                Err((envelope.into_payload(), refused))
            }
        }
    }

    /// [`enqueue`](Self::enqueue) for a topic with inline subscribers, under the queue's lock
    /// (`sender`): room first, then the number, the inline handlers, and the message queued
    /// as they saw it; a refusal hands the payload back, its seq not taken.
    #[allow(clippy::too_many_arguments)]
    fn enqueue_seen(
        &self,
        queue: &Queue<T>,
        sender: &Sender<Queued<T>>,
        inline: &[Arc<Inline<T>>],
        payload: T,
        wait: Wait,
        lifecycle: &Lifecycle,
        node: Option<&WaitNode>,
    ) -> Result<u64, (T, Refused)> {
        // Room that stays: only the holder of `sender` adds (see the module docs). The room
        // comes from the dispatcher, whose record the queue's points at while this waits
        // (and, inside inline handlers, their topics' too). This publisher's own record
        // follows the dispatcher's too, until the room is found: not while the inline handlers
        // run, whose publishes record their own waits there.
        let mut following = None;
        let mut on_room = None;
        while sender.is_full() {
            if let Some(until) = slice(wait, false) {
                // Not for a try (`Wait::Never`), which does not wait.
                following.get_or_insert_with(|| queue.adding.following(&self.waits));
                queue.wait_for_room(sender, until);
                if !sender.is_full() {
                    break;
                }
            }
            let on_room = on_room.get_or_insert_with(|| deadlock::waiting_on(node, &self.waits));
            if let Some(refused) = stop_waiting(wait, lifecycle, || on_room.leads_back()) {
                return Err((payload, refused));
            }
        }
        drop(on_room);
        drop(following);
        let seq = self.numbering.next();
        let Some(lent) = shared::shared(seq, self.name, Envelope::new(payload), 1)
            .map(Message::new)
            .next()
        else {
            unreachable!("`shared` hands out at least one reference")
        };
        let under = inline::Under {
            order: self.order_address(),
            waits: &queue.adding,
        };
        if let Said::Rejected(rejection) = inline::run(inline, &lent, under) {
            return match lent.try_into_payload() {
                Ok(payload) => Err((payload, Refused::Rejected(rejection))),
                Err(kept) => {
                    // Its seq is used: a message with it is out there.
                    let _ = self.numbering.take();
                    inline::kept(&rejection, kept)
                }
            };
        }
        // Counted before it is in the queue: the dispatcher takes it off after its hand-out.
        queue.pending.fetch_add(1, SeqCst);
        if sender.try_send(Queued::Seen(lent)).is_err() {
            unreachable!(
                "room was found under the queue's lock, where only its holder adds, and the \
                 queue keeps its receiver"
            );
        }
        let taken = self.numbering.take();
        debug_assert_eq!(taken, seq, "numbered under the queue's lock only");
        Ok(seq)
    }

    /// Hands a queued message to every subscription and observer, waiting at full `Block`
    /// mailboxes as a publisher does; the dispatcher's step.
    fn dispatch(&self, queued: Queued<T>, lifecycle: &Lifecycle) {
        // Lock order: row 4 (the order lock), nothing else held; rows 5, 6, 8 and channel
        // locks inside; see engine/mod.rs.
        let mut order = self.order.lock();
        let order = self.current(&mut order);
        let (subscribers, observers) = (&order.subscribers, &order.observers);
        if subscribers.is_empty() && observers.is_empty() {
            self.unheard();
            return;
        }
        let count = subscribers.len() + usize::from(!observers.is_empty());
        let stop = lifecycle.stop_signal();
        let entered = std::iter::empty();
        match queued {
            Queued::Made(seq, topic, envelope) => {
                let references = order
                    .pool
                    .shared(seq, topic, envelope, count)
                    .map(Message::new);
                self.deliver(subscribers, observers, references, entered, None, stop);
            }
            Queued::Seen(message) => {
                let references = std::iter::repeat(message).take(count);
                self.deliver(subscribers, observers, references, entered, None, stop);
            }
        }
    }

    /// A message the dispatcher will never hand out (the bus was stopped): a dead letter
    /// of each subscription that would have had it, counted as closed out, and dropped for
    /// each observer, counted.
    pub(super) fn abandon(&self, queued: Queued<T>, letters: &DeadLetterStore, spill: &mut Spill) {
        let kept = self
            .queue
            .as_ref()
            .and_then(|queue| queue.last.lock().clone());
        let (subscribers, observers) =
            kept.unwrap_or_else(|| (self.subscribers.load_full(), self.observers.load_full()));
        let message = queued.into_message();
        for outbox in subscribers.iter() {
            let wants = catch_unwind(AssertUnwindSafe(|| outbox.wants(message.payload())));
            if matches!(wants, Ok(false)) {
                continue;
            }
            let core = &outbox.core;
            let failure = Failure::text(NOT_HANDLED);
            let name = Arc::clone(&core.name);
            let letter = DeadLetter::new(message.clone(), core.id, name, failure, 0);
            spill.extend(letters.push_keeping(letter));
            // Received and closed out at once: its stats add up as a mailbox's do.
            core.counters.received.fetch_add(1, SeqCst);
            core.counters.closed_out.fetch_add(1, SeqCst);
        }
        for inlet in observers.iter() {
            inlet.left_out(&message, NOT_HANDLED);
        }
    }

    /// After a forced stop: each message still queued, abandoned (see [`abandon`]), under
    /// `taking`: the dispatcher may have taken some since the stop, and has abandoned those
    /// itself by the time this has the lock.
    pub(super) fn close_out_queue(&self, letters: &DeadLetterStore, spill: &mut Spill) {
        let Some(queue) = &self.queue else { return };
        // Lock order: row 4b (`taking`), nothing else held; row 9 and user code (filters)
        // inside; see engine/mod.rs. Once it is ours, the dispatcher holds no message it
        // took after the stop (see the module docs).
        let _taking = queue.taking.lock();
        while let Ok(queued) = queue.receiver.try_recv() {
            self.abandon(queued, letters, spill);
            queue.finished();
        }
    }
}

/// The end of a publisher's next slice of waiting (`None`: no wait at all). A slice is short
/// so that a waiting publisher looks again at the close and at a cycle; `long` for one that
/// cannot be part of a cycle.
fn slice(wait: Wait, long: bool) -> Option<Instant> {
    match wait {
        Wait::Never => None,
        Wait::Until(deadline) => Some(deadline.min(Instant::now() + RECHECK)),
        Wait::Forever if long => Some(Instant::now() + RECHECK * 20),
        Wait::Forever => Some(Instant::now() + RECHECK),
    }
}

/// Why a publisher that found no room in its last slice stops waiting, if it does.
fn stop_waiting(
    wait: Wait,
    lifecycle: &Lifecycle,
    leads_back: impl Fn() -> bool,
) -> Option<Refused> {
    match wait {
        Wait::Never => Some(Refused::Full),
        Wait::Until(deadline) if Instant::now() >= deadline => Some(Refused::Timeout),
        _ if lifecycle.is_stopped() => Some(Refused::Closed),
        _ if leads_back() => Some(Refused::WouldDeadlock),
        _ => None,
    }
}
