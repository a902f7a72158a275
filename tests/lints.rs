//! Code that uses the macros stays clean under strict lints (clippy's too, when CI runs
//! `cargo clippy --all-targets`), and under `no_implicit_prelude`.
#![deny(
    warnings,
    missing_docs,
    unreachable_pub,
    rust_2018_idioms,
    unused_qualifications
)]
#![deny(clippy::all, clippy::pedantic)]

/// Topics and subscribers in a module without the prelude: the expansions name everything
/// by absolute path.
#[no_implicit_prelude]
pub mod shop {
    use ::eventbus::{subscriber, Bus, Message, Topic};

    /// An order.
    #[derive(Topic, Debug)]
    #[topic(name = "lints.order")]
    pub struct Order(pub u64);

    /// A generic topic.
    #[derive(Topic, Debug)]
    pub struct Envelope<T, const N: usize>(pub [T; N]);

    /// A subscriber.
    ///
    /// # Errors
    ///
    /// For order zero.
    #[subscriber(capacity = 8, overflow = DropNewest, retries = 1, backoff = "1ms")]
    pub fn audit(order: &Order) -> ::core::result::Result<(), &'static str> {
        if order.0 == 0 {
            ::core::result::Result::Err("order zero")
        } else {
            ::core::result::Result::Ok(())
        }
    }

    /// One whose error is a `std::error::Error`, kept whole in the dead letter.
    ///
    /// # Errors
    ///
    /// Always.
    #[subscriber(name = "lints.io")]
    pub fn io(_: &Order) -> ::core::result::Result<(), ::std::io::Error> {
        ::core::result::Result::Err(::std::io::Error::other("disk full"))
    }

    /// Another.
    #[subscriber(name = "lints.forward")]
    pub fn forward(order: &Message<Order>, bus: &Bus) {
        let _ = bus.publish(Envelope([order.seq(); 2]));
    }
}

#[test]
fn the_lint_clean_subscribers_run() {
    use eventbus::Topic;

    let bus = eventbus::Bus::builder()
        .registered_in("lints::shop")
        .build();
    bus.publish(shop::Order(0)).unwrap();
    bus.close();
    assert_eq!(bus.stats().subscriptions.len(), 3);
    let letters = bus.dead_letters();
    let error = |name: &str| letters.iter().find(|l| l.subscriber() == name).unwrap();
    assert_eq!(error("lints::shop::audit").error(), "order zero");
    assert!(std::error::Error::source(error("lints.io")).is_some());
    assert_eq!(shop::Envelope::<u64, 2>::name(), "Envelope<u64, 2>");
}

/// An async observer in a module without the prelude (feature `tokio`).
#[cfg(feature = "tokio")]
#[no_implicit_prelude]
pub mod watch {
    use ::eventbus::{observer, AnyMessage, Bus};

    /// Observes every `lints.*` topic, awaiting.
    ///
    /// # Errors
    ///
    /// Never.
    #[observer("lints.*", name = "lints.watch", retries = 1)]
    pub async fn watch(
        m: &AnyMessage,
        bus: &Bus,
    ) -> ::core::result::Result<(), ::std::string::String> {
        ::tokio::task::yield_now().await;
        let _ = (m.seq(), bus.is_closed());
        ::core::result::Result::Ok(())
    }
}

#[cfg(feature = "tokio")]
#[test]
fn the_lint_clean_async_observer_runs() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let bus = eventbus::Bus::builder()
            .registered_in("lints::watch")
            .build();
        bus.publish_async(shop::Order(1)).await.unwrap();
        bus.close_async().await;
        assert_eq!(bus.stats().subscriptions[0].delivered, 1);
    });
}
