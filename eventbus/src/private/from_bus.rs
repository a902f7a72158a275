//! What a `#[subscriber]` or `#[observer]` may take after its message, decided by a trait
//! and not by how the type is spelled (as axum's extractors are): `&Bus`, `State<T>` and
//! `&State<T>`, under any name (`use eventbus::State as BusState`, a full path, a type
//! alias). The expansion asks the compiler `<P as FromBus<'_>>` for each parameter type `P`,
//! spanned at `P`, so a parameter that cannot be supplied is reported there, with the
//! message below naming what is allowed.

use super::{state, state_key, StateKey};
use crate::bus::Bus;
use crate::error::SubscribeError;
use crate::options::Options;
use crate::state::State;

/// A parameter a registered handler can be given after its message.
///
/// Two steps, because a `State<T>` is looked up once, when the subscriber starts (a missing
/// one is a `SubscribeError`, and `build` checks it before anything starts through
/// [`STATE`](FromBus::STATE)), while the argument is made for each call.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a subscriber parameter",
    label = "after the message, a subscriber may take only `&Bus`, `State<T>` or `&State<T>`",
    note = "`State` is `eventbus::State`, under any name: `use eventbus::State as BusState;` \
            works beside axum's `State`"
)]
pub trait FromBus<'a>: Sized {
    /// What the subscriber keeps between calls: `()` for the bus, the `State<T>` for a state.
    type Slot: Clone + Send + Sync + 'static;

    /// The state type this parameter needs from the builder, if any.
    const STATE: Option<StateKey>;

    /// Looks the parameter up when the subscriber starts.
    fn slot(bus: &Bus, options: &Options) -> Result<Self::Slot, SubscribeError>;

    /// The argument for one call.
    fn from_bus(slot: &'a Self::Slot, bus: &'a Bus) -> Self;
}

impl<'a> FromBus<'a> for &'a Bus {
    type Slot = ();

    const STATE: Option<StateKey> = None;

    fn slot(_: &Bus, _: &Options) -> Result<(), SubscribeError> {
        Ok(())
    }

    fn from_bus(_: &'a (), bus: &'a Bus) -> Self {
        bus
    }
}

impl<'a, T: Send + Sync + 'static> FromBus<'a> for State<T> {
    type Slot = State<T>;

    const STATE: Option<StateKey> = Some(state_key::<T>());

    fn slot(bus: &Bus, options: &Options) -> Result<State<T>, SubscribeError> {
        state::<T>(bus, options)
    }

    fn from_bus(slot: &'a State<T>, _: &'a Bus) -> Self {
        State::clone(slot)
    }
}

impl<'a, T: Send + Sync + 'static> FromBus<'a> for &'a State<T> {
    type Slot = State<T>;

    const STATE: Option<StateKey> = Some(state_key::<T>());

    fn slot(bus: &Bus, options: &Options) -> Result<State<T>, SubscribeError> {
        state::<T>(bus, options)
    }

    fn from_bus(slot: &'a State<T>, _: &'a Bus) -> Self {
        slot
    }
}
