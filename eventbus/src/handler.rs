//! Handlers: what a subscriber may return, and how one attempt is run (a panic is a failed
//! attempt, never a dead worker).

use std::any::Any;
use std::fmt::Display;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::Message;

mod sealed {
    pub trait Sealed {}
}

/// What a handler may return: `()`, or `Result<(), E>` where `E: Display`.
///
/// An `Err` is a failed attempt; its `Display` text is kept in the dead letter.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a subscriber return type",
    label = "a subscriber returns `()` or `Result<(), E>` with `E: Display`"
)]
pub trait HandlerResult: sealed::Sealed {
    #[doc(hidden)]
    fn into_result(self) -> Result<(), String>;
}

impl sealed::Sealed for () {}
impl HandlerResult for () {
    fn into_result(self) -> Result<(), String> {
        Ok(())
    }
}

impl<E: Display> sealed::Sealed for Result<(), E> {}
impl<E: Display> HandlerResult for Result<(), E> {
    fn into_result(self) -> Result<(), String> {
        self.map_err(|error| error.to_string())
    }
}

/// A dynamic subscription's handler: `FnMut(&Message<T>) -> R` where `R` is `()` or
/// `Result<(), E: Display>`.
///
/// Name the message type on the closure's parameter so the compiler can see it:
/// `|m: &Message<OrderPlaced>| ...`.
#[diagnostic::on_unimplemented(
    message = "this is not a handler for `Message<{T}>`",
    label = "expected `FnMut(&Message<{T}>) -> R` where `R` is `()` or `Result<(), E: Display>`",
    note = "annotate the closure's parameter: `|m: &Message<{T}>| ...`"
)]
pub trait Handler<T>: Send + 'static {
    #[doc(hidden)]
    fn call(&mut self, message: &Message<T>) -> Result<(), String>;
}

impl<T, F, R> Handler<T> for F
where
    F: FnMut(&Message<T>) -> R + Send + 'static,
    R: HandlerResult,
{
    fn call(&mut self, message: &Message<T>) -> Result<(), String> {
        self(message).into_result()
    }
}

/// Runs one attempt, turning a panic into an error that carries the panic's message.
pub(crate) fn attempt(run: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(result) => result,
        Err(panic) => Err(format!("panicked: {}", panic_message(&*panic))),
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> &str {
    if let Some(text) = panic.downcast_ref::<&'static str>() {
        text
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text
    } else {
        "(a panic payload that is not a string)"
    }
}
