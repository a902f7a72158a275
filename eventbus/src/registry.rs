//! Registration: how `#[subscriber]` functions are collected at startup (with `inventory`)
//! and started by a [`BusBuilder`](crate::BusBuilder).

use std::time::Duration;

use crate::state::StateKey;
use crate::{Bus, Options, Overflow, SubscribeError, Subscription};

/// One `#[subscriber]` function, as the macro records it. Not for direct use.
#[doc(hidden)]
#[derive(Debug)]
pub struct Registration {
    /// `module_path!()` where the function is defined.
    pub module_path: &'static str,
    /// The function's name.
    pub function: &'static str,
    /// `name = "..."`, if given.
    pub name: Option<&'static str>,
    pub capacity: usize,
    pub overflow: Overflow,
    pub retries: u32,
    pub backoff_nanos: u64,
    /// The `State<T>` types its handler takes.
    pub states: &'static [StateKey],
    pub start: fn(&Bus, Options) -> Result<Subscription, SubscribeError>,
}

inventory::collect!(Registration);

impl Registration {
    /// The subscriber's name: `name = "..."`, or the function's path.
    pub(crate) fn subscriber_name(&self) -> String {
        match self.name {
            Some(name) => name.to_owned(),
            None => format!("{}::{}", self.module_path, self.function),
        }
    }

    pub(crate) fn options(&self) -> Options {
        Options::default()
            .capacity(self.capacity)
            .overflow(self.overflow)
            .retries(self.retries)
            .backoff(Duration::from_nanos(self.backoff_nanos))
            .name(self.subscriber_name())
    }

    /// Whether the function is defined in module `prefix` or below it.
    pub(crate) fn is_in(&self, prefix: &str) -> bool {
        let prefix = prefix.trim_end_matches("::");
        match self.module_path.strip_prefix(prefix) {
            Some(rest) => rest.is_empty() || rest.starts_with("::"),
            None => false,
        }
    }

    /// Every registered subscriber, by name.
    pub(crate) fn all() -> Vec<&'static Registration> {
        let mut all: Vec<_> = inventory::iter::<Registration>.into_iter().collect();
        all.sort_by_key(|r| r.subscriber_name());
        all
    }
}
