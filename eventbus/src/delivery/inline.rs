//! Inline subscribers: handlers that run on the publisher's thread, inside the publish, after
//! the message is numbered and before any mailbox or log gets it. A refusal (an `Err` or a
//! panic) rejects the publish whole: nothing is handed out, the seq is not used, and the
//! message goes back to the publisher with the handler's error.
//!
//! There is no mailbox and no worker: an inline subscription is its core (name, options,
//! counters) and its handler. The topic's order lock (`topics/state.rs`; on a dispatcher
//! topic, its queue's lock, `topics/dispatcher.rs`) is held while the handlers run, so they
//! see the topic's one order, one message at a time; a publish from a handler to a topic
//! whose handlers this thread is running (its own, or one further up a synchronous cascade)
//! would wait for a lock its own thread holds, and is refused with `WouldDeadlock` (see
//! [`running`]).

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::deadlock::{self, TopicWaits};
use crate::delivery::core::{Retire, SubscriptionCore};
use crate::error::Rejection;
use crate::handler::{attempt, Failure};
use crate::message::cause::Cause;
use crate::message::Message;
use crate::options::filter::Verdict;
use crate::stats::Counters;
use crate::trace;

/// An inline subscriber's handler.
pub(crate) type InlineRun<T> = Box<dyn FnMut(&Message<T>) -> Result<(), Failure> + Send>;

/// The handler, shared by the topic's list (which calls it) and the subscription's core (which
/// retires it).
struct Slot<T> {
    /// `None` once retired (dropped then, so what it holds goes with the subscription).
    handler: Mutex<Option<InlineRun<T>>>,
    /// Set first by a retire: a publish that still has the subscription on its list skips it.
    retired: AtomicBool,
    id: u64,
}

/// One inline subscription, as its topic's list holds it.
pub(crate) struct Inline<T> {
    pub(crate) core: Arc<SubscriptionCore>,
    slot: Arc<Slot<T>>,
}

/// What a topic's inline subscribers said of one message.
pub(crate) enum Said {
    /// Every one that wanted it accepted it.
    Accepted,
    /// One refused it; the rest were not asked.
    Rejected(Rejection),
}

thread_local! {
    /// The topics whose inline handlers this thread is running, innermost last (by the
    /// address of their order lock), and the inline subscriptions whose handler it is in.
    static RUNNING: RefCell<(Vec<usize>, Vec<u64>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Whether this thread is running inline handlers of the topic whose order lock is at
/// `order`: a publish to it from there would wait for its own thread.
pub(crate) fn running(order: usize) -> bool {
    RUNNING.with(|running| running.borrow().0.contains(&order))
}

/// Whether this thread is running any inline handler: a close or an unsubscribe from there
/// cannot wait for the topic's publishes, one of which is this thread's.
pub(crate) fn inside() -> bool {
    RUNNING.with(|running| !running.borrow().0.is_empty())
}

/// Marks this thread as running `order`'s inline handlers until dropped.
struct Entered;

impl Entered {
    fn topic(order: usize) -> Self {
        RUNNING.with(|running| running.borrow_mut().0.push(order));
        Entered
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        RUNNING.with(|running| running.borrow_mut().0.pop());
    }
}

/// Marks this thread as inside inline subscription `id`'s handler until dropped.
struct InHandler;

impl InHandler {
    fn of(id: u64) -> Self {
        RUNNING.with(|running| running.borrow_mut().1.push(id));
        InHandler
    }
}

impl Drop for InHandler {
    fn drop(&mut self) {
        RUNNING.with(|running| running.borrow_mut().1.pop());
    }
}

/// An inline subscription of `T`: its entry for the topic's list, and the core, whose
/// retire takes the handler off.
pub(crate) fn inline<T: Send + Sync + 'static>(
    id: u64,
    handler: InlineRun<T>,
    core: impl FnOnce(Box<dyn Retire>) -> SubscriptionCore,
) -> Inline<T> {
    let slot = Arc::new(Slot {
        handler: Mutex::new(Some(handler)),
        retired: AtomicBool::new(false),
        id,
    });
    let core = Arc::new(core(Box::new(Retirer(Arc::clone(&slot)))));
    // No worker: nothing is ever queued, so there is nothing for a close or an unsubscribe
    // to wait for once the handler is off (see `Retirer`).
    core.mark_finished();
    Inline { core, slot }
}

struct Retirer<T>(Arc<Slot<T>>);

impl<T: Send + Sync> Retire for Retirer<T> {
    fn retire(&self) {
        self.0.retired.store(true, SeqCst);
        // From inside its own handler the lock is this thread's: the flag is enough, and the
        // handler is dropped with the subscription's last list. Elsewhere, a call under way
        // on a publisher's thread finishes first, so none runs after the unsubscribe.
        let own = RUNNING.with(|running| running.borrow().1.contains(&self.0.id));
        if !own {
            // Lock order: an inline handler's slot (row 4a), nothing else held; see
            // engine/mod.rs.
            let handler = self.0.handler.lock().take();
            drop(handler);
        }
    }
}

/// The lock a publisher holds while it runs a topic's inline handlers (the topic's order
/// lock; on a dispatcher topic, its queue's): its address, which [`running`] knows it by,
/// and the wait-graph record of its holder.
#[derive(Clone, Copy)]
pub(crate) struct Under<'a> {
    pub(crate) order: usize,
    pub(crate) waits: &'a Arc<TopicWaits>,
}

/// Runs `inline`'s handlers on `message`, in the order they subscribed, until one refuses it.
/// Called by the topic's publisher under the lock `under` names, once the publish was
/// accepted and room for it found. While they run, what their publishes wait on is recorded
/// in that lock's record too (`deadlock::running_inline`).
pub(crate) fn run<T: 'static>(
    inline: &[Arc<Inline<T>>],
    message: &Message<T>,
    under: Under<'_>,
) -> Said {
    let _entered = Entered::topic(under.order);
    let _running = deadlock::running_inline(under.waits);
    for entry in inline {
        let counters = &entry.core.counters;
        if let Some(filter) = &entry.core.options.filter {
            match filter.verdict(message.payload()) {
                Verdict::Accept => {}
                Verdict::Reject | Verdict::Panicked => {
                    Counters::bump(&counters.filtered);
                    continue;
                }
            }
        }
        if entry.slot.retired.load(SeqCst) {
            continue;
        }
        // Lock order: row 4a, under row 4 (the order lock); any lock inside (user code, which
        // may publish to other topics); see engine/mod.rs.
        let mut handler = entry.slot.handler.lock();
        let Some(run) = handler.as_mut() else {
            continue;
        };
        Counters::bump(&counters.received);
        Counters::bump(&counters.taken);
        let outcome = {
            let _in = InHandler::of(entry.slot.id);
            // A child of the publisher's own span: no link needed.
            let _attempt = trace::attempt(
                message.topic(),
                message.seq(),
                &entry.core.name,
                1,
                &Cause::none(),
            );
            attempt(|| run(message))
        };
        drop(handler);
        match outcome {
            Ok(()) => Counters::bump(&counters.delivered),
            Err(failure) => {
                Counters::bump(&counters.failed);
                // Finished without delivery: the publisher has it back (not a dead letter).
                Counters::bump(&counters.abandoned);
                let (reason, error) = failure.into_parts();
                let name = Arc::clone(&entry.core.name);
                return Said::Rejected(Rejection::new(name, reason, error));
            }
        }
    }
    Said::Accepted
}

/// A handler refused a message and kept a clone of it: the payload cannot go back to the
/// publisher, and publishing it anyway would overrule the refusal. A misuse, reported where
/// it happens, like a `RefCell` borrowed twice.
#[cold]
pub(crate) fn kept<T>(rejection: &Rejection, message: Message<T>) -> ! {
    drop(message);
    panic!(
        "{rejection}; but a handler kept a clone of the message, so it cannot be handed back \
         to the publisher: an inline handler must not keep a message it refuses"
    )
}
