//! A subscription's priority (`Options::priority`): a function of the topic's messages, with
//! the topic's type erased, that gives each message its urgency level (higher first). The
//! mailbox that orders by it is `delivery/priority.rs`.

use std::any::Any;
use std::fmt;

use crate::options::predicate::MessageFn;

/// A subscription's priority function, without its topic's type (which it checks).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Priority(MessageFn<u8>);

impl Priority {
    /// The level a message gets when the function panics: the least urgent.
    pub(crate) const ON_PANIC: u8 = 0;

    pub(crate) fn new<T: 'static>(level: impl Fn(&T) -> u8 + Send + Sync + 'static) -> Self {
        Priority(MessageFn::new(level))
    }

    /// Whether it was written for topic `T`; else the type it was written for.
    pub(crate) fn check<T: 'static>(&self) -> Result<(), &'static str> {
        self.0.check::<T>()
    }

    /// The message's level; [`ON_PANIC`](Self::ON_PANIC) if the function panicked (the panic
    /// stops here).
    #[inline]
    pub(crate) fn level(&self, message: &dyn Any) -> u8 {
        self.0.call(message).unwrap_or(Self::ON_PANIC)
    }
}

impl fmt::Debug for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.show("Priority", f)
    }
}
