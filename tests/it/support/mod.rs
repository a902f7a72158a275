//! Exact synchronisation for the tests: a handler that stops until the test lets it go, and
//! a recorder of what each subscriber saw; and in `net`, a free port and an HTTP exchange.
#![allow(dead_code, unreachable_pub)]

pub mod net;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

/// Waits until `subscription` has nothing queued and nothing in its handler. Exact: its
/// stats read high, never low, so idle is never seen before it is so.
pub fn until_idle(subscription: &eventbus::Subscription) {
    until("the mailbox is idle", || {
        let stats = subscription.stats();
        stats.queued == 0 && stats.in_handler == 0
    });
}

/// How long a test waits for something that must happen before calling it a failure.
/// Never a synchronisation: every wait below ends as soon as its event happens.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A latch: `wait` blocks until `open` (or the `Latch` is dropped).
#[derive(Clone)]
pub struct Latch {
    tx: Arc<Mutex<Option<Sender<()>>>>,
    rx: Receiver<()>,
}

impl Latch {
    pub fn new() -> Self {
        let (tx, rx) = crossbeam_channel::bounded(0);
        Latch {
            tx: Arc::new(Mutex::new(Some(tx))),
            rx,
        }
    }

    pub fn open(&self) {
        self.tx.lock().unwrap().take();
    }

    pub fn wait(&self) {
        let _ = self.rx.recv();
    }
}

/// Signals from handlers to the test: "I have started message N".
#[derive(Clone)]
pub struct Signal {
    tx: Sender<u64>,
    rx: Receiver<u64>,
}

impl Signal {
    pub fn new() -> Self {
        let (tx, rx) = crossbeam_channel::unbounded();
        Signal { tx, rx }
    }

    pub fn send(&self, value: u64) {
        self.tx.send(value).unwrap();
    }

    /// Whether nothing has been sent (and not yet taken).
    pub fn rx_is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    /// The next value sent; panics if none comes in `PATIENCE`.
    pub fn next(&self) -> u64 {
        self.rx
            .recv_timeout(PATIENCE)
            .expect("the handler never signalled")
    }
}

/// Collects what a subscriber saw, in order.
#[derive(Clone, Default)]
pub struct Seen<T>(Arc<Mutex<Vec<T>>>);

impl<T: Clone> Seen<T> {
    pub fn new() -> Self {
        Seen(Arc::new(Mutex::new(Vec::new())))
    }

    pub fn push(&self, value: T) {
        self.0.lock().unwrap().push(value);
    }

    pub fn get(&self) -> Vec<T> {
        self.0.lock().unwrap().clone()
    }
}

/// Waits until `condition` holds, looking again as soon as the thread is rescheduled; panics
/// if it does not hold within `PATIENCE`. For states no handler can signal, such as a
/// publisher that has numbered a message and is waiting for room.
pub fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while !condition() {
        assert!(
            std::time::Instant::now() < deadline,
            "never happened: {what}"
        );
        std::thread::yield_now();
    }
}

/// The options of [`a_timed_publish_held_up_by_the_handler`]'s subscription: capacity 1,
/// and a filter that says on the receiver when it sees the message whose `value` is 3.
pub fn capacity_one_telling_of_three<T: eventbus::Topic>(
    value: fn(&T) -> u64,
) -> (eventbus::Options, std::sync::mpsc::Receiver<()>) {
    let (waiting, in_filter) = std::sync::mpsc::channel();
    let options = eventbus::Options::default()
        .capacity(1)
        .filter(move |m: &T| {
            if value(m) == 3 {
                // The timed publish holds the observer's turn here, and waits for room next.
                let _ = waiting.send(());
            }
            true
        });
    (options, in_filter)
}

/// The far side of a cycle through an observer's turn. `bus` has a subscription to `make`'s
/// topic with [`capacity_one_telling_of_three`]'s options (`in_filter` its receiver), whose
/// handler, on `make(1)`, sends 1 on `started` and waits for `go`. Publishes `make(1)`,
/// then `make(2)` (which fills the mailbox), then from another thread `make(3)` with
/// `publish_timeout` (`PATIENCE`): an all-or-nothing publish, which takes the topic's
/// observers' turns first and then waits for room in that mailbox. Opens `go` once the
/// filter has seen it. The handler then does its part (publishes, or unsubscribes the
/// observer) and records in `outcomes` what came of it, which must be `expected`; the timed
/// publish must then go through, not at its deadline. Then closes the bus.
pub fn a_timed_publish_held_up_by_the_handler<T: eventbus::Topic>(
    bus: &eventbus::Bus,
    make: fn(u64) -> T,
    (started, go): (&Signal, &Latch),
    in_filter: std::sync::mpsc::Receiver<()>,
    (outcomes, expected): (&Seen<String>, &str),
) {
    assert!(bus.publish(make(1)).is_ok());
    assert_eq!(started.next(), 1);
    // The handler holds 1: this one fills its mailbox.
    assert!(bus.publish(make(2)).is_ok());
    let holder = {
        let bus = bus.clone();
        std::thread::spawn(move || {
            let outcome = bus.publish_timeout(make(3), PATIENCE);
            outcome.map(|_| ()).map_err(|e| e.to_string())
        })
    };
    in_filter.recv().unwrap();
    go.open();
    let timed = holder.join().unwrap();
    assert_eq!(outcomes.get(), [expected]);
    assert_eq!(
        timed,
        Ok(()),
        "the timed publish went through once the handler was done"
    );
    bus.close();
}
