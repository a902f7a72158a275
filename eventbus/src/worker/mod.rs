//! Workers: each subscription's one consumer, which takes messages from its mailbox (or its
//! topic's log: [`Source`]) in order
//! and runs the handler, retrying in place and keeping a dead letter when it gives up. Two
//! kinds, one file each: a thread (`thread.rs`) and, with feature `tokio`, a task
//! (`task.rs`); what they share is here.
//!
//! A worker never dies of user code: the handler's panics are failed attempts, a message or
//! panic payload that panics when dropped is dropped where that cannot unwind (`message/shared.rs`,
//! `handler.rs`), and so is the handler itself when the subscription ends. Its last step,
//! whatever happened, tells the lifecycle it has finished.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use crate::dead_letter::{DeadLetter, DeadLetterStore};
use crate::delivery::core::{SubscriptionCore, NOT_HANDLED};
use crate::delivery::log::{Reader, SharedReader};
use crate::delivery::mailbox::Inbox;
use crate::delivery::priority::PriorityInbox;
use crate::handler::Failure;
use crate::lifecycle::Lifecycle;
use crate::message::Message;
use crate::message::Taken;
use crate::stats::Counters;
#[cfg(feature = "tokio")]
use crate::trace;

#[cfg(feature = "tokio")]
pub(crate) mod task;
pub(crate) mod thread;

thread_local! {
    /// The bus and subscription whose worker this thread is, if any: set for a thread
    /// worker's life, and for a task worker while it is polled (`task.rs`), so that one
    /// lookup answers for both.
    static CURRENT: RefCell<Option<(u64, Arc<SubscriptionCore>)>> = const { RefCell::new(None) };
}

/// The subscription whose worker the calling thread or task is, if it is one of bus `bus`'s.
#[inline]
pub(crate) fn current(bus: u64) -> Option<Arc<SubscriptionCore>> {
    CURRENT.with(|current| match &*current.borrow() {
        Some((of, core)) if *of == bus => Some(Arc::clone(core)),
        _ => None,
    })
}

/// What a worker needs of its bus.
#[derive(Clone, Debug)]
pub(crate) struct Context {
    /// The bus's id, to tell its workers from others'.
    pub(crate) bus: u64,
    pub(crate) lifecycle: Arc<Lifecycle>,
    pub(crate) dead_letters: Arc<DeadLetterStore>,
}

/// Tells the lifecycle the worker has finished, however it ends (a task dropped by its
/// runtime included).
struct Finish<'a>(&'a Context, &'a SubscriptionCore);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        self.0.lifecycle.finished(self.1);
    }
}

/// Where a worker takes its messages from: its mailbox (plain or by priority), or its
/// topic's log (at a position of its own, or one its group shares).
pub(crate) enum Source<T> {
    Mailbox(Inbox<T>),
    Priority(PriorityInbox<T>),
    Log(Reader<T>),
    SharedLog(Arc<SharedReader<T>>),
}

impl<T: Send + Sync + 'static> Source<T> {
    /// The next message, awaiting one; `None` once retired and nothing more can arrive.
    #[cfg(feature = "tokio")]
    pub(crate) async fn next_async(&mut self) -> Option<Message<T>> {
        match self {
            Source::Mailbox(inbox) => inbox.next_async().await,
            Source::Priority(inbox) => inbox.next_async().await,
            Source::Log(reader) => reader.next_async().await,
            Source::SharedLog(reader) => reader.next_async().await,
        }
    }

    /// The next message there now, without waiting (for a dropped stream's rest).
    #[cfg(feature = "tokio")]
    pub(crate) fn try_next(&mut self) -> Option<Message<T>> {
        match self {
            Source::Mailbox(inbox) => inbox.try_next(),
            Source::Priority(inbox) => inbox.try_next(),
            Source::Log(reader) => reader.try_next(),
            Source::SharedLog(reader) => reader.try_next(),
        }
    }

    /// Whether nothing is waiting now.
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Source::Mailbox(inbox) => inbox.is_empty(),
            Source::Priority(inbox) => inbox.is_empty(),
            Source::Log(reader) => reader.is_empty(),
            Source::SharedLog(reader) => reader.is_empty(),
        }
    }
}

/// One kind of [`Source`], as a thread worker's loop takes from it. The loop is made for each
/// kind (`thread.rs`), so a delivery does not ask which kind its source is: asking cost a
/// mailbox delivery about 8 instructions (BENCHMARKS.md, "The mailbox path's drift").
pub(crate) trait Take<T> {
    /// The next message, waiting for one; `None` once retired and nothing more can arrive.
    /// Lent in its log's slot where the log lends (see `delivery/log/`): for a thread worker,
    /// which does not keep it past the next call.
    fn next_lent(&mut self) -> Option<Taken<'_, T>>;

    /// `next_lent`'s common case where the source lends a run of messages: the next of the
    /// run in hand, lent; `None` when there is no such next (ask `next_lent`). Apart, so
    /// that the loop delivers it knowing it is lent: asking cost a log delivery about 8
    /// instructions (BENCHMARKS.md, "A lending worker's copy").
    #[inline(always)]
    fn next_in_run(&mut self) -> Option<&Message<T>> {
        None
    }

    /// Whether nothing is waiting now.
    fn is_empty(&self) -> bool;

    /// The next message a forced close keeps as a dead letter: a mailbox's, there now; never
    /// a log's (its unread messages are its history, see [`close_out_rest`]).
    fn rest(&mut self) -> Option<Message<T>>;
}

impl<T: Send + Sync + 'static> Take<T> for Inbox<T> {
    #[inline(always)]
    fn next_lent(&mut self) -> Option<Taken<'_, T>> {
        self.next().map(Taken::Owned)
    }

    fn is_empty(&self) -> bool {
        Inbox::is_empty(self)
    }

    fn rest(&mut self) -> Option<Message<T>> {
        self.try_next()
    }
}

impl<T: Send + Sync + 'static> Take<T> for PriorityInbox<T> {
    #[inline(always)]
    fn next_lent(&mut self) -> Option<Taken<'_, T>> {
        self.next().map(Taken::Owned)
    }

    fn is_empty(&self) -> bool {
        PriorityInbox::is_empty(self)
    }

    fn rest(&mut self) -> Option<Message<T>> {
        self.try_next()
    }
}

impl<T: Send + Sync + 'static> Take<T> for Reader<T> {
    #[inline(always)]
    fn next_lent(&mut self) -> Option<Taken<'_, T>> {
        Reader::next_lent(self)
    }

    #[inline(always)]
    fn next_in_run(&mut self) -> Option<&Message<T>> {
        Reader::next_in_run(self)
    }

    fn is_empty(&self) -> bool {
        Reader::is_empty(self)
    }

    fn rest(&mut self) -> Option<Message<T>> {
        None
    }
}

impl<T: Send + Sync + 'static> Take<T> for Arc<SharedReader<T>> {
    #[inline(always)]
    fn next_lent(&mut self) -> Option<Taken<'_, T>> {
        self.next().map(Taken::Owned)
    }

    fn is_empty(&self) -> bool {
        SharedReader::is_empty(self)
    }

    fn rest(&mut self) -> Option<Message<T>> {
        None
    }
}

impl<T: Send + Sync + 'static> Take<T> for Source<T> {
    fn next_lent(&mut self) -> Option<Taken<'_, T>> {
        match self {
            Source::Mailbox(inbox) => inbox.next_lent(),
            Source::Priority(inbox) => inbox.next_lent(),
            Source::Log(reader) => Take::next_lent(reader),
            Source::SharedLog(reader) => reader.next_lent(),
        }
    }

    fn is_empty(&self) -> bool {
        Source::is_empty(self)
    }

    fn rest(&mut self) -> Option<Message<T>> {
        match self {
            Source::Mailbox(inbox) => inbox.rest(),
            Source::Priority(inbox) => inbox.rest(),
            Source::Log(reader) => reader.rest(),
            Source::SharedLog(reader) => reader.rest(),
        }
    }
}

/// What is left for a consumer that will take no more (after a forced close, or a dropped
/// stream), let go of by its consumer (not the closing thread), counted as dropped.
#[cfg(feature = "tokio")]
pub(crate) fn abandon_rest<T>(
    core: &SubscriptionCore,
    mut next: impl FnMut() -> Option<Message<T>>,
    why: &'static str,
) {
    while let Some(message) = next() {
        took(core);
        abandon(core, message, why);
    }
}

/// A message taken out of the mailbox: counted (see [`SubscriptionCore::took`]).
#[inline]
pub(crate) fn took(core: &SubscriptionCore) {
    core.took();
}

/// A message a worker took after a forced close: kept as a dead letter, as the closing
/// thread keeps what it empties out of the mailbox (`Retire::close_out`).
fn closed_out<T: Send + Sync + 'static>(
    core: &SubscriptionCore,
    context: &Context,
    message: Message<T>,
) {
    let failure = Failure::text(NOT_HANDLED);
    let letter = DeadLetter::new(message, core.id, Arc::clone(&core.name), failure, 0);
    core.keep_dead_letter(&context.dead_letters, letter);
}

/// What is left in a worker's mailbox after a forced close, kept as dead letters. A log
/// subscription's unread messages stay in the topic's log: they are its history, not this
/// subscription's (see `Bus::close_timeout`).
fn close_out_rest<T: Send + Sync + 'static>(
    core: &SubscriptionCore,
    context: &Context,
    source: &mut impl Take<T>,
) {
    while let Some(message) = source.rest() {
        took(core);
        closed_out(core, context, message);
    }
}

/// A message no handler will see: counted as dropped.
#[cfg(feature = "tokio")]
fn abandon<T>(core: &SubscriptionCore, message: Message<T>, why: &'static str) {
    trace::dropped(message.topic(), message.seq(), &core.name, why);
    drop(message);
    Counters::bump(&core.counters.abandoned);
}

/// A message whose attempt succeeded (its reference, or a lent one). Counted only once the
/// worker has let go of it (see `lifecycle.rs`).
#[inline(always)]
fn delivered<M>(core: &SubscriptionCore, message: M) {
    drop(message);
    Counters::bump(&core.counters.delivered);
}

/// A failed attempt, counted; the wait before the retry, if there is one (none for a failure
/// the subscription's `retry_if` ruled out).
fn failed(core: &SubscriptionCore, attempts: u32, failure: &Failure) -> Option<Duration> {
    Counters::bump(&core.counters.failed);
    (attempts <= core.options.retries && !failure.is_permanent())
        .then(|| core.options.retry_delay(attempts))
}

/// A message given up on: kept as a dead letter.
fn dead_letter<T: Send + Sync + 'static>(
    core: &SubscriptionCore,
    context: &Context,
    message: Message<T>,
    failure: Failure,
    attempts: u32,
) {
    let letter = DeadLetter::new(message, core.id, Arc::clone(&core.name), failure, attempts);
    context.dead_letters.push(letter);
    Counters::bump(&core.counters.dead_lettered);
}
