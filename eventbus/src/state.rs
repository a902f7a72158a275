//! Shared state for handlers: values given to the builder once per type, handed to
//! `#[subscriber]` functions that take a `State<T>` parameter.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A shared value given to [`BusBuilder::state`](crate::BusBuilder::state), as a
/// `#[subscriber]` receives it: a cheap handle to one `T` shared by every handler.
///
/// A subscriber takes it as `State<T>` or `&State<T>`, anywhere after its message.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use eventbus::{subscriber, Bus, State, Topic};
///
/// #[derive(Topic)]
/// struct Visit;
///
/// #[derive(Default)]
/// struct Counter(AtomicU64);
///
/// #[subscriber]
/// fn count(_: &Visit, counter: State<Counter>) {
///     counter.0.fetch_add(1, Ordering::Relaxed);
/// }
///
/// let bus = Bus::builder().state(Counter::default()).registered().build();
/// bus.publish(Visit).unwrap();
/// bus.close();
/// assert_eq!(bus.state::<Counter>().unwrap().0.load(Ordering::Relaxed), 1);
/// ```
pub struct State<T: ?Sized>(Arc<T>);

impl<T: ?Sized> State<T> {
    /// The shared value's `Arc`.
    pub fn arc(&self) -> &Arc<T> {
        &self.0
    }
}

impl<T: ?Sized> Clone for State<T> {
    fn clone(&self) -> Self {
        State(Arc::clone(&self.0))
    }
}

impl<T: ?Sized> Deref for State<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for State<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("State").field(&&*self.0).finish()
    }
}

/// The values a bus was built with, one per type.
#[derive(Default)]
pub(crate) struct States(HashMap<TypeId, Arc<dyn Any + Send + Sync>>);

impl States {
    pub(crate) fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        self.0.insert(TypeId::of::<T>(), Arc::new(value));
    }

    pub(crate) fn contains(&self, key: &StateKey) -> bool {
        self.0.contains_key(&(key.type_id)())
    }

    pub(crate) fn get<T: Send + Sync + 'static>(&self) -> Option<State<T>> {
        let value = Arc::clone(self.0.get(&TypeId::of::<T>())?);
        value.downcast::<T>().ok().map(State)
    }
}

impl fmt::Debug for States {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("States")
            .field("count", &self.0.len())
            .finish()
    }
}

/// Names a state type in a registration, so `build` can check it before starting anything.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct StateKey {
    pub type_id: fn() -> TypeId,
    pub type_name: fn() -> &'static str,
}
