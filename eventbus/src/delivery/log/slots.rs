//! A log's ring: its messages in blocks of cells (`message/log_block.rs`), seq `s` in cell
//! `s % cells` of the block for `s / cells`, found in a table of blocks by `(s / cells) %
//! entries`. The table has room for `retain` messages and the block being filled, so the
//! block a new one replaces in the table has been trimmed whole and let go of. It is made
//! in groups of entries as the log fills: a log of 2³² messages costs a table of groups
//! (one entry per [`GROUP`] blocks) until its messages come.
//!
//! The log writes (appends, trims) under its ring lock; a reader lending in place finds
//! blocks and cells without it, for seqs below the tail it read (with acquire: the append
//! stored its block in the table and wrote its cell before it moved the tail, with release)
//! and at or past its protected position, which no trim passes (see `mod.rs`).
//!
//! "Under the ring lock", here and in `message/log_block.rs`, covers a fast append too (see
//! `mod.rs`): no holder of the lock overlaps one, and one sees what the holders before it
//! wrote, as the next holder would.

use std::mem::ManuallyDrop;
use std::ops::Range;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::sync::OnceLock;

use crate::delivery::log::clock::Time;
use crate::message::log_block::{LogBlock, CELLS};
use crate::message::shared::{Header, Shared};

/// Entries in a group of the table: a million messages' blocks, 128 KiB.
const GROUP: usize = 1 << 14;

/// A group of entries: the blocks kept (null where none is).
type Group = Box<[AtomicPtr<Header>]>;

pub(crate) struct Slots<V> {
    /// The groups of entries, each made on first use.
    groups: Box<[OnceLock<Group>]>,
    /// Cells per block, a power of two: `1 << shift`.
    shift: u32,
    /// Entries in all, less one (a power of two less one).
    mask: usize,
    topic: &'static str,
    _owns: std::marker::PhantomData<LogBlock<V>>,
}

impl<V> Slots<V> {
    /// Room for `retain` messages (at least one) of `topic`. Blocks have `retain` rounded up
    /// to a power of two cells, at most [`CELLS`]; none is made until it is appended to.
    pub(crate) fn new(retain: usize, topic: &'static str) -> Self {
        let cells = retain.max(1).next_power_of_two().min(CELLS as usize);
        let entries = (retain.max(1).div_ceil(cells) + 1).next_power_of_two();
        Slots {
            groups: (0..entries.div_ceil(GROUP))
                .map(|_| OnceLock::new())
                .collect(),
            shift: cells.trailing_zeros(),
            mask: entries - 1,
            topic,
            _owns: std::marker::PhantomData,
        }
    }

    #[inline(always)]
    fn cells(&self) -> u64 {
        1 << self.shift
    }

    /// Seq's group and entry in it, and its cell in the block.
    #[inline(always)]
    fn place(&self, seq: u64) -> (usize, usize, u32) {
        let entry = (seq >> self.shift) as usize & self.mask;
        (
            entry / GROUP,
            entry % GROUP,
            (seq & (self.cells() - 1)) as u32,
        )
    }

    /// Seq's entry, if its group is made, and its cell in the block.
    #[inline(always)]
    fn entry(&self, seq: u64) -> Option<(&AtomicPtr<Header>, u32)> {
        let (group, entry, index) = self.place(seq);
        // SAFETY: `place` masks to the entries there are: its group is in the table, and the
        // entry in the group (a group is as long as `GROUP`, or all the entries there are).
        let group = unsafe { self.groups.get_unchecked(group) }.get()?;
        Some((unsafe { group.get_unchecked(entry) }, index))
    }

    /// Seq's entry, its group made if need be, and its cell in the block.
    #[inline(always)]
    fn entry_or_make(&self, seq: u64) -> (&AtomicPtr<Header>, u32) {
        match self.entry(seq) {
            Some(found) => found,
            None => self.make(seq),
        }
    }

    /// Makes `seq`'s group: once per group, out of the way of the appends that find theirs.
    #[cold]
    #[inline(never)]
    fn make(&self, seq: u64) -> (&AtomicPtr<Header>, u32) {
        let (group, entry, index) = self.place(seq);
        let len = GROUP.min(self.mask + 1);
        let group = self.groups[group]
            .get_or_init(|| (0..len).map(|_| AtomicPtr::new(ptr::null_mut())).collect());
        (&group[entry], index)
    }

    /// The block `seq` is in, as a handle that lets go of nothing, and its cell there; `None`
    /// if that block is not kept (not made yet, or trimmed whole).
    ///
    /// # Safety
    ///
    /// The caller holds the ring lock, or reads a seq below a tail it read with acquire and
    /// at or past its protected position; it does not use the handle after the block may be
    /// let go of (see the module docs).
    #[inline]
    pub(crate) unsafe fn block(&self, seq: u64) -> Option<(ManuallyDrop<LogBlock<V>>, u32)> {
        let (entry, index) = self.entry(seq)?;
        let raw = entry.load(Acquire);
        if raw.is_null() {
            return None;
        }
        // SAFETY: the table holds `into_raw` pointers of blocks the log keeps; the handle is
        // never dropped, so it lets go of nothing.
        let block = ManuallyDrop::new(unsafe { LogBlock::from_raw(raw) });
        (block.base() == seq - u64::from(index)).then_some((block, index))
    }

    /// Appends `value` as `seq`, at `at`; out of line if `None` (see `log_block.rs`).
    ///
    /// # Safety
    ///
    /// Under the ring lock; `seq` is the log's next, and every seq a table's length of blocks
    /// before it was trimmed.
    #[inline(always)]
    pub(crate) unsafe fn append(&self, seq: u64, value: Option<V>, at: Time) {
        let (entry, index) = self.entry_or_make(seq);
        let raw = match index {
            0 => {
                let raw =
                    LogBlock::<V>::new(seq, self.topic, self.cells() as u32, at.nanos()).into_raw();
                let before = entry.swap(raw, Release);
                // Once in 64 appends: a block left in the table would leak.
                assert!(before.is_null(), "the block before was trimmed whole");
                raw
            }
            // Under the ring lock, the table's last write was this thread's.
            _ => entry.load(Relaxed),
        };
        assert!(!raw.is_null(), "a block is made at its first cell");
        // SAFETY: under the ring lock; the block for `seq` is in the table (made above, or at
        // its first cell), and the cell is not appended yet. The handle lets go of nothing.
        unsafe {
            let block = ManuallyDrop::new(LogBlock::<V>::from_raw(raw));
            debug_assert_eq!(block.base(), seq - u64::from(index));
            match value {
                Some(value) => block.append(index, value, at.nanos()),
                None => block.append_out_of_line(index, at.nanos()),
            }
        }
    }

    /// Trims `seq`, the log's oldest: the values no reference can reach go to `keep` (a value
    /// with no `Drop` stays in its cell: see `LogBlock::trim`), and the log's reference to
    /// the block, if this was its last cell, is returned; both to be let go of once the ring
    /// lock is.
    ///
    /// # Safety
    ///
    /// Under the ring lock; `seq` was appended and not trimmed, every seq before it was, and
    /// no uncounted handle on it is used after (see the module docs).
    #[inline(always)]
    pub(crate) unsafe fn trim(&self, seq: u64, keep: &mut impl FnMut(V)) -> Option<LogBlock<V>> {
        // A value with no `Drop` stays in its cell (`LogBlock::trim`): only a block's last
        // cell has something to do, let go of the log's reference. An append of a plain
        // message (numbers, say) is spared the block's look-up but at a block's end.
        if !std::mem::needs_drop::<V>() && (seq + 1) & (self.cells() - 1) != 0 {
            return None;
        }
        let (entry, index) = self.entry(seq)?;
        let raw = entry.load(Relaxed);
        if raw.is_null() {
            return None;
        }
        // SAFETY: the caller's promise: under the ring lock, `seq`'s block is kept (and so is
        // the one in its entry) and its cells up to `seq` are behind every reader's use. The
        // handle lets go of nothing, unless it is the block's last cell: then the log's
        // reference is returned, and the entry no longer holds it.
        unsafe {
            let block = ManuallyDrop::new(LogBlock::<V>::from_raw(raw));
            debug_assert_eq!(block.base(), seq - u64::from(index));
            block.trim(index, keep);
            if u64::from(index) + 1 < self.cells() {
                return None;
            }
            entry.store(ptr::null_mut(), Release);
            Some(ManuallyDrop::into_inner(block))
        }
    }

    /// An uncounted handle on `seq`'s message, if it is in its cell (not out of line).
    ///
    /// # Safety
    ///
    /// As [`block`](Self::block), for a seq appended and not trimmed; the handle is used only
    /// while the message is kept.
    pub(crate) unsafe fn message(&self, seq: u64) -> Option<ManuallyDrop<Shared<V>>> {
        // SAFETY: the caller's promise.
        unsafe {
            let (block, index) = self.block(seq)?;
            (!block.is_out_of_line(index)).then(|| block.alias(index))
        }
    }

    /// The end of the interval `seq`'s stamp dates it to: it was appended before then.
    ///
    /// # Safety
    ///
    /// As [`message`](Self::message).
    pub(crate) unsafe fn appended_before(&self, seq: u64) -> Option<Time> {
        // SAFETY: the caller's promise.
        unsafe {
            let (block, index) = self.block(seq)?;
            Some(Time::from_nanos(block.appended_before(index)))
        }
    }

    /// The first of `seqs` that may have been appended at `from` or after, `seqs.end` if
    /// none: the first whose stamp's interval (a millisecond, or a second, rounded down)
    /// ends after `from`. So a message appended at `from` or after is never passed over.
    ///
    /// # Safety
    ///
    /// As [`message`](Self::message), for every seq of `seqs`.
    pub(crate) unsafe fn first_appended_since(&self, seqs: Range<u64>, from: Time) -> u64 {
        let end = seqs.end;
        seqs.into_iter()
            .find(|&seq| {
                // SAFETY: the caller's promise.
                unsafe { self.appended_before(seq) }.is_some_and(|before| before > from)
            })
            .unwrap_or(end)
    }

    /// When `seq` was appended (to the millisecond).
    ///
    /// # Safety
    ///
    /// As [`message`](Self::message).
    #[cfg(test)]
    pub(crate) unsafe fn appended_at(&self, seq: u64) -> Option<Time> {
        // SAFETY: the caller's promise.
        unsafe {
            let (block, index) = self.block(seq)?;
            Some(Time::from_nanos(block.appended_at(index)))
        }
    }
}

impl<V> Drop for Slots<V> {
    fn drop(&mut self) {
        for entry in self
            .groups
            .iter_mut()
            .filter_map(OnceLock::get_mut)
            .flat_map(|g| g.iter_mut())
        {
            let raw = std::mem::replace(entry.get_mut(), ptr::null_mut());
            if !raw.is_null() {
                // SAFETY: a block the log keeps, its reference let go of once, here.
                drop(unsafe { LogBlock::<V>::from_raw(raw) });
            }
        }
    }
}

// SAFETY: the table hands out `&V` to several threads and moves `V`s in and out on whichever
// thread holds the ring lock (see `LogBlock`'s bounds).
unsafe impl<V: Send + Sync> Sync for Slots<V> {}
// SAFETY: as above.
unsafe impl<V: Send + Sync> Send for Slots<V> {}

/// Also run under Miri (`cargo +nightly miri test -p eventbus --lib slots`).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::log::clock;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;

    /// Counts its drops.
    struct Tally(Arc<AtomicUsize>, u64);

    impl Drop for Tally {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    fn tally(drops: &Arc<AtomicUsize>, seq: u64) -> Tally {
        Tally(Arc::clone(drops), seq)
    }

    /// What `seq`'s message shows, read under the (single-threaded) test's "lock".
    fn read(slots: &Slots<Tally>, seq: u64) -> Option<(u64, u64)> {
        // SAFETY: one thread.
        unsafe { slots.message(seq) }.map(|m| (m.seq(), m.1))
    }

    #[test]
    fn cells_hold_their_seqs_in_blocks_of_a_power_of_two() {
        let drops = Arc::new(AtomicUsize::new(0));
        let slots = Slots::new(3, "t");
        assert_eq!(slots.cells(), 4, "rounded up to a power of two");
        assert_eq!(slots.mask + 1, 2, "3 messages and the block being filled");
        assert_eq!(read(&slots, 0), None, "nothing appended yet");
        let now = clock::now();
        // SAFETY (all): one thread, appends in order, trims behind them.
        unsafe {
            for seq in 0..6 {
                slots.append(seq, Some(tally(&drops, seq)), now);
            }
        }
        assert_eq!(read(&slots, 1), Some((1, 1)));
        assert_eq!(read(&slots, 5), Some((5, 5)), "the second block");
        let mut trimmed = Vec::new();
        // SAFETY: as above.
        let released = unsafe { slots.trim(0, &mut |v| trimmed.push(v)) };
        assert!(released.is_none(), "the block has cells left");
        assert_eq!(trimmed.iter().map(|t| t.1).collect::<Vec<_>>(), [0]);
        drop(trimmed);
        assert_eq!(drops.load(SeqCst), 1);
        let mut trimmed = Vec::new();
        // SAFETY: as above.
        let released = unsafe {
            for seq in 1..3 {
                assert!(slots.trim(seq, &mut |v| trimmed.push(v)).is_none());
            }
            slots.trim(3, &mut |v| trimmed.push(v))
        };
        assert!(released.is_some(), "its last cell trimmed, the block goes");
        assert_eq!(read(&slots, 3), None);
        drop((trimmed, released));
        assert_eq!(drops.load(SeqCst), 4);
        // SAFETY: as above: seq 8 goes where the first block was.
        unsafe { slots.append(6, Some(tally(&drops, 6)), now) };
        unsafe { slots.append(7, Some(tally(&drops, 7)), now) };
        unsafe { slots.append(8, Some(tally(&drops, 8)), now) };
        assert_eq!(read(&slots, 8), Some((8, 8)));
        assert_eq!(read(&slots, 0), None, "0's block is gone, 8's is there");
        drop(slots);
        assert_eq!(
            drops.load(SeqCst),
            9,
            "what the log kept is dropped with it"
        );
    }

    #[test]
    fn a_referenced_block_keeps_its_trimmed_values_until_let_go_of() {
        let drops = Arc::new(AtomicUsize::new(0));
        let slots = Slots::new(2, "t");
        let now = clock::now();
        // SAFETY (all): one thread.
        let kept = unsafe {
            slots.append(0, Some(tally(&drops, 0)), now);
            slots.append(1, Some(tally(&drops, 1)), now);
            // A counted reference to seq 1, as a reader or a dead letter holds one.
            Shared::clone(&slots.message(1).unwrap())
        };
        let mut trimmed = Vec::new();
        // SAFETY: as above.
        assert!(unsafe { slots.trim(0, &mut |v| trimmed.push(v)) }.is_none());
        assert!(trimmed.is_empty(), "seq 1 is held: nothing moves");
        let mut trimmed = Vec::new();
        // SAFETY: as above.
        let released = unsafe { slots.trim(1, &mut |v| trimmed.push(v)) };
        assert!(released.is_some());
        drop(released);
        assert_eq!(drops.load(SeqCst), 0, "the reference still holds the block");
        assert_eq!((kept.seq(), kept.1), (1, 1));
        drop(kept);
        assert_eq!(drops.load(SeqCst), 2, "the last release dropped both");
    }

    #[test]
    fn a_handle_on_a_cell_stays_good_while_the_cells_before_it_are_trimmed() {
        let drops = Arc::new(AtomicUsize::new(0));
        let slots = Slots::new(4, "t");
        let now = clock::now();
        // SAFETY (all): one thread; the handle on seq 3 is used while 3 is kept, as a lending
        // reader's at its position is.
        unsafe {
            for seq in 0..4 {
                slots.append(seq, Some(tally(&drops, seq)), now);
            }
            let lent = slots.message(3).unwrap();
            let mut trimmed = Vec::new();
            for seq in 0..3 {
                assert!(slots.trim(seq, &mut |v| trimmed.push(v)).is_none());
            }
            assert_eq!(trimmed.len(), 3, "the log alone held the block: taken out");
            drop(trimmed);
            assert_eq!((lent.seq(), lent.1), (3, 3));
        }
        assert_eq!(drops.load(SeqCst), 3);
        drop(slots);
        assert_eq!(drops.load(SeqCst), 4);
    }

    #[test]
    fn a_trim_that_finds_the_log_alone_takes_out_what_earlier_ones_left() {
        let drops = Arc::new(AtomicUsize::new(0));
        let slots = Slots::new(4, "t");
        let now = clock::now();
        // SAFETY (all): one thread.
        unsafe {
            for seq in 0..4 {
                slots.append(seq, Some(tally(&drops, seq)), now);
            }
            let held = Shared::clone(&slots.message(3).unwrap());
            let mut trimmed = Vec::new();
            assert!(slots.trim(0, &mut |v| trimmed.push(v)).is_none());
            assert!(trimmed.is_empty());
            drop(held);
            assert!(slots.trim(1, &mut |v| trimmed.push(v)).is_none());
            let values: Vec<_> = trimmed.iter().map(|t| t.1).collect();
            assert_eq!(values, [0, 1], "0 and 1 taken out together");
        }
    }

    /// A value with no `Drop` stays in its cell: no trim hands it on, and the trim of a
    /// block's last cell still lets go of the log's reference, while one handed out keeps
    /// the block (and its values readable) until it is let go of.
    #[test]
    fn values_with_no_drop_stay_in_their_cells_and_blocks_still_go() {
        let slots = Slots::<u64>::new(3, "t");
        let cells = slots.cells();
        let now = clock::now();
        let mut handed_on = Vec::new();
        // SAFETY (all): one thread, appends in order, trims behind them; the counted
        // reference is used while it holds its block.
        unsafe {
            for seq in 0..2 * cells {
                slots.append(seq, Some(seq * 10), now);
            }
            let held = Shared::clone(&slots.message(1).unwrap());
            for seq in 0..cells - 1 {
                assert!(slots.trim(seq, &mut |v| handed_on.push(v)).is_none());
            }
            let released = slots.trim(cells - 1, &mut |v| handed_on.push(v));
            assert!(released.is_some(), "its last cell trimmed, the block goes");
            assert_eq!(slots.message(0).map(|m| m.seq()), None);
            drop(released);
            assert_eq!(
                (held.seq(), *held),
                (1, 10),
                "the reference holds the block"
            );
            drop(held);
            for seq in cells..2 * cells - 1 {
                assert!(slots.trim(seq, &mut |v| handed_on.push(v)).is_none());
            }
            assert_eq!(
                read_plain(&slots, 2 * cells - 1),
                Some((2 * cells - 1, (2 * cells - 1) * 10))
            );
            assert!(slots
                .trim(2 * cells - 1, &mut |v| handed_on.push(v))
                .is_some());
        }
        assert!(handed_on.is_empty(), "nothing to drop, nothing handed on");
    }

    /// What `seq`'s message shows, for a log of plain numbers.
    fn read_plain(slots: &Slots<u64>, seq: u64) -> Option<(u64, u64)> {
        // SAFETY: one thread.
        unsafe { slots.message(seq) }.map(|m| (m.seq(), **m))
    }

    #[test]
    fn out_of_line_cells_hold_no_value_and_show_no_message() {
        let drops = Arc::new(AtomicUsize::new(0));
        let slots = Slots::new(2, "t");
        let now = clock::now();
        // SAFETY (all): one thread.
        unsafe {
            slots.append(0, None, now);
            slots.append(1, Some(tally(&drops, 1)), now);
            assert!(slots.message(0).is_none());
            assert!(slots.appended_at(0).is_some());
            let mut trimmed = Vec::new();
            assert!(slots.trim(0, &mut |v| trimmed.push(v)).is_none());
            assert!(trimmed.is_empty());
        }
        drop(slots);
        assert_eq!(drops.load(SeqCst), 1);
    }

    #[test]
    fn a_huge_log_costs_only_its_table_of_groups_until_it_fills() {
        let capacity = 1 << 32;
        let slots: Slots<u64> = Slots::new(capacity, "t");
        let entries = (capacity / CELLS as usize + 1).next_power_of_two();
        assert_eq!(slots.groups.len(), entries / GROUP);
        let last = capacity as u64 - 1;
        // SAFETY: one thread; a block is made at its first cell.
        unsafe { slots.append(last - 63, Some(9), clock::now()) };
        assert_eq!(unsafe { slots.message(last - 63) }.map(|m| **m), Some(9));
        assert!(unsafe { slots.message(0) }.is_none());
        assert_eq!(slots.groups.iter().filter(|g| g.get().is_some()).count(), 1);
    }

    #[test]
    fn stamps_keep_the_append_time_to_the_millisecond() {
        let slots: Slots<u8> = Slots::new(8, "t");
        let first = clock::now();
        let later = first + std::time::Duration::from_millis(1500);
        // SAFETY (all): one thread.
        unsafe {
            slots.append(0, Some(0), first);
            slots.append(1, Some(1), later);
            let at = slots.appended_at(1).unwrap();
            assert!(at <= later && later - at < std::time::Duration::from_millis(1));
            assert_eq!(slots.appended_at(0), Some(first));
        }
    }

    #[test]
    fn stamps_past_twelve_days_keep_the_append_time_to_the_second() {
        let slots: Slots<u8> = Slots::new(8, "t");
        let first = clock::now();
        let days =
            std::time::Duration::from_secs(13 * 24 * 3600) + std::time::Duration::from_millis(2500);
        // SAFETY (all): one thread.
        unsafe {
            slots.append(0, Some(0), first);
            slots.append(1, Some(1), first + days);
            slots.append(
                2,
                Some(2),
                first + days + std::time::Duration::from_millis(400),
            );
            let at = slots.appended_at(1).unwrap();
            assert!(at <= first + days && first + days - at < std::time::Duration::from_secs(1));
            assert_eq!(
                slots.appended_at(2),
                Some(at),
                "the same second: the cached stamp"
            );
        }
    }

    /// A `Since` join starts at `first_appended_since`: it must not pass over a message
    /// appended at `from` or after, whatever its stamp's rounding. Past about 12 days into
    /// a block, stamps count seconds: a message appended 900 ms into its second is dated to
    /// the second's start, 400 ms before a `from` it came after.
    #[test]
    fn the_first_appended_since_passes_over_no_message_appended_after_it() {
        use std::time::Duration;
        let slots: Slots<u8> = Slots::new(8, "t");
        let first = clock::now();
        let days = Duration::from_secs(13 * 24 * 3600);
        // SAFETY (all): one thread.
        unsafe {
            slots.append(0, Some(0), first);
            slots.append(1, Some(1), first + Duration::from_millis(7));
            slots.append(2, Some(2), first + days + Duration::from_millis(900));
            slots.append(3, Some(3), first + days + Duration::from_millis(1900));
            let since = |from: Time| slots.first_appended_since(0..4, from);
            assert_eq!(since(first), 0);
            assert_eq!(
                since(first + Duration::from_micros(6_500)),
                1,
                "7 ms, by its stamp"
            );
            assert_eq!(
                since(first + Duration::from_micros(8_500)),
                2,
                "1 came before 8 ms"
            );
            assert_eq!(
                since(first + days + Duration::from_millis(500)),
                2,
                "2 came 400 ms after, dated to its second's start"
            );
            assert_eq!(
                since(first + days + Duration::from_millis(1950)),
                3,
                "3 came 50 ms before, but its stamp cannot tell"
            );
            assert_eq!(
                since(first + days + Duration::from_millis(2001)),
                4,
                "none after"
            );
        }
    }

    #[test]
    fn a_panic_in_a_values_drop_stops_at_the_last_release() {
        struct Brittle(Arc<AtomicUsize>);
        impl Drop for Brittle {
            fn drop(&mut self) {
                self.0.fetch_add(1, SeqCst);
                panic!("a payload's Drop panics");
            }
        }
        let drops = Arc::new(AtomicUsize::new(0));
        let slots = Slots::new(4, "t");
        let now = clock::now();
        // SAFETY (all): one thread.
        unsafe {
            for seq in 0..3 {
                slots.append(seq, Some(Brittle(Arc::clone(&drops))), now);
            }
        }
        drop(slots);
        assert_eq!(
            drops.load(SeqCst),
            3,
            "each dropped, none stopped the others"
        );
    }

    #[test]
    fn threads_letting_go_of_a_block_drop_each_value_once() {
        let rounds = if cfg!(miri) { 10 } else { 500 };
        for round in 0..rounds {
            let drops = Arc::new(AtomicUsize::new(0));
            let slots = Slots::new(4, "t");
            let now = clock::now();
            // SAFETY (all): appends and trims on this thread; the others hold counted
            // references only.
            let references: Vec<_> = unsafe {
                for seq in 0..4 {
                    slots.append(seq, Some(tally(&drops, seq)), now);
                }
                (0..4)
                    .map(|seq| Shared::clone(&slots.message(seq).unwrap()))
                    .collect()
            };
            std::thread::scope(|scope| {
                for reference in references {
                    scope.spawn(move || {
                        assert!(reference.1 < 4);
                        drop(reference);
                    });
                }
                let mut trimmed = Vec::new();
                // SAFETY: as above.
                let released = unsafe {
                    (0..3).for_each(|seq| {
                        assert!(slots.trim(seq, &mut |v| trimmed.push(v)).is_none())
                    });
                    slots.trim(3, &mut |v| trimmed.push(v))
                };
                drop((trimmed, released));
            });
            assert_eq!(drops.load(SeqCst), 4, "round {round}");
        }
    }
}
