//! What every benchmark measures with: its knobs from the environment, the load average it
//! prints at the start and end, a thread's own CPU time, the median of its rounds and the
//! process's resident memory. Each bench includes this file with `#[path]`, so a bench that
//! needs only some of it leaves the rest unused.
#![allow(dead_code)]

use std::time::Duration;

/// A number from the environment (`_` allowed as a separator: `200_000`), or `default`.
pub(crate) fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

/// Whether the scenario titled `title` runs: all do unless the variable `only` names part of
/// some titles.
pub(crate) fn wanted(only: &str, title: &str) -> bool {
    std::env::var(only).map_or(true, |only| title.contains(&only))
}

/// `/proc/loadavg`'s three averages: a run that starts above 2 shares the machine.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".into(),
        |l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

/// The CPU time the calling thread has run so far (`/proc/thread-self/schedstat`): what a
/// publisher spends, apart from the wall time it waits.
pub(crate) fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let ns = stat
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

/// The middle value of the rounds (the upper one of an even count).
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The process's resident memory, in bytes (`/proc/self/statm`, 4 KiB pages).
pub(crate) fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse::<u64>().ok())
        .unwrap_or(0)
        * 4096
}
