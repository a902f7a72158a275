//! A consumer group's key (`Options::key`): a function of the topic's messages, with the
//! topic's type erased, that picks the worker (the lane) each message goes to, so that one
//! key's messages reach one worker in topic order. The group itself is `delivery/group.rs`.

use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};

use crate::options::predicate::MessageFn;

/// A group's key function, without its topic's type (which it checks), as a hash.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Key(MessageFn<u64>);

impl Key {
    pub(crate) fn new<T: 'static, K: Hash>(key: impl Fn(&T) -> K + Send + Sync + 'static) -> Self {
        Key(MessageFn::new(move |message: &T| {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            key(message).hash(&mut hasher);
            hasher.finish()
        }))
    }

    /// Whether it was written for topic `T`; else the type it was written for.
    pub(crate) fn check<T: 'static>(&self) -> Result<(), &'static str> {
        self.0.check::<T>()
    }

    /// The lane (of `of`) the message's key picks; `None` if the key function panicked. The
    /// same key always picks the same lane (the hasher's keys are fixed).
    #[inline]
    pub(crate) fn lane(&self, message: &dyn Any, of: usize) -> Option<usize> {
        self.0.call(message).map(|hash| (hash % of as u64) as usize)
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.show("Key", f)
    }
}
