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

/// `State` under other names, beside a web framework's own `State` (as with axum's): the
/// macros ask the compiler what a parameter is, not how it is spelled (issue 32, item 1).
mod any_name {
    use std::sync::atomic::{AtomicU64, Ordering};

    use eventbus::State as BusState;
    use eventbus::{observer, subscriber, AnyMessage, Bus, Topic};

    /// A framework's own `State`, as `axum::extract::State` is, imported under its name.
    #[allow(dead_code)]
    pub(crate) struct State<S>(pub S);

    pub(crate) type Shared<T> = eventbus::State<T>;

    #[derive(Topic, Debug)]
    #[topic(name = "shop.order")]
    pub(crate) struct Order(pub u64);

    #[derive(Default, Debug)]
    pub(crate) struct Tally {
        pub(crate) renamed: AtomicU64,
        pub(crate) full_path: AtomicU64,
        pub(crate) alias: AtomicU64,
        pub(crate) observed: AtomicU64,
    }

    #[subscriber]
    fn renamed(o: &Order, tally: BusState<Tally>, bus: &Bus) {
        assert!(bus.state::<Tally>().is_some());
        tally.renamed.fetch_add(o.0, Ordering::SeqCst);
    }

    #[subscriber]
    fn full_path(o: &Order, tally: &eventbus::State<Tally>) {
        tally.full_path.fetch_add(o.0, Ordering::SeqCst);
    }

    #[subscriber]
    fn alias(o: &Order, tally: Shared<Tally>, again: &Shared<Tally>) {
        assert!(std::sync::Arc::ptr_eq(tally.arc(), again.arc()));
        tally.alias.fetch_add(o.0, Ordering::SeqCst);
    }

    #[observer("shop.*")]
    fn observed(_: &AnyMessage, _: &Bus, tally: BusState<Tally>, also: &Shared<Tally>) {
        tally.observed.fetch_add(1, Ordering::SeqCst);
        assert!(std::sync::Arc::ptr_eq(tally.arc(), also.arc()));
    }

    /// The local `State` is still the framework's.
    pub(crate) fn framework_state() -> State<u8> {
        State(7)
    }
}

#[test]
fn state_works_under_any_name_in_subscribers_and_observers() {
    use any_name::{Order, Tally};
    assert_eq!(any_name::framework_state().0, 7);
    let bus = Bus::builder()
        .state(Tally::default())
        .registered_in("state::any_name")
        .build();
    for id in 1..=3 {
        bus.publish(Order(id)).unwrap();
    }
    bus.close();
    let tally = bus.state::<Tally>().unwrap();
    let read = |n: &AtomicU64| n.load(Ordering::SeqCst);
    assert_eq!(
        [
            read(&tally.renamed),
            read(&tally.full_path),
            read(&tally.alias),
            read(&tally.observed)
        ],
        [6, 6, 6, 3]
    );
    assert!(bus.dead_letters().is_empty());
}

#[test]
fn a_state_under_another_name_is_checked_at_build() {
    let error = Bus::builder()
        .registered_in("state::any_name")
        .try_build()
        .unwrap_err();
    let BuildError::MissingState(missing) = &error else {
        panic!("expected MissingState, got {error:?}");
    };
    assert_eq!(missing.state, "state::any_name::Tally");
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
