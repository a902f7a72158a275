//! Filters: a subscription's predicate over its topic's messages, checked at publish on the
//! publisher's thread, before the mailbox, so a message it rejects never takes a slot.

use std::any::Any;
use std::fmt;

use crate::options::predicate::MessageFn;

/// A subscription's filter, without its topic's type (which it checks).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Filter(MessageFn<bool>);

/// What a filter said of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Accept,
    Reject,
    /// The predicate panicked: the message is not delivered to this subscription.
    Panicked,
}

impl Filter {
    pub(crate) fn new<T: 'static>(accepts: impl Fn(&T) -> bool + Send + Sync + 'static) -> Self {
        Filter(MessageFn::new(accepts))
    }

    /// Whether it was written for topic `T`; else the type it was written for.
    pub(crate) fn check<T: 'static>(&self) -> Result<(), &'static str> {
        self.0.check::<T>()
    }

    /// Asks the predicate; a panic in it stops here.
    #[inline]
    pub(crate) fn verdict(&self, message: &dyn Any) -> Verdict {
        match self.0.call(message) {
            Some(true) => Verdict::Accept,
            Some(false) => Verdict::Reject,
            None => Verdict::Panicked,
        }
    }
}

impl fmt::Debug for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.show("Filter", f)
    }
}
