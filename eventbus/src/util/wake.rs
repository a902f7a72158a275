//! Waking tasks that wait for a mailbox or a topic's turn (feature `tokio`), at the cost of
//! one plain load on the sync paths while no task waits.
//!
//! A waiter registers a listener, arms the wake, then looks again before it sleeps; a waker
//! that finds the wake armed fences, disarms it and notifies every listener. Listeners stay
//! notified until their waiter runs, so a wake that nobody armed again since its last
//! notification has no one left to wake: the waker skips the notification and its lock. A
//! publisher filling a mailbox whose task has yet to run, or a worker draining a full
//! mailbox while a publisher waits for room, notifies once a wait, where it notified (and
//! took the event's lock) once a message.
//!
//! The waker's load may be ordered before the change it announces (a store then a load: x86
//! reorders them), so it can miss a waiter that came at that instant; a waiter therefore
//! sleeps at most [`BACKSTOP`] before it looks again. Wakers that must never miss (a task
//! waiting on its own mailbox) fence first.
//!
//! Those bounds are kept by the ticker (`ticker.rs`), not by the runtime's timer: a wait
//! works the same on a runtime built without its time driver.

use std::future::Future;
use std::sync::atomic::{
    fence, AtomicBool, Ordering::Relaxed, Ordering::Release, Ordering::SeqCst,
};
use std::time::Duration;

use event_listener::Event;

use crate::util::{deadline, ticker};

/// The longest a waiter sleeps without looking again, in case its wake-up was missed.
pub(crate) const BACKSTOP: Duration = Duration::from_millis(1);

#[derive(Default)]
pub(crate) struct Wake {
    /// Set by a waiter once its listener is in; cleared by the waker that notifies it. While
    /// clear, every listener in the event is notified already (or about to be, by the waker
    /// that cleared it), but for one whose waiter has yet to set it (between its `listen` and
    /// its store): that waiter looks at its condition after the store, so a waker has no one
    /// it must wake.
    armed: AtomicBool,
    event: Event,
}

impl std::fmt::Debug for Wake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wake")
            .field("armed", &self.armed.load(Relaxed))
            .finish()
    }
}

impl Wake {
    /// Wakes the waiters, if the wake is armed (see the module docs).
    #[inline]
    pub(crate) fn notify(&self) {
        self.notify_if(|| true);
    }

    /// Wakes the waiters if the wake is armed and `worth_it` says so (asked only then), as
    /// [`notify`](Self::notify) does: for a waker that knows the waiters' condition does not
    /// hold yet, and will look again when it might.
    #[inline]
    pub(crate) fn notify_if(&self, worth_it: impl FnOnce() -> bool) {
        if self.armed.load(Relaxed) && worth_it() {
            self.notify_now();
        }
    }

    /// Wakes the waiters, never missing one that armed the wake before this call; whether it
    /// notified (false: no waiter had armed it since the last notification).
    #[cold]
    pub(crate) fn notify_now(&self) -> bool {
        // Pairs with the waiter's fence: either this load sees its arming, or its look after
        // arming sees the change this call announces.
        fence(SeqCst);
        // The load first: while a notified waiter has yet to run, most calls end here,
        // without a read-modify-write.
        if self.armed.load(SeqCst) && self.armed.swap(false, SeqCst) {
            // Every listener in now, the arming waiter's among them, is notified; one that
            // comes later arms the wake again after its listener is in.
            self.event.notify(usize::MAX);
            return true;
        }
        false
    }

    /// Waits until woken, or `max` (`BACKSTOP` where a wake-up may be missed; `None` where
    /// every waker fences, so none is missed), unless `ready` holds once the wake is armed.
    pub(crate) fn wait_unless<'a>(
        &'a self,
        max: Option<Duration>,
        ready: impl FnOnce() -> bool + 'a,
    ) -> impl Future<Output = ()> + Send + 'a {
        // The listener first: a waker that sees the wake armed must find it in the event.
        let listener = self.event.listen();
        // Release: a waker whose swap reads this store finds the listener in the event
        // (its notify then locks the event's list after this `listen` let it go).
        self.armed.store(true, Release);
        // Pairs with the waker's fence (see `notify_now`).
        fence(SeqCst);
        let ready = ready();
        async move {
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

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{mpsc, Arc};
    use std::task::{Context, Poll, Waker};

    use super::*;

    /// Tells its channel when woken.
    struct Told(parking_lot::Mutex<mpsc::Sender<()>>);

    impl std::task::Wake for Told {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }

        fn wake_by_ref(self: &Arc<Self>) {
            let _ = self.0.lock().send(());
        }
    }

    /// A waker, and the channel it tells.
    fn told() -> (Waker, mpsc::Receiver<()>) {
        let (tell, woken) = mpsc::channel();
        (
            Waker::from(Arc::new(Told(parking_lot::Mutex::new(tell)))),
            woken,
        )
    }

    fn poll_once(wait: std::pin::Pin<&mut impl Future<Output = ()>>, waker: &Waker) -> bool {
        wait.poll(&mut Context::from_waker(waker)).is_ready()
    }

    #[test]
    fn a_waiter_after_a_notified_one_is_woken_too() {
        let wake = Wake::default();
        let (first_waker, first_woken) = told();
        let mut first = pin!(wake.wait_unless(None, || false));
        assert!(!poll_once(first.as_mut(), &first_waker));
        assert!(wake.notify_now(), "an armed wake notifies");
        first_woken.try_recv().expect("the first waiter is woken");
        // The first has not run since; a second waits now.
        let (second_waker, second_woken) = told();
        let mut second = pin!(wake.wait_unless(None, || false));
        assert!(!poll_once(second.as_mut(), &second_waker));
        assert!(wake.notify_now(), "the second waiter armed the wake again");
        second_woken.try_recv().expect("the second waiter is woken");
        assert!(poll_once(first, &first_waker));
        assert!(poll_once(second, &second_waker));
    }

    #[test]
    fn a_notified_waiter_is_not_notified_again_before_it_runs() {
        let wake = Wake::default();
        assert!(!wake.notify_now(), "no waiter: nothing to notify");
        let (waker, woken) = told();
        let mut wait = pin!(wake.wait_unless(None, || false));
        assert!(!poll_once(wait.as_mut(), &waker));
        assert!(wake.notify_now());
        for _ in 0..3 {
            assert!(!wake.notify_now(), "the waiter is notified already");
            wake.notify();
        }
        assert_eq!(woken.try_iter().count(), 1, "woken once");
        assert!(poll_once(wait, &waker));
    }

    #[test]
    fn a_ready_waiter_does_not_wait() {
        let wake = Wake::default();
        let (waker, _) = told();
        assert!(poll_once(pin!(wake.wait_unless(None, || true)), &waker));
    }

    /// Unparks its thread when woken.
    struct Unpark(std::thread::Thread);

    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }

    /// Runs `future` on this thread, parked while it is pending.
    fn block_on<F: Future>(future: F) -> F::Output {
        let mut future = pin!(future);
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        loop {
            if let Poll::Ready(out) = future.as_mut().poll(&mut Context::from_waker(&waker)) {
                return out;
            }
            std::thread::park();
        }
    }

    /// A waiter and a waker on two threads, the waker changing the state only once the waiter
    /// is about to look, round after round: a wake-up missed leaves the waiter asleep for
    /// good (no backstop), and the test fails on its deadline. Under Miri, whose weak memory
    /// lets the two sides' loads pass their stores where the fences allow it, fewer rounds.
    #[test]
    fn no_wake_up_is_missed_between_two_threads() {
        const ROUNDS: u64 = if cfg!(miri) { 200 } else { 20_000 };
        let wake = Arc::new(Wake::default());
        let (wanted, state) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (finished_tx, finished) = mpsc::channel();
        let waiter = {
            let (wake, wanted, state) = (wake.clone(), wanted.clone(), state.clone());
            std::thread::spawn(move || {
                for round in 1..=ROUNDS {
                    wanted.store(round, Ordering::Relaxed);
                    while state.load(Ordering::Relaxed) < round {
                        let state = &state;
                        block_on(wake.wait_unless(None, || state.load(Ordering::Relaxed) >= round));
                    }
                }
                let _ = finished_tx.send(());
            })
        };
        for round in 1..=ROUNDS {
            while wanted.load(Ordering::Relaxed) < round {
                std::thread::yield_now();
            }
            state.store(round, Ordering::Relaxed);
            wake.notify_now();
        }
        finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the waiter saw every round: no wake-up was missed");
        waiter.join().unwrap();
    }
}
