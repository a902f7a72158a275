//! Finding waits that could never end, so that a handler's publish is refused
//! ([`PublishError::WouldDeadlock`](crate::PublishError::WouldDeadlock)) instead of freezing
//! the bus.
//!
//! # The wait graph
//!
//! A handler's worker can wait in two ways while it publishes: for a topic's order lock (held
//! by another publisher, which may itself be waiting for room), and for room in full `Block`
//! mailboxes, which only their own workers can make. Each wait is recorded before it starts
//! and cleared when it ends: a handler's subscription records the full mailboxes it is about
//! to publish into and the topic whose lock it waits for (`SubscriptionCore::waits`); a topic
//! records the mailbox its order lock's holder is blocked on (`TopicWaits`, recorded by every
//! publisher, handler or not, only while it is blocked). A wait can never end when,
//! following these records, it leads back to the waiting subscription: its own full mailbox,
//! a cycle A → B → A, or a cycle through a publisher that holds a topic's lock.
//!
//! # Who finds a cycle, and when
//!
//! A handler about to publish into full `Block` mailboxes records them, then follows the
//! records from there (each under its own lock, one at a time). Of two handlers closing a
//! cycle at once, the one whose walk takes the other's lock second sees the other's record,
//! so at least one finds it before it has numbered or handed out anything. A handler waiting
//! for an order lock follows the records again every `RECHECK`, so a cycle that forms through
//! a lock holder (say a publisher outside the bus, blocked on a mailbox) is found within one
//! interval, again before anything is handed out. Only handlers are refused: a cycle always
//! passes through one (a thread outside the bus holds no mailbox).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};

use crate::mailbox::Outbox;
use crate::subscription::SubscriptionCore;

/// How often a handler waiting for a topic's order lock looks for a cycle again.
const RECHECK: Duration = Duration::from_millis(5);

/// Waiting would never end.
#[derive(Debug)]
pub(crate) struct WouldDeadlock;

/// What one subscription's worker waits on, while it publishes.
#[derive(Debug, Default)]
pub(crate) struct Waits {
    mailboxes: Vec<Arc<SubscriptionCore>>,
    topic: Option<Arc<TopicWaits>>,
}

/// What the holder of one topic's order lock waits on.
#[derive(Debug, Default)]
pub(crate) struct TopicWaits {
    holder: Mutex<Vec<Arc<SubscriptionCore>>>,
}

/// Takes a topic's order lock. A handler (`publisher`) that has to wait records so, and is
/// refused if the wait leads back to it.
pub(crate) fn lock_order<'a, S>(
    lock: &'a Mutex<S>,
    topic: &Arc<TopicWaits>,
    publisher: Option<&Arc<SubscriptionCore>>,
) -> Result<MutexGuard<'a, S>, WouldDeadlock> {
    if let Some(guard) = lock.try_lock() {
        return Ok(guard);
    }
    let Some(publisher) = publisher else {
        return Ok(lock.lock());
    };
    publisher.waits.lock().topic = Some(Arc::clone(topic));
    let _clear = Cleared(|| publisher.waits.lock().topic = None);
    loop {
        if leads_back(publisher) {
            return Err(WouldDeadlock);
        }
        if let Some(guard) = lock.try_lock_for(RECHECK) {
            return Ok(guard);
        }
    }
}

/// Records the full `Block` mailboxes a handler's publish is about to go into, and refuses
/// it if waiting there leads back to the handler. The record lasts as long as the guard.
pub(crate) fn check_room<'a, T>(
    publisher: &'a SubscriptionCore,
    subscribers: &[Arc<Outbox<T>>],
) -> Result<Recorded<'a>, WouldDeadlock> {
    let full: Vec<Arc<SubscriptionCore>> = subscribers
        .iter()
        .filter(|outbox| outbox.would_block())
        .map(|outbox| Arc::clone(&outbox.core))
        .collect();
    if full.is_empty() {
        return Ok(Recorded(None));
    }
    publisher.waits.lock().mailboxes = full;
    let recorded = Recorded(Some(publisher));
    if leads_back(publisher) {
        return Err(WouldDeadlock);
    }
    Ok(recorded)
}

/// Clears what `check_room` recorded.
#[derive(Debug)]
pub(crate) struct Recorded<'a>(Option<&'a SubscriptionCore>);

impl Drop for Recorded<'_> {
    fn drop(&mut self) {
        if let Some(publisher) = self.0 {
            publisher.waits.lock().mailboxes.clear();
        }
    }
}

impl TopicWaits {
    /// Whether the order lock's holder is blocked on a mailbox other than `mailbox`. It
    /// clears its record under this same lock when it wakes, so whatever was done before this
    /// call is seen by the rest of its hand-out (`mailbox.rs` relies on it).
    pub(crate) fn blocked_elsewhere(&self, mailbox: u64) -> bool {
        let holder = self.holder.lock();
        !holder.is_empty() && holder.iter().all(|core| core.id != mailbox)
    }

    /// Records that the order lock's holder waits for room in `mailbox`, until `f` returns.
    pub(crate) fn waiting_on<R>(
        &self,
        mailbox: &Arc<SubscriptionCore>,
        f: impl FnOnce() -> R,
    ) -> R {
        *self.holder.lock() = vec![Arc::clone(mailbox)];
        let _clear = Cleared(|| self.holder.lock().clear());
        f()
    }
}

struct Cleared<F: FnMut()>(F);

impl<F: FnMut()> Drop for Cleared<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// Whether following the records from what `publisher` waits on leads back to it.
fn leads_back(publisher: &SubscriptionCore) -> bool {
    let mut cores: Vec<Arc<SubscriptionCore>> = Vec::new();
    let mut topics: Vec<Arc<TopicWaits>> = Vec::new();
    let mut seen_cores = HashSet::new();
    let mut seen_topics = HashSet::new();
    let follow = |waits: &Waits, cores: &mut Vec<_>, topics: &mut Vec<_>| {
        cores.extend(waits.mailboxes.iter().cloned());
        topics.extend(waits.topic.iter().cloned());
    };
    follow(&publisher.waits.lock(), &mut cores, &mut topics);
    loop {
        if let Some(core) = cores.pop() {
            if core.id == publisher.id {
                return true;
            }
            if seen_cores.insert(core.id) {
                let waits = core.waits.lock();
                follow(&waits, &mut cores, &mut topics);
            }
        } else if let Some(topic) = topics.pop() {
            if seen_topics.insert(Arc::as_ptr(&topic) as usize) {
                cores.extend(topic.holder.lock().iter().cloned());
            }
        } else {
            return false;
        }
    }
}
