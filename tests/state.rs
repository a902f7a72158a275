//! Shared state for handlers: `State<T>` parameters, checked at build time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use eventbus::{subscriber, BuildError, Bus, Message, State, Topic};

#[derive(Topic, Debug, Clone, Copy)]
pub struct OrderPlaced {
    pub id: u64,
}

#[derive(Topic, Debug, Clone, Copy)]
pub struct Reserved(pub u64);

/// A stand-in for a database pool.
#[derive(Default, Debug)]
pub struct Db {
    rows: Mutex<Vec<u64>>,
    flaky: AtomicU64,
}

#[derive(Default, Debug)]
pub struct Audit(AtomicU64);

#[derive(Debug)]
pub struct DbError;

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection reset")
    }
}

mod shop {
    use super::*;

    #[subscriber(retries = 3, backoff = "1ms")]
    fn reserve(o: &OrderPlaced, db: State<Db>, bus: &Bus) -> Result<(), DbError> {
        if db.flaky.fetch_add(1, Ordering::SeqCst) == 1 {
            return Err(DbError);
        }
        db.rows.lock().unwrap().push(o.id);
        bus.publish(Reserved(o.id)).map(|_| ()).map_err(|_| DbError)
    }

    #[subscriber]
    fn audit(r: &Message<Reserved>, audit: &State<Audit>, db: State<Db>) {
        assert!(db.rows.lock().unwrap().contains(&r.0));
        audit.0.fetch_add(1, Ordering::SeqCst);
    }
}

mod needs_missing {
    use super::*;

    pub(crate) struct Mailer;

    #[subscriber(name = "mailer")]
    fn mail(_: &OrderPlaced, _mailer: State<Mailer>) {}
}

#[test]
fn handlers_get_the_state_the_builder_was_given() {
    let bus = Bus::builder()
        .state(Db::default())
        .state(Audit::default())
        .registered_in("state::shop")
        .build();
    for id in 1..=4 {
        bus.publish(OrderPlaced { id }).unwrap();
    }
    bus.close();
    let db = bus.state::<Db>().unwrap();
    assert_eq!(*db.rows.lock().unwrap(), [1, 2, 3, 4]);
    assert_eq!(bus.state::<Audit>().unwrap().0.load(Ordering::SeqCst), 4);
    assert!(bus.dead_letters().is_empty());
    assert_eq!(bus.stats().subscriptions[1].retried, 1);
    assert!(bus.state::<String>().is_none());
}

#[test]
fn a_missing_state_fails_the_build_naming_the_subscriber_and_the_type() {
    let error = Bus::builder()
        .registered_in("state::needs_missing")
        .try_build()
        .unwrap_err();
    let BuildError::MissingState(missing) = &error else {
        panic!("expected MissingState, got {error:?}");
    };
    assert_eq!(missing.subscriber, "mailer");
    assert_eq!(missing.state, "state::needs_missing::Mailer");
    fn is_error<E: std::error::Error + Clone + Send + Sync + 'static>(_: &E) {}
    is_error(missing);
    assert_eq!(
        error.to_string(),
        "subscriber `mailer` takes `State<state::needs_missing::Mailer>`, but the bus was given \
         no `state::needs_missing::Mailer`: add `.state(...)` with one to the builder"
    );
}

#[test]
#[should_panic(expected = "subscriber `mailer` takes `State<state::needs_missing::Mailer>`")]
fn build_panics_with_the_same_message() {
    let _ = Bus::builder().registered_in("state::needs_missing").build();
}

#[test]
fn a_state_given_twice_keeps_the_last() {
    let bus = Bus::builder().state(1u32).state(2u32).build();
    assert_eq!(*bus.state::<u32>().unwrap(), 2);
    let state = bus.state::<u32>().unwrap();
    assert_eq!(format!("{state:?}"), "State(2)");
}
