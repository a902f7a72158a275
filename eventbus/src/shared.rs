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

use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{
    fence, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};

struct Counted<T> {
    /// References not yet let go of, including those a [`References`] has yet to hand out.
    refs: AtomicUsize,
    value: T,
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

/// `count` references to `value` (at least one), in one allocation.
pub(crate) fn shared<T>(value: T, count: usize) -> References<T> {
    let count = count.max(1);
    let counted = Box::new(Counted {
        refs: AtomicUsize::new(count),
        value,
    });
    References {
        counted: NonNull::from(Box::leak(counted)),
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
    // SAFETY: the count reached zero, so no reference is left; the allocation came from
    // `Box::leak` in `shared`. A panic in `T`'s `Drop` still frees the allocation (the box's
    // drop glue deallocates on unwind) and is caught here.
    let value = unsafe { Box::from_raw(counted.as_ptr()) };
    crate::unwind::drop_quietly(value);
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
