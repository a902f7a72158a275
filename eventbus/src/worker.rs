//! Workers: one thread per subscription that takes messages from its mailbox in order and
//! runs the handler, retrying in place and keeping a dead letter when it gives up.
//!
//! A worker never dies of user code: the handler's panics are failed attempts, a message or
//! panic payload that panics when dropped is dropped where that cannot unwind (`shared.rs`,
//! `handler.rs`), and so is the handler itself when the subscription ends. Its last step,
//! whatever happened, tells the lifecycle it has finished.

use std::cell::RefCell;
use std::sync::Arc;

use crate::dead_letter::{DeadLetter, DeadLetterStore};
use crate::handler::{self, drop_quietly, Failure};
use crate::lifecycle::Lifecycle;
use crate::mailbox::Inbox;
use crate::observe;
use crate::shared::Shared;
use crate::stats::Counters;
use crate::subscriber::SubscriptionCore;
use crate::Message;

thread_local! {
    /// The bus and subscription whose worker this thread is, if any.
    static CURRENT: RefCell<Option<(u64, Arc<SubscriptionCore>)>> = const { RefCell::new(None) };
}

/// The subscription whose worker the calling thread is, if it is one of bus `bus`'s.
pub(crate) fn current(bus: u64) -> Option<Arc<SubscriptionCore>> {
    CURRENT.with(|current| match &*current.borrow() {
        Some((of, core)) if *of == bus => Some(Arc::clone(core)),
        _ => None,
    })
}

/// What a worker needs of its bus.
#[derive(Clone)]
pub(crate) struct Context {
    /// The bus's id, to tell its workers from others'.
    pub(crate) bus: u64,
    pub(crate) lifecycle: Arc<Lifecycle>,
    pub(crate) dead_letters: Arc<DeadLetterStore>,
}

/// A message handler as a worker runs it.
pub(crate) trait Run<T>: FnMut(&Message<T>) -> Result<(), Failure> + Send + 'static {}
impl<T, F: FnMut(&Message<T>) -> Result<(), Failure> + Send + 'static> Run<T> for F {}

/// Starts the worker's thread, named after the subscriber.
pub(crate) fn spawn<T: Send + Sync + 'static>(
    inbox: Inbox<T>,
    core: Arc<SubscriptionCore>,
    context: Context,
    handler: impl Run<T>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(core.name.to_string())
        .spawn(move || run(inbox, core, context, handler))
        .map(drop)
}

/// Tells the lifecycle the worker has finished, however it ends.
struct Finish<'a>(&'a Context, &'a SubscriptionCore);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        CURRENT.with(|current| current.borrow_mut().take());
        self.0.lifecycle.finished(self.1);
    }
}

fn run<T: Send + Sync + 'static>(
    mut inbox: Inbox<T>,
    core: Arc<SubscriptionCore>,
    context: Context,
    mut handler: impl Run<T>,
) {
    CURRENT.with(|current| *current.borrow_mut() = Some((context.bus, Arc::clone(&core))));
    let _finish = Finish(&context, &core);
    let lifecycle = &context.lifecycle;
    let counters = &core.counters;
    while let Some(message) = inbox.next() {
        Counters::bump(&counters.taken);
        if lifecycle.is_stopped() {
            abandon(&core, message);
            break;
        }
        deliver(&core, &context, &mut handler, message);
        // A closing bus is drained only once every mailbox has run dry: this may be the
        // last one (see `lifecycle.rs`).
        if !lifecycle.is_open() && inbox.is_empty() {
            lifecycle.poke();
        }
    }
    if lifecycle.is_stopped() {
        // What a forced close left in the mailbox is let go of here, counted, not on the
        // closing thread.
        while let Some(message) = inbox.try_next() {
            Counters::bump(&counters.taken);
            abandon(&core, message);
        }
    }
    drop_quietly(handler);
    drop(inbox);
}

/// A message a forced close keeps from its handler: counted as dropped.
fn abandon<T>(core: &SubscriptionCore, message: Shared<Message<T>>) {
    observe::dropped(message.topic(), message.seq(), &core.name, "forced close");
    drop(message);
    Counters::bump(&core.counters.abandoned);
}

/// Runs the handler on one message until it succeeds or its retries are spent. The outcome
/// is counted only once the worker has let go of the message (see `lifecycle.rs`).
fn deliver<T: Send + Sync + 'static>(
    core: &SubscriptionCore,
    context: &Context,
    handler: &mut impl Run<T>,
    message: Shared<Message<T>>,
) {
    let counters = &core.counters;
    let mut attempts: u32 = 0;
    loop {
        attempts = attempts.saturating_add(1);
        let outcome = {
            let _attempt = observe::attempt(message.topic(), message.seq(), &core.name, attempts);
            handler::attempt(|| handler(&message))
        };
        let failure = match outcome {
            Ok(()) => {
                drop(message);
                Counters::bump(&counters.delivered);
                return;
            }
            Err(failure) => failure,
        };
        Counters::bump(&counters.failed);
        let retry = attempts <= core.options.retries
            && context.lifecycle.sleep(core.options.retry_delay(attempts));
        if !retry {
            let letter = DeadLetter::new(message, Arc::clone(&core.name), failure, attempts);
            context.dead_letters.push(letter);
            Counters::bump(&counters.dead_lettered);
            return;
        }
        Counters::bump(&counters.retried);
    }
}
