//! `Options::retry_if`: errors not worth retrying are dead letters at once (issue 32,
//! item 3); a panic, and a failure the predicate says to retry, are retried as before.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use eventbus::{Bus, Message, Options, SubscribeError, Topic};

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct Order(i64);

#[derive(Debug, PartialEq)]
enum SaveError {
    Busy,
    Refused,
}

impl fmt::Display for SaveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SaveError::Busy => f.write_str("the database is busy"),
            SaveError::Refused => f.write_str("CHECK constraint failed"),
        }
    }
}

fn transient(e: &SaveError) -> bool {
    *e == SaveError::Busy
}

fn options() -> Options {
    Options::default()
        .retries(3)
        .backoff(Duration::from_millis(1))
        .retry_if(transient)
}

/// Attempts of refused, busy and fine orders.
type Attempts = Arc<[AtomicU32; 3]>;

/// Attempts per order id, and the handler that counts them: negative ids are refused for
/// good, ids above 100 are busy every time, others succeed.
fn counting() -> (
    Attempts,
    impl FnMut(&Message<Order>) -> Result<(), SaveError>,
) {
    let attempts: Attempts = Arc::new(Default::default());
    let count = Arc::clone(&attempts);
    let handler = move |m: &Message<Order>| {
        let (slot, outcome) = match m.0 {
            id if id < 0 => (0, Err(SaveError::Refused)),
            id if id > 100 => (1, Err(SaveError::Busy)),
            _ => (2, Ok(())),
        };
        count[slot].fetch_add(1, SeqCst);
        outcome
    };
    (attempts, handler)
}

#[test]
fn a_permanent_error_is_a_dead_letter_after_one_attempt() {
    let bus = Bus::builder().build();
    let (attempts, handler) = counting();
    let subscription = bus.subscribe::<Order>(options(), handler);
    bus.publish(Order(-1)).unwrap();
    bus.publish(Order(1)).unwrap();
    bus.wait_idle();
    assert_eq!(attempts[0].load(SeqCst), 1, "a refused order is tried once");
    let letters = bus.dead_letters();
    assert_eq!(letters.len(), 1);
    assert_eq!((letters[0].seq(), letters[0].attempts()), (0, 1));
    assert_eq!(letters[0].error(), "CHECK constraint failed");
    let stats = subscription.stats();
    assert_eq!(
        (
            stats.delivered,
            stats.failed,
            stats.retried,
            stats.dead_lettered
        ),
        (1, 1, 0, 1)
    );
    bus.close();
}

#[test]
fn a_transient_error_is_retried_as_the_options_say() {
    let bus = Bus::builder().build();
    let (attempts, handler) = counting();
    bus.subscribe::<Order>(options(), handler);
    bus.publish(Order(101)).unwrap();
    bus.wait_idle();
    assert_eq!(attempts[1].load(SeqCst), 4, "1 attempt + 3 retries");
    assert_eq!(bus.dead_letters()[0].attempts(), 4);
    bus.close();
}

#[test]
fn a_panic_is_retried_whatever_retry_if_says() {
    let bus = Bus::builder().build();
    let attempts = Arc::new(AtomicU32::new(0));
    let count = Arc::clone(&attempts);
    let options = Options::default()
        .retries(2)
        .backoff(Duration::from_millis(1))
        .retry_if(|_: &SaveError| false);
    bus.subscribe::<Order>(
        options,
        move |_: &Message<Order>| -> Result<(), SaveError> {
            count.fetch_add(1, SeqCst);
            panic!("boom");
        },
    );
    bus.publish(Order(1)).unwrap();
    bus.wait_idle();
    assert_eq!(attempts.load(SeqCst), 3);
    bus.close();
}

#[test]
fn async_subscribers_and_groups_ask_it_too() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let bus = Bus::builder().runtime(runtime.handle().clone()).build();
    let attempts = Arc::new(AtomicU32::new(0));
    let count = Arc::clone(&attempts);
    bus.subscribe_async(options(), move |_: Message<Order>| {
        let count = Arc::clone(&count);
        async move {
            tokio::task::yield_now().await;
            count.fetch_add(1, SeqCst);
            Err::<(), _>(SaveError::Refused)
        }
    });
    let group_attempts = Arc::new(AtomicU32::new(0));
    let count = Arc::clone(&group_attempts);
    bus.subscribe_group::<Order>(
        options().workers(2),
        move |_: &Message<Order>| -> Result<(), SaveError> {
            count.fetch_add(1, SeqCst);
            Err(SaveError::Refused)
        },
    );
    bus.publish(Order(-5)).unwrap();
    bus.wait_idle();
    assert_eq!(attempts.load(SeqCst), 1);
    assert_eq!(group_attempts.load(SeqCst), 1);
    assert!(bus.dead_letters().iter().all(|l| l.attempts() == 1));
    bus.close();
}

#[test]
fn a_retry_if_for_another_type_is_refused_at_subscribe() {
    let bus = Bus::builder().build();
    let wrong = Options::default().retry_if(|_: &std::io::Error| true);
    let error = bus
        .try_subscribe::<Order>(wrong.clone().name("saver"), |_: &Message<Order>| {
            Err::<(), _>(SaveError::Busy)
        })
        .unwrap_err();
    assert!(matches!(error, SubscribeError::RetryIf { .. }), "{error}");
    let text = error.to_string();
    assert!(
        text.contains("saver") && text.contains("io::error::Error"),
        "{text}"
    );
    assert!(text.contains("SaveError"), "{text}");
    // A handler that cannot fail has no error to ask about.
    let error = bus
        .try_subscribe::<Order>(wrong.clone(), |_: &Message<Order>| {})
        .unwrap_err();
    assert!(
        matches!(error, SubscribeError::RetryIf { error: "()", .. }),
        "{error}"
    );
    // Inline subscribers retry nothing: refused there.
    let error = bus
        .try_subscribe_inline::<Order>(
            Options::default().retry_if(transient),
            |_: &Message<Order>| Err::<(), _>(SaveError::Busy),
        )
        .unwrap_err();
    assert!(error.to_string().contains("retry_if"), "{error}");
    assert!(bus.stats().subscriptions.is_empty());
    bus.close();
}

/// `#[subscriber(retry_if = f)]`: each kind of registered subscriber, started from its own
/// module so no other test's bus starts them.
pub mod registered {
    use std::error::Error;
    use std::fmt;

    use eventbus::{observer, subscriber, AnyMessage, Topic};

    /// Negative ids are refused for good, ids above 100 are busy every time, others are
    /// saved.
    #[derive(Topic, Debug)]
    #[topic(name = "retry_if.save")]
    pub struct Save(pub i64);

    /// A `std::error::Error`: a `#[subscriber]` keeps it whole in its dead letter.
    #[derive(Debug, PartialEq)]
    pub enum StoreError {
        Busy,
        Refused,
    }

    impl fmt::Display for StoreError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                StoreError::Busy => f.write_str("the database is busy"),
                StoreError::Refused => f.write_str("CHECK constraint failed"),
            }
        }
    }

    impl Error for StoreError {}

    fn store(id: i64) -> Result<(), StoreError> {
        match id {
            id if id < 0 => Err(StoreError::Refused),
            id if id > 100 => Err(StoreError::Busy),
            _ => Ok(()),
        }
    }

    pub fn is_transient(e: &StoreError) -> bool {
        *e == StoreError::Busy
    }

    /// Thread subscribers: a plain one, a group, one whose error is only `Display`, and an
    /// observer.
    pub mod threads {
        use super::*;

        #[subscriber(retry_if = is_transient, retries = 3, backoff = "1ms", name = "retry_if.thread")]
        fn thread(save: &Save) -> Result<(), StoreError> {
            store(save.0)
        }

        #[subscriber(
            retry_if = is_transient,
            retries = 3,
            backoff = "1ms",
            workers = 2,
            name = "retry_if.group"
        )]
        fn group(save: &Save) -> Result<(), StoreError> {
            store(save.0)
        }

        #[allow(clippy::ptr_arg)] // `retry_if` takes `fn(&E)`, and `E` is `String` here
        fn is_busy(e: &String) -> bool {
            e.contains("busy")
        }

        #[subscriber(retry_if = is_busy, retries = 3, backoff = "1ms", name = "retry_if.text")]
        fn text(save: &Save) -> Result<(), String> {
            store(save.0).map_err(|e| e.to_string())
        }

        #[observer(
            "retry_if.*",
            retry_if = is_transient,
            retries = 3,
            backoff = "1ms",
            name = "retry_if.observer"
        )]
        fn observer(m: &AnyMessage) -> Result<(), StoreError> {
            store(m.downcast_ref::<Save>().map_or(0, |save| save.0))
        }
    }

    /// Async subscribers (feature `tokio`): a task and a group of tasks.
    pub mod tasks {
        use super::*;

        #[subscriber(retry_if = is_transient, retries = 3, backoff = "1ms", name = "retry_if.task")]
        async fn task(save: &Save) -> Result<(), StoreError> {
            tokio::task::yield_now().await;
            store(save.0)
        }

        #[subscriber(
            retry_if = is_transient,
            retries = 3,
            backoff = "1ms",
            workers = 2,
            name = "retry_if.tasks"
        )]
        async fn tasks(save: &Save) -> Result<(), StoreError> {
            tokio::task::yield_now().await;
            store(save.0)
        }
    }
}

/// Publishes a refused, a busy and a fine `Save`, and gives each dead letter as
/// `(subscriber, seq, attempts, error)`, sorted.
fn registered_letters(bus: &Bus) -> Vec<(String, u64, u32, String)> {
    for id in [-1, 101, 1] {
        bus.publish(registered::Save(id)).unwrap();
    }
    bus.wait_idle();
    let mut letters: Vec<_> = bus
        .dead_letters()
        .iter()
        .map(|l| {
            let subscriber = l.subscriber().to_owned();
            (subscriber, l.seq(), l.attempts(), l.error().to_owned())
        })
        .collect();
    letters.sort();
    letters
}

/// For each subscriber: the refused message (seq 0) tried once, the busy one (seq 1) four
/// times.
fn expected(subscribers: &[&str]) -> Vec<(String, u64, u32, String)> {
    let mut expected: Vec<_> = subscribers
        .iter()
        .flat_map(|name| {
            [
                (name.to_string(), 0, 1, "CHECK constraint failed".to_owned()),
                (name.to_string(), 1, 4, "the database is busy".to_owned()),
            ]
        })
        .collect();
    expected.sort();
    expected
}

#[test]
fn the_attribute_makes_a_permanent_error_a_dead_letter_after_one_attempt() {
    let bus = Bus::builder()
        .registered_in(concat!(module_path!(), "::registered::threads"))
        .build();
    let letters = registered_letters(&bus);
    let subscribers = [
        "retry_if.group",
        "retry_if.observer",
        "retry_if.text",
        "retry_if.thread",
    ];
    assert_eq!(letters, expected(&subscribers));
    // The error stays whole: a `std::error::Error` is its dead letter's `source()`.
    let letters = bus.dead_letters();
    let refused = letters
        .iter()
        .find(|l| l.subscriber() == "retry_if.thread" && l.seq() == 0)
        .unwrap();
    let source = std::error::Error::source(refused).unwrap();
    assert_eq!(
        source.downcast_ref::<registered::StoreError>(),
        Some(&registered::StoreError::Refused)
    );
    for stats in bus.stats().subscriptions {
        let counts = (stats.failed, stats.retried, stats.dead_lettered);
        assert_eq!(counts, (5, 3, 2), "{}", stats.name);
    }
    bus.close();
}

#[test]
fn the_attribute_works_for_async_subscribers_and_groups() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let bus = Bus::builder()
        .runtime(runtime.handle().clone())
        .registered_in(concat!(module_path!(), "::registered::tasks"))
        .build();
    let letters = registered_letters(&bus);
    assert_eq!(letters, expected(&["retry_if.task", "retry_if.tasks"]));
    bus.close();
}
