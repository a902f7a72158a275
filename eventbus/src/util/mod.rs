//! Leaves every layer may use: catching panics in user code, waking async waiters, padding a
//! value to its own cache line, and spinning before sleeping.

pub(crate) mod padded;
pub(crate) mod snooze;
pub(crate) mod unwind;
#[cfg(feature = "tokio")]
pub(crate) mod wake;
