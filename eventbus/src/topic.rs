//! The public [`Topic`] trait: the Rust types that messages are and the names they go by.
//! A topic's runtime state (its order, its subscribers) is `topics/`.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::OnceLock;

use parking_lot::Mutex;

use crate::numbering::TopicIndex;

/// A type whose values can be published on a [`Bus`](crate::Bus).
///
/// Derive it with `#[derive(Topic)]`; `#[topic(name = "...")]` sets the name, which defaults
/// to the type's own name. Each instantiation of a generic topic is a topic of its own, named
/// with its type arguments.
///
/// # Examples
///
/// ```
/// use eventbus::Topic;
///
/// #[derive(Topic)]
/// #[topic(name = "orders.placed")]
/// struct OrderPlaced { id: u64 }
///
/// #[derive(Topic)]
/// struct Shipped(u64);
///
/// #[derive(Topic)]
/// struct Envelope<T: Send + Sync + 'static>(T);
///
/// assert_eq!(OrderPlaced::name(), "orders.placed");
/// assert_eq!(Shipped::name(), "Shipped");
/// assert_eq!(Envelope::<u8>::name(), "Envelope<u8>");
/// ```
///
/// A type that is not a topic cannot be published:
///
/// ```compile_fail
/// struct NotATopic;
/// let bus = eventbus::Bus::builder().build();
/// bus.publish(NotATopic);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a topic",
    label = "not a topic",
    note = "add `#[derive(Topic)]` to the definition of `{Self}`"
)]
pub trait Topic: Send + Sync + 'static {
    /// The topic's name, as shown in stats and dead letters.
    fn name() -> &'static str;

    /// The topic's log, if it keeps one: `#[topic(retain = N, retain_for = "1h")]`. A log
    /// topic keeps its last messages in one ring shared by all its subscriptions, each of
    /// which reads it at a position of its own, and may start in the past
    /// ([`Options::start`](crate::Options::start)). `None` (the default): every subscription
    /// gets a mailbox.
    fn retention() -> Option<crate::options::Retention> {
        None
    }

    /// The capacity of the topic's dispatcher queue, if it has a dispatcher:
    /// `#[topic(dispatcher)]` (a queue of 1024) or `#[topic(dispatcher, queue = N)]`.
    ///
    /// A publish to such a topic numbers the message, adds it to the topic's bounded queue and
    /// returns; one thread per topic, its dispatcher, hands each queued message to every
    /// subscription in queue order. Publishers wait only when the queue is full, never on
    /// the hand-out (a full `Block` mailbox holds up the dispatcher instead). `None` (the
    /// default): the publisher hands out itself. A log topic has no dispatcher: its
    /// subscriptions read the log, there is nothing to hand out.
    ///
    /// ```
    /// use eventbus::Topic;
    ///
    /// #[derive(Topic)]
    /// #[topic(dispatcher, queue = 4096)]
    /// struct Click { x: u32, y: u32 }
    ///
    /// assert_eq!(Click::dispatcher(), Some(4096));
    /// ```
    fn dispatcher() -> Option<usize> {
        None
    }

    /// Whether the derive gave the topic a log, known at compile time so that
    /// `#[subscriber(overflow = DropNewest)]` on a log topic fails to compile. The runtime
    /// still checks [`Topic::retention`], which is the authority for a hand-written impl.
    #[doc(hidden)]
    const LOG: bool = false;

    /// How an observer's [`AnyMessage`](crate::AnyMessage) shows a value of this type:
    /// `#[derive(Topic)]` writes its `Debug` when it has one. Not for direct use.
    #[doc(hidden)]
    fn __debug(value: &Self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let _ = value;
        write!(f, "<{}>", std::any::type_name::<Self>())
    }

    /// The topic type's index in each bus's table of numberings (`numbering.rs`) and of
    /// topics by index (`topics/directory.rs`): `#[derive(Topic)]` gives one to a type
    /// without generic parameters. `None`: every publish finds the topic the usual way. Not
    /// for direct use.
    #[doc(hidden)]
    fn __index() -> Option<&'static TopicIndex> {
        None
    }

    /// The value as something `AnyMessage::to_json` can write: `#[derive(Topic)]` gives it
    /// when the type implements `serde::Serialize` (and feature `serde` is on). Not for
    /// direct use.
    #[doc(hidden)]
    fn __serializable(value: &Self) -> Option<&dyn crate::message::Serializable> {
        let _ = value;
        None
    }
}

/// The name of one instantiation of a generic topic, made once and kept for the life of the
/// process: there are only as many as the program has instantiations.
#[doc(hidden)]
pub fn generic_name<T: 'static>(make: impl FnOnce() -> String) -> &'static str {
    static NAMES: OnceLock<Mutex<HashMap<TypeId, &'static str>>> = OnceLock::new();
    // Lock order: row 9 (the interned names), a leaf, at times under row 1; see engine/mod.rs.
    let mut names = NAMES.get_or_init(Default::default).lock();
    names
        .entry(TypeId::of::<T>())
        .or_insert_with(|| Box::leak(make().into_boxed_str()))
}
