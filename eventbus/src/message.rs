//! What a subscriber receives: a share of the published value, with its place in the
//! topic's order.

use std::fmt;
use std::ops::Deref;

use crate::shared::Shared;

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

/// What a publish allocates once and every subscriber shares.
pub(crate) struct Envelope<T> {
    seq: u64,
    topic: &'static str,
    payload: T,
}

impl<T> Envelope<T> {
    pub(crate) fn new(seq: u64, topic: &'static str, payload: T) -> Self {
        Envelope {
            seq,
            topic,
            payload,
        }
    }
}

impl<T> Message<T> {
    /// A message around one of the shared references a publish made.
    pub(crate) fn new(shared: Shared<Envelope<T>>) -> Self {
        Message { shared }
    }

    /// A message no publish made, its one reference (a dead letter for bytes that never
    /// became a message of the bus: feature `nats`).
    #[cfg(feature = "nats")]
    pub(crate) fn alone(seq: u64, topic: &'static str, payload: T) -> Self {
        match crate::shared::shared(Envelope::new(seq, topic, payload), 1).next() {
            Some(shared) => Message { shared },
            None => unreachable!("`shared` hands out at least one reference"),
        }
    }

    /// The message's number in its topic: from 0, one more for each publish, no gaps, no
    /// repeats.
    pub fn seq(&self) -> u64 {
        self.shared.seq
    }

    /// The name of the message's topic.
    pub fn topic(&self) -> &'static str {
        self.shared.topic
    }

    /// The published value (also reachable through `Deref`).
    pub fn payload(&self) -> &T {
        &self.shared.payload
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
