//! A function of one topic's messages with the topic's type erased, which it checks: what a
//! subscription's filter (`filter.rs`), a group's key (`key.rs`) and a priority
//! (`priority.rs`) are made of. A leaf.

use std::any::{Any, TypeId};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::util::unwind::drop_quietly;

pub(crate) struct MessageFn<R> {
    /// The topic it was written for.
    topic: TypeId,
    topic_name: &'static str,
    call: Arc<Erased<R>>,
}

/// The function over a message whose type it checks: `None` for a message of another topic
/// (which subscribe rules out).
type Erased<R> = dyn Fn(&dyn Any) -> Option<R> + Send + Sync;

impl<R> MessageFn<R> {
    pub(crate) fn new<T: 'static>(f: impl Fn(&T) -> R + Send + Sync + 'static) -> Self {
        MessageFn {
            topic: TypeId::of::<T>(),
            topic_name: std::any::type_name::<T>(),
            call: Arc::new(move |message: &dyn Any| message.downcast_ref::<T>().map(&f)),
        }
    }

    /// The type it was written for, and its name.
    pub(crate) fn written_for(&self) -> (TypeId, &'static str) {
        (self.topic, self.topic_name)
    }

    /// Whether it was written for topic `T`; else the type it was written for.
    pub(crate) fn check<T: 'static>(&self) -> Result<(), &'static str> {
        if self.topic == TypeId::of::<T>() {
            Ok(())
        } else {
            Err(self.topic_name)
        }
    }

    /// Calls it on `message`; `None` if it panicked (the panic stops here), or if `message`
    /// is of another topic.
    #[inline]
    pub(crate) fn call(&self, message: &dyn Any) -> Option<R> {
        match catch_unwind(AssertUnwindSafe(|| (self.call)(message))) {
            Ok(result) => result,
            Err(panic) => {
                drop_quietly(panic);
                None
            }
        }
    }

    /// Shown as `what(&Topic)`.
    pub(crate) fn show(&self, what: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{what}(&{})", self.topic_name)
    }
}

impl<R> Clone for MessageFn<R> {
    fn clone(&self) -> Self {
        MessageFn {
            topic: self.topic,
            topic_name: self.topic_name,
            call: Arc::clone(&self.call),
        }
    }
}

/// Two are the same when they are the same function (clones of one `Options`).
impl<R> PartialEq for MessageFn<R> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.call, &other.call)
    }
}

impl<R> Eq for MessageFn<R> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_answers_for_its_own_topic_and_stops_a_panic() {
        let even = MessageFn::new(|n: &u32| {
            assert!(*n < 100, "too big");
            n % 2 == 0
        });
        assert_eq!(even.call(&4u32), Some(true));
        assert_eq!(even.call(&5u32), Some(false));
        assert_eq!(even.call(&100u32), None, "a panic");
        assert_eq!(even.call(&"text"), None, "another topic");
        assert_eq!(even.check::<u32>(), Ok(()));
        assert_eq!(even.check::<u64>(), Err("u32"));
        assert!(even == even.clone());
        assert!(even != MessageFn::new(|n: &u32| n % 2 == 0));
    }
}
