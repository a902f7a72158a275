//! Waking tasks that wait for a mailbox or a topic's turn (feature `tokio`), at the cost of
//! one plain load on the sync paths while no task waits.
//!
//! A waiter counts itself, registers a listener, then looks again before it sleeps; a waker
//! that finds the count above zero fences and notifies. The waker's load may be ordered
//! before the change it announces (a store then a load: x86 reorders them), so it can miss a
//! waiter that came at that instant; a waiter therefore sleeps at most [`BACKSTOP`] before it
//! looks again. Wakers that must never miss (a task waiting on its own mailbox) fence first.
//!
//! Those bounds are kept by the ticker (`ticker.rs`), not by the runtime's timer: a wait
//! works the same on a runtime built without its time driver.

use std::future::Future;
use std::sync::atomic::{fence, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::time::Duration;

use event_listener::Event;

use crate::util::{deadline, ticker};

/// The longest a waiter sleeps without looking again, in case its wake-up was missed.
pub(crate) const BACKSTOP: Duration = Duration::from_millis(1);

#[derive(Default)]
pub(crate) struct Wake {
    waiters: AtomicUsize,
    event: Event,
}

impl std::fmt::Debug for Wake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wake")
            .field("waiters", &self.waiters.load(Relaxed))
            .finish()
    }
}

impl Wake {
    /// Wakes the waiters, if any are counted (see the module docs).
    #[inline]
    pub(crate) fn notify(&self) {
        if self.waiters.load(Relaxed) > 0 {
            self.notify_now();
        }
    }

    /// Wakes the waiters, never missing one that counted itself before this call.
    #[cold]
    pub(crate) fn notify_now(&self) {
        fence(SeqCst);
        if self.waiters.load(SeqCst) > 0 {
            self.event.notify(usize::MAX);
        }
    }

    /// Waits until woken, or `max` (`BACKSTOP` where a wake-up may be missed; `None` where
    /// every waker fences, so none is missed), unless `ready` holds once the waiter is
    /// counted.
    pub(crate) fn wait_unless<'a>(
        &'a self,
        max: Option<Duration>,
        ready: impl FnOnce() -> bool + 'a,
    ) -> impl Future<Output = ()> + Send + 'a {
        self.waiters.fetch_add(1, SeqCst);
        let counted = Counted(&self.waiters);
        let listener = self.event.listen();
        let ready = ready();
        async move {
            let _counted = counted;
            match (ready, max) {
                (true, _) => {}
                (false, Some(max)) => {
                    let _ = ticker::before(deadline::after(max), listener).await;
                }
                (false, None) => listener.await,
            }
        }
    }
}

/// Takes a waiter off the count, however its wait ends (a dropped future included).
struct Counted<'a>(&'a AtomicUsize);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

/// Awaits `wait`, but not past `deadline`: whether it ended (true) or the deadline came
/// first (false). Cancel-safe as `wait` is. The deadline is the ticker's, not the runtime's
/// timer.
pub(crate) async fn until(
    deadline: Option<std::time::Instant>,
    wait: impl Future<Output = ()>,
) -> bool {
    match deadline {
        None => {
            wait.await;
            true
        }
        Some(deadline) => ticker::before(deadline, wait).await.is_some(),
    }
}
