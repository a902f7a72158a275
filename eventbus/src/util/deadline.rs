//! A deadline from a timeout, for the publishes that wait until one.

use std::time::{Duration, Instant};

/// The deadline `timeout` from now; a timeout past what an `Instant` can hold is a century,
/// so a publish with one is still all or nothing.
pub(crate) fn after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 24 * 3600)))
        .unwrap_or(now)
}
