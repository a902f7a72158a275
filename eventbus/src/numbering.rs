//! A topic's numbering (`Numbering`: the next seq, apart from the topic's message type), and
//! each bus's table of them by topic type (`Numberings`, found by a `TopicIndex`), which lets
//! a publish to a topic that no one has ever heard number its message with one
//! compare-and-swap: no hashing, no downcast, no lock. Under the engine and the topic; uses
//! nothing of the bus.
//!
//! # Who numbers, and how
//!
//! The seq and a flag, `LOCKED`, share one word. While the flag is clear, the topic has
//! never had a subscriber nor an observer and the bus has not begun to close: a publish
//! numbers with a compare-and-swap that expects the flag clear, and delivers nothing. Once
//! the flag is set it stays set, and every numbering is under the topic's order lock: a
//! plain load and store, as cheap as a counter no one else writes.
//!
//! The flag is set, with a read-modify-write, by the first subscribe or observer *before*
//! its mailbox is on the topic's list; by a closing bus's first drain look on every topic
//! then made, *before* it reads their numbers; and by a topic made once a look may have
//! passed it by, before it goes in the table (see `Engine::topic`, whose fence pairs with
//! the look's). So:
//! - a compare-and-swap that succeeded came before the set in the word's order: its message
//!   was numbered before the subscription could hear of any, so no subscriber sees a gap in
//!   its seqs, and a drain look that set the flag reads a number that counts it;
//! - after the set, every compare-and-swap fails (it expects the flag clear): those publishes
//!   take the order lock, where the lifecycle decides;
//! - under the order lock, a numbering that reads the flag set can store without a
//!   read-modify-write: no one else changes the seq any more, and a set of a set flag
//!   changes nothing. One that reads it clear uses a `fetch_add`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, OnceLock};

/// Set in a [`Numbering`]'s word: numbering only under the topic's order lock.
const LOCKED: u64 = 1 << 63;

/// One topic's numbering: its next seq and whether a publish may number without the order
/// lock (see the module docs).
pub(crate) struct Numbering {
    /// The next seq, and `LOCKED`.
    word: AtomicU64,
    #[cfg(feature = "tracing")]
    name: &'static str,
    /// Set once a publish found the topic had never had a subscriber, and said so.
    #[cfg(feature = "tracing")]
    warned: std::sync::atomic::AtomicBool,
    /// Set by the first subscribe or observer.
    #[cfg(feature = "tracing")]
    heard: std::sync::atomic::AtomicBool,
}

impl Numbering {
    /// A numbering from seq 0; `locked` for a topic that numbers only under its order lock
    /// from the start (a log topic, which keeps what is published for subscriptions to come).
    pub(crate) fn new(name: &'static str, locked: bool) -> Self {
        #[cfg(not(feature = "tracing"))]
        let _ = name;
        Numbering {
            word: AtomicU64::new(if locked { LOCKED } else { 0 }),
            #[cfg(feature = "tracing")]
            name,
            #[cfg(feature = "tracing")]
            warned: std::sync::atomic::AtomicBool::new(false),
            #[cfg(feature = "tracing")]
            heard: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// How many messages were numbered.
    #[inline]
    pub(crate) fn next(&self) -> u64 {
        self.word.load(Relaxed) & !LOCKED
    }

    /// The next seq, taken: called under the topic's order lock.
    #[inline(always)]
    pub(crate) fn take(&self) -> u64 {
        let word = self.word.load(Relaxed);
        if word & LOCKED != 0 {
            // No one else changes the seq now (see the module docs).
            self.word.store(word + 1, Relaxed);
            word & !LOCKED
        } else {
            // A publish no one hears may be numbering beside this one.
            self.word.fetch_add(1, Relaxed) & !LOCKED
        }
    }

    /// From now on, every numbering is under the order lock: a subscriber or observer comes,
    /// or the bus closes. Sequentially consistent, as the close and topic making that order
    /// themselves by it.
    pub(crate) fn lock(&self) {
        self.word.fetch_or(LOCKED, SeqCst);
    }

    /// The next seq, taken without the order lock, if the topic has never been heard and the
    /// bus `is_open`; `None` sends the publish the usual way.
    #[inline(always)]
    pub(crate) fn take_unheard(&self, is_open: impl FnOnce() -> bool) -> Option<u64> {
        let word = self.word.load(Relaxed);
        // The state too: a publish that comes after the caller saw the bus closing is refused
        // (under the order lock), whether or not a look has made the topic lock yet.
        if word & LOCKED != 0 || !is_open() {
            return None;
        }
        // Relaxed: only this word's own order matters (see the module docs); the message is
        // delivered to no one, so nothing else is published with the number.
        self.word
            .compare_exchange(word, word + 1, Relaxed, Relaxed)
            .ok()?;
        self.unheard();
        Some(word)
    }

    /// A subscriber or an observer came: the topic has been heard.
    pub(crate) fn heard(&self) {
        #[cfg(feature = "tracing")]
        self.heard.store(true, Relaxed);
        self.lock();
    }

    /// A publish found no subscriber: if the topic never had one, says so once.
    #[inline]
    pub(crate) fn unheard(&self) {
        #[cfg(feature = "tracing")]
        if !self.heard.load(Relaxed)
            && !self.warned.load(Relaxed)
            && !self.warned.swap(true, Relaxed)
        {
            crate::trace::unheard(self.name);
        }
    }
}

/// A topic type's place in each bus's table of [`Numbering`]s (and in its directory's table
/// of topics by index, `topics/directory.rs`), given on first use from one count for the
/// process. `#[derive(Topic)]` makes one `static` per topic type that has no
/// generic parameters (a `static` in a generic impl would be shared by every instantiation).
/// Not for direct use.
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
    pub(crate) fn get(&self) -> Option<usize> {
        let index = self.0.load(Relaxed);
        (index != UNSET).then_some(index)
    }

    /// The index, given now if it has none.
    pub(crate) fn get_or_give(&self) -> usize {
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

/// Slots in a bus's table: topic types past the first this many in the process take the
/// publish's usual way. Every topic type made with an index counts, log topics' too (the
/// directory's table by index gives them theirs).
const SLOTS: usize = 256;

/// A bus's mailbox topics' [`Numbering`]s by topic index.
pub(crate) struct Numberings {
    slots: Box<[OnceLock<Arc<Numbering>>]>,
}

impl Numberings {
    pub(crate) fn new() -> Self {
        Numberings {
            slots: (0..SLOTS).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Puts a topic's numbering in the table (once made, a topic stays).
    pub(crate) fn insert(&self, index: &TopicIndex, numbering: &Arc<Numbering>) {
        if let Some(slot) = self.slots.get(index.get_or_give()) {
            let _ = slot.set(Arc::clone(numbering));
        }
    }

    /// Numbers a message for a topic in the table that has never been heard, while the bus
    /// is not closing (see [`Numbering::take_unheard`]); `None` sends the publish the usual
    /// way.
    #[inline(always)]
    pub(crate) fn take_unheard(
        &self,
        index: Option<&TopicIndex>,
        is_open: impl FnOnce() -> bool,
    ) -> Option<u64> {
        self.slots.get(index?.get()?)?.get()?.take_unheard(is_open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn only_a_topic_in_the_table_never_heard_is_numbered_without_the_lock() {
        let table = Numberings::new();
        let index = TopicIndex::new();
        let open = || true;
        assert_eq!(table.take_unheard(None, open), None, "a type with no index");
        assert_eq!(table.take_unheard(Some(&index), open), None, "not given");
        let numbering = Arc::new(Numbering::new("t", false));
        table.insert(&index, &numbering);
        assert_eq!(table.take_unheard(Some(&index), open), Some(0));
        assert_eq!(table.take_unheard(Some(&index), open), Some(1));
        assert_eq!(table.take_unheard(Some(&index), || false), None, "closing");
        assert_eq!(numbering.take(), 2, "one numbering for both ways");
        numbering.heard();
        assert_eq!(table.take_unheard(Some(&index), open), None, "heard");
        assert_eq!(numbering.take(), 3, "the flag is not part of the seq");
        assert_eq!(numbering.next(), 4);
        numbering.lock();
        assert_eq!(numbering.take(), 4, "locking again changes nothing");
    }

    #[test]
    fn a_log_topic_numbers_under_its_lock_from_the_start() {
        let numbering = Numbering::new("t", true);
        assert_eq!(numbering.take_unheard(|| true), None);
        assert_eq!(numbering.take(), 0);
        assert_eq!(numbering.next(), 1);
    }

    #[test]
    fn an_index_past_the_table_takes_the_usual_way() {
        let table = Numberings::new();
        let index = TopicIndex(AtomicUsize::new(SLOTS));
        table.insert(&index, &Arc::new(Numbering::new("t", false)));
        assert_eq!(table.take_unheard(Some(&index), || true), None);
    }

    /// Unheard publishes racing a subscribe: every seq is given once, whichever way it was
    /// taken, and none is taken without the lock after the flag was set.
    #[test]
    fn numbers_taken_both_ways_beside_a_lock_are_each_given_once() {
        let numbering = Arc::new(Numbering::new("t", false));
        let locked_at = Arc::new(AtomicU64::new(u64::MAX));
        let unheard = {
            let numbering = Arc::clone(&numbering);
            std::thread::spawn(move || {
                let mut taken = Vec::new();
                while taken.len() < 20_000 {
                    if let Some(seq) = numbering.take_unheard(|| true) {
                        taken.push(seq);
                    } else {
                        break;
                    }
                }
                taken
            })
        };
        let mut locked = Vec::new();
        for i in 0..20_000 {
            if i == 5_000 {
                numbering.lock();
                locked_at.store(numbering.next(), SeqCst);
            }
            locked.push(numbering.take());
        }
        let unheard = unheard.join().unwrap();
        let mut all: Vec<u64> = unheard.iter().chain(&locked).copied().collect();
        all.sort_unstable();
        let expected: Vec<u64> = (0..all.len() as u64).collect();
        assert_eq!(all, expected, "every seq given exactly once");
        let at = locked_at.load(SeqCst);
        assert!(
            unheard.iter().all(|&seq| seq < at),
            "no seq taken without the lock after the flag was set"
        );
    }
}
