//! Leaves every layer may use: deadlines from timeouts, catching panics in user code, waking async waiters, padding a
//! value to its own cache line, and spinning before sleeping.

pub(crate) mod deadline;
pub(crate) mod padded;
pub(crate) mod snooze;
pub(crate) mod unwind;
#[cfg(feature = "tokio")]
pub(crate) mod wake;
