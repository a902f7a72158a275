//! Building a bus: which registered subscribers it starts, and how many dead letters it keeps.

use crate::dead_letter::DEFAULT_DEAD_LETTER_CAPACITY;
use crate::registry::Registration;
use crate::Bus;

/// Builds a [`Bus`]. Starts no `#[subscriber]` unless told to.
///
/// # Examples
///
/// ```
/// use eventbus::Bus;
///
/// let bus = Bus::builder()
///     .registered_in("my_app::billing")
///     .dead_letter_capacity(100)
///     .build();
/// # bus.close();
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `.build()`"]
pub struct BusBuilder {
    selection: Selection,
    dead_letter_capacity: usize,
}

#[derive(Debug, Clone)]
enum Selection {
    /// The listed module prefixes (none: no registered subscriber).
    In(Vec<String>),
    All,
}

impl BusBuilder {
    pub(crate) fn new() -> Self {
        BusBuilder {
            selection: Selection::In(Vec::new()),
            dead_letter_capacity: DEFAULT_DEAD_LETTER_CAPACITY,
        }
    }

    /// Starts every `#[subscriber]` in the program.
    pub fn registered(mut self) -> Self {
        self.selection = Selection::All;
        self
    }

    /// Starts the `#[subscriber]` functions defined in module `prefix` or its submodules
    /// (`"app::billing"` takes `app::billing` and `app::billing::refunds`, not
    /// `app::billing_v2`). Call it again to add more modules.
    pub fn registered_in(mut self, prefix: impl Into<String>) -> Self {
        if let Selection::In(prefixes) = &mut self.selection {
            prefixes.push(prefix.into());
        }
        self
    }

    /// How many dead letters the bus keeps (default 10,000); past that the oldest are
    /// discarded and counted.
    pub fn dead_letter_capacity(mut self, capacity: usize) -> Self {
        self.dead_letter_capacity = capacity;
        self
    }

    /// Builds the bus and starts the chosen subscribers.
    ///
    /// # Panics
    ///
    /// If a subscriber's worker thread cannot be started.
    pub fn build(self) -> Bus {
        let bus = Bus::with_dead_letter_capacity(self.dead_letter_capacity);
        for registration in Registration::all() {
            let chosen = match &self.selection {
                Selection::All => true,
                Selection::In(prefixes) => prefixes.iter().any(|p| registration.is_in(p)),
            };
            if chosen {
                if let Err(error) = (registration.start)(&bus, registration.options()) {
                    panic!("{error}");
                }
            }
        }
        bus
    }
}
