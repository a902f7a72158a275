//! Observability hooks for the `tracing` feature: a span per delivery attempt, a `warn` event
//! per drop, per dead letter and for the first publish to a topic no one ever subscribed to,
//! an `info` event when the bus closes. Without the feature
//! every function here is empty and inlined away.
//!
//! An attempt span `follows_from` the span that was current where its message was published
//! (tracing's convention for work a message causes), so a trace goes on past the bus: a
//! publish keeps that span's id in the message (`message/cause.rs`). An async attempt carries its span with `Instrument`, so it is the
//! current span across the handler's awaits and never while the task is suspended.

#[cfg(feature = "tracing")]
mod on {
    use crate::message::cause::Cause;
    use crate::stats::BusStats;

    /// Entered for one delivery attempt; exited when dropped.
    pub(crate) type Attempt = tracing::span::EnteredSpan;

    #[inline]
    fn span(topic: &str, seq: u64, subscriber: &str, attempt: u32, cause: &Cause) -> tracing::Span {
        let span = tracing::info_span!("eventbus.attempt", topic, seq, subscriber, attempt);
        if let Some(id) = cause.id() {
            span.follows_from(id.clone());
        }
        span
    }

    #[inline]
    pub(crate) fn attempt(
        topic: &str,
        seq: u64,
        subscriber: &str,
        attempt: u32,
        cause: &Cause,
    ) -> Attempt {
        span(topic, seq, subscriber, attempt, cause).entered()
    }

    /// `future`, inside its attempt's span whenever it is polled.
    #[cfg(feature = "tokio")]
    #[inline]
    pub(crate) fn attempt_async<F: std::future::Future>(
        topic: &str,
        seq: u64,
        subscriber: &str,
        attempt: u32,
        cause: &Cause,
        future: F,
    ) -> tracing::instrument::Instrumented<F> {
        use tracing::Instrument;
        future.instrument(span(topic, seq, subscriber, attempt, cause))
    }

    #[inline]
    pub(crate) fn dropped(topic: &str, seq: u64, subscriber: &str, why: &'static str) {
        tracing::warn!(topic, seq, subscriber, why, "eventbus: message dropped");
    }

    #[inline]
    pub(crate) fn dead_letter(topic: &str, seq: u64, subscriber: &str, attempts: u32, error: &str) {
        tracing::warn!(
            topic,
            seq,
            subscriber,
            attempts,
            error,
            "eventbus: dead letter"
        );
    }

    #[cold]
    pub(crate) fn dispatcher_not_started(topic: &str, error: &std::io::Error) {
        tracing::warn!(
            topic,
            %error,
            "eventbus: the topic's dispatcher thread could not start; its publishers hand out \
             themselves"
        );
    }

    #[cold]
    pub(crate) fn unheard(topic: &str) {
        tracing::warn!(
            topic,
            "eventbus: a message was published to a topic that has never had a subscriber; if \
             one was expected from a `#[subscriber]` in another crate, that crate may not be \
             linked in: name it somewhere in the binary (`use handlers as _;`)"
        );
    }

    #[inline]
    pub(crate) fn closed(stats: impl FnOnce() -> BusStats, completed: bool) {
        let stats = stats();
        let total = |f: fn(&crate::stats::SubscriptionStats) -> u64| -> u64 {
            stats.subscriptions.iter().map(f).sum()
        };
        tracing::info!(
            completed,
            published = stats.topics.iter().map(|t| t.published).sum::<u64>(),
            delivered = total(|s| s.delivered),
            dead_lettered = total(|s| s.dead_lettered),
            dropped = total(|s| s.dropped),
            queued = total(|s| s.queued),
            "eventbus: closed"
        );
    }
}

#[cfg(not(feature = "tracing"))]
mod on {
    use crate::message::cause::Cause;
    use crate::stats::BusStats;

    /// Nothing to enter without the feature.
    pub(crate) struct Attempt;

    #[inline(always)]
    pub(crate) fn attempt(_: &str, _: u64, _: &str, _: u32, _: &Cause) -> Attempt {
        Attempt
    }

    #[cfg(feature = "tokio")]
    #[inline(always)]
    pub(crate) fn attempt_async<F: std::future::Future>(
        _: &str,
        _: u64,
        _: &str,
        _: u32,
        _: &Cause,
        future: F,
    ) -> F {
        future
    }

    #[inline(always)]
    pub(crate) fn dropped(_: &str, _: u64, _: &str, _: &'static str) {}

    #[inline(always)]
    pub(crate) fn dead_letter(_: &str, _: u64, _: &str, _: u32, _: &str) {}

    #[inline(always)]
    pub(crate) fn closed(_: impl FnOnce() -> BusStats, _: bool) {}

    #[cold]
    pub(crate) fn dispatcher_not_started(_: &str, _: &std::io::Error) {}
}

#[cfg(feature = "tokio")]
pub(crate) use on::attempt_async;
#[cfg(feature = "tracing")]
pub(crate) use on::unheard;
pub(crate) use on::{attempt, closed, dead_letter, dispatcher_not_started, dropped};
