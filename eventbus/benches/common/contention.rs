//! The contended regime of the benchmarks (issue 29, item 4): a service shares its cores with
//! other processes, so each bench that includes this file can measure with one core kept
//! busy by a process it starts and stops itself.
//!
//! - `EVENTBUS_BENCH_BUSY=1`: before measuring, start one busy-loop process (this same bench
//!   binary, re-run with `EVENTBUS_BENCH_BUSY_CHILD` set, spinning until killed); it is killed
//!   when the bench ends, also on a panic.
//!
//! Read the contended figures beside a quiet run of the same build: the ratios to the
//! baseline measured in the same run still hold, the absolute numbers do not.

use std::process::{Child, Command};

/// The busy loop, killed when dropped.
pub(crate) struct BusyLoop(Child);

impl Drop for BusyLoop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Call first in `main`: in the busy-loop child, spins forever and never returns.
pub(crate) fn spin_if_child() {
    if std::env::var_os("EVENTBUS_BENCH_BUSY_CHILD").is_some() {
        let mut x = 0u64;
        loop {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }
}

/// Starts the busy loop if `EVENTBUS_BENCH_BUSY` asks for it, and says which regime runs.
pub(crate) fn start_if_asked() -> Option<BusyLoop> {
    let asked = std::env::var("EVENTBUS_BENCH_BUSY").is_ok_and(|v| v != "0" && !v.is_empty());
    if !asked {
        println!("regime: quiet (EVENTBUS_BENCH_BUSY=1 for one core kept busy)");
        return None;
    }
    let exe = std::env::current_exe().expect("the bench binary's path");
    let child = Command::new(exe)
        .env("EVENTBUS_BENCH_BUSY_CHILD", "1")
        .spawn()
        .expect("start the busy-loop process");
    println!(
        "regime: contended, one busy-loop process (pid {}) for the whole run",
        child.id()
    );
    Some(BusyLoop(child))
}

/// The spread of a measurement's rounds: slowest ÷ fastest.
pub(crate) fn spread(values: &[f64]) -> f64 {
    let low = values.iter().copied().fold(f64::MAX, f64::min);
    let high = values.iter().copied().fold(0.0, f64::max);
    if low > 0.0 {
        high / low
    } else {
        f64::NAN
    }
}
