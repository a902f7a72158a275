//! A typed, in-process event bus.
//!
//! Topics are Rust types (`#[derive(Topic)]`); subscribers are functions marked
//! `#[subscriber(...)]`, collected at startup, or closures given to [`Bus::subscribe`]. Every
//! subscription gets its own bounded mailbox and its own worker thread, so a slow or failing
//! subscriber delays only itself, and with [`Overflow::Block`] the publishers of its topic:
//! that is backpressure it chose.
//!
//! # Examples
//!
//! ```
//! use eventbus::{subscriber, Bus, Message, Topic};
//!
//! #[derive(Topic, Debug)]
//! #[topic(name = "orders.placed")]
//! pub struct OrderPlaced { pub id: u64, pub customer: u64 }
//!
//! #[derive(Debug)]
//! pub struct MailError(String);
//! impl std::fmt::Display for MailError {
//!     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
//!         f.write_str(&self.0)
//!     }
//! }
//!
//! #[subscriber(capacity = 100, overflow = DropOldest, retries = 3, backoff = "1ms")]
//! fn send_email(order: &OrderPlaced) -> Result<(), MailError> {
//!     if order.customer == 0 {
//!         return Err(MailError("no such customer".into()));
//!     }
//!     Ok(())
//! }
//!
//! #[subscriber]
//! fn reserve_stock(order: &Message<OrderPlaced>, _bus: &Bus) {
//!     assert_eq!(order.topic(), "orders.placed");
//! }
//!
//! let bus = Bus::new(); // starts every #[subscriber] in the program
//! bus.publish(OrderPlaced { id: 41, customer: 7 }).unwrap();
//! bus.publish(OrderPlaced { id: 42, customer: 0 }).unwrap();
//! bus.close(); // delivers everything accepted, then stops
//!
//! let letters = bus.dead_letters();
//! assert_eq!(letters.len(), 1);
//! assert_eq!(letters[0].attempts(), 4);
//! assert_eq!(letters[0].payload::<OrderPlaced>().unwrap().id, 42);
//! ```
//!
//! # The promises
//!
//! 1. A slow or failing subscriber delays only itself (and, with `Block`, the publishers of its
//!    topic).
//! 2. Every mailbox is bounded; a full one does what its subscriber chose (`Block`,
//!    `DropOldest`, `DropNewest`), and every drop is counted.
//! 3. A failing message is retried in place, then kept as a [`DeadLetter`] with its error.
//! 4. Every subscriber of a topic sees that topic's messages in one order, however many threads
//!    publish; topics never wait on each other.
//! 5. Closing delivers everything accepted, then stops.
//!
//! # Subscribers
//!
//! `#[subscriber(capacity = N, overflow = Block | DropOldest | DropNewest, retries = N,
//! backoff = "10ms", name = "...")]` goes on a free function taking `&T` or `&Message<T>`
//! (where `T: Topic`), optionally followed by `&Bus`, and returning `()` or `Result<(), E>`
//! with `E: Display`. Defaults: capacity 1024, `Block`, no retries, 10 ms backoff, and the
//! function's path as its name. Backoff units are `ns`, `us`, `ms`, `s` and `m`; the wait
//! before retry *n* is `backoff × 2^(n−1)`, at most `32 × backoff` (see
//! [`Options::retry_delay`]).
//!
//! An `Err` or a panic is a failed attempt; the worker lives on.
//!
//! A subscription to a type that is not a topic does not compile:
//!
//! ```compile_fail
//! use eventbus::subscriber;
//! struct NotATopic;
//! #[subscriber]
//! fn handler(_: &NotATopic) {}
//! ```

mod builder;
mod bus;
mod dead_letter;
mod deadlock;
mod error;
mod handler;
mod lifecycle;
mod mailbox;
mod message;
mod observe;
mod options;
mod registry;
mod state;
mod stats;
mod subscription;
mod topic;
mod worker;

pub use builder::{BuildError, BusBuilder};
pub use bus::{Bus, CloseReport, Unfinished};
pub use dead_letter::{DeadLetter, DEFAULT_DEAD_LETTER_CAPACITY};
pub use error::{PublishError, SubscribeError};
pub use eventbus_macros::{subscriber, Topic};
pub use handler::{Handler, HandlerResult};
pub use message::Message;
pub use options::{Options, Overflow, DEFAULT_BACKOFF, DEFAULT_CAPACITY, MAX_CAPACITY};
pub use state::State;
pub use stats::{BusStats, SubscriptionStats, TopicStats};
pub use subscription::Subscription;
pub use topic::Topic;

/// What the macros' expansions name. Not public API: it may change in any release.
#[doc(hidden)]
pub mod __private {
    pub use inventory;

    pub use crate::registry::Registration;
    pub use crate::state::StateKey;
    pub use crate::topic::generic_name;
    use crate::{Bus, HandlerResult, Message, Options, State, SubscribeError, Subscription, Topic};

    /// Names state type `T` in a registration.
    pub const fn state_key<T: 'static>() -> StateKey {
        StateKey {
            type_id: std::any::TypeId::of::<T>,
            type_name: std::any::type_name::<T>,
        }
    }

    /// The bus's `T`, for a registered subscriber's `State<T>` parameter.
    pub fn state<T: Send + Sync + 'static>(
        bus: &Bus,
        options: &Options,
    ) -> Result<State<T>, SubscribeError> {
        bus.state::<T>()
            .ok_or_else(|| SubscribeError::MissingState {
                name: options.name.clone().unwrap_or_default(),
                state: std::any::type_name::<T>(),
            })
    }

    /// Starts a registered subscriber, whose handler also gets the bus.
    pub fn subscribe_registered<T, H>(
        bus: &Bus,
        options: Options,
        handler: H,
    ) -> Result<Subscription, SubscribeError>
    where
        T: Topic,
        H: FnMut(&Message<T>, &Bus) -> Result<(), String> + Send + 'static,
    {
        bus.inner.subscribe(options, handler)
    }

    /// What a subscriber may take after its message: for now only `&Bus`.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a subscriber parameter",
        label = "after the message, a subscriber may take only `&Bus`"
    )]
    pub trait FromBus<'a>: Sized {
        fn from_bus(bus: &'a Bus) -> Self;
    }

    impl<'a> FromBus<'a> for &'a Bus {
        fn from_bus(bus: &'a Bus) -> Self {
            bus
        }
    }

    /// The handler's return value as an attempt's outcome.
    pub fn into_result<R: HandlerResult>(result: R) -> Result<(), String> {
        result.into_result()
    }
}
