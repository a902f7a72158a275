//! Workers: one thread per subscription that takes messages from its mailbox in order and
//! runs the handler, retrying in place and keeping a dead letter when it gives up.

use std::cell::RefCell;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use crate::dead_letter::DeadLetter;
use crate::handler;
use crate::mailbox::Inbox;
use crate::observe;
use crate::shared::Shared;
use crate::stats::Counters;
use crate::subscription::SubscriptionCore;
use crate::{Bus, Message};

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

/// The id of the subscription whose worker the calling thread is, if one of bus `bus`'s.
pub(crate) fn current_subscription(bus: u64) -> Option<u64> {
    current(bus).map(|core| core.id)
}

pub(crate) fn run<T, H>(mut inbox: Inbox<T>, core: Arc<SubscriptionCore>, bus: Bus, mut handler: H)
where
    T: Send + Sync + 'static,
    H: FnMut(&Message<T>, &Bus) -> Result<(), String>,
{
    CURRENT.with(|current| *current.borrow_mut() = Some((bus.inner.id, Arc::clone(&core))));
    let stopped = bus.inner.lifecycle.stopped();
    while let Some(message) = inbox.next() {
        // A forced stop: take no more. What is left stays counted as queued.
        if stopped.load(SeqCst) {
            break;
        }
        deliver(&core, &bus, &mut handler, message);
        // A closing bus is drained only once every mailbox has run dry: this may be the
        // last one (see `lifecycle.rs`).
        if !bus.inner.lifecycle.is_open() && inbox.is_empty() {
            bus.inner.poke_if_closing();
        }
    }
    // A worker whose mailbox was shut looked at its topic's order lock before stopping, and
    // a closing bus that looked at the same moment found it taken: look again.
    drop(inbox);
    bus.inner.poke_if_closing();
}

/// Runs the handler on one message until it succeeds or its retries are spent.
fn deliver<T, H>(core: &SubscriptionCore, bus: &Bus, handler: &mut H, message: Shared<Message<T>>)
where
    T: Send + Sync + 'static,
    H: FnMut(&Message<T>, &Bus) -> Result<(), String>,
{
    let counters = &core.counters;
    let mut attempts: u32 = 0;
    loop {
        attempts = attempts.saturating_add(1);
        let outcome = {
            let _attempt = observe::attempt(message.topic(), message.seq(), &core.name, attempts);
            handler::attempt(|| handler(&*message, bus))
        };
        let error = match outcome {
            Ok(()) => {
                Counters::bump(&counters.delivered);
                return;
            }
            Err(error) => error,
        };
        Counters::bump(&counters.failed);
        let retry = attempts <= core.options.retries
            && bus
                .inner
                .lifecycle
                .sleep(core.options.retry_delay(attempts));
        if !retry {
            let letter = DeadLetter::new(message, Arc::clone(&core.name), error, attempts);
            bus.inner.dead_letters.push(letter);
            Counters::bump(&counters.dead_lettered);
            return;
        }
        Counters::bump(&counters.retried);
    }
}
