//! What a subscriber receives: the published value with its place in the topic's order.

use std::fmt;
use std::ops::Deref;

/// A published message, as handed to subscribers.
///
/// It dereferences to the published value; [`seq`](Message::seq) is its place in the topic's
/// one order. One `Message` is shared (reference-counted, one allocation) by every subscriber
/// of the topic, so the value need not be `Clone`.
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
    seq: u64,
    topic: &'static str,
    payload: T,
}

impl<T> Message<T> {
    pub(crate) fn new(seq: u64, topic: &'static str, payload: T) -> Self {
        Message {
            seq,
            topic,
            payload,
        }
    }

    /// The message's number in its topic: from 0, one more for each publish, no gaps, no
    /// repeats.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The name of the message's topic.
    pub fn topic(&self) -> &'static str {
        self.topic
    }

    /// The published value (also reachable through `Deref`).
    pub fn payload(&self) -> &T {
        &self.payload
    }
}

impl<T> Deref for Message<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.payload
    }
}

impl<T: fmt::Debug> fmt::Debug for Message<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message")
            .field("topic", &self.topic)
            .field("seq", &self.seq)
            .field("payload", &self.payload)
            .finish()
    }
}
