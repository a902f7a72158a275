//! A clock for async waits that needs no runtime's time driver (feature `tokio`): one shared
//! thread, the ticker, wakes each pending [`Sleep`] at its deadline, so a `publish_async`, a
//! `publish_timeout_async`, an async subscriber's retry or `wait_idle_async` waits the same on
//! a runtime built without `enable_time()`.
//!
//! The ticker starts when a sleep first has to wait and ends once no sleep has waited for
//! [`LINGER`]: no thread runs while nothing waits. A sleep registers only when it is polled
//! before its deadline, and takes itself off when it ends or is dropped.
//!
//! Lock: `TICKER.state` alone, never held while a waker runs (wakers are woken after it is
//! let go, so a waker that polls at once cannot deadlock on it).

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// How long the ticker stays once no sleep is pending, so a burst of short waits starts it
/// once rather than once per wait.
const LINGER: Duration = Duration::from_millis(20);

static TICKER: Ticker = Ticker {
    state: parking_lot::const_mutex(State {
        pending: BTreeMap::new(),
        next: 0,
        running: false,
    }),
    changed: Condvar::new(),
};

struct Ticker {
    state: Mutex<State>,
    /// Told when a sleep becomes the earliest, so the ticker sleeps until its deadline.
    changed: Condvar,
}

struct State {
    /// The waker of each pending sleep, by deadline (then by an id, the same deadline being
    /// possible for two).
    pending: BTreeMap<(Instant, u64), Waker>,
    /// The next sleep's id.
    next: u64,
    /// Whether the ticker's thread runs (or has been started).
    running: bool,
}

/// A future that is ready at `deadline`, woken by the ticker thread; no runtime's timer.
#[derive(Debug)]
pub(crate) struct Sleep {
    deadline: Instant,
    /// Its id once it has registered.
    id: Option<u64>,
}

impl Sleep {
    pub(crate) fn until(deadline: Instant) -> Self {
        Sleep { deadline, id: None }
    }

    /// The sleep of `delay` from now.
    pub(crate) fn after(delay: Duration) -> Self {
        Sleep::until(crate::util::deadline::after(delay))
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            self.unregister();
            return Poll::Ready(());
        }
        let this = &mut *self;
        TICKER.register(this.deadline, &mut this.id, cx.waker());
        Poll::Pending
    }
}

impl Sleep {
    fn unregister(&mut self) {
        if let Some(id) = self.id.take() {
            // Lock: `TICKER.state` alone (see the module docs).
            TICKER.state.lock().pending.remove(&(self.deadline, id));
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.unregister();
    }
}

impl Ticker {
    /// Records `waker` for `deadline` (under `id` if it has one, which the ticker may have
    /// dropped when it fired), starting the ticker if it is not running.
    fn register(&'static self, deadline: Instant, id: &mut Option<u64>, waker: &Waker) {
        // Lock: `TICKER.state` alone (see the module docs).
        let mut state = self.state.lock();
        let key = match *id {
            Some(id) => (deadline, id),
            None => {
                let key = (deadline, state.next);
                state.next += 1;
                *id = Some(key.1);
                key
            }
        };
        match state.pending.get_mut(&key) {
            Some(known) if known.will_wake(waker) => return,
            Some(known) => known.clone_from(waker),
            None => {
                state.pending.insert(key, waker.clone());
            }
        }
        if !state.running {
            let started = std::thread::Builder::new()
                .name("eventbus-ticker".into())
                .spawn(|| TICKER.run());
            match started {
                Ok(_) => state.running = true,
                // No thread to be had: the sleep looks again at once, until its deadline,
                // rather than never waking. Its entry goes, or its next poll (the same
                // waker) would find itself known and not be woken again.
                Err(_) => {
                    state.pending.remove(&key);
                    *id = None;
                    drop(state);
                    waker.wake_by_ref();
                }
            }
        } else if state.pending.first_key_value().map(|(first, _)| *first) == Some(key) {
            self.changed.notify_one();
        }
    }

    /// The ticker's thread: wakes each sleep at its deadline; ends after [`LINGER`] with
    /// none pending.
    fn run(&self) {
        // Lock: `TICKER.state` alone, let go while wakers run (see the module docs).
        let mut state = self.state.lock();
        loop {
            let now = Instant::now();
            let mut due = Vec::new();
            while let Some(first) = state.pending.first_entry() {
                if first.key().0 > now {
                    break;
                }
                due.push(first.remove());
            }
            if !due.is_empty() {
                drop(state);
                // A waker is user code (an executor's): one that panics must not end the
                // ticker, which every pending and later sleep counts on.
                for waker in due {
                    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| waker.wake())) {
                        crate::util::unwind::drop_quietly(panic);
                    }
                }
                state = self.state.lock();
                continue;
            }
            match state.pending.first_key_value() {
                Some(((deadline, _), _)) => {
                    let deadline = *deadline;
                    self.changed.wait_until(&mut state, deadline);
                }
                None => {
                    let waited = self.changed.wait_for(&mut state, LINGER);
                    if waited.timed_out() && state.pending.is_empty() {
                        state.running = false;
                        return;
                    }
                }
            }
        }
    }
}

/// Awaits `wait`, but not past `deadline`: its output, or `None` once the deadline came
/// first. Polls `wait` first, so a deadline is registered only while `wait` is pending.
/// Cancel-safe as `wait` is.
pub(crate) async fn before<F: Future>(deadline: Instant, wait: F) -> Option<F::Output> {
    let mut wait = std::pin::pin!(wait);
    let mut sleep = Sleep::until(deadline);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(done) = wait.as_mut().poll(cx) {
            return Poll::Ready(Some(done));
        }
        Pin::new(&mut sleep).poll(cx).map(|()| None)
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::sync::{mpsc, Arc};
    use std::task::Wake;

    use super::*;

    /// Sends on its channel when woken, then panics if told to.
    struct Signal {
        woken: Mutex<mpsc::Sender<()>>,
        panics: bool,
    }

    impl Wake for Signal {
        fn wake(self: Arc<Self>) {
            let _ = self.woken.lock().send(());
            assert!(!self.panics, "a waker that panics (on purpose, in a test)");
        }
    }

    /// Polls `sleep` once with a waker that tells `woken`; it must be pending.
    fn poll_pending(sleep: &mut Sleep, panics: bool) -> mpsc::Receiver<()> {
        let (tell, woken) = mpsc::channel();
        let waker = Waker::from(Arc::new(Signal {
            woken: Mutex::new(tell),
            panics,
        }));
        let polled = Pin::new(sleep).poll(&mut Context::from_waker(&waker));
        assert!(
            polled.is_pending(),
            "a sleep polled before its deadline is pending"
        );
        woken
    }

    #[test]
    fn a_waker_that_panics_does_not_stop_the_ticker() {
        const PATIENCE: Duration = Duration::from_secs(20);
        let mut first = Sleep::after(Duration::from_millis(5));
        let first_woken = poll_pending(&mut first, true);
        first_woken
            .recv_timeout(PATIENCE)
            .expect("the first sleep is woken at its deadline");
        // The ticker has met a panicking waker; a later sleep must still be woken.
        let mut second = Sleep::after(Duration::from_millis(5));
        let second_woken = poll_pending(&mut second, false);
        second_woken
            .recv_timeout(PATIENCE)
            .expect("a sleep after a waker panicked is still woken");
    }
}
