//! Publishing: a message to its topic, found by type, numbered and handed out under the
//! topic's order lock (`topics/state.rs`), or numbered alone when no one has ever heard it.

use crate::topic::Topic;
use crate::topics::state::{Refused, TopicState, Wait};
use crate::worker;

use super::Engine;

impl Engine {
    /// Publishes `payload` to its topic, waiting as `wait` allows; its seq.
    #[inline(always)]
    pub(crate) fn publish<T: Topic>(&self, payload: T, wait: Wait) -> Result<u64, (T, Refused)> {
        // A topic no one has ever heard, found by its type's index: a number, and nothing
        // else (`numbering.rs`).
        let is_open = || self.lifecycle.is_open();
        if let Some(seq) = self.numberings.take_unheard(T::__index(), is_open) {
            return Ok(seq);
        }
        self.publish_heard(payload, wait)
    }

    /// [`publish`](Self::publish), every case but the one above.
    #[inline(always)]
    pub(super) fn publish_heard<T: Topic>(
        &self,
        payload: T,
        wait: Wait,
    ) -> Result<u64, (T, Refused)> {
        self.with_topic::<T, _>(|topic| {
            if let Some(seq) = self.number_unheard(topic) {
                return Ok(seq);
            }
            let publisher = worker::current(self.id);
            let published = topic.publish(payload, wait, &self.lifecycle, publisher.as_ref());
            self.lifecycle.poke();
            published
        })
    }

    /// Publishes `payload` as `publish` with `Wait::Forever` does from outside a handler, if
    /// that needs no wait (see `TopicState::publish_at_once`); otherwise hands it back, not
    /// numbered.
    #[cfg(feature = "tokio")]
    #[inline(always)]
    pub(crate) fn publish_at_once<T: Topic>(&self, payload: T) -> Result<u64, T> {
        let is_open = || self.lifecycle.is_open();
        if let Some(seq) = self.numberings.take_unheard(T::__index(), is_open) {
            return Ok(seq);
        }
        self.with_topic::<T, _>(|topic| {
            if let Some(seq) = self.number_unheard(topic) {
                return Ok(seq);
            }
            // A handler's publish is recorded for the deadlock check: the full way.
            if worker::current(self.id).is_some() {
                return Err(payload);
            }
            let published = topic.publish_at_once(payload, &self.lifecycle);
            if published.is_ok() {
                self.lifecycle.poke();
            }
            published
        })
    }

    /// With no subscribers, the bus open and the order lock free: nothing to hand out and
    /// nothing for a close to wait for, so nothing is counted or allocated; the seq.
    #[inline(always)]
    fn number_unheard<T: Topic>(&self, topic: &TopicState<T>) -> Option<u64> {
        if topic.subscriber_count() != 0 || !self.lifecycle.is_open() {
            return None;
        }
        let seq = topic.number_unheard(&self.lifecycle)?;
        // This publish held the order lock, which a closing bus may have found taken: look
        // again.
        self.lifecycle.poke();
        Some(seq)
    }

    /// Publishes like [`publish`](Self::publish) with `Wait::Forever`, awaiting instead of
    /// blocking (see `TopicState::publish_async`). A topic no one hears takes the same quick
    /// paths as `publish`, before anything is awaited.
    /// With a `deadline`, a wait that reaches it hands the payload back with
    /// `Refused::Timeout`.
    #[cfg(feature = "tokio")]
    pub(crate) async fn publish_async<T: Topic>(
        &self,
        payload: T,
        deadline: Option<std::time::Instant>,
    ) -> Result<u64, (T, Refused)> {
        let is_open = || self.lifecycle.is_open();
        if let Some(seq) = self.numberings.take_unheard(T::__index(), is_open) {
            return Ok(seq);
        }
        if let Some(seq) = self.with_topic::<T, _>(|topic| self.number_unheard(topic)) {
            return Ok(seq);
        }
        let topic = self.topic::<T>();
        let publisher = worker::current(self.id);
        let published = super::typed::<T>(&*topic)
            .publish_async(payload, &self.lifecycle, publisher, deadline)
            .await;
        self.lifecycle.poke();
        published
    }
}
