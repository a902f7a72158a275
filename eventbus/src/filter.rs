//! Filters: a subscription's predicate over its topic's messages, checked at publish on the
//! publisher's thread, before the mailbox, so a message it rejects never takes a slot.

use std::any::{Any, TypeId};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::unwind::drop_quietly;

/// A subscription's filter, without its topic's type (which it checks).
#[derive(Clone)]
pub(crate) struct Filter {
    /// The topic the predicate was written for.
    topic: TypeId,
    topic_name: &'static str,
    accepts: Arc<Predicate>,
}

/// A filter's predicate, over a message whose type it checks.
type Predicate = dyn Fn(&dyn Any) -> bool + Send + Sync;

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
        Filter {
            topic: TypeId::of::<T>(),
            topic_name: std::any::type_name::<T>(),
            accepts: Arc::new(move |message: &dyn Any| {
                // A filter is only ever asked about its own topic (checked at subscribe).
                message.downcast_ref::<T>().is_some_and(&accepts)
            }),
        }
    }

    /// Whether it was written for topic `T`; else the type it was written for.
    pub(crate) fn check<T: 'static>(&self) -> Result<(), &'static str> {
        if self.topic == TypeId::of::<T>() {
            Ok(())
        } else {
            Err(self.topic_name)
        }
    }

    /// Asks the predicate; a panic in it stops here.
    #[inline]
    pub(crate) fn verdict(&self, message: &dyn Any) -> Verdict {
        match catch_unwind(AssertUnwindSafe(|| (self.accepts)(message))) {
            Ok(true) => Verdict::Accept,
            Ok(false) => Verdict::Reject,
            Err(panic) => {
                drop_quietly(panic);
                Verdict::Panicked
            }
        }
    }
}

impl fmt::Debug for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Filter(&{})", self.topic_name)
    }
}

/// Two filters are the same when they are the same predicate (clones of one `Options`).
impl PartialEq for Filter {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.accepts, &other.accepts)
    }
}

impl Eq for Filter {}
