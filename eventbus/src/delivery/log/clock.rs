//! The log's clock: the time an append stamps its message with, and how far that time may
//! be off.
//!
//! Every append reads it, under the ring lock, so it must be cheap. `Instant::now` was about
//! 30% of a 1 → 1 log publish's wall time (BENCHMARKS.md, "What the clock costs a
//! publish"): the vDSO reads the time stamp counter, ordered with a fence. On Linux the log
//! reads the kernel's coarse monotonic clock instead (`CLOCK_MONOTONIC_COARSE`): the time
//! the kernel last moved its clock on, once a timer tick ([`tick`]: `clock_getres`, 4 ms at
//! `HZ=250`), which the vDSO reads from memory. Where the coarse clock's tick is longer
//! than [`MAX_TICK`], or on other systems, the clock is `Instant::now` and the tick is zero.
//!
//! A reading is behind the time by up to a tick, and more when the kernel moves its clock
//! on late (its steps fall on a grid of its own, and a timer interrupt may be held up): here,
//! sampled after random sleeps and spins with both cores busy, from 1.8 to 9.5 ms behind
//! with 4 ms ticks, 5.9 ms at the 99.9th percentile. Two readings' difference is off by as
//! much as their lags differ. So what depends on an age allows [`slack`], three ticks: the
//! age trim waits that much more than `retain_for` (`Log::trim_expired`), and `Start::Since`
//! starts that much (and a millisecond) earlier (`Log::join_all`). A lag beyond it (a core
//! of a virtual machine descheduled by its host, say) could trim a message early, or leave
//! one out of a `Since`, by the excess.
//!
//! The readings are `Instant`s: the coarse time since an origin taken once, added to the
//! `Instant` read at that origin. Their differences are the coarse clock's.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The longest tick the coarse clock may have and still date messages: past it (a kernel
/// built with `HZ=100`), the log reads the fine clock.
pub(crate) const MAX_TICK: Duration = Duration::from_millis(4);

/// The time to stamp an append with, or to measure stamps' ages against (see the module
/// docs: within [`slack`] of `Instant::now`, either way).
#[inline]
pub(crate) fn now() -> Instant {
    match origin() {
        Some(origin) => origin.at + coarse().saturating_sub(origin.coarse),
        None => Instant::now(),
    }
}

/// The coarse clock's tick: zero where the log reads the fine clock.
pub(crate) fn tick() -> Duration {
    origin().map_or(Duration::ZERO, |origin| origin.tick)
}

/// How far two readings' difference may be off the time between them (see the module
/// docs): three ticks, zero where the log reads the fine clock.
pub(crate) fn slack() -> Duration {
    3 * tick()
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
    // 2.6.32. It cannot fail with a valid clock and pointer; were it to, `time` stays zero
    // and the readings stop (`saturating_sub` in `now`).
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

    /// Readings for five of the longest ticks (twenty under Miri, whose clock moves on
    /// every read), each between two fine ones: never back, and off the fine clock by no
    /// more than the slack either way (the origin's lag one way, this reading's the other).
    #[test]
    fn readings_keep_within_the_slack_of_the_fine_clock_and_never_go_back() {
        let slack = slack();
        assert!(slack <= 3 * MAX_TICK);
        let started = Instant::now();
        let mut last = now();
        let mut readings = 0;
        while readings < 20 || (!cfg!(miri) && started.elapsed() < 5 * MAX_TICK) {
            let before = Instant::now();
            let reading = now();
            let after = Instant::now();
            assert!(reading >= last, "the clock went back");
            assert!(
                reading + slack >= before,
                "{reading:?} more than {slack:?} before {before:?}"
            );
            assert!(
                reading <= after + slack,
                "{reading:?} more than {slack:?} after {after:?}"
            );
            last = reading;
            readings += 1;
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
