//! A waiter's few turns before it sleeps: spin, then yield (as crossbeam's `Backoff`).

/// How many times a worker that caught up, or a publisher waiting for room, spins (1, 2, 4,
/// .. 32 times) before it yields.
const SPINS: u32 = 6;

/// How many times it then yields before it sleeps.
const YIELDS: u32 = 3;

/// The machine's cores (as the standard library counts them; 1 if it cannot tell), asked once.
pub(crate) fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// A waiter's few turns before it sleeps (as crossbeam's `Backoff::snooze`): spins, then
/// yields.
#[derive(Default)]
pub(crate) struct Snooze(u32);

impl Snooze {
    /// Takes one more turn; false once they are over (and then takes none).
    pub(crate) fn snooze(&mut self) -> bool {
        if self.is_over() {
            return false;
        }
        if self.0 < SPINS {
            for _ in 0..1 << self.0 {
                std::hint::spin_loop();
            }
        } else {
            std::thread::yield_now();
        }
        self.0 += 1;
        true
    }

    pub(crate) fn is_over(&self) -> bool {
        self.0 >= SPINS + YIELDS
    }
}
