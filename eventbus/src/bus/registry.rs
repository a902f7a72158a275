//! Registration: how `#[subscriber]` functions are collected at startup (with `inventory`)
//! and started by a [`BusBuilder`](crate::BusBuilder), and [`Bus::registered`], which lists
//! them.
//!
//! `inventory` collects a registration from every crate the linker keeps, and the linker
//! keeps a library crate only if the program refers to it: a crate of subscribers that
//! nothing names contributes none. The crate docs ("Applications of many crates") give the
//! fix; `Bus::registered` and `BusBuilder::require` make the omission visible.

use std::time::Duration;

use crate::bus::subscription::Subscription;
use crate::bus::Bus;
use crate::error::SubscribeError;
use crate::options::Options;
use crate::options::Overflow;
use crate::state::StateKey;

/// One `#[subscriber]` function, as the macro records it. Not for direct use.
#[doc(hidden)]
#[derive(Debug)]
pub struct Registration {
    /// `module_path!()` where the function is defined.
    pub module_path: &'static str,
    /// The function's name.
    pub function: &'static str,
    /// Its topic's `Topic::name`.
    pub topic: fn() -> &'static str,
    /// `name = "..."`, if given.
    pub name: Option<&'static str>,
    pub capacity: usize,
    pub overflow: Overflow,
    pub retries: u32,
    pub backoff_nanos: u64,
    /// `workers = N`: a consumer group's size (1: no group).
    pub workers: usize,
    /// `start = ...`: where a subscription to a log topic starts.
    pub from: crate::options::Start,
    /// What each parameter after the message needs from the builder: the `T` of a
    /// `State<T>` (`FromBus::STATE`), `None` for one that needs nothing.
    pub states: &'static [Option<StateKey>],
    /// `async fn`: its worker is a task, which needs a runtime.
    pub asynchronous: bool,
    pub start: fn(&Bus, Options) -> Result<Subscription, SubscribeError>,
}

inventory::collect!(Registration);

impl Registration {
    /// The subscriber's name: `name = "..."`, or the function's path.
    pub(crate) fn subscriber_name(&self) -> String {
        match self.name {
            Some(name) => name.to_owned(),
            None => self.path(),
        }
    }

    pub(crate) fn options(&self) -> Options {
        Options::default()
            .capacity(self.capacity)
            .overflow(self.overflow)
            .retries(self.retries)
            .backoff(Duration::from_nanos(self.backoff_nanos))
            .start(self.from)
            .workers(self.workers)
            .name(self.subscriber_name())
    }

    /// The function's path: `module_path::function`.
    pub(crate) fn path(&self) -> String {
        format!("{}::{}", self.module_path, self.function)
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

/// A `#[subscriber]` function found in the program, as [`Bus::registered`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegisteredSubscriber {
    /// Its name: `name = "..."`, or the function's path.
    pub name: String,
    /// Its topic's name ([`Topic::name`](crate::Topic::name)).
    pub topic: &'static str,
    /// The module that defines the function, as `module_path!()` gives it; its first
    /// segment is the crate.
    pub module_path: &'static str,
    /// The function's name.
    pub function: &'static str,
    /// The options it is started with: those of its attribute, with defaults filled in and
    /// its name set.
    pub options: Options,
}

impl Bus {
    /// Every `#[subscriber]` in the program, by name: what [`Bus::new`] would start, whether
    /// or not any bus has started it. Log it, or assert on it, at start-up.
    ///
    /// It lists what the linker kept: a `#[subscriber]` in a library crate that the program
    /// never refers to is missing (see "Applications of many crates" in the crate docs; the
    /// fix is one line, `use that_crate as _;`). [`BusBuilder::require`] makes the build
    /// fail when a subscriber is missing.
    ///
    /// [`BusBuilder::require`]: crate::BusBuilder::require
    ///
    /// # Examples
    ///
    /// ```
    /// use eventbus::{subscriber, Bus, Options, Overflow, Topic};
    ///
    /// #[derive(Topic)]
    /// #[topic(name = "orders.placed")]
    /// struct OrderPlaced;
    ///
    /// #[subscriber(name = "email", overflow = DropOldest)]
    /// fn send_receipt(_: &OrderPlaced) {}
    ///
    /// let registered = Bus::registered();
    /// let email = registered.iter().find(|s| s.name == "email").unwrap();
    /// assert_eq!((email.topic, email.function), ("orders.placed", "send_receipt"));
    /// assert_eq!(
    ///     email.options,
    ///     Options::default().overflow(Overflow::DropOldest).name("email")
    /// );
    /// for s in &registered {
    ///     println!("{} on {} ({}::{})", s.name, s.topic, s.module_path, s.function);
    /// }
    /// ```
    pub fn registered() -> Vec<RegisteredSubscriber> {
        Registration::all()
            .into_iter()
            .map(|registration| RegisteredSubscriber {
                name: registration.subscriber_name(),
                topic: (registration.topic)(),
                module_path: registration.module_path,
                function: registration.function,
                options: registration.options(),
            })
            .collect()
    }
}
