//! One published message shared by the mailboxes it is handed to.
//!
//! It works like an `Arc` whose references are all made at once: a publish to `n` mailboxes
//! allocates the message with its count already at `n` and hands out `n` references, instead
//! of making one and cloning it `n - 1` times. Each clone is an atomic increment on the
//! line the workers' decrements also write, so at 16 subscribers the publisher spent a
//! share of every publish taking that line back (see BENCHMARKS.md). Letting go works as
//! `Arc`'s does, except that a panic in the value's `Drop` stops where the last reference is
//! let go of (a worker, a publisher making room, the dead-letter store): user code must not
//! take down the thread that happens to hold the last reference.
//!
//! # Blocks, headers and cells
//!
//! A message lives in a *cell* of a *block*: the value, and the cell's index in its block.
//! What the cells of a block share is in the block's [`Header`] in front of them: the count
//! of references (to any of its cells), and the seq of its first cell and the topic's name,
//! so that a cell need not carry them. A reference ([`Shared`]) points at its cell; the
//! header is found from the cell by its index (`header_of`). The blocks made here hold one
//! cell each; a log keeps its messages in blocks of many (`log_block.rs`), which the same
//! references point into: the header's `kind` says what letting go of a block's last
//! reference does.
//!
//! # Spare blocks
//!
//! A topic's publishes take their blocks from its [`Pool`], and the last reference let go of
//! puts its block back there instead of freeing it. A freed block crossed threads (allocated
//! by the publisher, freed by a worker), which cost `malloc` and `free` about 200
//! instructions a message (BENCHMARKS.md); putting it back is one compare-and-swap.
//!
//! The spare blocks are a stack that any thread pushes onto and only the topic's publisher
//! (under the order lock) takes from, all at once with a swap, so the stack has no ABA
//! problem: no block is ever taken off it singly while others push. A topic makes at most
//! [`Pool::limit`] blocks that go back to it (later ones are freed as before), so the stack
//! is bounded. When the pool is dropped with its topic, the stack's head becomes a sentinel
//! that no block is, and a block let go of after that sees it and is freed.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::mem::{offset_of, size_of, MaybeUninit};
use std::ops::Deref;
use std::ptr::{self, NonNull};
use std::sync::atomic::{
    fence, AtomicPtr, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::Arc;

/// What the cells of a block share, in front of them.
#[repr(C)]
pub(crate) struct Header {
    /// References to the block's cells not yet let go of, including those a [`References`]
    /// has yet to hand out (and, for a log's block, the log's own while it keeps the block).
    pub(super) refs: AtomicUsize,
    /// The seq of the block's first cell.
    pub(super) base: u64,
    /// The name of the topic its messages were published to.
    pub(super) topic: &'static str,
    /// What letting go of the last reference does.
    pub(super) kind: Kind,
    /// How many cells follow the header.
    pub(super) cells: u32,
}

/// The kinds of block.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// One cell, from a topic's pool or of its own ([`Block`]).
    One,
    /// A log's block of many cells (`log_block.rs`).
    Log,
}

/// One message's place in a block.
#[repr(C)]
pub(crate) struct Cell<V> {
    /// Written while the block is its writer's alone, before any reference to the cell is
    /// handed out; dropped (or taken out) once, after the last reference is let go of.
    pub(super) value: UnsafeCell<MaybeUninit<V>>,
    /// The cell's place in its block: `seq - base`, and how far behind it the header is.
    pub(super) index: u32,
    /// For a log's cell: when it was appended, and whether its message is kept out of line
    /// (`log_block.rs`). Unused in a block of one.
    pub(super) stamp: u32,
}

/// A block of one cell, as a topic's pool makes and keeps them.
#[repr(C)]
struct Block<V> {
    header: Header,
    cell: Cell<V>,
    /// The stack the block goes back to when its last reference is let go of, if any.
    spares: Option<Arc<Spares<V>>>,
    /// The block below this one while it is on its pool's stack. Written only by the thread
    /// that owns the block, before the push that publishes it.
    below: *mut Block<V>,
}

/// The stack of a topic's spare blocks (see the module docs): null when empty, [`closed`]
/// once its pool is gone.
struct Spares<V> {
    top: AtomicPtr<Block<V>>,
}

/// The stack's head once its pool has been dropped: an address no block has.
fn closed<V>() -> *mut Block<V> {
    NonNull::dangling().as_ptr()
}

impl<V> Spares<V> {
    /// Pushes `block`, whose value has been dropped; false if the pool is gone (the caller
    /// frees it).
    ///
    /// # Safety
    ///
    /// The caller owns `block` (no reference to it is left) and does not use it after a
    /// `true`.
    unsafe fn put_back(&self, block: NonNull<Block<V>>) -> bool {
        let mut top = self.top.load(Relaxed);
        loop {
            if top == closed() {
                return false;
            }
            // SAFETY: the caller owns the block until the push below succeeds.
            unsafe { (*block.as_ptr()).below = top };
            // Release: the publisher that takes the stack (Acquire) sees `below`, and the
            // dropped value's writes, of this block and of every one under it (each push is
            // a read-modify-write, so it carries on the release of those before it).
            match self
                .top
                .compare_exchange_weak(top, block.as_ptr(), Release, Relaxed)
            {
                Ok(_) => return true,
                Err(now) => top = now,
            }
        }
    }
}

/// A topic's blocks, as its publishers make messages in them: under the topic's order lock,
/// which is what lets [`Pool::shared`] take `&mut self`.
pub(crate) struct Pool<V> {
    spares: Arc<Spares<V>>,
    /// Spare blocks taken from the stack in one swap, linked by `below`: this pool's alone.
    ready: *mut Block<V>,
    /// Blocks made that go back to this pool: at most `limit`.
    made: usize,
    limit: usize,
}

// SAFETY: the blocks `ready` links hold no `V` (their values were dropped) and are this
// pool's alone; the pool is used under its topic's order lock, one thread at a time. Sending
// it sends the right to write `V`s into those blocks and hand them out, which needs `V: Send`.
unsafe impl<V: Send> Send for Pool<V> {}

/// About how many bytes of blocks a topic makes to reuse, and the bounds on how many blocks
/// that is. More messages in flight at once than this get blocks of their own, freed as
/// before. Enough for a default mailbox (1,024) full of small messages: a block of one with
/// a 24-byte value is 88 bytes (its header is 40), and with 64 KiB, 744 of them, a mailbox
/// filled to its capacity allocated and freed the rest (BENCHMARKS.md).
const POOL_BYTES: usize = 96 * 1024;
const POOL_BLOCKS: (usize, usize) = (8, 1024);

impl<V> Pool<V> {
    pub(crate) fn new() -> Self {
        let limit = (POOL_BYTES / size_of::<Block<V>>().max(1)).clamp(POOL_BLOCKS.0, POOL_BLOCKS.1);
        Pool {
            spares: Arc::new(Spares {
                top: AtomicPtr::new(ptr::null_mut()),
            }),
            ready: ptr::null_mut(),
            made: 0,
            limit,
        }
    }

    /// How many blocks the pool makes to reuse, at most.
    #[cfg(test)]
    fn limit(&self) -> usize {
        self.limit
    }

    /// How many spare blocks it has now.
    #[cfg(test)]
    fn spares(&self) -> usize {
        let mut count = 0;
        for mut block in [self.ready, self.spares.top.load(Acquire)] {
            while !block.is_null() {
                count += 1;
                // SAFETY: test code, with no thread letting go of blocks meanwhile.
                block = unsafe { (*block).below };
            }
        }
        count
    }

    /// `count` references to `value` (at least one), message `seq` of `topic`, in a spare
    /// block if there is one.
    #[inline(always)]
    pub(crate) fn shared(
        &mut self,
        seq: u64,
        topic: &'static str,
        value: V,
        count: usize,
    ) -> References<V> {
        let count = count.max(1);
        let block = match self.spare() {
            Some(block) => {
                // SAFETY: a spare block is this pool's alone and its value was dropped, so
                // writing a new one leaks nothing; the count is set before any reference
                // exists, and handing the references to other threads publishes it.
                unsafe {
                    let block = block.as_ptr();
                    (*block).header.refs.store(count, Relaxed);
                    (*block).header.base = seq;
                    (*block).header.topic = topic;
                    (*block).cell.value.get_mut().write(value);
                }
                block
            }
            None if self.made < self.limit => {
                self.made += 1;
                allocate(seq, topic, value, count, Some(Arc::clone(&self.spares)))
            }
            None => allocate(seq, topic, value, count, None),
        };
        References {
            cell: cell_of(block),
            left: count,
            _owns: PhantomData,
        }
    }

    #[inline(always)]
    fn spare(&mut self) -> Option<NonNull<Block<V>>> {
        if self.ready.is_null() {
            // Acquire: see the pushes' writes (see `put_back`). The head is never `closed`
            // while the pool lives.
            self.ready = self.spares.top.swap(ptr::null_mut(), Acquire);
        }
        let block = NonNull::new(self.ready)?;
        // SAFETY: blocks on `ready` are this pool's alone and still allocated.
        self.ready = unsafe { (*block.as_ptr()).below };
        Some(block)
    }
}

impl<V> Drop for Pool<V> {
    fn drop(&mut self) {
        let stacked = self.spares.top.swap(closed(), Acquire);
        for mut block in [std::mem::replace(&mut self.ready, ptr::null_mut()), stacked] {
            while !block.is_null() {
                // SAFETY: a spare block's value was dropped and nothing else refers to it;
                // it came from `Box::leak` in `allocate`, and freeing it drops its
                // `Arc<Spares>`, not a value (`MaybeUninit`).
                let below = unsafe { (*block).below };
                drop(unsafe { Box::from_raw(block) });
                block = below;
            }
        }
    }
}

/// A new block holding `value`, counted `count` times. Out of line: most publishes reuse one.
#[inline(never)]
fn allocate<V>(
    seq: u64,
    topic: &'static str,
    value: V,
    count: usize,
    spares: Option<Arc<Spares<V>>>,
) -> NonNull<Block<V>> {
    NonNull::from(Box::leak(Box::new(Block {
        header: Header {
            refs: AtomicUsize::new(count),
            base: seq,
            topic,
            kind: Kind::One,
            cells: 1,
        },
        cell: Cell {
            value: UnsafeCell::new(MaybeUninit::new(value)),
            index: 0,
            stamp: 0,
        },
        spares,
        below: ptr::null_mut(),
    })))
}

/// The cell of `block`, as references point at it: derived from the block's own pointer,
/// so that the header can be found from it again (`header_of`).
#[inline(always)]
fn cell_of<V>(block: NonNull<Block<V>>) -> NonNull<Cell<V>> {
    // SAFETY: a field of an allocated block: not null.
    unsafe { NonNull::new_unchecked(ptr::addr_of_mut!((*block.as_ptr()).cell)) }
}

/// Where a block's first cell is, from its start: the same in every kind of block (all are
/// `repr(C)`, the header first and the cells right after it).
pub(super) const fn cells_at<V>() -> usize {
    offset_of!(Block<V>, cell)
}

/// The header of the block `cell` is in.
///
/// # Safety
///
/// `cell` points at a cell of an allocated block, and was derived from the block's pointer
/// (so that it may reach the header).
#[inline(always)]
pub(super) unsafe fn header_of<V>(cell: NonNull<Cell<V>>) -> NonNull<Header> {
    // SAFETY: the caller's promise: the block is allocated, so its cell's index is there.
    let index = unsafe { (*cell.as_ptr()).index } as usize;
    // The cells are one `size_of::<Cell<V>>()` apart, the first at `cells_at`.
    let back = cells_at::<V>() + index * size_of::<Cell<V>>();
    // SAFETY: the caller's promise: `back` bytes before the cell is its block's start, in
    // the same allocation.
    unsafe { NonNull::new_unchecked(cell.as_ptr().cast::<u8>().sub(back).cast::<Header>()) }
}

/// The one-cell block `cell` is in.
///
/// # Safety
///
/// As [`header_of`]; the block is a [`Block`] (one cell, from a pool or `shared`).
#[inline(always)]
unsafe fn block_of<V>(cell: NonNull<Cell<V>>) -> NonNull<Block<V>> {
    // SAFETY: the caller's promise; the header is a `Block`'s first field.
    unsafe { header_of(cell).cast() }
}

/// One reference to a shared value. Made by [`shared`], or by cloning another.
pub(crate) struct Shared<V> {
    cell: NonNull<Cell<V>>,
    _owns: PhantomData<Cell<V>>,
}

// SAFETY: a `Shared<V>` gives `&V` to the thread holding it and drops the `V` on whichever
// thread lets go of the last reference, as `Arc<V>` does, so it is `Send` and `Sync` under
// the bounds `Arc<V>` is: `V: Send + Sync`.
unsafe impl<V: Send + Sync> Send for Shared<V> {}
// SAFETY: as above.
unsafe impl<V: Send + Sync> Sync for Shared<V> {}

/// The references to one value a publish has yet to hand out; those it never hands out are
/// let go of when it is dropped.
pub(crate) struct References<V> {
    cell: NonNull<Cell<V>>,
    left: usize,
    _owns: PhantomData<Cell<V>>,
}

/// `count` references to `value` (at least one), message `seq` of `topic`, in one
/// allocation of its own (freed, not kept, when the last reference goes).
pub(crate) fn shared<V>(seq: u64, topic: &'static str, value: V, count: usize) -> References<V> {
    let count = count.max(1);
    References {
        cell: cell_of(allocate(seq, topic, value, count, None)),
        left: count,
        _owns: PhantomData,
    }
}

/// Lets go of `n` references, and drops the value if they were the last.
///
/// # Safety
///
/// The caller holds `n` of the counted references to `cell` and uses none of them after.
#[inline]
unsafe fn release<V>(cell: NonNull<Cell<V>>, n: usize) {
    // SAFETY: the caller's references are counted, so the block is still there.
    let refs = unsafe { &header_of(cell).as_ref().refs };
    // As in `Arc`: each reference's uses happen before its release (Release), and the last
    // release sees all of them (Acquire) before it drops the value.
    if refs.fetch_sub(n, Release) != n {
        return;
    }
    fence(Acquire);
    // SAFETY (all): the count reached zero, so no reference is left and this thread has the
    // block to itself.
    let header = unsafe { header_of(cell) };
    if unsafe { header.as_ref().kind } == Kind::Log {
        return unsafe { release_log_block::<V>(header) };
    }
    let block = unsafe { block_of(cell) };
    unsafe { drop_value(block) };
    unsafe { recycle(block) };
}

/// A log's block let go of: out of line, so that the release of a block of one (every
/// mailbox delivery's) stays small enough to be put in line.
///
/// # Safety
///
/// As `log_block::last_release`.
#[cold]
#[inline(never)]
unsafe fn release_log_block<V>(header: NonNull<Header>) {
    // SAFETY: the caller's promise.
    unsafe { super::log_block::last_release::<V>(header) }
}

/// Drops a block's value; a panic in its `Drop` stops here.
///
/// # Safety
///
/// The caller has the block to itself (no reference to it is left), and its value was not
/// dropped yet: it is taken out once and never read again (a reused block gets a new one
/// first).
unsafe fn drop_value<V>(block: NonNull<Block<V>>) {
    if std::mem::needs_drop::<V>() {
        // SAFETY: the caller's promise.
        let value = unsafe { (*block.as_ptr()).cell.value.get_mut().assume_init_read() };
        crate::util::unwind::drop_quietly(value);
    }
}

/// Puts a block whose value was dropped back on its pool's stack, or frees it (a block made
/// beyond its pool's limit, or whose pool is gone).
///
/// # Safety
///
/// The caller owns the block (no reference to it is left) and its value was dropped; the
/// caller does not use it after.
unsafe fn recycle<V>(block: NonNull<Block<V>>) {
    // SAFETY: the caller's promise: the block is still allocated, and this thread owns it.
    if let Some(spares) = unsafe { &(*block.as_ptr()).spares } {
        // SAFETY: as above; after a push the block is not touched again.
        if unsafe { spares.put_back(block) } {
            return;
        }
    }
    // SAFETY: as above; the allocation came from `Box::leak` in `allocate`, and its value
    // was dropped (`MaybeUninit`: freeing the box does not drop it again).
    drop(unsafe { Box::from_raw(block.as_ptr()) });
}

impl<V> Iterator for References<V> {
    type Item = Shared<V>;

    #[inline]
    fn next(&mut self) -> Option<Shared<V>> {
        if self.left == 0 {
            return None;
        }
        // One of the references counted at the start passes to the `Shared`.
        self.left -= 1;
        Some(Shared {
            cell: self.cell,
            _owns: PhantomData,
        })
    }
}

impl<V> Drop for References<V> {
    #[inline]
    fn drop(&mut self) {
        if self.left > 0 {
            // SAFETY: the `left` references not handed out are this one's to let go of.
            unsafe { release(self.cell, self.left) };
        }
    }
}

impl<V> Clone for Shared<V> {
    fn clone(&self) -> Self {
        // As in `Arc`: a new reference is made from an existing one, so no ordering is
        // needed; a count near overflow (leaked clones) aborts rather than wrap.
        if self.header().refs.fetch_add(1, Relaxed) > isize::MAX as usize {
            std::process::abort();
        }
        Shared {
            cell: self.cell,
            _owns: PhantomData,
        }
    }
}

impl<V> Shared<V> {
    /// The header of its block.
    #[inline(always)]
    fn header(&self) -> &Header {
        // SAFETY: this reference is counted, so the block is there as long as `self`; its
        // cell pointer was derived from the block's (`cell_of`).
        unsafe { header_of(self.cell).as_ref() }
    }

    /// The message's seq: its block's first, and its place in the block.
    #[inline]
    pub(crate) fn seq(&self) -> u64 {
        // SAFETY: as in `header`: the cell is there as long as `self`.
        let index = unsafe { (*self.cell.as_ptr()).index };
        self.header().base + u64::from(index)
    }

    /// The name of the topic it was published to.
    #[inline]
    pub(crate) fn topic(&self) -> &'static str {
        self.header().topic
    }

    /// A reference to the message in `cell`: one of the counted ones, or a handle that is not
    /// counted (an alias), which the caller never drops.
    ///
    /// # Safety
    ///
    /// `cell` is a cell of an allocated block with a value, derived from the block's pointer;
    /// the caller owns one of the block's counted references for it, or uses it as an alias.
    pub(super) unsafe fn at(cell: NonNull<Cell<V>>) -> Shared<V> {
        Shared {
            cell,
            _owns: PhantomData,
        }
    }

    /// The value, if this is its only reference; else this reference back.
    ///
    /// For a message an inline subscriber refused (`delivery/inline.rs`): its payload goes
    /// back to the publisher.
    pub(crate) fn try_unwrap(self) -> Result<V, Self> {
        // Acquire: as the last release's fence, every other reference's uses happened before
        // (each let go with a release read-modify-write). A count of one is this reference
        // alone, and no other can appear meanwhile (a new one is made only from one held, or
        // from an alias a counted one keeps). A log's cell is never unwrapped: its block is
        // the log's (`log_block.rs`).
        let header = self.header();
        if header.kind != Kind::One || header.refs.load(Acquire) != 1 {
            return Err(self);
        }
        let cell = self.cell;
        std::mem::forget(self);
        // SAFETY (all): the only reference was this one, now forgotten: this thread has the
        // block to itself, and its value is taken out once, never read again; with the value
        // out, the block goes back (or is freed) without it.
        let block = unsafe { block_of(cell) };
        let value = unsafe { (*block.as_ptr()).cell.value.get_mut().assume_init_read() };
        unsafe { recycle(block) };
        Ok(value)
    }
}

impl<V> Deref for Shared<V> {
    type Target = V;

    #[inline(always)]
    fn deref(&self) -> &V {
        // SAFETY: this reference is counted, so the value lives at least as long as `self`;
        // it was written before any reference was handed out, and is not written while one
        // is held.
        unsafe { (*(*self.cell.as_ptr()).value.get()).assume_init_ref() }
    }
}

impl<V> Drop for Shared<V> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: this is the reference's one release; `self` is not used after.
        unsafe { release(self.cell, 1) };
    }
}

/// Also run under Miri (`cargo +nightly miri test -p eventbus --lib shared`), which checks the
/// unsafe code above for use after free, leaks and data races; CI's machine has no Miri.
#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;

    /// Counts its drops.
    struct Tally(Arc<AtomicUsize>, u64);

    impl Drop for Tally {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    #[test]
    fn the_value_is_dropped_once_when_the_last_reference_goes() {
        let drops = Arc::new(AtomicUsize::new(0));
        let references: Vec<_> = shared(0, "t", Tally(Arc::clone(&drops), 7), 3).collect();
        assert_eq!(references.len(), 3);
        let mut references = references.into_iter();
        let last = references.next().unwrap();
        drop(references);
        assert_eq!(drops.load(SeqCst), 0);
        assert_eq!(last.1, 7);
        drop(last);
        assert_eq!(drops.load(SeqCst), 1);
    }

    #[test]
    fn references_never_handed_out_are_let_go_of() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut references = shared(0, "t", Tally(Arc::clone(&drops), 1), 4);
        let one = references.next().unwrap();
        drop(references);
        assert_eq!(drops.load(SeqCst), 0, "one reference is still held");
        drop(one);
        assert_eq!(drops.load(SeqCst), 1);

        drop(shared(0, "t", Tally(Arc::clone(&drops), 2), 4));
        assert_eq!(
            drops.load(SeqCst),
            2,
            "none handed out: dropped with the references"
        );
        // Asking for none still makes one, which is let go of.
        drop(shared(0, "t", Tally(Arc::clone(&drops), 3), 0));
        assert_eq!(drops.load(SeqCst), 3);
    }

    #[test]
    fn the_only_reference_unwraps_and_its_block_goes_back_to_the_pool() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut pool = Pool::new();
        let mut references = pool.shared(0, "t", Tally(Arc::clone(&drops), 5), 2);
        let (one, two) = (references.next().unwrap(), references.next().unwrap());
        let one = match one.try_unwrap() {
            Err(one) => one,
            Ok(_) => panic!("two references: not unwrapped"),
        };
        drop(two);
        let value = match one.try_unwrap() {
            Ok(value) => value,
            Err(_) => panic!("the only reference unwraps"),
        };
        assert_eq!(
            (value.1, drops.load(SeqCst)),
            (5, 0),
            "taken out, not dropped"
        );
        drop(value);
        assert_eq!(drops.load(SeqCst), 1);
        assert_eq!(pool.spares(), 1, "the emptied block is a spare");
        let reused = pool
            .shared(0, "t", Tally(Arc::clone(&drops), 6), 1)
            .next()
            .unwrap();
        assert_eq!(pool.spares(), 0);
        drop(reused);
        assert_eq!(drops.load(SeqCst), 2);
    }

    /// Panics in its `Drop`, with a payload that panics again when dropped.
    struct Brittle(Arc<AtomicUsize>);

    struct PanicsOnDrop;

    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("the payload panics in its Drop too");
        }
    }

    impl Drop for Brittle {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
            std::panic::panic_any(PanicsOnDrop);
        }
    }

    #[test]
    fn a_panic_in_the_values_drop_stops_at_the_last_release() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut references = shared(0, "t", Brittle(Arc::clone(&drops)), 2);
        let (one, two) = (references.next().unwrap(), references.next().unwrap());
        drop(one);
        drop(two);
        assert_eq!(drops.load(SeqCst), 1);
    }

    #[test]
    fn a_clone_is_one_more_reference() {
        let drops = Arc::new(AtomicUsize::new(0));
        let one = shared(0, "t", Tally(Arc::clone(&drops), 5), 1)
            .next()
            .unwrap();
        let two = one.clone();
        drop(one);
        assert_eq!((drops.load(SeqCst), two.1), (0, 5));
        drop(two);
        assert_eq!(drops.load(SeqCst), 1);
    }

    /// The address of the value a reference shows.
    fn address<T>(shared: &Shared<T>) -> usize {
        &**shared as *const T as usize
    }

    #[test]
    fn a_block_let_go_of_is_reused_by_the_next_message() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut pool = Pool::new();
        let first = pool
            .shared(0, "t", Tally(Arc::clone(&drops), 1), 2)
            .collect::<Vec<_>>();
        let at = address(&first[0]);
        drop(first);
        assert_eq!(
            drops.load(SeqCst),
            1,
            "the value is dropped when its block goes back"
        );
        let second = pool
            .shared(0, "t", Tally(Arc::clone(&drops), 2), 1)
            .next()
            .unwrap();
        assert_eq!(address(&second), at, "the spare block was not reused");
        assert_eq!(second.1, 2);
        drop(second);
        drop(pool);
        assert_eq!(drops.load(SeqCst), 2);
    }

    #[test]
    fn blocks_let_go_of_after_their_pool_is_gone_are_freed() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut pool = Pool::new();
        let spare = pool
            .shared(0, "t", Tally(Arc::clone(&drops), 0), 1)
            .next()
            .unwrap();
        drop(spare);
        let held: Vec<_> = (1..=3)
            .map(|i| {
                pool.shared(0, "t", Tally(Arc::clone(&drops), i), 1)
                    .next()
                    .unwrap()
            })
            .collect();
        // The pool goes first (its topic was dropped) with its spare block; the blocks still
        // held are freed when let go of (Miri reports a leak otherwise).
        drop(pool);
        assert_eq!(drops.load(SeqCst), 1);
        drop(held);
        assert_eq!(drops.load(SeqCst), 4);
    }

    #[test]
    fn a_pool_keeps_at_most_its_limit_of_blocks() {
        let mut pool = Pool::new();
        let limit = pool.limit();
        let held: Vec<_> = (0..limit as u64 + 5)
            .map(|i| pool.shared(0, "t", i, 1).next().unwrap())
            .collect();
        drop(held);
        assert_eq!(pool.spares(), limit);
    }

    #[test]
    fn threads_letting_go_while_the_publisher_takes_blocks_lose_none() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut pool = Pool::new();
        let rounds = if cfg!(miri) { 20 } else { 2000 };
        let (tx, rx) = std::sync::mpsc::channel::<Shared<Tally>>();
        let rx = std::sync::Mutex::new(rx);
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| {
                    while let Ok(shared) = rx.lock().unwrap().recv() {
                        assert!(shared.1 < rounds);
                        drop(shared);
                    }
                });
            }
            for i in 0..rounds {
                for shared in pool.shared(0, "t", Tally(Arc::clone(&drops), i), 2) {
                    tx.send(shared).unwrap();
                }
            }
            drop(tx);
        });
        assert_eq!(drops.load(SeqCst), rounds as usize);
        assert!(pool.spares() <= pool.limit());
    }

    #[test]
    fn threads_letting_go_at_once_drop_the_value_once() {
        for _ in 0..200 {
            let drops = Arc::new(AtomicUsize::new(0));
            let start = std::sync::Barrier::new(8);
            std::thread::scope(|scope| {
                for reference in shared(0, "t", Tally(Arc::clone(&drops), 9), 8) {
                    let start = &start;
                    scope.spawn(move || {
                        start.wait();
                        assert_eq!(reference.1, 9);
                        drop(reference);
                    });
                }
            });
            assert_eq!(drops.load(SeqCst), 1);
        }
    }
}
