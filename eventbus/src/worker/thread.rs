//! The thread worker: one OS thread per subscription, blocking on its mailbox or its
//! topic's log.

use std::sync::Arc;

use super::{
    close_out_rest, closed_out, dead_letter, delivered, failed, took, Context, Finish, Source,
    Take, CURRENT,
};
use crate::delivery::core::SubscriptionCore;
use crate::handler::{self, Failure};
use crate::message::Message;
use crate::message::Taken;
use crate::stats::Counters;
use crate::trace;
use crate::util::unwind::drop_quietly;

/// A message handler as a thread worker runs it.
pub(crate) trait Run<T>: FnMut(&Message<T>) -> Result<(), Failure> + Send + 'static {}
impl<T, F: FnMut(&Message<T>) -> Result<(), Failure> + Send + 'static> Run<T> for F {}

/// Starts the worker's thread, named after the subscriber.
pub(crate) fn spawn<T: Send + Sync + 'static>(
    inbox: Source<T>,
    core: Arc<SubscriptionCore>,
    context: Context,
    handler: impl Run<T>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(core.name.to_string())
        .spawn(move || run(inbox, core, context, handler))
        .map(drop)
}

/// Runs the worker's loop made for its kind of source (see [`Take`]).
fn run<T: Send + Sync + 'static>(
    inbox: Source<T>,
    core: Arc<SubscriptionCore>,
    context: Context,
    handler: impl Run<T>,
) {
    match inbox {
        Source::Mailbox(inbox) => serve(inbox, core, context, handler),
        Source::Priority(inbox) => serve(inbox, core, context, handler),
        Source::Log(reader) => serve(reader, core, context, handler),
        Source::SharedLog(reader) => serve(reader, core, context, handler),
    }
}

/// Takes from `inbox` and delivers until it is retired and empty, or the bus is stopped.
#[inline(never)]
fn serve<T: Send + Sync + 'static>(
    mut inbox: impl Take<T>,
    core: Arc<SubscriptionCore>,
    context: Context,
    mut handler: impl Run<T>,
) {
    CURRENT.with(|current| *current.borrow_mut() = Some((context.bus, Arc::clone(&core))));
    let _current = Cleared;
    let _finish = Finish(&context, &core);
    let lifecycle = &context.lifecycle;
    // Once the bus is stopped, takes nothing more: a log's unread messages stay in the log
    // (see `close_out_rest`), so the stats read right after a forced close stay true. While
    // the bus is open, `is_stopped` and `is_open` are one load each: two a delivery, since
    // the stop is asked before the next take only once the bus is not open.
    let mut go_on = !lifecycle.is_stopped();
    while go_on {
        // A message lent from the run in hand first, apart: its delivery then knows it is
        // lent, and asks nothing of its kind (see `Take::next_in_run`).
        go_on = match inbox.next_in_run() {
            Some(message) => deliver_taken(&core, &context, &mut handler, Taken::Lent(message)),
            None => match inbox.next_lent() {
                Some(message) => deliver_taken(&core, &context, &mut handler, message),
                None => break,
            },
        };
        if go_on && !lifecycle.is_open() {
            go_on = !lifecycle.is_stopped();
            // A closing bus is drained only once every mailbox has run dry: this may be the
            // last one (see `lifecycle.rs`).
            if go_on && inbox.is_empty() {
                lifecycle.poke();
            }
        }
    }
    if lifecycle.is_stopped() {
        close_out_rest(&core, &context, &mut inbox);
    }
    drop_quietly(handler);
    drop(inbox);
}

/// Counts `message` taken and delivers it, unless the bus was stopped: then keeps it as a
/// dead letter. Whether the loop goes on.
#[inline(always)]
fn deliver_taken<T: Send + Sync + 'static>(
    core: &SubscriptionCore,
    context: &Context,
    handler: &mut impl Run<T>,
    message: Taken<'_, T>,
) -> bool {
    took(core);
    if context.lifecycle.is_stopped() {
        closed_out(core, context, message.into_owned());
        return false;
    }
    deliver(core, context, handler, message);
    true
}

/// Forgets which subscription this thread worked for.
struct Cleared;

impl Drop for Cleared {
    fn drop(&mut self) {
        CURRENT.with(|current| current.borrow_mut().take());
    }
}

/// Runs the handler on one message until it succeeds or its retries are spent. In line: in
/// its own frame it cost a mailbox delivery about 10 instructions more.
#[inline(always)]
fn deliver<T: Send + Sync + 'static>(
    core: &SubscriptionCore,
    context: &Context,
    handler: &mut impl Run<T>,
    message: Taken<'_, T>,
) {
    let mut attempts: u32 = 0;
    loop {
        attempts = attempts.saturating_add(1);
        let outcome = {
            let _attempt = trace::attempt(
                message.topic(),
                message.seq(),
                &core.name,
                attempts,
                message.cause(),
            );
            let retry_if = core.options.retry_if.as_ref();
            handler::with_own_retry_if(retry_if, || handler::attempt(|| handler(&message)))
        };
        let failure = match outcome {
            Ok(()) => return delivered(core, message),
            Err(failure) => failure,
        };
        match failed(core, attempts, &failure) {
            Some(delay) if context.lifecycle.sleep(delay) => {
                // The error is user code too: its `Drop` may panic.
                drop_quietly(failure);
                Counters::bump(&core.counters.retried);
            }
            _ => return dead_letter(core, context, message.into_owned(), failure, attempts),
        }
    }
}
