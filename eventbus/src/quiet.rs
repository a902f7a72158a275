//! What a publish to a topic that no one hears needs, without the topic's message type: its
//! numbering and its count of listeners (`Quiet`), found in a bus's table by the topic type's
//! index (`TopicIndex`) with no hashing, no downcast and no lock. Beside `directory.rs`,
//! which finds a topic's whole state; under the engine, over the lifecycle it reads.
//!
//! Such a publish numbers its message with a `fetch_add` and returns, so every numbering of a
//! mailbox topic is a `fetch_add` too: under the order lock, a load and a store could lose
//! one made meanwhile by a publish that read the count before a subscribe. A log topic keeps
//! what is published for subscriptions to come, so it is never in the table, and numbers
//! under its locks.

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

use crate::lifecycle::Lifecycle;

/// A topic type's place in each bus's table of [`Quiet`]s, given on first use from one count
/// for the process. `#[derive(Topic)]` makes one `static` per topic type that has no generic
/// parameters (a `static` in a generic impl would be shared by every instantiation). Not for
/// direct use.
#[doc(hidden)]
#[derive(Debug)]
pub struct TopicIndex(AtomicUsize);

/// A `TopicIndex` not given yet.
const UNSET: usize = usize::MAX;

/// The next index to give.
static NEXT: AtomicUsize = AtomicUsize::new(0);

impl TopicIndex {
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        TopicIndex(AtomicUsize::new(UNSET))
    }

    #[inline(always)]
    fn get(&self) -> Option<usize> {
        let index = self.0.load(Relaxed);
        (index != UNSET).then_some(index)
    }

    /// The index, given now if it has none.
    fn get_or_give(&self) -> usize {
        if let Some(index) = self.get() {
            return index;
        }
        let next = NEXT.fetch_add(1, Relaxed);
        match self.0.compare_exchange(UNSET, next, Relaxed, Relaxed) {
            Ok(_) => next,
            Err(given) => given,
        }
    }
}

/// One topic's numbering and count of listeners.
pub(crate) struct Quiet {
    /// The next message's number. Read without a lock for stats.
    pub(crate) next_seq: AtomicU64,
    /// The topic's subscribers and observers; written under the topic's `edit` lock.
    pub(crate) count: AtomicUsize,
    #[cfg(feature = "tracing")]
    name: &'static str,
    /// Set once a publish found the topic had never had a subscriber, and said so.
    #[cfg(feature = "tracing")]
    warned: std::sync::atomic::AtomicBool,
    /// Set by the first subscribe.
    #[cfg(feature = "tracing")]
    heard: std::sync::atomic::AtomicBool,
}

impl Quiet {
    pub(crate) fn new(name: &'static str) -> Self {
        #[cfg(not(feature = "tracing"))]
        let _ = name;
        Quiet {
            next_seq: AtomicU64::new(0),
            count: AtomicUsize::new(0),
            #[cfg(feature = "tracing")]
            name,
            #[cfg(feature = "tracing")]
            warned: std::sync::atomic::AtomicBool::new(false),
            #[cfg(feature = "tracing")]
            heard: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The next number, for a message published now under the topic's order lock.
    #[inline(always)]
    pub(crate) fn number(&self) -> u64 {
        self.next_seq.fetch_add(1, Relaxed)
    }

    /// A subscriber or an observer came: the topic has been heard.
    pub(crate) fn heard(&self) {
        #[cfg(feature = "tracing")]
        self.heard.store(true, Relaxed);
    }

    /// A publish found no subscriber: if the topic never had one, says so once.
    #[inline]
    pub(crate) fn unheard(&self) {
        #[cfg(feature = "tracing")]
        if !self.heard.load(Relaxed) && !self.warned.swap(true, Relaxed) {
            crate::observe::unheard(self.name);
        }
    }
}

/// Slots in a bus's table: topic types past the first this many in the process take the
/// publish's usual way.
const SLOTS: usize = 256;

/// A bus's [`Quiet`]s by topic index.
pub(crate) struct Table {
    slots: Box<[OnceLock<Arc<Quiet>>]>,
}

impl Table {
    pub(crate) fn new() -> Self {
        Table {
            slots: (0..SLOTS).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Puts a topic's `Quiet` in the table (once made, a topic stays).
    pub(crate) fn insert(&self, index: &TopicIndex, quiet: &Arc<Quiet>) {
        if let Some(slot) = self.slots.get(index.get_or_give()) {
            let _ = slot.set(Arc::clone(quiet));
        }
    }

    /// Numbers a message for a topic in the table that has no subscriber nor observer, while
    /// the bus is open; `None` sends the publish the usual way. A close that began after the
    /// look at the state finds the count moved and looks again at the poke.
    #[inline(always)]
    pub(crate) fn number_unheard(
        &self,
        index: Option<&TopicIndex>,
        lifecycle: &Lifecycle,
    ) -> Option<u64> {
        let quiet = self.slots.get(index?.get()?)?.get()?;
        if quiet.count.load(SeqCst) != 0 || !lifecycle.is_open() {
            return None;
        }
        // Sequentially consistent, as the state's load above and a close's look at the
        // numbers: either this publish saw the bus open before the close began, and the
        // close's first look sees this number, or the poke below sees the close.
        let seq = quiet.next_seq.fetch_add(1, SeqCst);
        quiet.unheard();
        lifecycle.poke();
        Some(seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::directory::Directory;

    fn lifecycle() -> Lifecycle {
        Lifecycle::new(Arc::new(Directory::new()))
    }

    #[test]
    fn an_index_is_given_once_and_never_twice() {
        let (a, b) = (TopicIndex::new(), TopicIndex::new());
        assert_eq!(a.get(), None, "given only on first use");
        let given = a.get_or_give();
        assert_eq!(a.get_or_give(), given);
        assert_eq!(a.get(), Some(given));
        assert_ne!(b.get_or_give(), given);
    }

    #[test]
    fn only_a_topic_in_the_table_with_no_listener_on_an_open_bus_is_numbered() {
        let table = Table::new();
        let lifecycle = lifecycle();
        let index = TopicIndex::new();
        assert_eq!(
            table.number_unheard(None, &lifecycle),
            None,
            "a type with no index"
        );
        assert_eq!(
            table.number_unheard(Some(&index), &lifecycle),
            None,
            "not given"
        );
        let quiet = Arc::new(Quiet::new("t"));
        table.insert(&index, &quiet);
        assert_eq!(table.number_unheard(Some(&index), &lifecycle), Some(0));
        assert_eq!(table.number_unheard(Some(&index), &lifecycle), Some(1));
        quiet.count.store(1, SeqCst);
        assert_eq!(
            table.number_unheard(Some(&index), &lifecycle),
            None,
            "heard"
        );
        quiet.count.store(0, SeqCst);
        assert_eq!(quiet.number(), 2, "one numbering for both ways");
        let _ = lifecycle.close(Some(std::time::Instant::now()), false);
        assert_eq!(
            table.number_unheard(Some(&index), &lifecycle),
            None,
            "closed"
        );
    }

    #[test]
    fn an_index_past_the_table_takes_the_usual_way() {
        let table = Table::new();
        let lifecycle = lifecycle();
        let index = TopicIndex(AtomicUsize::new(SLOTS));
        table.insert(&index, &Arc::new(Quiet::new("t")));
        assert_eq!(table.number_unheard(Some(&index), &lifecycle), None);
    }
}
