//! Publishing: a message to its topic, found by type, numbered and handed out under the
//! topic's order lock (`topics/state.rs`), or numbered alone when no one has ever heard it.

#[cfg(feature = "tokio")]
use std::future::Future;
#[cfg(feature = "tokio")]
use std::pin::Pin;
#[cfg(feature = "tokio")]
use std::task::{Context, Poll};

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
    /// blocking (see `TopicState::publish_async`): a future that does nothing until polled.
    /// Its first poll takes, in place, the paths of a sync `publish` that needs no wait (a
    /// topic no one hears; room in every `Block` mailbox): no future of the wait is built.
    /// Only a publish that must wait for room or its turn builds one, boxed, and awaits it.
    /// With a `timeout` (a `Duration`; `()` for none), counted from that wait's start, a wait
    /// that reaches it hands the payload back with `Refused::Timeout`. `map` makes a refusal
    /// the caller's error. Both are types of no size where they can be (`()`, a function
    /// item), so the future built at every publish stays small.
    #[cfg(feature = "tokio")]
    #[inline(always)]
    pub(crate) fn publish_async<T: Topic, E, M: Fn((T, Refused)) -> E, D: Limit>(
        &self,
        payload: T,
        timeout: D,
        map: M,
    ) -> PublishAsync<'_, T, M, D> {
        PublishAsync {
            engine: self,
            payload: Some(payload),
            waiting: None,
            timeout,
            map,
        }
    }

    /// `publish_async`'s first step, which never waits: the seq, or the payload back with
    /// `Refused::Full` where the publish must wait, or with why it was refused.
    #[cfg(feature = "tokio")]
    #[inline(always)]
    fn publish_now<T: Topic>(&self, payload: T) -> Result<u64, (T, Refused)> {
        // As a sync publish on a runtime: the quick paths, then a try that does not wait
        // (a handler's publish, a log or dispatcher topic, observers, inline subscribers).
        match self.publish_at_once(payload) {
            Ok(seq) => Ok(seq),
            // Another publisher has the topic's turn: the task waits for it as a task
            // (`publish_waiting`). The try would wait on the lock, holding up this runtime
            // thread and every task queued on it for as long as the holder keeps the turn,
            // longer if the holder's thread is descheduled. (A turn taken between this look
            // and the try is still waited for on the lock, while its holder moves.)
            Err(payload) if self.with_topic::<T, _>(TopicState::turn_taken) => {
                Err((payload, Refused::Full))
            }
            Err(payload) => self.publish_heard(payload, Wait::Never),
        }
    }

    /// `publish_async`'s wait, with no lock held across an `.await`.
    #[cfg(feature = "tokio")]
    async fn publish_waiting<T: Topic>(
        &self,
        payload: T,
        deadline: Option<std::time::Instant>,
    ) -> Result<u64, (T, Refused)> {
        let topic = self.topic::<T>();
        let publisher = worker::current(self.id);
        let published = super::typed::<T>(&*topic)
            .publish_async(payload, &self.lifecycle, publisher, deadline)
            .await;
        self.lifecycle.poke();
        published
    }
}

/// The future of [`Engine::publish_async`]: the payload until its first poll, then, only if
/// the publish must wait, the wait.
#[cfg(feature = "tokio")]
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub(crate) struct PublishAsync<'a, T, M, D> {
    engine: &'a Engine,
    /// The message, until the first poll.
    payload: Option<T>,
    /// The wait for room or the topic's turn, once the first poll found it must wait.
    waiting: Option<Pin<Box<Waiting<'a, T>>>>,
    /// The timeout: `()` for none, of no size.
    timeout: D,
    /// Makes a refusal the caller's error: a function item, of no size.
    map: M,
}

#[cfg(feature = "tokio")]
type Waiting<'a, T> = dyn Future<Output = Result<u64, (T, Refused)>> + Send + 'a;

// Nothing in it is pinned in place: the wait is boxed, the payload only moved out.
#[cfg(feature = "tokio")]
impl<T, M, D> Unpin for PublishAsync<'_, T, M, D> {}

#[cfg(feature = "tokio")]
impl<T: Topic, E, M: Fn((T, Refused)) -> E, D: Limit> Future for PublishAsync<'_, T, M, D> {
    type Output = Result<u64, E>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<u64, E>> {
        let this = &mut *self;
        if let Some(payload) = this.payload.take() {
            match this.engine.publish_now(payload) {
                Ok(seq) => return Poll::Ready(Ok(seq)),
                Err((payload, Refused::Full)) => {
                    let deadline = this.timeout.get().map(crate::util::deadline::after);
                    let waiting = this.engine.publish_waiting(payload, deadline);
                    this.waiting = Some(Box::pin(waiting));
                }
                Err(refused) => return Poll::Ready(Err((this.map)(refused))),
            }
        }
        let Some(waiting) = this.waiting.as_mut() else {
            panic!("`publish_async` polled after it completed");
        };
        let published = std::task::ready!(waiting.as_mut().poll(cx));
        this.waiting = None;
        Poll::Ready(published.map_err(&this.map))
    }
}

#[cfg(feature = "tokio")]
impl<T, M, D> std::fmt::Debug for PublishAsync<'_, T, M, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublishAsync")
            .field("polled", &self.payload.is_none())
            .field("waiting", &self.waiting.is_some())
            .finish_non_exhaustive()
    }
}

/// A [`PublishAsync`]'s timeout: `()` for none (`publish_async`), a `Duration`
/// (`publish_timeout_async`).
#[cfg(feature = "tokio")]
pub(crate) trait Limit: Copy {
    /// The timeout, if any.
    fn get(self) -> Option<std::time::Duration>;
}

#[cfg(feature = "tokio")]
impl Limit for () {
    #[inline(always)]
    fn get(self) -> Option<std::time::Duration> {
        None
    }
}

#[cfg(feature = "tokio")]
impl Limit for std::time::Duration {
    #[inline(always)]
    fn get(self) -> Option<std::time::Duration> {
        Some(self)
    }
}
