//! What the macros' expansions name (`::eventbus::__private::...`): the registration entry
//! points here, the autoref-specialisation shims in `shims.rs`. Not public API: it may change
//! in any release.

mod from_bus;
mod shims;

pub use crate::message::Serializable;
pub use from_bus::FromBus;
pub use inventory;
pub use shims::*;

pub use crate::bus::registry::Registration;
use crate::bus::subscription::Subscription;
use crate::bus::Bus;
use crate::error::{MissingState, SubscribeError};
pub use crate::handler::Failure;
use crate::message::{AnyMessage, Message};
pub use crate::numbering::TopicIndex;
use crate::options::Options;
use crate::state::State;
pub use crate::state::StateKey;
pub use crate::topic::generic_name;
use crate::topic::Topic;

/// Names state type `T` in a registration.
pub const fn state_key<T: 'static>() -> StateKey {
    StateKey {
        type_id: std::any::TypeId::of::<T>,
        type_name: std::any::type_name::<T>,
    }
}

/// The bus's `T`, for a registered subscriber's `State<T>` parameter.
pub(crate) fn state<T: Send + Sync + 'static>(
    bus: &Bus,
    options: &Options,
) -> Result<State<T>, SubscribeError> {
    bus.state::<T>().ok_or_else(|| {
        SubscribeError::MissingState(MissingState {
            subscriber: options.name.clone().unwrap_or_default(),
            state: std::any::type_name::<T>(),
        })
    })
}

/// Refuses `#[subscriber(overflow = DropNewest)]` on a log topic when the program is
/// compiled: evaluated in a `const`, the assertion is a compile error.
pub const fn refuse_drop_newest_on_log<T: Topic>() {
    assert!(
        !T::LOG,
        "`overflow = DropNewest` has no meaning on a log topic: its subscriptions share one \
         log, so a message cannot be left out for one of them; use `DropOldest` (a \
         subscription that falls behind loses what the log trims, counted as dropped) or \
         `Block` (publishers wait for it)"
    );
}

/// Refuses `#[subscriber(priority = f)]` on a log topic when the program is compiled:
/// evaluated in a `const`, the assertion is a compile error.
pub const fn refuse_priority_on_log<T: Topic>() {
    assert!(
        !T::LOG,
        "`priority` cannot go with a log topic: its subscriptions read the one log in topic \
         order, and there is no mailbox to reorder; drop `priority`, or the topic's `retain`"
    );
}

/// The error type of a `#[subscriber]`'s declared return type, for `retry_if = f`.
#[diagnostic::on_unimplemented(
    message = "`retry_if` asks about the handler's error, but the handler returns `{Self}`",
    label = "`retry_if` needs a handler that returns `Result<(), E>`",
    note = "`retry_if = f` takes a `fn f(&E) -> bool` of the handler's error `E`; a handler \
            that cannot fail has nothing to ask about: drop `retry_if`"
)]
pub trait ErrorOf {
    type Error: 'static;
}

impl<E: 'static> ErrorOf for Result<(), E> {
    type Error = E;
}

/// `#[subscriber(retry_if = f)]`: `f` must take the error of the handler's return type `R`,
/// so one written for another type is a compile error at `f`.
pub fn retry_if<R: ErrorOf>(options: Options, retry: fn(&R::Error) -> bool) -> Options {
    options.retry_if(retry)
}

/// Starts a registered subscriber, whose handler also gets the bus.
pub fn subscribe_registered<T, H>(
    bus: &Bus,
    options: Options,
    handler: H,
) -> Result<Subscription, SubscribeError>
where
    T: Topic,
    H: Fn(&Message<T>, &Bus) -> Result<(), Failure> + Send + Sync + 'static,
{
    bus.subscribe_registered(options, handler)
}

/// Starts a registered `#[subscriber(inline)]`, whose handler also gets the bus.
pub fn subscribe_registered_inline<T, H>(
    bus: &Bus,
    options: Options,
    handler: H,
) -> Result<Subscription, SubscribeError>
where
    T: Topic,
    H: Fn(&Message<T>, &Bus) -> Result<(), Failure> + Send + Sync + 'static,
{
    bus.subscribe_registered_inline(options, handler)
}

/// Starts a registered observer, whose handler also gets the bus.
pub fn observe_registered<H>(
    bus: &Bus,
    pattern: &str,
    options: Options,
    handler: H,
) -> Result<Subscription, SubscribeError>
where
    H: Fn(&AnyMessage, &Bus) -> Result<(), Failure> + Send + 'static,
{
    bus.observe_registered(pattern, options, handler)
}

/// Starts a registered async subscriber, whose handler also gets the bus.
#[cfg(feature = "tokio")]
pub fn subscribe_registered_async<T, H, A>(
    bus: &Bus,
    options: Options,
    handler: H,
) -> Result<Subscription, SubscribeError>
where
    T: Topic,
    H: Fn(Message<T>, Bus) -> A + Send + Sync + 'static,
    A: std::future::Future<Output = Result<(), Failure>> + Send + 'static,
{
    bus.subscribe_registered_async(options, handler)
}

/// Starts a registered async observer, whose handler also gets the bus.
#[cfg(feature = "tokio")]
pub fn observe_registered_async<H, A>(
    bus: &Bus,
    pattern: &str,
    options: Options,
    handler: H,
) -> Result<Subscription, SubscribeError>
where
    H: Fn(AnyMessage, Bus) -> A + Send + 'static,
    A: std::future::Future<Output = Result<(), Failure>> + Send + 'static,
{
    bus.observe_registered_async(pattern, options, handler)
}

/// Without the `tokio` feature an `async fn` observer cannot start: this says so where it
/// is written.
#[cfg(not(feature = "tokio"))]
#[diagnostic::on_unimplemented(
    message = "`async fn` observers need the `tokio` feature of `eventbus`",
    label = "an async observer, but `eventbus` was built without `tokio`",
    note = "enable it in Cargo.toml: `eventbus = {{ version = \"...\", features = [\"tokio\"] }}`"
)]
pub trait AsyncObserversNeedTokio {}

/// Refuses to compile without the `tokio` feature (see `AsyncObserversNeedTokio`).
#[cfg(not(feature = "tokio"))]
pub fn observe_registered_async<H>(
    _: &Bus,
    _: &str,
    _: Options,
    _: H,
) -> Result<Subscription, SubscribeError>
where
    H: AsyncObserversNeedTokio,
{
    unreachable!("no implementation of AsyncObserversNeedTokio exists")
}

/// Without the `tokio` feature an `async fn` subscriber cannot start: this says so where
/// it is written.
#[cfg(not(feature = "tokio"))]
#[diagnostic::on_unimplemented(
    message = "`async fn` subscribers need the `tokio` feature of `eventbus`",
    label = "an async subscriber, but `eventbus` was built without `tokio`",
    note = "enable it in Cargo.toml: `eventbus = {{ version = \"...\", features = [\"tokio\"] }}`"
)]
pub trait AsyncSubscribersNeedTokio {}

/// Refuses to compile without the `tokio` feature (see `AsyncSubscribersNeedTokio`).
#[cfg(not(feature = "tokio"))]
pub fn subscribe_registered_async<T, H, A>(
    _: &Bus,
    _: Options,
    _: H,
) -> Result<Subscription, SubscribeError>
where
    T: Topic,
    H: AsyncSubscribersNeedTokio,
{
    unreachable!("no implementation of AsyncSubscribersNeedTokio exists")
}
