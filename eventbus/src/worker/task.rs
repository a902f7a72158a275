//! The task worker (feature `tokio`): one tokio task per subscription, awaiting its mailbox,
//! one message at a time, in order; retries wait with the ticker (`util/ticker.rs`), not the
//! runtime's timer.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use super::{
    close_out_rest, closed_out, dead_letter, delivered, failed, took, Context, Finish, Source,
    CURRENT,
};
use crate::delivery::core::SubscriptionCore;
use crate::handler::{self, Failure};
use crate::message::Message;
use crate::stats::Counters;
use crate::trace;
use crate::util::unwind::drop_quietly;

/// A message handler as a task worker runs it: it owns its share of the message, so its
/// future may hold it across `.await`s.
pub(crate) trait RunAsync<T>: Send + 'static {
    type Attempt: Future<Output = Result<(), Failure>> + Send + 'static;
    fn call(&mut self, message: Message<T>) -> Self::Attempt;
}

impl<T, F, A> RunAsync<T> for F
where
    F: FnMut(Message<T>) -> A + Send + 'static,
    A: Future<Output = Result<(), Failure>> + Send + 'static,
{
    type Attempt = A;

    fn call(&mut self, message: Message<T>) -> A {
        self(message)
    }
}

/// Starts the worker's task on `runtime`.
pub(crate) fn spawn<T: Send + Sync + 'static>(
    runtime: &tokio::runtime::Handle,
    inbox: Source<T>,
    core: Arc<SubscriptionCore>,
    context: Context,
    handler: impl RunAsync<T>,
) {
    let current = Some((context.bus, Arc::clone(&core)));
    runtime.spawn(AsCurrent {
        current,
        worker: Box::pin(run(inbox, core, context, handler)),
    });
}

/// A task worker, its subscription the thread's `CURRENT` while it is polled (a task may
/// move between threads, so per poll): a publish from its handler finds it with the one
/// thread-local lookup every publish makes, where a task-local would cost every publish a
/// second one.
struct AsCurrent<F> {
    /// The subscription while not polled; what the thread had while polled.
    current: Option<(u64, Arc<SubscriptionCore>)>,
    worker: Pin<Box<F>>,
}

impl<F: Future> Future for AsCurrent<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let swapped = Swapped::new(&mut this.current);
        let poll = this.worker.as_mut().poll(cx);
        drop(swapped);
        poll
    }
}

/// Swaps a value with the thread's `CURRENT`, and back when dropped (a panicking poll
/// included).
struct Swapped<'a>(&'a mut Option<(u64, Arc<SubscriptionCore>)>);

impl<'a> Swapped<'a> {
    fn new(value: &'a mut Option<(u64, Arc<SubscriptionCore>)>) -> Self {
        CURRENT.with(|current| std::mem::swap(&mut *current.borrow_mut(), value));
        Swapped(value)
    }
}

impl Drop for Swapped<'_> {
    fn drop(&mut self) {
        CURRENT.with(|current| std::mem::swap(&mut *current.borrow_mut(), self.0));
    }
}

async fn run<T: Send + Sync + 'static>(
    mut inbox: Source<T>,
    core: Arc<SubscriptionCore>,
    context: Context,
    mut handler: impl RunAsync<T>,
) {
    let _finish = Finish(&context, &core);
    let lifecycle = &context.lifecycle;
    // Once the bus is stopped, takes nothing more: a log's unread messages stay in the log
    // (see `close_out_rest`), so the stats read right after a forced close stay true.
    while !lifecycle.is_stopped() {
        let Some(message) = inbox.next_async().await else {
            break;
        };
        took(&core);
        if lifecycle.is_stopped() {
            closed_out(&core, &context, message);
            break;
        }
        deliver(&core, &context, &mut handler, message).await;
        // A closing bus is drained only once every mailbox has run dry (see `lifecycle.rs`).
        if !lifecycle.is_open() && inbox.is_empty() {
            lifecycle.poke();
        }
    }
    if lifecycle.is_stopped() {
        close_out_rest(&core, &context, &mut inbox);
    }
    drop_quietly(handler);
    drop(inbox);
}

/// Runs the handler on one message until it succeeds or its retries are spent.
async fn deliver<T: Send + Sync + 'static>(
    core: &SubscriptionCore,
    context: &Context,
    handler: &mut impl RunAsync<T>,
    message: Message<T>,
) {
    let mut attempts: u32 = 0;
    loop {
        attempts = attempts.saturating_add(1);
        let share = message.clone();
        let outcome = trace::attempt_async(
            message.topic(),
            message.seq(),
            &core.name,
            attempts,
            message.cause(),
            handler::with_retry_if_async(
                core.options.retry_if.clone(),
                handler::attempt_async(|| handler.call(share)),
            ),
        )
        .await;
        let failure = match outcome {
            Ok(()) => return delivered(core, message),
            Err(failure) => failure,
        };
        match failed(core, attempts, &failure) {
            Some(delay) if context.lifecycle.sleep_async(delay).await => {
                // The error is user code too: its `Drop` may panic.
                drop_quietly(failure);
                Counters::bump(&core.counters.retried);
            }
            _ => return dead_letter(core, context, message, failure, attempts),
        }
    }
}
