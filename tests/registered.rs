//! `#[subscriber]` functions: collected at startup, started by the builder, with the options
//! their attribute gives.

use std::sync::Mutex;
use std::time::Duration;

use eventbus::{subscriber, BuildError, Bus, Message, Options, Overflow, Topic};

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
#[topic(name = "orders.placed")]
pub struct OrderPlaced {
    pub id: u64,
    pub customer: u64,
}

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
pub struct StockReserved(u64);

#[derive(Debug)]
pub struct MailError(u64);

impl std::fmt::Display for MailError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "customer {} has no address", self.0)
    }
}

mod shop {
    use super::*;

    pub(crate) static EMAILS: Mutex<Vec<u64>> = Mutex::new(Vec::new());
    pub(crate) static RESERVED: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());
    pub(crate) static CONFIRMED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

    #[subscriber(capacity = 100, overflow = DropOldest, retries = 3, backoff = "1ms")]
    fn send_email(order: &OrderPlaced) -> Result<(), MailError> {
        if order.customer == 0 {
            return Err(MailError(order.customer));
        }
        EMAILS.lock().unwrap().push(order.id);
        Ok(())
    }

    #[subscriber]
    fn reserve_stock(order: &Message<OrderPlaced>, bus: &Bus) {
        RESERVED.lock().unwrap().push((order.seq(), order.id));
        bus.publish(StockReserved(order.id)).unwrap();
    }

    #[subscriber(name = "warehouse.confirm", capacity = 1)]
    fn confirm(reserved: &StockReserved) {
        CONFIRMED.lock().unwrap().push(reserved.0);
    }
}

mod elsewhere {
    use super::*;

    pub(crate) static CALLS: Mutex<u64> = Mutex::new(0);

    #[subscriber]
    fn never_started_by_the_shop_tests(_: &OrderPlaced) {
        *CALLS.lock().unwrap() += 1;
    }
}

#[test]
fn registered_subscribers_run_with_their_options() {
    let bus = Bus::builder().registered_in("registered::shop").build();
    for id in 1..=3 {
        bus.publish(OrderPlaced {
            id,
            customer: id % 3,
        })
        .unwrap();
    }
    bus.close();

    assert_eq!(*shop::EMAILS.lock().unwrap(), [1, 2]);
    assert_eq!(*shop::RESERVED.lock().unwrap(), [(0, 1), (1, 2), (2, 3)]);
    // Published by a handler through its `&Bus`, and delivered before close returned.
    assert_eq!(*shop::CONFIRMED.lock().unwrap(), [1, 2, 3]);
    assert_eq!(*elsewhere::CALLS.lock().unwrap(), 0);

    let stats = bus.stats();
    let names: Vec<_> = stats
        .subscriptions
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "registered::shop::reserve_stock",
            "registered::shop::send_email",
            "warehouse.confirm"
        ]
    );
    let email = &stats.subscriptions[1];
    assert_eq!(
        (email.topic, email.capacity, email.overflow),
        ("orders.placed", 100, Overflow::DropOldest)
    );
    assert_eq!(
        (email.delivered, email.retried, email.dead_lettered),
        (2, 3, 1)
    );
    assert_eq!(stats.subscriptions[2].capacity, 1);

    let letters = bus.dead_letters();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].error(), "customer 0 has no address");
    assert_eq!(letters[0].attempts(), 4);
    assert_eq!(letters[0].payload::<OrderPlaced>().unwrap().id, 3);
}

#[test]
fn a_builder_starts_no_registered_subscriber_unless_told() {
    let bus = Bus::builder().build();
    assert!(bus.stats().subscriptions.is_empty());
    bus.close();
    // A prefix is a whole module path: `registered::sho` is not `registered::shop`.
    let bus = Bus::builder().registered_in("registered::sho").build();
    assert!(bus.stats().subscriptions.is_empty());
    bus.close();
}

#[test]
fn bus_new_starts_every_registered_subscriber() {
    let bus = Bus::new();
    let names: Vec<_> = bus
        .stats()
        .subscriptions
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(names.contains(&"registered::elsewhere::never_started_by_the_shop_tests".to_owned()));
    // Published nothing, so the other tests' statics are untouched.
    assert!(bus.close_timeout(Duration::from_secs(20)).completed);
}

#[test]
fn registered_and_registered_in_together_are_refused_in_either_order() {
    let builders = [
        Bus::builder()
            .registered()
            .registered_in("registered::shop"),
        Bus::builder()
            .registered_in("registered::shop")
            .registered(),
    ];
    for builder in builders {
        let error = builder
            .try_build()
            .expect_err("the two selections conflict");
        assert!(matches!(
            &error,
            BuildError::ConflictingSelection { modules } if modules == &["registered::shop"]
        ));
        assert_eq!(
            error.to_string(),
            "both `registered()` (every `#[subscriber]`) and `registered_in(\"registered::shop\")` \
             (only those modules) were called: keep `registered_in` to start only the \
             subscribers in those modules, or `registered()` alone to start all"
        );
    }
}

#[test]
fn bus_registered_lists_every_subscriber_with_its_topic_place_and_options() {
    let listed: Vec<_> = Bus::registered()
        .into_iter()
        .map(|s| (s.name, s.topic, s.module_path, s.function))
        .collect();
    assert_eq!(
        listed,
        [
            (
                "registered::elsewhere::never_started_by_the_shop_tests".to_owned(),
                "orders.placed",
                "registered::elsewhere",
                "never_started_by_the_shop_tests"
            ),
            (
                "registered::shop::reserve_stock".to_owned(),
                "orders.placed",
                "registered::shop",
                "reserve_stock"
            ),
            (
                "registered::shop::send_email".to_owned(),
                "orders.placed",
                "registered::shop",
                "send_email"
            ),
            (
                "warehouse.confirm".to_owned(),
                "StockReserved",
                "registered::shop",
                "confirm"
            ),
        ]
    );
    let email = Bus::registered()
        .into_iter()
        .find(|s| s.function == "send_email")
        .unwrap();
    assert_eq!(
        email.options,
        Options::default()
            .capacity(100)
            .overflow(Overflow::DropOldest)
            .retries(3)
            .backoff(Duration::from_millis(1))
            .name("registered::shop::send_email")
    );
}

#[test]
fn require_accepts_a_started_subscriber_by_name_or_by_path() {
    let bus = Bus::builder()
        .registered_in("registered::shop")
        .require("warehouse.confirm")
        .require("registered::shop::confirm")
        .require("registered::shop::send_email")
        .try_build()
        .unwrap();
    bus.close();
}

#[test]
fn require_fails_the_build_naming_the_missing_and_saying_why() {
    // Not in the program at all: what a crate the linker left out looks like.
    let error = Bus::builder()
        .registered_in("registered::shop")
        .require("email::send_receipt")
        .require("registered::shop::send_email")
        .require("audit")
        .try_build()
        .expect_err("two are missing");
    assert!(matches!(
        &error,
        BuildError::MissingSubscribers { unregistered, unselected }
            if unregistered == &["email::send_receipt", "audit"] && unselected.is_empty()
    ));
    assert_eq!(
        error.to_string(),
        "no `#[subscriber]` named `email::send_receipt`, `audit` is in this program. A library \
         crate's subscribers are linked in only if the program refers to that crate: add \
         `use email as _;` and `use its_crate as _;` to the binary. `Bus::registered()` lists \
         the subscribers that are in"
    );

    // In the program, outside the builder's selection; both kinds at once.
    let error = Bus::builder()
        .registered_in("registered::shop")
        .require("registered::elsewhere::never_started_by_the_shop_tests")
        .require("email::send_receipt")
        .try_build()
        .expect_err("one is not chosen, one is missing");
    assert!(matches!(
        &error,
        BuildError::MissingSubscribers { unregistered, unselected }
            if unregistered == &["email::send_receipt"]
                && unselected == &["registered::elsewhere::never_started_by_the_shop_tests"]
    ));
    assert_eq!(
        error.to_string(),
        "no `#[subscriber]` named `email::send_receipt` is in this program. A library crate's \
         subscribers are linked in only if the program refers to that crate: add \
         `use email as _;` to the binary. `Bus::registered()` lists the subscribers that are \
         in; and `registered::elsewhere::never_started_by_the_shop_tests` is in this program, \
         but this builder does not start it: add `.registered_in(\"...\")` with its module"
    );
}
