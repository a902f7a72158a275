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
