//! What a subscriber receives: a share of the published value, with its place in the
//! topic's order.

pub(crate) mod cause;
pub(crate) mod log_block;
#[cfg(feature = "nats")]
pub(crate) mod origin;
pub(crate) mod shared;

use std::fmt;
use std::mem::ManuallyDrop;
use std::ops::Deref;

use crate::message::cause::Cause;
use crate::message::shared::Shared;

/// A published message, as handed to subscribers.
///
/// It dereferences to the published value; [`seq`](Message::seq) is its place in the topic's
/// one order. Every subscriber of the topic shares one allocation of the value (a `Message`
/// is one reference to it, like an `Arc`), so the value need not be `Clone`; cloning a
/// `Message` makes another reference, and an async handler owns its `Message` across
/// `.await`s.
///
/// # Examples
///
/// ```
/// use eventbus::{Bus, Message, Options, Topic};
///
/// #[derive(Topic)]
/// struct Tick(u32);
///
/// let bus = Bus::builder().build();
/// let (tx, rx) = std::sync::mpsc::channel();
/// bus.subscribe::<Tick>(Options::default(), move |m: &Message<Tick>| {
///     tx.send((m.seq(), m.topic(), m.0)).unwrap();
/// });
/// bus.publish(Tick(7)).unwrap();
/// bus.close();
/// assert_eq!(rx.recv().unwrap(), (0, "Tick", 7));
/// ```
pub struct Message<T> {
    shared: Shared<Envelope<T>>,
}

/// What a publish allocates once and every subscriber shares (its seq and topic are in its
/// block's header: see `shared.rs`).
pub(crate) struct Envelope<T> {
    /// The span current where it was published (feature `tracing`; else nothing).
    cause: Cause,
    /// Published by a NATS importer (feature `nats`; see `origin.rs`).
    #[cfg(feature = "nats")]
    imported: bool,
    payload: T,
}

impl<T> Envelope<T> {
    /// Made where the message is published: it keeps the span current there.
    pub(crate) fn new(payload: T) -> Self {
        Envelope {
            cause: Cause::current(),
            #[cfg(feature = "nats")]
            imported: origin::importing(),
            payload,
        }
    }

    /// The payload back, from a message that was never handed out.
    pub(crate) fn into_payload(self) -> T {
        self.payload
    }
}

impl<T> Message<T> {
    /// A message around one of the shared references a publish made.
    pub(crate) fn new(shared: Shared<Envelope<T>>) -> Self {
        Message { shared }
    }

    /// A message no publish made, its one reference (a dead letter for bytes that never
    /// became a message of the bus: feature `nats`; and unit tests).
    #[cfg(any(feature = "nats", test))]
    pub(crate) fn alone(seq: u64, topic: &'static str, payload: T) -> Self {
        match crate::message::shared::shared(seq, topic, Envelope::new(payload), 1).next() {
            Some(shared) => Message { shared },
            None => unreachable!("`shared` hands out at least one reference"),
        }
    }

    /// The message's number in its topic: from 0, one more for each publish, no gaps, no
    /// repeats.
    pub fn seq(&self) -> u64 {
        self.shared.seq()
    }

    /// The name of the message's topic.
    pub fn topic(&self) -> &'static str {
        self.shared.topic()
    }

    /// The published value (also reachable through `Deref`).
    pub fn payload(&self) -> &T {
        &self.shared.payload
    }

    /// Whether a NATS importer published it (feature `nats`).
    #[cfg(feature = "nats")]
    pub(crate) fn is_imported(&self) -> bool {
        self.shared.imported
    }

    /// The span that was current where the message was published (feature `tracing`).
    pub(crate) fn cause(&self) -> &Cause {
        &self.shared.cause
    }

    /// The counted reference this message is.
    pub(crate) fn into_shared(self) -> Shared<Envelope<T>> {
        self.shared
    }

    /// The published value, if this is the message's only reference (a message an inline
    /// subscriber refused, going back to its publisher); else the message back.
    pub(crate) fn try_into_payload(self) -> Result<T, Message<T>> {
        match self.shared.try_unwrap() {
            Ok(envelope) => Ok(envelope.payload),
            Err(shared) => Err(Message { shared }),
        }
    }

    /// A message of a log's block, as a handle that is not counted: never dropped, so it
    /// lets go of nothing (see `log_block.rs`).
    pub(crate) fn uncounted(shared: ManuallyDrop<Shared<Envelope<T>>>) -> ManuallyDrop<Self> {
        ManuallyDrop::new(Message {
            shared: ManuallyDrop::into_inner(shared),
        })
    }
}

/// A message a worker took: its own reference, or one lent by its topic's log for as long as
/// the worker does not take the next (see `delivery/log/`).
pub(crate) enum Taken<'a, T> {
    Owned(Message<T>),
    Lent(&'a Message<T>),
}

impl<T> Taken<'_, T> {
    /// A reference of the worker's own: the taken one, or a new one for a lent message.
    pub(crate) fn into_owned(self) -> Message<T> {
        match self {
            Taken::Owned(message) => message,
            Taken::Lent(message) => message.clone(),
        }
    }
}

impl<T> Deref for Taken<'_, T> {
    type Target = Message<T>;

    fn deref(&self) -> &Message<T> {
        match self {
            Taken::Owned(message) => message,
            Taken::Lent(message) => message,
        }
    }
}

/// Another share of the same message: no copy of the value, one more reference.
impl<T> Clone for Message<T> {
    fn clone(&self) -> Self {
        Message {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Deref for Message<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.shared.payload
    }
}

impl<T: fmt::Debug> fmt::Debug for Message<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message")
            .field("topic", &self.topic())
            .field("seq", &self.seq())
            .field("payload", self.payload())
            .finish()
    }
}

/// A message of any topic, as an observer receives it ([`Bus::observe`](crate::Bus::observe),
/// `#[observer]`): its topic's name, its seq, and its value, reachable as its own type with
/// [`downcast_ref`](AnyMessage::downcast_ref).
///
/// Its `Debug` shows the value when the topic's type implements `Debug` (else `<TypeName>`),
/// as `#[derive(Topic)]` records it.
///
/// # Examples
///
/// ```
/// use eventbus::{AnyMessage, Bus, Options, Topic};
///
/// #[derive(Topic, Debug)]
/// #[topic(name = "orders.placed")]
/// struct OrderPlaced { id: u64 }
///
/// let bus = Bus::builder().build();
/// let (tx, rx) = std::sync::mpsc::channel();
/// let audit = bus
///     .observe("orders.*", Options::default(), move |m: &AnyMessage| {
///         let id = m.downcast_ref::<OrderPlaced>().map(|o| o.id);
///         tx.send((m.topic(), m.seq(), id, format!("{m:?}"))).unwrap();
///     })
///     .unwrap();
/// bus.publish(OrderPlaced { id: 7 }).unwrap();
/// audit.unsubscribe();
/// assert_eq!(
///     rx.recv().unwrap(),
///     ("orders.placed", 0, Some(7), "OrderPlaced { id: 7 }".to_owned())
/// );
/// ```
pub struct AnyMessage {
    message: Box<dyn Erased>,
}

/// A `Message<T>` with its type erased, and what its topic recorded about `T`.
trait Erased: Send + Sync {
    fn topic(&self) -> &'static str;
    fn seq(&self) -> u64;
    fn payload(&self) -> &dyn std::any::Any;
    /// The `Message<T>` itself.
    fn message(&self) -> &dyn std::any::Any;
    fn debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    fn serializable(&self) -> Option<&dyn Serializable>;
    /// Another share of the message (for an async observer's attempt).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    fn share(&self) -> Box<dyn Erased>;
}

/// A value that can become JSON (feature `serde`): every `T: Serialize`. Not for direct use.
#[doc(hidden)]
pub trait Serializable {
    /// The value as JSON.
    #[cfg(feature = "serde")]
    fn to_json(&self) -> Result<serde_json::Value, serde_json::Error>;
}

#[cfg(feature = "serde")]
impl<T: serde::Serialize> Serializable for T {
    fn to_json(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::to_value(self)
    }
}

/// What a topic's type records for observers (see `Topic`'s hidden methods).
pub(crate) struct Recorded<T> {
    pub(crate) debug: fn(&T, &mut fmt::Formatter<'_>) -> fmt::Result,
    pub(crate) serializable: fn(&T) -> Option<&dyn Serializable>,
}

struct Typed<T> {
    message: Message<T>,
    recorded: Recorded<T>,
}

impl<T: Send + Sync + 'static> Erased for Typed<T> {
    fn topic(&self) -> &'static str {
        self.message.topic()
    }

    fn seq(&self) -> u64 {
        self.message.seq()
    }

    fn payload(&self) -> &dyn std::any::Any {
        self.message.payload()
    }

    fn message(&self) -> &dyn std::any::Any {
        &self.message
    }

    fn debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (self.recorded.debug)(self.message.payload(), f)
    }

    fn serializable(&self) -> Option<&dyn Serializable> {
        (self.recorded.serializable)(self.message.payload())
    }

    fn share(&self) -> Box<dyn Erased> {
        Box::new(Typed {
            message: self.message.clone(),
            recorded: Recorded {
                debug: self.recorded.debug,
                serializable: self.recorded.serializable,
            },
        })
    }
}

impl AnyMessage {
    /// Another share of `message`, its type erased.
    pub(crate) fn new<T: Send + Sync + 'static>(
        message: Message<T>,
        recorded: Recorded<T>,
    ) -> Self {
        AnyMessage {
            message: Box::new(Typed { message, recorded }),
        }
    }

    /// Another share of the same message: what an async observer's handler owns, one per
    /// attempt.
    #[cfg(feature = "tokio")]
    pub(crate) fn share(&self) -> AnyMessage {
        AnyMessage {
            message: self.message.share(),
        }
    }

    /// The name of the message's topic.
    pub fn topic(&self) -> &'static str {
        self.message.topic()
    }

    /// The message's number in its topic (see [`Message::seq`]).
    pub fn seq(&self) -> u64 {
        self.message.seq()
    }

    /// The published value, if it is a `T`.
    pub fn downcast_ref<T: 'static>(&self) -> Option<&T> {
        self.message.payload().downcast_ref()
    }

    /// Whether the published value is a `T`.
    pub fn is<T: 'static>(&self) -> bool {
        self.message.payload().is::<T>()
    }

    /// The `Message<T>` this is a share of, if it is one of `T`.
    pub(crate) fn message<T: 'static>(&self) -> Option<&Message<T>> {
        self.message.message().downcast_ref()
    }

    /// `TypeId::of::<T>()` of the published `T`: its topic's key in the bus's directory.
    pub(crate) fn topic_type(&self) -> std::any::TypeId {
        self.message.payload().type_id()
    }

    /// The published value as JSON, when its topic's type implements `serde::Serialize`
    /// (`None` otherwise; `#[derive(Topic)]` records which). Feature `serde`.
    ///
    /// # Errors
    ///
    /// What `serde_json` says when the value cannot be written as JSON (a map with keys that
    /// are not strings, say).
    #[cfg(feature = "serde")]
    pub fn to_json(&self) -> Option<Result<serde_json::Value, serde_json::Error>> {
        self.message.serializable().map(Serializable::to_json)
    }
}

/// The value, when its type implements `Debug`; else `<TypeName>`.
impl fmt::Debug for AnyMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.message.debug(f)
    }
}
