//! The log's clock: the time an append stamps its message with, and how far that time may
//! be off.
//!
//! Every append reads it, under the ring lock, so it must be cheap. `Instant::now` was about
//! 30% of a 1 → 1 log publish's wall time (BENCHMARKS.md, "What the clock costs a
//! publish"): the vDSO reads the time stamp counter, ordered with a fence. On Linux the log
//! reads the kernel's coarse monotonic clock instead (`CLOCK_MONOTONIC_COARSE`): the time
//! of the last timer tick, which the vDSO reads from memory the kernel writes once a tick.
//! It is behind the fine clock by up to a tick ([`tick`]: `clock_getres`, 4 ms at
//! `HZ=250`), so a stamp dates a message to within a tick, and the age trim waits a tick
//! more than `retain_for` so that no message is trimmed early (`Log::trim_expired`). Where
//! the coarse clock's tick is longer than [`MAX_TICK`], or on other systems, the clock is
//! `Instant::now` and the tick is zero.
//!
//! The readings are `Instant`s: the coarse time since an origin taken once, added to the
//! `Instant` read at that origin. Their differences are the coarse clock's, so two readings
//! differ from the fine clock's difference by less than a tick.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The longest tick the coarse clock may have and still date messages: past it (a kernel
/// built with `HZ=100`), the log reads the fine clock.
pub(crate) const MAX_TICK: Duration = Duration::from_millis(4);

/// The time to stamp an append with, or to measure stamps' ages against (see the module
/// docs: within [`tick`] of `Instant::now`).
#[inline]
pub(crate) fn now() -> Instant {
    match origin() {
        Some(origin) => origin.at + coarse().saturating_sub(origin.coarse),
        None => Instant::now(),
    }
}

/// How far behind the fine clock [`now`] may be: zero where it is the fine clock.
pub(crate) fn tick() -> Duration {
    origin().map_or(Duration::ZERO, |origin| origin.tick)
}

/// The coarse clock's reading at `at`, and its tick.
#[derive(Clone, Copy, Debug)]
struct Origin {
    at: Instant,
    coarse: Duration,
    tick: Duration,
}

/// The origin, taken once; `None` where the log reads the fine clock.
#[inline]
fn origin() -> Option<&'static Origin> {
    static ORIGIN: OnceLock<Option<Origin>> = OnceLock::new();
    ORIGIN
        .get_or_init(|| {
            let tick = coarse_tick().filter(|tick| *tick <= MAX_TICK)?;
            // The fine reading between two equal coarse ones: no tick between them, so `at`
            // is less than a tick after `coarse`, however long this thread was preempted.
            // Tried again if a tick fell between (ticks are milliseconds apart: the second
            // try at the latest), a few times at most: a clock that moves on every read
            // (Miri's) takes the last try's pair.
            let mut coarse_before = coarse();
            let mut tries = 0;
            loop {
                let at = Instant::now();
                let coarse_after = coarse();
                tries += 1;
                if coarse_after == coarse_before || tries == 4 {
                    return Some(Origin {
                        at,
                        coarse: coarse_before,
                        tick,
                    });
                }
                coarse_before = coarse_after;
            }
        })
        .as_ref()
}

#[cfg(target_os = "linux")]
fn coarse() -> Duration {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `time` is a valid, writable `timespec` for the length of the call, the only
    // memory `clock_gettime` writes; `CLOCK_MONOTONIC_COARSE` exists on every Linux since
    // 2.6.32 (and `coarse_tick` has asked for it before any reading is used). It cannot fail
    // with a valid clock and pointer; were it to, `time` stays zero and the readings stop
    // (a stamp too early by the time since the origin: the trim then keeps the message
    // longer, never shorter).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut time) };
    Duration::new(time.tv_sec as u64, time.tv_nsec as u32)
}

/// The coarse clock's resolution, if it has one.
#[cfg(all(target_os = "linux", not(miri)))]
fn coarse_tick() -> Option<Duration> {
    let mut resolution = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: as in `coarse`: `resolution` is a valid, writable `timespec`.
    let said = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut resolution) };
    (said == 0).then(|| Duration::new(resolution.tv_sec as u64, resolution.tv_nsec as u32))
}

/// Miri has no `clock_getres`: it takes the tick to be [`MAX_TICK`], so that the tests it
/// runs read the coarse clock (which it has) as a log does.
#[cfg(all(target_os = "linux", miri))]
fn coarse_tick() -> Option<Duration> {
    Some(MAX_TICK)
}

#[cfg(not(target_os = "linux"))]
fn coarse() -> Duration {
    Duration::ZERO
}

#[cfg(not(target_os = "linux"))]
fn coarse_tick() -> Option<Duration> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_keep_within_a_tick_of_the_fine_clock_and_never_go_back() {
        let tick = tick();
        assert!(tick <= MAX_TICK);
        let mut last = now();
        for _ in 0..if cfg!(miri) { 20 } else { 1_000 } {
            let before = Instant::now();
            let reading = now();
            let after = Instant::now();
            assert!(reading >= last, "the clock went back");
            // Off by less than a tick, either way: the origin's own reading was up to a tick
            // behind, and so is this one.
            assert!(
                reading + tick >= before,
                "{reading:?} more than {tick:?} before {before:?}"
            );
            assert!(
                reading <= after + tick,
                "{reading:?} more than {tick:?} after {after:?}"
            );
            last = reading;
        }
    }

    #[cfg(all(target_os = "linux", not(miri)))]
    #[test]
    fn on_linux_the_log_reads_the_coarse_clock_where_its_tick_is_short() {
        let resolution = coarse_tick().expect("Linux has CLOCK_MONOTONIC_COARSE");
        if resolution <= MAX_TICK {
            assert_eq!(tick(), resolution);
        } else {
            assert_eq!(tick(), Duration::ZERO);
        }
    }
}
