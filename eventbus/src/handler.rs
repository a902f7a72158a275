//! Handlers: what a subscriber may return, what a failed attempt keeps (the error itself, so
//! its `source()` chain survives into the dead letter), and how one attempt is run: a panic is
//! a failed attempt, never a dead worker, and neither is a panic payload that panics again
//! when dropped.

use std::any::{Any, TypeId};
use std::error::Error;
use std::fmt::{self, Display};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::message::Message;
use crate::options::retry_if::RetryIf;
use crate::util::unwind::drop_quietly;

mod sealed {
    pub trait Sealed {}
}

/// A failed attempt: the error's text, and the error itself when it is a
/// [`std::error::Error`] (so a dead letter keeps its `source()` chain).
#[doc(hidden)]
#[derive(Clone)]
pub struct Failure {
    text: String,
    error: Option<Arc<dyn Error + Send + Sync + 'static>>,
    /// The subscription's `retry_if` said this error is not worth retrying.
    permanent: bool,
}

thread_local! {
    /// The `retry_if` of the subscription whose attempt this thread runs now (see
    /// `with_retry_if_set`): the handler's error has its type only where the handler's result
    /// is turned into a [`Failure`], inside the attempt, so the question is asked there.
    static RETRY_IF: std::cell::RefCell<Option<RetryIf>> = const { std::cell::RefCell::new(None) };
    /// Whether `RETRY_IF` holds one: a flag with no destructor, so asking it costs a load,
    /// where asking `RETRY_IF` first makes sure its destructor is registered.
    static RETRY_IF_SET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the attempt's `retry_if` says `error` is worth retrying (yes without one).
fn worth_retrying(error: &dyn Any) -> bool {
    RETRY_IF.with(|retry_if| {
        retry_if
            .borrow()
            .as_ref()
            .map_or(true, |r| r.retries(error))
    })
}

/// Runs `run` with `retry_if` as the thread's, and back to what was there after (a panic
/// included): each poll of an async attempt, which may run inside another (a task polled
/// by a thread that is running one).
///
/// In line: the common case (no `retry_if` here and none set on this thread) is one load
/// and a branch; the swap is out of line. As its own function the common case cost a
/// thread worker's delivery about 37 instructions, most of them the frame (BENCHMARKS.md,
/// "The mailbox path's drift"); thread workers now take `with_own_retry_if`.
#[cfg(feature = "tokio")]
#[inline(always)]
pub(crate) fn with_retry_if<R>(retry_if: Option<&RetryIf>, run: impl FnOnce() -> R) -> R {
    // A clone, a swap and a restore per delivery were about 100 instructions of a log
    // delivery's 474 (BENCHMARKS.md).
    if retry_if.is_none() && !RETRY_IF_SET.with(|set| set.get()) {
        return run();
    }
    with_retry_if_set(retry_if, run)
}

/// `with_retry_if` for a thread worker's attempt. Its loop is its thread's outermost
/// frame, where no `retry_if` is set (one set further in is put back on the way out, a panic
/// included), so only the subscription's own is asked about: the thread-local flag's look,
/// about 4 instructions a delivery, is left out.
#[inline(always)]
pub(crate) fn with_own_retry_if<R>(retry_if: Option<&RetryIf>, run: impl FnOnce() -> R) -> R {
    debug_assert!(
        !RETRY_IF_SET.with(|set| set.get()),
        "a worker's loop is outermost"
    );
    match retry_if {
        None => run(),
        Some(_) => with_retry_if_set(retry_if, run),
    }
}

/// `with_retry_if` or `with_own_retry_if` when there is a `retry_if` to set or one to
/// restore.
#[inline(never)]
fn with_retry_if_set<R>(retry_if: Option<&RetryIf>, run: impl FnOnce() -> R) -> R {
    struct Restore(Option<RetryIf>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            RETRY_IF_SET.with(|set| set.set(before.is_some()));
            RETRY_IF.with(|retry_if| *retry_if.borrow_mut() = before);
        }
    }
    let before = RETRY_IF.with(|current| current.replace(retry_if.cloned()));
    RETRY_IF_SET.with(|set| set.set(retry_if.is_some()));
    let _restore = Restore(before);
    run()
}

impl Failure {
    /// A failure known only by its text.
    pub fn text(text: impl Display) -> Self {
        Failure {
            text: text.to_string(),
            error: None,
            permanent: false,
        }
    }

    /// A failure that keeps the error.
    pub fn error<E: Error + Send + Sync + 'static>(error: E) -> Self {
        Failure {
            text: error.to_string(),
            error: Some(Arc::new(error)),
            permanent: false,
        }
    }

    /// A `#[subscriber]`'s failure that keeps the error (see `__private::Outcome`), asking the
    /// attempt's `retry_if` about it as [`HandlerResult`] does for other handlers.
    pub(crate) fn of_handler<E: Error + Send + Sync + 'static>(error: E) -> Self {
        let permanent = !worth_retrying(&error);
        Failure {
            permanent,
            ..Failure::error(error)
        }
    }

    /// Whether the subscription's `retry_if` ruled out a retry.
    pub(crate) fn is_permanent(&self) -> bool {
        self.permanent
    }

    pub(crate) fn message(&self) -> &str {
        &self.text
    }

    pub(crate) fn as_error(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        self.error.as_deref()
    }

    /// Its text and error, apart.
    pub(crate) fn into_parts(self) -> (String, Option<Arc<dyn Error + Send + Sync + 'static>>) {
        (self.text, self.error)
    }
}

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Failure").field(&self.text).finish()
    }
}

/// What a handler may return: `()`, or `Result<(), E>` where `E: Display`.
///
/// An `Err` is a failed attempt; its `Display` text is kept in the dead letter. A
/// `#[subscriber]` whose `E` is a `std::error::Error + Send + Sync + 'static` keeps the
/// error itself too ([`DeadLetter`](crate::DeadLetter)'s `source()`); so does a dynamic
/// handler that returns `Result<(), Box<dyn Error + Send + Sync>>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a subscriber return type",
    label = "a subscriber returns `()` or `Result<(), E>` with `E: Display`"
)]
pub trait HandlerResult: sealed::Sealed {
    #[doc(hidden)]
    fn into_result(self) -> Result<(), Failure>;

    /// The error's type, if the handler can fail (for `Options::retry_if`'s check).
    #[doc(hidden)]
    fn error_type() -> Option<(TypeId, &'static str)> {
        None
    }
}

impl sealed::Sealed for () {}
impl HandlerResult for () {
    fn into_result(self) -> Result<(), Failure> {
        Ok(())
    }
}

impl<E: Display + 'static> sealed::Sealed for Result<(), E> {}
impl<E: Display + 'static> HandlerResult for Result<(), E> {
    fn into_result(self) -> Result<(), Failure> {
        self.map_err(|error| {
            let permanent = !worth_retrying(&error);
            // The one error type a closure can name without a bound of ours: keep it whole.
            let boxed: Box<dyn Any> = Box::new(error);
            let mut failure = match boxed.downcast::<Box<dyn Error + Send + Sync>>() {
                Ok(error) => Failure {
                    text: error.to_string(),
                    error: Some(Arc::from(*error)),
                    permanent: false,
                },
                Err(other) => match other.downcast::<E>() {
                    Ok(error) => Failure::text(error),
                    Err(_) => unreachable!("the box holds an E"),
                },
            };
            failure.permanent = permanent;
            failure
        })
    }

    fn error_type() -> Option<(TypeId, &'static str)> {
        Some((TypeId::of::<E>(), std::any::type_name::<E>()))
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
    fn call(&mut self, message: &Message<T>) -> Result<(), Failure>;

    /// Its result's error type, if it can fail.
    #[doc(hidden)]
    fn error_type(&self) -> Option<(TypeId, &'static str)>;
}

impl<T, F, R> Handler<T> for F
where
    F: FnMut(&Message<T>) -> R + Send + 'static,
    R: HandlerResult,
{
    fn call(&mut self, message: &Message<T>) -> Result<(), Failure> {
        self(message).into_result()
    }

    fn error_type(&self) -> Option<(TypeId, &'static str)> {
        R::error_type()
    }
}

/// A consumer group's handler ([`Bus::subscribe_group`](crate::Bus::subscribe_group)):
/// `Fn(&Message<T>) -> R + Send + Sync` where `R` is `()` or `Result<(), E: Display>`, since
/// the group's workers call it at once from their threads.
#[diagnostic::on_unimplemented(
    message = "this is not a group handler for `Message<{T}>`",
    label = "expected `Fn(&Message<{T}>) -> R + Send + Sync` where `R` is `()` or `Result<(), E: Display>`",
    note = "a group's workers call its handler from several threads at once: it cannot be \
            `FnMut`; share state through `Arc`, atomics or a `Mutex`"
)]
pub trait GroupHandler<T>: Send + Sync + 'static {
    #[doc(hidden)]
    fn call(&self, message: &Message<T>) -> Result<(), Failure>;

    /// Its result's error type, if it can fail.
    #[doc(hidden)]
    fn error_type(&self) -> Option<(TypeId, &'static str)>;
}

impl<T, F, R> GroupHandler<T> for F
where
    F: Fn(&Message<T>) -> R + Send + Sync + 'static,
    R: HandlerResult,
{
    fn call(&self, message: &Message<T>) -> Result<(), Failure> {
        self(message).into_result()
    }

    fn error_type(&self) -> Option<(TypeId, &'static str)> {
        R::error_type()
    }
}

/// Runs one attempt, turning a panic into a failure that carries the panic's message.
pub(crate) fn attempt(run: impl FnOnce() -> Result<(), Failure>) -> Result<(), Failure> {
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(result) => result,
        Err(panic) => Err(panicked(panic)),
    }
}

/// A panic as a failed attempt; the payload is dropped where it cannot unwind.
fn panicked(panic: Box<dyn Any + Send>) -> Failure {
    let failure = Failure::text(format_args!("panicked: {}", panic_message(&*panic)));
    let _ = drop_quietly(panic);
    failure
}

/// `future`, with `retry_if` as its thread's whenever it is polled (a task may move between
/// threads): where an async handler's result becomes a [`Failure`].
#[cfg(feature = "tokio")]
pub(crate) async fn with_retry_if_async<F: std::future::Future>(
    retry_if: Option<RetryIf>,
    future: F,
) -> F::Output {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| with_retry_if(retry_if.as_ref(), || future.as_mut().poll(cx))).await
}

/// Runs one async attempt: making the future and every poll of it; a panic in either is a
/// failed attempt.
#[cfg(feature = "tokio")]
pub(crate) async fn attempt_async<F>(make: impl FnOnce() -> F) -> Result<(), Failure>
where
    F: std::future::Future<Output = Result<(), Failure>>,
{
    let future = match catch_unwind(AssertUnwindSafe(make)) {
        Ok(future) => future,
        Err(panic) => return Err(panicked(panic)),
    };
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(move |cx| {
        match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(panic) => std::task::Poll::Ready(Err(panicked(panic))),
        }
    })
    .await
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
