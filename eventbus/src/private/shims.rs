//! Autoref specialisation for the macros: method lookup tries the by-value impl (which exists
//! only when the type has the capability) before the by-reference fallback, so one expansion
//! serves types with and without `Debug`, `Serialize`, an error type or a topic impl.

use crate::handler::{Failure, HandlerResult};
use crate::message::Serializable;
use crate::topic::Topic;

/// How `#[derive(Topic)]` records a type's `Debug` and `Serialize` for observers,
/// through autoref specialisation (as `Outcome`): `(&PayloadOf(value)).debug_payload(..)`
/// finds `ViaDebug` on `PayloadOf<T>` when `T: Debug`, else `DebugFallback` on
/// `&PayloadOf<T>`; the same for `serializable`.
pub struct PayloadOf<'a, T>(pub &'a T);

impl<T> std::fmt::Debug for PayloadOf<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PayloadOf")
    }
}

pub trait ViaDebug {
    fn debug_payload(&self, f: &mut std::fmt::Formatter<'_>, name: &str) -> std::fmt::Result;
}

impl<T: std::fmt::Debug> ViaDebug for PayloadOf<'_, T> {
    fn debug_payload(&self, f: &mut std::fmt::Formatter<'_>, _: &str) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.0, f)
    }
}

pub trait DebugFallback {
    fn debug_payload(&self, f: &mut std::fmt::Formatter<'_>, name: &str) -> std::fmt::Result;
}

impl<T> DebugFallback for &PayloadOf<'_, T> {
    fn debug_payload(&self, f: &mut std::fmt::Formatter<'_>, name: &str) -> std::fmt::Result {
        write!(f, "<{name}>")
    }
}

pub trait ViaSerialize<'a> {
    fn serializable(&self) -> Option<&'a dyn Serializable>;
}

#[cfg(feature = "serde")]
impl<'a, T: serde::Serialize> ViaSerialize<'a> for PayloadOf<'a, T> {
    fn serializable(&self) -> Option<&'a dyn Serializable> {
        Some(self.0)
    }
}

pub trait SerializeFallback<'a> {
    fn serializable(&self) -> Option<&'a dyn Serializable>;
}

impl<'a, T> SerializeFallback<'a> for &PayloadOf<'a, T> {
    fn serializable(&self) -> Option<&'a dyn Serializable> {
        None
    }
}

/// Turns a `#[subscriber]`'s return value into an attempt's outcome, keeping a concrete
/// error whole: `(&Outcome(&result)).kind().into_result(result)`.
///
/// `HandlerResult` cannot do it alone: its impl for every `Result<(), E: Display>` cannot
/// also ask for `E: Error` without overlapping (and a closure's handler needs the wide
/// one). So the expansion goes through autoref specialisation: method lookup tries
/// `Outcome<Result<(), E>>` (which has `kind` only if `E: Error + Send + Sync + 'static`,
/// giving `ErrorKind`) before `&Outcome<R>` (which always has it, giving `PlainKind`,
/// whose `R: HandlerResult` bound says "not a subscriber return type" for anything else).
pub struct Outcome<'a, R>(pub &'a R);

impl<R> std::fmt::Debug for Outcome<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Outcome")
    }
}

pub trait ViaError {
    fn kind(&self) -> ErrorKind {
        ErrorKind
    }
}

impl<E: std::error::Error + Send + Sync + 'static> ViaError for Outcome<'_, Result<(), E>> {}

pub trait ViaHandlerResult {
    fn kind(&self) -> PlainKind {
        PlainKind
    }
}

impl<R> ViaHandlerResult for &Outcome<'_, R> {}

/// For a `Result<(), E>` whose `E` is an error that can cross threads: keeps `E`.
#[derive(Debug)]
pub struct ErrorKind;

impl ErrorKind {
    pub fn into_result<E>(self, result: Result<(), E>) -> Result<(), Failure>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        result.map_err(Failure::of_handler)
    }
}

/// For anything else: what `HandlerResult` makes of it.
#[derive(Debug)]
pub struct PlainKind;

impl PlainKind {
    pub fn into_result<R: HandlerResult>(self, result: R) -> Result<(), Failure> {
        result.into_result()
    }
}

/// Names topic `T` for a registration: `(&TopicName::<T>::NEW).name()` is `T::name()`.
///
/// When `T` is not a topic, the subscribe call in the same expansion already says so;
/// a plain `<T as Topic>::name` would say it a second time. So the call goes through
/// autoref specialisation: method lookup tries `TopicName<T>` (which has `name` only if
/// `T: Topic`) before `&TopicName<T>` (which always has it, and is never run, because the
/// expansion does not compile then).
pub struct TopicName<T: ?Sized>(std::marker::PhantomData<fn() -> T>);

impl<T: ?Sized> TopicName<T> {
    pub const NEW: Self = TopicName(std::marker::PhantomData);
}

impl<T: ?Sized> std::fmt::Debug for TopicName<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TopicName")
    }
}

pub trait TopicNameOfTopic {
    fn name(&self) -> &'static str;
}

impl<T: Topic> TopicNameOfTopic for TopicName<T> {
    fn name(&self) -> &'static str {
        T::name()
    }
}

pub trait TopicNameFallback {
    fn name(&self) -> &'static str;
}

impl<T: ?Sized> TopicNameFallback for &TopicName<T> {
    fn name(&self) -> &'static str {
        unreachable!("a registration whose message type is not a topic does not compile")
    }
}
