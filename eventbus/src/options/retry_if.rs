//! Which failures are worth retrying (`Options::retry_if`): a function of the handler's error,
//! with the error's type erased, asked when an attempt fails. One it says `false` for is a
//! dead letter at once.

use std::any::Any;
use std::fmt;

use crate::options::predicate::MessageFn;

/// A subscription's retry predicate, without its error type (which it checks).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct RetryIf(MessageFn<bool>);

impl RetryIf {
    pub(crate) fn new<E: 'static>(retry: impl Fn(&E) -> bool + Send + Sync + 'static) -> Self {
        RetryIf(MessageFn::new(retry))
    }

    /// The error type it was written for, and its name.
    pub(crate) fn written_for_type(&self) -> std::any::TypeId {
        self.0.written_for().0
    }

    pub(crate) fn written_for(&self) -> &'static str {
        self.0.written_for().1
    }

    /// Whether to retry after `error`. A predicate that panics (or an error of another type,
    /// which subscribe rules out) retries, as a failure without a predicate does.
    #[inline]
    pub(crate) fn retries(&self, error: &dyn Any) -> bool {
        self.0.call(error).unwrap_or(true)
    }
}

impl fmt::Debug for RetryIf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.show("RetryIf", f)
    }
}
