//! Keeping user code's panics from unwinding into the bus: a value whose `Drop` panics (a
//! message, a panic payload, a handler's captured state or error, a hook) is dropped where
//! the panic stops.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Drops `value` where a panic in its `Drop` cannot unwind into the caller; whether it
/// dropped without one. A panic payload that panics again when dropped is dropped the same
/// way, a bounded number of times, then leaked.
pub(crate) fn drop_quietly<V>(value: V) -> bool {
    let Err(mut payload) = catch_unwind(AssertUnwindSafe(move || drop(value))) else {
        return true;
    };
    for _ in 0..8 {
        match catch_unwind(AssertUnwindSafe(move || drop(payload))) {
            Ok(()) => return false,
            Err(next) => payload = next,
        }
    }
    std::mem::forget(payload);
    false
}
