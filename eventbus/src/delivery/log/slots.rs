//! A log's storage (`delivery/log/`): one slot per seq, modulo a power of two at least the log's
//! capacity, so that a worker can read a message in place with no lock held, and finding a
//! seq's slot is a mask, not a division.
//!
//! Slots come in chunks made on first use, and chunks in groups made on first use, so a log
//! that keeps a million messages (or four billion) costs memory only as it fills, and a slot
//! never moves once made. Every write happens under the log's ring lock. A read happens
//! under that lock too, or, for a `Block` subscription's worker, without it, under the rule
//! `delivery/log/` keeps: a slot is not written while such a worker may read it (its seq is at or
//! past the worker's position, which the publisher never laps).

use std::cell::UnsafeCell;
use std::sync::OnceLock;

/// Slots per chunk (a power of two).
const CHUNK: usize = 1024;

/// Chunks per group (a power of two).
const GROUP: usize = 1024;

pub(crate) struct Slots<E> {
    /// The number of slots, less one: a power of two, less one.
    mask: u64,
    groups: Box<[OnceLock<Group<E>>]>,
}

/// Up to [`GROUP`] chunks, each made on first use.
type Group<E> = Box<[OnceLock<Chunk<E>>]>;

/// Up to [`CHUNK`] slots, made at once.
type Chunk<E> = Box<[Slot<E>]>;

pub(crate) struct Slot<E>(UnsafeCell<Option<E>>);

impl<E> Slot<E> {
    /// What the slot holds, if anything.
    ///
    /// # Safety
    ///
    /// No thread writes the slot while the returned reference lives.
    #[inline]
    pub(crate) unsafe fn get(&self) -> Option<&E> {
        // SAFETY: the caller's promise: the slot is not written while this is read.
        unsafe { (*self.0.get()).as_ref() }
    }
}

// SAFETY: a `Slots<E>` hands out `&E` to several threads (`E: Sync`) and moves `E`s in and
// out on whichever thread holds the ring lock (`E: Send`). Its methods that touch a slot are
// `unsafe`, and their callers keep the rule that makes it free of data races: no slot is
// written while another thread reads or writes it.
unsafe impl<E: Send + Sync> Sync for Slots<E> {}

impl<E> Slots<E> {
    /// Room for `capacity` entries (at least one), rounded up to a power of two: seqs `s`
    /// and `s + capacity` share a slot only when `capacity` is a power of two, so a log takes
    /// the message it trims out of its slot before it puts the newest in its own. Only the
    /// table of groups is allocated yet (one entry per million slots).
    pub(crate) fn new(capacity: usize) -> Self {
        let slots = capacity.max(1).next_power_of_two();
        Slots {
            mask: slots as u64 - 1,
            groups: (0..slots.div_ceil(CHUNK * GROUP))
                .map(|_| OnceLock::new())
                .collect(),
        }
    }

    /// How many slots there are: a power of two.
    pub(crate) fn len(&self) -> u64 {
        self.mask + 1
    }

    /// Seq's group, its chunk in the group, and its slot in the chunk.
    fn place(&self, seq: u64) -> (usize, usize, usize) {
        let at = (seq & self.mask) as usize;
        (at / (CHUNK * GROUP), at / CHUNK % GROUP, at % CHUNK)
    }

    /// Puts `entry` in `seq`'s slot (which also holds `seq ± len()`); what was there.
    ///
    /// # Safety
    ///
    /// No other thread reads or writes the slot meanwhile.
    #[inline]
    pub(crate) unsafe fn replace(&self, seq: u64, entry: Option<E>) -> Option<E> {
        let (group, chunk, at) = self.place(seq);
        let slot = match self.groups[group]
            .get()
            .and_then(|chunks| chunks[chunk].get())
        {
            Some(chunk) => &chunk[at],
            None => self.make(seq),
        };
        // SAFETY: the caller's promise: this thread alone has the slot now.
        unsafe { std::mem::replace(&mut *slot.0.get(), entry) }
    }

    /// Makes `seq`'s chunk, and its group if need be: once per chunk, out of the way of the
    /// appends that find theirs made.
    #[cold]
    #[inline(never)]
    fn make(&self, seq: u64) -> &Slot<E> {
        let (group, chunk, at) = self.place(seq);
        let slots = self.len() as usize;
        let chunks = self.groups[group].get_or_init(|| {
            (0..GROUP.min(slots.div_ceil(CHUNK)))
                .map(|_| OnceLock::new())
                .collect()
        });
        let chunk = chunks[chunk].get_or_init(|| {
            (0..CHUNK.min(slots))
                .map(|_| Slot(UnsafeCell::new(None)))
                .collect()
        });
        &chunk[at]
    }

    /// The slots of `seq` and of the seqs after it, up to `n` of them and no further than its
    /// chunk's end: a block read looks up its chunk once. Empty if the chunk is not made.
    /// Reading a slot is `Slot::get`, under `get`'s rule.
    #[inline]
    pub(crate) fn run(&self, seq: u64, n: usize) -> &[Slot<E>] {
        let (group, chunk, at) = self.place(seq);
        match self.groups[group]
            .get()
            .and_then(|chunks| chunks[chunk].get())
        {
            Some(chunk) => &chunk[at..chunk.len().min(at.saturating_add(n))],
            None => &[],
        }
    }

    /// What `seq`'s slot holds (an entry of `seq`, or of `seq ± len()`), if anything.
    ///
    /// # Safety
    ///
    /// No thread writes the slot while the returned reference lives.
    #[inline]
    pub(crate) unsafe fn get(&self, seq: u64) -> Option<&E> {
        let (group, chunk, at) = self.place(seq);
        let chunk = self.groups[group].get()?[chunk].get()?;
        // SAFETY: the caller's promise: the slot is not written while this is read.
        unsafe { (*chunk[at].0.get()).as_ref() }
    }
}

/// Also run under Miri (`cargo +nightly miri test -p eventbus --lib slots`).
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_holds_its_seq_and_the_seqs_a_power_of_two_apart() {
        let slots = Slots::new(3);
        assert_eq!(slots.len(), 4, "rounded up to a power of two");
        // SAFETY: one thread.
        unsafe {
            assert_eq!(slots.get(0), None, "nothing written yet");
            assert_eq!(slots.replace(0, Some("zero")), None);
            assert_eq!(slots.replace(1, Some("one")), None);
            assert_eq!(slots.get(0), Some(&"zero"));
            assert_eq!(
                slots.replace(3, Some("three")),
                None,
                "3 has a slot of its own"
            );
            assert_eq!(slots.replace(4, Some("four")), Some("zero"));
            assert_eq!(slots.get(0), Some(&"four"), "4 is 0's slot");
            assert_eq!(slots.replace(5, None), Some("one"));
            assert_eq!(slots.get(1), None);
        }
    }

    #[test]
    fn a_run_stops_at_its_chunks_end_and_at_n() {
        let slots: Slots<u64> = Slots::new(2 * CHUNK);
        assert!(slots.run(0, 4).is_empty(), "no chunk made yet");
        // SAFETY (all): one thread.
        unsafe {
            for seq in CHUNK as u64 - 2..CHUNK as u64 + 2 {
                slots.replace(seq, Some(seq));
            }
            let run = slots.run(CHUNK as u64 - 2, 8);
            assert_eq!(run.len(), 2, "the first chunk's last two");
            assert_eq!(run[1].get(), Some(&(CHUNK as u64 - 1)));
            let run = slots.run(CHUNK as u64, 1);
            assert_eq!(run.len(), 1);
            assert_eq!(run[0].get(), Some(&(CHUNK as u64)));
            let run = slots.run(3 * CHUNK as u64 + 1, 3);
            assert_eq!(
                run.iter().map(|slot| slot.get()).collect::<Vec<_>>(),
                [Some(&(CHUNK as u64 + 1)), None, None],
                "a lap later, in the second chunk"
            );
        }
    }

    #[test]
    fn chunks_are_made_as_the_log_fills() {
        let slots: Slots<u64> = Slots::new(CHUNK + 5);
        assert_eq!(slots.len(), 2 * CHUNK as u64);
        assert_eq!(slots.groups.len(), 1);
        assert!(slots.groups[0].get().is_none());
        // SAFETY: one thread.
        unsafe {
            slots.replace(CHUNK as u64 + 4, Some(7));
            assert_eq!(slots.get(CHUNK as u64 + 4), Some(&7));
            assert_eq!(
                slots.get(3 * CHUNK as u64 + 4),
                Some(&7),
                "two chunks later"
            );
        }
        let chunks = slots.groups[0].get().unwrap();
        assert_eq!(chunks.len(), 2);
        assert!(chunks[0].get().is_none());
        assert_eq!(chunks[1].get().map(|c| c.len()), Some(CHUNK));
    }

    #[test]
    fn a_small_log_has_one_short_chunk() {
        let slots: Slots<u64> = Slots::new(5);
        // SAFETY: one thread.
        unsafe {
            slots.replace(6, Some(6));
        }
        let chunks = slots.groups[0].get().unwrap();
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].get().map(|c| c.len()), Some(8));
    }

    #[test]
    fn a_huge_log_costs_only_its_table_of_groups_until_it_fills() {
        let capacity = 1 << 32;
        let slots: Slots<u64> = Slots::new(capacity);
        assert_eq!(slots.groups.len(), capacity / (CHUNK * GROUP));
        // SAFETY: one thread.
        unsafe {
            let last = capacity as u64 - 1;
            slots.replace(last, Some(9));
            assert_eq!(slots.get(last), Some(&9));
            assert_eq!(slots.get(0), None);
        }
        assert_eq!(slots.groups.iter().filter(|g| g.get().is_some()).count(), 1);
    }

    #[test]
    fn entries_left_in_the_slots_are_dropped_with_them() {
        let value = std::sync::Arc::new(());
        let slots = Slots::new(4);
        // SAFETY: one thread.
        unsafe {
            slots.replace(2, Some(std::sync::Arc::clone(&value)));
        }
        drop(slots);
        assert_eq!(std::sync::Arc::strong_count(&value), 1);
    }
}
