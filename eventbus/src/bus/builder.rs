//! Building a bus: which registered subscribers it starts, the state their handlers share,
//! how many dead letters it keeps and the hook shown them.

use std::fmt;

use crate::bus::registry::Registration;
use crate::bus::Bus;
#[cfg(feature = "tokio")]
use crate::dead_letter::async_hook::AsyncHook;
use crate::dead_letter::DeadLetter;
use crate::dead_letter::Hook;
use crate::error::MissingState;
use crate::error::SubscribeError;
use crate::state::States;

/// The sync dead-letter hook, as the builder keeps it.
type SyncHook = Box<dyn FnMut(&DeadLetter) + Send>;

/// Builds a [`Bus`]. Starts no `#[subscriber]` unless told to.
///
/// # Examples
///
/// ```
/// use eventbus::Bus;
///
/// let bus = Bus::builder()
///     .registered_in("my_app::billing")
///     .state(String::from("postgres://localhost/shop"))
///     .dead_letter_capacity(100)
///     .build();
/// # bus.close();
/// ```
#[must_use = "a builder does nothing until `.build()`"]
pub struct BusBuilder {
    selection: Selection,
    /// The names given to `require`, in order.
    required: Vec<String>,
    dead_letter_capacity: usize,
    states: States,
    on_dead_letter: Option<SyncHook>,
    /// The async hook (feature `tokio`); `try_build` refuses it beside `on_dead_letter`.
    #[cfg(feature = "tokio")]
    on_dead_letter_async: Option<AsyncHook>,
    /// Where async subscribers and the async hook run (feature `tokio`).
    #[cfg(feature = "tokio")]
    runtime: Option<tokio::runtime::Handle>,
}

/// Which registered subscribers to start. Both fields are kept, rather than one replacing
/// the other, so that `try_build` can refuse a builder told both, in either order.
#[derive(Debug, Clone, Default)]
struct Selection {
    /// `registered()` was called.
    all: bool,
    /// The module prefixes given to `registered_in`.
    modules: Vec<String>,
}

impl Selection {
    fn chooses(&self, registration: &Registration) -> bool {
        self.all || self.modules.iter().any(|m| registration.is_in(m))
    }
}

/// Why [`BusBuilder::try_build`] could not build the bus. Nothing was started.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// A chosen subscriber takes a `State<T>` the builder was not given.
    MissingState(MissingState),
    /// A chosen subscriber could not start.
    Subscribe(SubscribeError),
    /// Both [`BusBuilder::registered`] (every subscriber) and [`BusBuilder::registered_in`]
    /// (only some modules) were called, so which subscribers were meant is unclear.
    ConflictingSelection {
        /// The modules given to `registered_in`.
        modules: Vec<String>,
    },
    /// Subscribers given to [`BusBuilder::require`] that the bus would not start.
    MissingSubscribers {
        /// No `#[subscriber]` in the program has these names: most likely the crate that
        /// defines them was left out by the linker, because the program never refers to it.
        unregistered: Vec<String>,
        /// These are in the program, but neither `registered()` nor `registered_in(...)`
        /// chose them.
        unselected: Vec<String>,
    },
    /// Both [`BusBuilder::on_dead_letter`] and [`BusBuilder::on_dead_letter_async`] were
    /// called (feature `tokio`). A bus has one hook, so which one was meant is unclear.
    #[cfg(feature = "tokio")]
    TwoDeadLetterHooks,
    /// [`BusBuilder::on_dead_letter_async`] was called, but the builder was given no runtime
    /// ([`BusBuilder::runtime`]) and `build()` was not called inside one (feature `tokio`).
    #[cfg(feature = "tokio")]
    HookWithoutRuntime,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::MissingState(missing) => write!(f, "{missing}"),
            BuildError::Subscribe(error) => write!(f, "{error}"),
            BuildError::ConflictingSelection { modules } => {
                let modules: Vec<String> = modules.iter().map(|m| format!("{m:?}")).collect();
                write!(
                    f,
                    "both `registered()` (every `#[subscriber]`) and `registered_in({})` (only \
                     those modules) were called: keep `registered_in` to start only the \
                     subscribers in those modules, or `registered()` alone to start all",
                    modules.join(", ")
                )
            }
            BuildError::MissingSubscribers {
                unregistered,
                unselected,
            } => {
                if !unregistered.is_empty() {
                    write!(
                        f,
                        "no `#[subscriber]` named {} is in this program. A library crate's \
                         subscribers are linked in only if the program refers to that crate: \
                         add {} to the binary. `Bus::registered()` lists the subscribers that \
                         are in",
                        quoted(unregistered),
                        link_hint(unregistered)
                    )?;
                }
                if !unregistered.is_empty() && !unselected.is_empty() {
                    f.write_str("; and ")?;
                }
                if !unselected.is_empty() {
                    let (is, it, its) = match unselected.len() {
                        1 => ("is", "it", "its"),
                        _ => ("are", "them", "their"),
                    };
                    write!(
                        f,
                        "{} {is} in this program, but this builder does not start {it}: add \
                         `.registered_in(\"...\")` with {its} module",
                        quoted(unselected),
                    )?;
                }
                Ok(())
            }
            #[cfg(feature = "tokio")]
            BuildError::TwoDeadLetterHooks => f.write_str(
                "both `on_dead_letter` and `on_dead_letter_async` were called, and a bus has one \
                 dead-letter hook: keep one of them",
            ),
            #[cfg(feature = "tokio")]
            BuildError::HookWithoutRuntime => f.write_str(
                "`on_dead_letter_async` needs a tokio runtime to run on: call `build()` inside \
                 one, or give the builder one with `.runtime(handle)`",
            ),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Subscribe(error) => Some(error),
            BuildError::MissingState(_)
            | BuildError::ConflictingSelection { .. }
            | BuildError::MissingSubscribers { .. } => None,
            #[cfg(feature = "tokio")]
            BuildError::TwoDeadLetterHooks | BuildError::HookWithoutRuntime => None,
        }
    }
}

/// `` `a`, `b` ``
fn quoted(names: &[String]) -> String {
    let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    names.join(", ")
}

/// `` `use handlers as _;` ``, one for each crate named by the paths among `names` (a path's
/// first segment is its crate, as `module_path!()` writes it); a name that is not a path
/// gets a placeholder.
fn link_hint(names: &[String]) -> String {
    let mut crates: Vec<&str> = Vec::new();
    for name in names {
        let krate = name
            .split_once("::")
            .map_or("its_crate", |(krate, _)| krate);
        if !crates.contains(&krate) {
            crates.push(krate);
        }
    }
    let uses: Vec<String> = crates.iter().map(|c| format!("`use {c} as _;`")).collect();
    uses.join(" and ")
}

impl BusBuilder {
    /// How many dead letters a bus keeps unless
    /// [`dead_letter_capacity`](BusBuilder::dead_letter_capacity) says otherwise.
    pub const DEFAULT_DEAD_LETTER_CAPACITY: usize = 10_000;

    pub(crate) fn new() -> Self {
        BusBuilder {
            selection: Selection::default(),
            required: Vec::new(),
            dead_letter_capacity: Self::DEFAULT_DEAD_LETTER_CAPACITY,
            states: States::default(),
            on_dead_letter: None,
            #[cfg(feature = "tokio")]
            on_dead_letter_async: None,
            #[cfg(feature = "tokio")]
            runtime: None,
        }
    }

    /// The tokio runtime async subscribers and [`on_dead_letter_async`](BusBuilder::on_dead_letter_async)
    /// run on (feature `tokio`). Without it, `build()` takes the runtime current where it is
    /// called, if any.
    ///
    /// The runtime needs no time driver: an async subscriber's retries, a task waiting for
    /// room (which looks again every millisecond in case a wake-up was missed) and the
    /// timeouts of the `_async` calls are kept by one thread of eventbus for all buses,
    /// which runs only while some task waits. (The `nats` bridge's tasks do use tokio's
    /// timer: a runtime that runs a `Bridge` needs `enable_all()`.)
    #[cfg(feature = "tokio")]
    pub fn runtime(mut self, runtime: tokio::runtime::Handle) -> Self {
        self.runtime = Some(runtime);
        self
    }

    /// Starts every `#[subscriber]` in the binary, those of its dependencies included (what
    /// [`Bus::new`] does). A library crate that the binary never refers to is left out by the
    /// linker, and its subscribers with it: see "Applications of many crates" in the crate
    /// docs. [`Bus::registered`] lists what this starts.
    ///
    /// Not together with [`registered_in`](BusBuilder::registered_in):
    /// [`try_build`](BusBuilder::try_build) refuses a builder given both.
    pub fn registered(mut self) -> Self {
        self.selection.all = true;
        self
    }

    /// Starts the `#[subscriber]` functions defined in module `prefix` or its submodules
    /// (`"app::billing"` takes `app::billing` and `app::billing::refunds`, not
    /// `app::billing_v2`). Call it again to add more modules.
    ///
    /// Not together with [`registered`](BusBuilder::registered):
    /// [`try_build`](BusBuilder::try_build) refuses a builder given both, in either order,
    /// with [`BuildError::ConflictingSelection`].
    pub fn registered_in(mut self, prefix: impl Into<String>) -> Self {
        self.selection.modules.push(prefix.into());
        self
    }

    /// Makes [`try_build`](BusBuilder::try_build) fail unless the bus would start the
    /// subscriber `name`: its name (`name = "..."` in its attribute, by default its path) or
    /// its path (`my_crate::module::function`). Call it again to require more.
    ///
    /// This turns a subscriber that is silently missing into an error at start-up: a library
    /// crate of subscribers that the program never refers to is left out by the linker (see
    /// "Applications of many crates" in the crate docs), and a subscriber outside the
    /// modules given to [`registered_in`](BusBuilder::registered_in) is not started.
    ///
    /// # Examples
    ///
    /// ```
    /// use eventbus::{subscriber, Bus, BuildError, Topic};
    ///
    /// #[derive(Topic)]
    /// struct OrderPlaced;
    ///
    /// #[subscriber(name = "audit")]
    /// fn audit(_: &OrderPlaced) {}
    ///
    /// let bus = Bus::builder().registered().require("audit").build();
    /// # bus.close();
    /// let error = Bus::builder()
    ///     .registered()
    ///     .require("email::send_receipt")
    ///     .try_build()
    ///     .unwrap_err();
    /// assert!(matches!(error, BuildError::MissingSubscribers { .. }));
    /// assert!(error.to_string().contains("add `use email as _;` to the binary"));
    /// ```
    pub fn require(mut self, name: impl Into<String>) -> Self {
        self.required.push(name.into());
        self
    }

    /// Gives handlers a shared value, which a `#[subscriber]` takes as `State<T>` or
    /// `&State<T>`. One value per type; a second of the same type replaces the first.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.states.insert(value);
        self
    }

    /// How many dead letters the bus keeps (default
    /// [`DEFAULT_DEAD_LETTER_CAPACITY`](BusBuilder::DEFAULT_DEAD_LETTER_CAPACITY), 10,000);
    /// past that the oldest are discarded and counted. With 0 it keeps none, but still
    /// counts them and shows them to [`on_dead_letter`](BusBuilder::on_dead_letter).
    pub fn dead_letter_capacity(mut self, capacity: usize) -> Self {
        self.dead_letter_capacity = capacity;
        self
    }

    /// Shows every new dead letter to `hook` (to log or persist it), on a thread of its own
    /// so that a slow hook never delays a worker. If the hook falls more than 1024 letters
    /// behind, later ones skip it (counted in [`BusStats::dead_letter_hook_skipped`](crate::BusStats));
    /// they are still kept in the store. `close` returns once the hook has seen every letter.
    /// A letter is kept before the hook is shown it, so the hook finds it in
    /// [`Bus::dead_letters`](crate::Bus::dead_letters) and may
    /// [`Bus::redeliver`](crate::Bus::redeliver) it.
    ///
    /// For a hook that awaits (a database, a queue), see
    /// [`on_dead_letter_async`](BusBuilder::on_dead_letter_async) (feature `tokio`); a bus has
    /// one of the two.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use eventbus::{Bus, DeadLetter, Message, Options, Topic};
    ///
    /// #[derive(Topic)]
    /// struct Charge(u32);
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let bus = Bus::builder()
    ///     .on_dead_letter(move |letter: &DeadLetter| tx.send(letter.to_string()).unwrap())
    ///     .build();
    /// bus.subscribe::<Charge>(Options::default().name("billing"), |_: &Message<Charge>| {
    ///     Err::<(), _>("declined")
    /// });
    /// bus.publish(Charge(5)).unwrap();
    /// bus.close();
    /// assert_eq!(rx.recv().unwrap(), "Charge #0 at billing after 1 attempt(s): declined");
    /// ```
    pub fn on_dead_letter(mut self, hook: impl FnMut(&DeadLetter) + Send + 'static) -> Self {
        self.on_dead_letter = Some(Box::new(hook));
        self
    }

    /// Shows every new dead letter to an async `hook` (to persist it with an async client),
    /// on one task of the bus's runtime (feature `tokio`): the runtime given to
    /// [`runtime`](BusBuilder::runtime), else the one current at `build()`.
    ///
    /// The hook takes its own clone of the letter, so its future may hold it across
    /// `.await`s. The task awaits the hook's future for one letter before it makes the next
    /// one's, so the hook sees the letters one at a time, in the order they were made. A
    /// panic while making the future or polling it ends that letter only: the next one is
    /// shown as usual (the panic is not counted, as with
    /// [`on_dead_letter`](BusBuilder::on_dead_letter)).
    ///
    /// Up to 1024 letters wait for the hook, in a bounded queue. A letter that finds it full
    /// skips the hook (counted in [`BusStats::dead_letter_hook_skipped`](crate::BusStats)) and
    /// is still kept in the store, where [`take_dead_letters`](crate::Bus::take_dead_letters)
    /// finds it, every letter as with `on_dead_letter`. The worker that made the letter never
    /// waits for the hook: that worker may itself be a task on the hook's runtime (on a
    /// `current_thread` runtime, or with every thread so busy, the hook could never make
    /// room), or a `close_timeout` giving up at its deadline; and a slow hook must not hold
    /// up every subscriber that fails.
    ///
    /// [`close`](crate::Bus::close) and [`close_async`](crate::Bus::close_async) return once
    /// the hook has finished every letter it was given; [`close_timeout`](crate::Bus::close_timeout)
    /// waits for it until its deadline, and says in
    /// [`CloseReport::hook_running`](crate::CloseReport) if it was still running then (it
    /// finishes on its own). As for async subscribers, `close` on a `current_thread`
    /// runtime's thread cannot wait (the hook's task needs that thread): it begins the close
    /// and returns; use `close_async` there. A close from inside the hook begins the close
    /// and returns, since the hook cannot wait for itself.
    ///
    /// [`try_build`](BusBuilder::try_build) refuses a builder given both this and
    /// `on_dead_letter` ([`BuildError::TwoDeadLetterHooks`]), or given this with no runtime
    /// to run it on ([`BuildError::HookWithoutRuntime`]); `build` panics with the same
    /// message.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use eventbus::{Bus, DeadLetter, Message, Options, Topic};
    /// use tokio::sync::Mutex;
    ///
    /// #[derive(Topic)]
    /// struct Charge(u32);
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let saved = Arc::new(Mutex::new(Vec::new())); // a database, say
    /// let db = Arc::clone(&saved);
    /// let bus = Bus::builder() // takes the current runtime
    ///     .on_dead_letter_async(move |letter: DeadLetter| {
    ///         let db = Arc::clone(&db);
    ///         async move {
    ///             tokio::task::yield_now().await; // the call to the database
    ///             db.lock().await.push(letter.to_string());
    ///         }
    ///     })
    ///     .build();
    /// bus.subscribe::<Charge>(Options::default().name("billing"), |_: &Message<Charge>| {
    ///     Err::<(), _>("declined")
    /// });
    /// bus.publish_async(Charge(5)).await.unwrap();
    /// bus.close_async().await; // returns once the hook has saved the letter
    /// assert_eq!(
    ///     *saved.lock().await,
    ///     ["Charge #0 at billing after 1 attempt(s): declined"]
    /// );
    /// # });
    /// ```
    #[cfg(feature = "tokio")]
    pub fn on_dead_letter_async<F, A>(mut self, mut hook: F) -> Self
    where
        F: FnMut(DeadLetter) -> A + Send + 'static,
        A: std::future::Future<Output = ()> + Send + 'static,
    {
        self.on_dead_letter_async = Some(Box::new(move |letter| Box::pin(hook(letter))));
        self
    }

    /// Builds the bus and starts the chosen subscribers.
    ///
    /// # Panics
    ///
    /// With [`try_build`](BusBuilder::try_build)'s error message, if a chosen subscriber takes
    /// a `State<T>` the builder was not given, or its worker thread cannot start.
    pub fn build(self) -> Bus {
        self.try_build().unwrap_or_else(|error| panic!("{error}"))
    }

    /// Builds the bus like [`build`](BusBuilder::build), saying what is wrong instead of
    /// panicking. Every chosen subscriber's state is checked before any is started.
    ///
    /// # Errors
    ///
    /// [`BuildError::ConflictingSelection`] if both `registered()` and `registered_in(...)`
    /// were called; [`BuildError::MissingSubscribers`] naming the subscribers given to
    /// [`require`](BusBuilder::require) that it would not start;
    /// [`BuildError::MissingState`] naming the subscriber and the type; or
    /// [`BuildError::Subscribe`] if a worker thread cannot start (the subscribers already
    /// started are closed again). With feature `tokio`, [`BuildError::TwoDeadLetterHooks`] if
    /// both dead-letter hooks were given, and [`BuildError::HookWithoutRuntime`] if
    /// [`on_dead_letter_async`](BusBuilder::on_dead_letter_async) has no runtime to run on.
    ///
    /// # Examples
    ///
    /// ```
    /// use eventbus::{subscriber, Bus, BuildError, State, Topic};
    ///
    /// #[derive(Topic)]
    /// struct Ping;
    /// struct Db;
    ///
    /// #[subscriber(name = "pinger")]
    /// fn ping(_: &Ping, _db: State<Db>) {}
    ///
    /// let error = Bus::builder().registered().try_build().unwrap_err();
    /// assert!(matches!(error, BuildError::MissingState(_)));
    /// assert!(error.to_string().starts_with("subscriber `pinger` takes `State<"));
    /// ```
    pub fn try_build(self) -> Result<Bus, BuildError> {
        if self.selection.all && !self.selection.modules.is_empty() {
            return Err(BuildError::ConflictingSelection {
                modules: self.selection.modules,
            });
        }
        #[cfg(feature = "tokio")]
        if self.on_dead_letter.is_some() && self.on_dead_letter_async.is_some() {
            return Err(BuildError::TwoDeadLetterHooks);
        }
        let all = Registration::all();
        let chosen: Vec<&Registration> = all
            .iter()
            .copied()
            .filter(|registration| self.selection.chooses(registration))
            .collect();
        let mut unregistered = Vec::new();
        let mut unselected = Vec::new();
        for required in &self.required {
            let is = |r: &Registration| r.subscriber_name() == *required || r.path() == *required;
            if chosen.iter().any(|r| is(r)) {
                continue;
            }
            if all.iter().any(|r| is(r)) {
                unselected.push(required.clone());
            } else {
                unregistered.push(required.clone());
            }
        }
        if !unregistered.is_empty() || !unselected.is_empty() {
            return Err(BuildError::MissingSubscribers {
                unregistered,
                unselected,
            });
        }
        for registration in &chosen {
            if let Some(key) = registration
                .states
                .iter()
                .flatten()
                .find(|k| !self.states.contains(k))
            {
                return Err(BuildError::MissingState(MissingState {
                    subscriber: registration.subscriber_name(),
                    state: (key.type_name)(),
                }));
            }
        }
        // Async subscribers need a runtime: checked, like state, before anything starts.
        #[cfg(feature = "tokio")]
        let runtime = self
            .runtime
            .or_else(|| tokio::runtime::Handle::try_current().ok());
        #[cfg(feature = "tokio")]
        if let (None, Some(registration)) = (&runtime, chosen.iter().find(|r| r.asynchronous)) {
            return Err(BuildError::Subscribe(SubscribeError::NoRuntime {
                name: registration.subscriber_name(),
            }));
        }
        let hook = self.on_dead_letter.map(Hook::Thread);
        #[cfg(feature = "tokio")]
        let hook = match (hook, self.on_dead_letter_async, &runtime) {
            (_, Some(hook), Some(runtime)) => Some(Hook::Task(hook, runtime.clone())),
            (_, Some(_), None) => return Err(BuildError::HookWithoutRuntime),
            (hook, None, _) => hook,
        };
        let bus =
            Bus::with_parts(self.dead_letter_capacity, self.states, hook).map_err(|source| {
                BuildError::Subscribe(SubscribeError::Spawn {
                    name: "eventbus-dead-letters".into(),
                    source,
                })
            })?;
        #[cfg(feature = "tokio")]
        bus.engine.set_runtime(runtime);
        for registration in chosen {
            if let Err(error) = (registration.start)(&bus, registration.options()) {
                bus.close();
                return Err(BuildError::Subscribe(error));
            }
        }
        Ok(bus)
    }
}

impl fmt::Debug for BusBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut builder = f.debug_struct("BusBuilder");
        builder
            .field("selection", &self.selection)
            .field("required", &self.required)
            .field("dead_letter_capacity", &self.dead_letter_capacity)
            .field("states", &self.states)
            .field("on_dead_letter", &self.on_dead_letter.is_some());
        #[cfg(feature = "tokio")]
        builder.field("on_dead_letter_async", &self.on_dead_letter_async.is_some());
        builder.finish()
    }
}
