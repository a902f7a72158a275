//! Leaves every layer may use: deadlines from timeouts, catching panics in user code, waking async waiters (and, for their bounds, a clock of our own), padding a
//! value to its own cache line, and spinning before sleeping.

pub(crate) mod deadline;
pub(crate) mod padded;
pub(crate) mod snooze;
#[cfg(feature = "tokio")]
pub(crate) mod ticker;
pub(crate) mod unwind;
#[cfg(feature = "tokio")]
pub(crate) mod wake;
