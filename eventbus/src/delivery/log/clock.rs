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
//! starts that much earlier (`Log::join_all`, which also allows for a stamp's rounding). A
//! lag beyond it (a core of a virtual machine descheduled by its host, say) could trim a
//! message early, or leave one out of a `Since`, by the excess.
//!
//! A reading is a [`Time`]: nanoseconds on the clock the log reads, as a `u64`. An
//! `Instant` made of the coarse time (an origin's `Instant` plus the coarse time since),
//! with the block's stamp cache comparing `Instant`s, cost a publish about fifty
//! instructions of carries and checks (BENCHMARKS.md, "A log's clock read as
//! nanoseconds"); a `u64` is compared and subtracted in one each.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The longest tick the coarse clock may have and still date messages: past it (a kernel
/// built with `HZ=100`), the log reads the fine clock.
pub(crate) const MAX_TICK: Duration = Duration::from_millis(4);

/// A reading of the log's clock: nanoseconds since the coarse clock's start (the machine's
/// boot, on Linux), or, where the log reads the fine clock, since the clock was chosen (the
/// first log made, or the first reading).
/// Readings of one process are of one clock, and only their differences mean anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Time(u64);

impl Time {
    /// The reading `nanos` nanoseconds on (a stamp's, `log_block.rs`).
    pub(crate) const fn from_nanos(nanos: u64) -> Self {
        Time(nanos)
    }

    pub(crate) const fn nanos(self) -> u64 {
        self.0
    }

    /// The reading `by` before this one, if the clock had started then.
    pub(crate) fn checked_sub(self, by: Duration) -> Option<Self> {
        u64::try_from(by.as_nanos())
            .ok()
            .and_then(|by| self.0.checked_sub(by))
            .map(Time)
    }
}

impl std::ops::Add<Duration> for Time {
    type Output = Time;

    /// Saturating: some 584 years of nanoseconds is the clock's end.
    fn add(self, by: Duration) -> Time {
        Time(self.0.saturating_add(saturating_nanos(by)))
    }
}

impl std::ops::Sub for Time {
    type Output = Duration;

    /// The time from `earlier` to this reading, zero if it is later.
    fn sub(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

/// The time to stamp an append with, or to measure stamps' ages against: the difference of
/// two readings is within [`slack`] of the time between them, either way (see the module
/// docs).
/// In line in the append that reads it (a call of its own cost about six instructions of
/// the twenty-odd), with the fine clock's reading out of line.
#[inline(always)]
pub(crate) fn now() -> Time {
    match source() {
        Source::Coarse { .. } => Time(coarse_nanos()),
        Source::Fine { origin } => fine_now(origin),
    }
}

/// The fine clock's reading: where the coarse clock cannot date messages.
#[inline(never)]
fn fine_now(origin: &Instant) -> Time {
    Time(saturating_nanos(origin.elapsed()))
}

/// `by` in nanoseconds, `u64::MAX` past the clock's end.
fn saturating_nanos(by: Duration) -> u64 {
    u64::try_from(by.as_nanos()).unwrap_or(u64::MAX)
}

/// The coarse clock's tick: zero where the log reads the fine clock.
pub(crate) fn tick() -> Duration {
    match source() {
        Source::Coarse { tick } => *tick,
        Source::Fine { .. } => Duration::ZERO,
    }
}

/// How far two readings' difference may be off the time between them (see the module
/// docs): three ticks, zero where the log reads the fine clock.
pub(crate) fn slack() -> Duration {
    3 * tick()
}

/// The clock the log reads, chosen once.
#[derive(Debug)]
enum Source {
    /// The kernel's coarse clock, whose tick is this.
    Coarse { tick: Duration },
    /// `Instant::now`, counted from `origin`.
    Fine { origin: Instant },
}

#[inline]
fn source() -> &'static Source {
    static SOURCE: OnceLock<Source> = OnceLock::new();
    SOURCE.get_or_init(|| match coarse_tick().filter(|tick| *tick <= MAX_TICK) {
        Some(tick) => Source::Coarse { tick },
        None => Source::Fine {
            origin: Instant::now(),
        },
    })
}

/// The coarse clock's reading, in nanoseconds.
#[cfg(target_os = "linux")]
#[inline(always)]
fn coarse_nanos() -> u64 {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `time` is a valid, writable `timespec` for the length of the call, the only
    // memory `clock_gettime` writes; `CLOCK_MONOTONIC_COARSE` exists on every Linux since
    // 2.6.32. It cannot fail with a valid clock and pointer; were it to, `time` stays zero,
    // a reading before any age: `trim_expired` trims nothing and `Since` starts at the
    // oldest (more kept and more delivered, never less).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut time) };
    // A monotonic clock's seconds and nanoseconds are never negative.
    (time.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(time.tv_nsec as u64)
}

/// The coarse clock's resolution, if it has one.
#[cfg(all(target_os = "linux", not(miri)))]
fn coarse_tick() -> Option<Duration> {
    let mut resolution = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: as in `coarse_nanos`: `resolution` is a valid, writable `timespec`.
    let said = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut resolution) };
    (said == 0).then(|| Duration::new(resolution.tv_sec as u64, resolution.tv_nsec as u32))
}

/// Miri has no `clock_getres`: it takes the tick to be [`MAX_TICK`], so that the tests it
/// runs read the coarse clock (which it has) as a log does.
#[cfg(all(target_os = "linux", miri))]
fn coarse_tick() -> Option<Duration> {
    Some(MAX_TICK)
}

/// Never read: off Linux the clock is the fine one.
#[cfg(not(target_os = "linux"))]
fn coarse_nanos() -> u64 {
    0
}

#[cfg(not(target_os = "linux"))]
fn coarse_tick() -> Option<Duration> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Readings for five of the longest ticks (twenty under Miri, whose clock moves on
    /// every read), each between two fine ones: never back, and the time since the first
    /// off the fine clock's by no more than the slack either way (the first reading's lag
    /// one way, this one's the other).
    #[test]
    fn readings_keep_within_the_slack_of_the_fine_clock_and_never_go_back() {
        let slack = slack();
        assert!(slack <= 3 * MAX_TICK);
        let started = Instant::now();
        let first = now();
        let first_after = Instant::now();
        let mut last = first;
        let mut readings = 0;
        while readings < 20 || (!cfg!(miri) && started.elapsed() < 5 * MAX_TICK) {
            let before = Instant::now();
            let reading = now();
            let after = Instant::now();
            assert!(reading >= last, "the clock went back");
            let since = reading - first;
            assert!(
                since + slack >= before - first_after,
                "{since:?} since the first reading, {:?} at least by the fine clock",
                before - first_after
            );
            assert!(
                since <= (after - started) + slack,
                "{since:?} since the first reading, {:?} at most by the fine clock",
                after - started
            );
            last = reading;
            readings += 1;
        }
    }

    #[test]
    fn a_reading_less_a_duration_is_one_the_clock_had_or_none() {
        let at = Time::from_nanos(5_000_000);
        assert_eq!(
            at.checked_sub(Duration::from_millis(2)),
            Some(Time::from_nanos(3_000_000))
        );
        assert_eq!(at.checked_sub(Duration::from_millis(6)), None);
        assert_eq!(at.checked_sub(Duration::MAX), None);
        assert_eq!(at + Duration::MAX, Time::from_nanos(u64::MAX));
        assert_eq!(Time::from_nanos(1) - at, Duration::ZERO);
        assert_eq!(at - Time::from_nanos(1), Duration::from_nanos(4_999_999));
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
