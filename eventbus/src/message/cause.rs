//! Where a message was published, for tracing: the id of the span current there (feature
//! `tracing`; nothing without it), which each delivery attempt's span `follows_from`
//! (`trace.rs`).
//!
//! Reading it costs one check of the level filter when no subscriber is interested. Only the
//! id is kept, not the span: holding the span would keep it open (an HTTP request's, say)
//! until every subscriber had handled the message.

/// The span that was current where a message was published, if any subscriber was
/// interested in `info` spans then.
#[cfg(feature = "tracing")]
#[derive(Clone, Debug, Default)]
pub(crate) struct Cause(Option<tracing::Id>);

#[cfg(feature = "tracing")]
impl Cause {
    /// The current span's id, at the cost of one check when no one listens.
    #[inline]
    pub(crate) fn current() -> Cause {
        if tracing::level_enabled!(tracing::Level::INFO) {
            Cause(tracing::Span::current().id())
        } else {
            Cause(None)
        }
    }

    /// No span to follow (work already inside the publisher's span).
    #[inline]
    pub(crate) fn none() -> Cause {
        Cause(None)
    }

    pub(crate) fn id(&self) -> Option<&tracing::Id> {
        self.0.as_ref()
    }
}

/// Nothing to keep without the feature.
#[cfg(not(feature = "tracing"))]
#[derive(Clone, Debug, Default)]
pub(crate) struct Cause;

#[cfg(not(feature = "tracing"))]
impl Cause {
    #[inline(always)]
    pub(crate) fn current() -> Cause {
        Cause
    }

    #[inline(always)]
    pub(crate) fn none() -> Cause {
        Cause
    }
}
