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

use std::marker::PhantomData;
use std::mem::{size_of, ManuallyDrop};
use std::ops::Deref;
use std::ptr::{self, NonNull};
use std::sync::atomic::{
    fence, AtomicPtr, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::Arc;

struct Counted<T> {
    /// References not yet let go of, including those a [`References`] has yet to hand out.
    refs: AtomicUsize,
    /// The stack the block goes back to when its last reference is let go of, if any.
    spares: Option<Arc<Spares<T>>>,
    /// The block below this one while it is on its pool's stack. Written only by the thread
    /// that owns the block, before the push that publishes it.
    below: *mut Counted<T>,
    /// Dropped (and the block reused or freed) when the last reference is let go of.
    value: ManuallyDrop<T>,
}

/// The stack of a topic's spare blocks (see the module docs): null when empty, [`closed`]
/// once its pool is gone.
struct Spares<T> {
    top: AtomicPtr<Counted<T>>,
}

/// The stack's head once its pool has been dropped: an address no block has.
fn closed<T>() -> *mut Counted<T> {
    NonNull::dangling().as_ptr()
}

impl<T> Spares<T> {
    /// Pushes `block`, whose value has been dropped; false if the pool is gone (the caller
    /// frees it).
    ///
    /// # Safety
    ///
    /// The caller owns `block` (no reference to it is left) and does not use it after a
    /// `true`.
    unsafe fn put_back(&self, block: NonNull<Counted<T>>) -> bool {
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
pub(crate) struct Pool<T> {
    spares: Arc<Spares<T>>,
    /// Spare blocks taken from the stack in one swap, linked by `below`: this pool's alone.
    ready: *mut Counted<T>,
    /// Blocks made that go back to this pool: at most `limit`.
    made: usize,
    limit: usize,
}

// SAFETY: the blocks `ready` links hold no `T` (their values were dropped) and are this
// pool's alone; the pool is used under its topic's order lock, one thread at a time. Sending
// it sends the right to write `T`s into those blocks and hand them out, which needs `T: Send`.
unsafe impl<T: Send> Send for Pool<T> {}

/// About how many bytes of blocks a topic makes to reuse, and the bounds on how many blocks
/// that is. More messages in flight at once than this get blocks of their own, freed as
/// before.
const POOL_BYTES: usize = 64 * 1024;
const POOL_BLOCKS: (usize, usize) = (8, 1024);

impl<T> Pool<T> {
    pub(crate) fn new() -> Self {
        let limit =
            (POOL_BYTES / size_of::<Counted<T>>().max(1)).clamp(POOL_BLOCKS.0, POOL_BLOCKS.1);
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

    /// `count` references to `value` (at least one), in a spare block if there is one.
    #[inline(always)]
    pub(crate) fn shared(&mut self, value: T, count: usize) -> References<T> {
        let count = count.max(1);
        let counted = match self.spare() {
            Some(block) => {
                // SAFETY: a spare block is this pool's alone and its value was dropped, so
                // writing a new one leaks nothing; the count is set before any reference
                // exists, and handing the references to other threads publishes it.
                unsafe {
                    let counted = block.as_ptr();
                    (*counted).refs.store(count, Relaxed);
                    ptr::write(&mut (*counted).value, ManuallyDrop::new(value));
                }
                block
            }
            None if self.made < self.limit => {
                self.made += 1;
                allocate(value, count, Some(Arc::clone(&self.spares)))
            }
            None => allocate(value, count, None),
        };
        References {
            counted,
            left: count,
            _owns: PhantomData,
        }
    }

    /// Lets go of `reference`, as dropping it would (and, as for a drop, no alias of it may
    /// outlive this: see [`Shared::alias`]). When it is the last one, the block
    /// comes straight back to this pool's own list: no read-modify-write of the count and no
    /// push, either of which would wait on a line other threads have read (a log's trim lets
    /// go of the oldest message this way, on its publisher's thread).
    #[inline]
    pub(crate) fn take_back(&mut self, reference: Shared<T>) {
        let counted = reference.counted;
        std::mem::forget(reference);
        // SAFETY: `reference` was counted, so the block is still there.
        let refs = unsafe { &counted.as_ref().refs };
        // Acquire: as the last release's fence, every other reference's uses happened before
        // (each let go with a release read-modify-write). A count of one is this reference
        // alone: a new one is only ever made from one already held (`Shared::clone`, a
        // `References` not yet handed out, which counts itself), or through an alias, whose
        // contract is that a counted reference keeps the value meanwhile, so that it cannot
        // be this one: none can appear while this runs.
        if refs.load(Acquire) != 1 {
            // SAFETY: this is the reference's one release.
            return unsafe { release(counted, 1) };
        }
        let block = counted.as_ptr();
        // SAFETY: the only reference was this one, now forgotten: this thread has the block
        // to itself.
        unsafe { drop_value(counted) };
        // SAFETY: as above.
        let ours = unsafe { &(*block).spares }
            .as_ref()
            .is_some_and(|spares| Arc::ptr_eq(spares, &self.spares));
        if ours {
            // SAFETY: as above; on `ready` the block is this pool's alone.
            unsafe { (*block).below = self.ready };
            self.ready = block;
        } else {
            // SAFETY: as above: another pool's block goes back as a release would send it
            // (or is freed); a block made beyond the limit is freed.
            unsafe { recycle(counted) };
        }
    }

    #[inline(always)]
    fn spare(&mut self) -> Option<NonNull<Counted<T>>> {
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

impl<T> Drop for Pool<T> {
    fn drop(&mut self) {
        let stacked = self.spares.top.swap(closed(), Acquire);
        for mut block in [std::mem::replace(&mut self.ready, ptr::null_mut()), stacked] {
            while !block.is_null() {
                // SAFETY: a spare block's value was dropped and nothing else refers to it;
                // it came from `Box::leak` in `allocate`, and freeing it drops its
                // `Arc<Spares>`, not a value (`ManuallyDrop`).
                let below = unsafe { (*block).below };
                drop(unsafe { Box::from_raw(block) });
                block = below;
            }
        }
    }
}

/// A new block holding `value`, counted `count` times. Out of line: most publishes reuse one.
#[inline(never)]
fn allocate<T>(value: T, count: usize, spares: Option<Arc<Spares<T>>>) -> NonNull<Counted<T>> {
    NonNull::from(Box::leak(Box::new(Counted {
        refs: AtomicUsize::new(count),
        spares,
        below: ptr::null_mut(),
        value: ManuallyDrop::new(value),
    })))
}

/// One reference to a shared value. Made by [`shared`], or by cloning another.
pub(crate) struct Shared<T> {
    counted: NonNull<Counted<T>>,
    _owns: PhantomData<Counted<T>>,
}

// SAFETY: a `Shared<T>` gives `&T` to the thread holding it and drops the `T` on whichever
// thread lets go of the last reference, as `Arc<T>` does, so it is `Send` and `Sync` under
// the bounds `Arc<T>` is: `T: Send + Sync`.
unsafe impl<T: Send + Sync> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for Shared<T> {}

/// The references to one value a publish has yet to hand out; those it never hands out are
/// let go of when it is dropped.
pub(crate) struct References<T> {
    counted: NonNull<Counted<T>>,
    left: usize,
    _owns: PhantomData<Counted<T>>,
}

/// `count` references to `value` (at least one), in one allocation of its own (freed, not
/// kept, when the last reference goes).
pub(crate) fn shared<T>(value: T, count: usize) -> References<T> {
    let count = count.max(1);
    References {
        counted: allocate(value, count, None),
        left: count,
        _owns: PhantomData,
    }
}

/// Lets go of `n` references, and frees the value if they were the last.
///
/// # Safety
///
/// The caller holds `n` of the counted references to `counted` and uses none of them after.
unsafe fn release<T>(counted: NonNull<Counted<T>>, n: usize) {
    // SAFETY: the caller's references are counted, so the allocation is still there.
    let refs = unsafe { &counted.as_ref().refs };
    // As in `Arc`: each reference's uses happen before its release (Release), and the last
    // release sees all of them (Acquire) before it drops the value.
    if refs.fetch_sub(n, Release) != n {
        return;
    }
    fence(Acquire);
    // SAFETY (both): the count reached zero, so no reference is left and this thread has the
    // block to itself.
    unsafe { drop_value(counted) };
    unsafe { recycle(counted) };
}

/// Drops a block's value; a panic in its `Drop` stops here.
///
/// # Safety
///
/// The caller has the block to itself (no reference to it is left), and its value was not
/// dropped yet: it is taken out once and never read again (a reused block gets a new one
/// first).
unsafe fn drop_value<T>(counted: NonNull<Counted<T>>) {
    if std::mem::needs_drop::<T>() {
        // SAFETY: the caller's promise.
        let value = unsafe { ManuallyDrop::take(&mut (*counted.as_ptr()).value) };
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
unsafe fn recycle<T>(counted: NonNull<Counted<T>>) {
    let block = counted.as_ptr();
    // SAFETY: the caller's promise: the block is still allocated, and this thread owns it.
    if let Some(spares) = unsafe { &(*block).spares } {
        // SAFETY: as above; after a push the block is not touched again.
        if unsafe { spares.put_back(counted) } {
            return;
        }
    }
    // SAFETY: as above; the allocation came from `Box::leak` in `allocate`, and its value
    // was dropped (`ManuallyDrop`: freeing the box does not drop it again).
    drop(unsafe { Box::from_raw(block) });
}

impl<T> Iterator for References<T> {
    type Item = Shared<T>;

    fn next(&mut self) -> Option<Shared<T>> {
        if self.left == 0 {
            return None;
        }
        // One of the references counted at the start passes to the `Shared`.
        self.left -= 1;
        Some(Shared {
            counted: self.counted,
            _owns: PhantomData,
        })
    }
}

impl<T> Drop for References<T> {
    fn drop(&mut self) {
        if self.left > 0 {
            // SAFETY: the `left` references not handed out are this one's to let go of.
            unsafe { release(self.counted, self.left) };
        }
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        // SAFETY: this reference is counted, so the allocation is still there.
        let refs = unsafe { &self.counted.as_ref().refs };
        // As in `Arc`: a new reference is made from an existing one, so no ordering is
        // needed; a count near overflow (leaked clones) aborts rather than wrap.
        if refs.fetch_add(1, Relaxed) > isize::MAX as usize {
            std::process::abort();
        }
        Shared {
            counted: self.counted,
            _owns: PhantomData,
        }
    }
}

impl<T> Shared<T> {
    /// A handle on the same value that is not counted; it must never be dropped.
    ///
    /// # Safety
    ///
    /// The caller uses it only while some counted reference keeps the value, and never drops
    /// it (dropping would let go of a reference it does not have).
    pub(crate) unsafe fn alias(&self) -> Shared<T> {
        Shared {
            counted: self.counted,
            _owns: PhantomData,
        }
    }

    /// The value, if this is its only reference; else this reference back.
    ///
    /// For a message an inline subscriber refused (`delivery/inline.rs`): its payload goes
    /// back to the publisher.
    pub(crate) fn try_unwrap(self) -> Result<T, Self> {
        // SAFETY: this reference is counted, so the allocation is still there.
        let refs = unsafe { &self.counted.as_ref().refs };
        // Acquire: as in `Pool::take_back`, every other reference's uses happened before its
        // release. A count of one is this reference alone, and no other can appear meanwhile
        // (a new one is made only from one held, or from an alias a counted one keeps).
        if refs.load(Acquire) != 1 {
            return Err(self);
        }
        let counted = self.counted;
        std::mem::forget(self);
        // SAFETY: the only reference was this one, now forgotten: this thread has the block to
        // itself, and its value is taken out once, never read again.
        let value = unsafe { ManuallyDrop::take(&mut (*counted.as_ptr()).value) };
        // SAFETY: as above; the value is out, so the block goes back (or is freed) without it.
        unsafe { recycle(counted) };
        Ok(value)
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this reference is counted, so the value lives at least as long as `self`.
        unsafe { &self.counted.as_ref().value }
    }
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // SAFETY: this is the reference's one release; `self` is not used after.
        unsafe { release(self.counted, 1) };
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
        let references: Vec<_> = shared(Tally(Arc::clone(&drops), 7), 3).collect();
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
        let mut references = shared(Tally(Arc::clone(&drops), 1), 4);
        let one = references.next().unwrap();
        drop(references);
        assert_eq!(drops.load(SeqCst), 0, "one reference is still held");
        drop(one);
        assert_eq!(drops.load(SeqCst), 1);

        drop(shared(Tally(Arc::clone(&drops), 2), 4));
        assert_eq!(
            drops.load(SeqCst),
            2,
            "none handed out: dropped with the references"
        );
        // Asking for none still makes one, which is let go of.
        drop(shared(Tally(Arc::clone(&drops), 3), 0));
        assert_eq!(drops.load(SeqCst), 3);
    }

    #[test]
    fn the_only_reference_unwraps_and_its_block_goes_back_to_the_pool() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut pool = Pool::new();
        let mut references = pool.shared(Tally(Arc::clone(&drops), 5), 2);
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
        let reused = pool.shared(Tally(Arc::clone(&drops), 6), 1).next().unwrap();
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
        let mut references = shared(Brittle(Arc::clone(&drops)), 2);
        let (one, two) = (references.next().unwrap(), references.next().unwrap());
        drop(one);
        drop(two);
        assert_eq!(drops.load(SeqCst), 1);
    }

    #[test]
    fn a_clone_is_one_more_reference() {
        let drops = Arc::new(AtomicUsize::new(0));
        let one = shared(Tally(Arc::clone(&drops), 5), 1).next().unwrap();
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
            .shared(Tally(Arc::clone(&drops), 1), 2)
            .collect::<Vec<_>>();
        let at = address(&first[0]);
        drop(first);
        assert_eq!(
            drops.load(SeqCst),
            1,
            "the value is dropped when its block goes back"
        );
        let second = pool.shared(Tally(Arc::clone(&drops), 2), 1).next().unwrap();
        assert_eq!(address(&second), at, "the spare block was not reused");
        assert_eq!(second.1, 2);
        drop(second);
        drop(pool);
        assert_eq!(drops.load(SeqCst), 2);
    }

    #[test]
    fn last_references_taken_back_put_their_blocks_on_the_pools_own_list() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut pool = Pool::new();
        let first = pool.shared(Tally(Arc::clone(&drops), 1), 1).next().unwrap();
        let second = pool.shared(Tally(Arc::clone(&drops), 2), 1).next().unwrap();
        let at = [address(&first), address(&second)];
        pool.take_back(first);
        pool.take_back(second);
        assert_eq!(
            drops.load(SeqCst),
            2,
            "the values are dropped when taken back"
        );
        assert!(
            pool.spares.top.load(SeqCst).is_null(),
            "not pushed on the shared stack"
        );
        assert_eq!(pool.spares(), 2, "both blocks are on the pool's list");
        let next: Vec<_> = (3..5)
            .map(|i| pool.shared(Tally(Arc::clone(&drops), i), 1).next().unwrap())
            .collect();
        let mut reused = [address(&next[0]), address(&next[1])];
        reused.sort_unstable();
        let mut at = at;
        at.sort_unstable();
        assert_eq!(reused, at, "the blocks taken back were not both reused");
        assert_eq!((next[0].1, next[1].1), (3, 4));
        drop(next);
        drop(pool);
        assert_eq!(drops.load(SeqCst), 4);
    }

    #[test]
    fn another_pools_block_taken_back_goes_to_that_pool() {
        let drops = Arc::new(AtomicUsize::new(0));
        let (mut mine, mut theirs) = (Pool::new(), Pool::new());
        let theirs_block = theirs
            .shared(Tally(Arc::clone(&drops), 1), 1)
            .next()
            .unwrap();
        let at = address(&theirs_block);
        mine.take_back(theirs_block);
        assert_eq!(drops.load(SeqCst), 1);
        assert_eq!(mine.spares(), 0, "taken into a pool it is not from");
        assert_eq!(theirs.spares(), 1);
        let next = theirs
            .shared(Tally(Arc::clone(&drops), 2), 1)
            .next()
            .unwrap();
        assert_eq!(address(&next), at);
    }

    #[test]
    fn a_panic_in_the_values_drop_stops_in_take_back_and_the_block_is_reused() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut pool = Pool::new();
        let brittle = pool.shared(Brittle(Arc::clone(&drops)), 1).next().unwrap();
        let at = address(&brittle);
        pool.take_back(brittle);
        assert_eq!(drops.load(SeqCst), 1);
        let next = pool.shared(Brittle(Arc::clone(&drops)), 1).next().unwrap();
        assert_eq!(address(&next), at);
        drop(next);
        assert_eq!(drops.load(SeqCst), 2);
    }

    #[test]
    fn take_back_racing_a_drop_on_another_thread_drops_the_value_once() {
        let rounds = if cfg!(miri) { 20 } else { 2000 };
        let drops = Arc::new(AtomicUsize::new(0));
        let mut pool = Pool::new();
        for i in 0..rounds {
            let mut references = pool.shared(Tally(Arc::clone(&drops), i), 2);
            let (kept, sent) = (references.next().unwrap(), references.next().unwrap());
            drop(references);
            std::thread::scope(|scope| {
                scope.spawn(move || drop(sent));
                pool.take_back(kept);
            });
            assert_eq!(drops.load(SeqCst), i as usize + 1, "round {i}");
        }
        assert!(pool.spares() <= pool.limit());
    }

    #[test]
    fn a_reference_taken_back_while_others_hold_one_only_lets_go() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut pool = Pool::new();
        let mut references = pool.shared(Tally(Arc::clone(&drops), 5), 2);
        let (first, second) = (references.next().unwrap(), references.next().unwrap());
        pool.take_back(first);
        assert_eq!(drops.load(SeqCst), 0, "the other reference still holds it");
        assert_eq!(second.1, 5);
        assert_eq!(pool.spares(), 0);
        drop(second);
        assert_eq!(drops.load(SeqCst), 1);
        assert_eq!(pool.spares(), 1, "the last drop sent the block back");
    }

    #[test]
    fn a_block_of_no_pool_taken_back_is_freed() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut pool = Pool::new();
        let unpooled = shared(Tally(Arc::clone(&drops), 3), 1).next().unwrap();
        pool.take_back(unpooled);
        assert_eq!(drops.load(SeqCst), 1);
        assert_eq!(pool.spares(), 0);
    }

    #[test]
    fn blocks_let_go_of_after_their_pool_is_gone_are_freed() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut pool = Pool::new();
        let spare = pool.shared(Tally(Arc::clone(&drops), 0), 1).next().unwrap();
        drop(spare);
        let held: Vec<_> = (1..=3)
            .map(|i| pool.shared(Tally(Arc::clone(&drops), i), 1).next().unwrap())
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
            .map(|i| pool.shared(i, 1).next().unwrap())
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
                for shared in pool.shared(Tally(Arc::clone(&drops), i), 2) {
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
                for reference in shared(Tally(Arc::clone(&drops), 9), 8) {
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
