//! Unsubscribing and closing: a subscription off its topic's list and its worker waited
//! for; the bus's close through `lifecycle.rs`, and the report of what it left.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Instant;

use crate::deadlock::{self, RECHECK};
use crate::delivery::core::SubscriptionCore;
use crate::lifecycle::Closed;
use crate::stats::CloseReport;
use crate::trace;
use crate::util::unwind::drop_quietly;
use crate::worker;

use super::{Engine, Entry};

impl Engine {
    /// Takes a subscription off its topic and retires it, without waiting for anything:
    /// for a stream, whose consumer is the caller.
    #[cfg(feature = "tokio")]
    pub(crate) fn detach(&self, core: &Arc<SubscriptionCore>) {
        self.leave(core);
        core.retire();
    }

    /// Retires a subscription: nothing published after this arrives, what is queued is
    /// delivered. Waits for its worker to finish, except where it cannot: from the
    /// subscription's own handler, or from another handler whose worker the subscription's
    /// worker waits for (directly or through others: see `deadlock.rs`); there it returns at
    /// once and the worker finishes later, which a close waits for.
    pub(crate) fn unsubscribe(&self, core: &Arc<SubscriptionCore>) {
        self.leave(core);
        core.retire();
        match worker::current(self.id) {
            None => {
                self.lifecycle.wait_until(None, None, || core.is_finished());
            }
            // Its own subscription (or group) cannot wait for itself.
            Some(me) if core.is_or_holds(me.id) => {}
            Some(me) => {
                let Ok(recorded) = deadlock::record(&me.node, core.nodes()) else {
                    return;
                };
                self.lifecycle.wait_until(None, Some(RECHECK), || {
                    core.is_finished() || recorded.leads_back()
                });
            }
        }
    }

    /// Takes a subscription off the bus's list and its topic's.
    pub(super) fn leave(&self, core: &SubscriptionCore) {
        let entry = {
            // Lock order: row 2, let go before row 1 or a topic's locks; see engine/mod.rs.
            let mut subscriptions = self.subscriptions.lock();
            let at = subscriptions.iter().position(|e| e.core.id == core.id);
            at.map(|at| subscriptions.remove(at))
        };
        match entry {
            Some(Entry {
                topic: Some(topic), ..
            }) => topic.remove(&core.mailbox_ids()),
            Some(Entry { topic: None, .. }) => {
                // Lock order: row 1; rows 6 (a log's ring) then 3 inside it; see engine/mod.rs.
                let mut observers = self.observers.lock();
                observers.retain(|observer| observer.id() != core.id);
                for topic in self.topics.all() {
                    topic.remove(&[core.id]);
                }
            }
            None => {}
        }
    }

    /// After a forced stop: every message still queued in a mailbox or a dispatcher's queue
    /// becomes a dead letter,
    /// here, before the close returns, so the stats and dead letters read right after it are
    /// final (a worker that takes one meanwhile keeps it as a dead letter too). Letters the
    /// store discards for them are dropped on a thread of their own: their messages' `Drop`
    /// is user code, which must not hold up the close past its deadline.
    fn close_out(&self) {
        let mut spill = Vec::new();
        for core in self.every_core() {
            core.close_out(&self.dead_letters, &mut spill);
        }
        // Then dispatcher queues, whose messages come after those in the mailboxes.
        for topic in self.topics.all() {
            topic.close_out(&self.dead_letters, &mut spill);
        }
        if !spill.is_empty() {
            // Without a thread to be had, they are dropped here after all (by `spawn`).
            let _ = std::thread::Builder::new()
                .name("eventbus-close-out".into())
                .spawn(move || drop_quietly(spill));
        }
    }

    /// Closes the bus (see `lifecycle.rs`) and reports what it left.
    pub(crate) fn close(&self, deadline: Option<Instant>) -> CloseReport {
        self.close_from(deadline, self.inside())
    }

    /// Closes the bus; `inside` says whether the caller is one of its workers (which cannot
    /// wait for itself).
    pub(crate) fn close_from(&self, deadline: Option<Instant>, inside: bool) -> CloseReport {
        let closed = self.lifecycle.close(deadline, inside);
        // What was left, read before a forced stop makes it dead letters.
        let subscriptions = self.every_subscription();
        if closed == Closed::TimedOut {
            self.lifecycle.stop();
            self.close_out();
        }
        let hook_finished = match closed {
            // Workers may still make dead letters.
            Closed::Begun => true,
            Closed::Completed => self.dead_letters.close_hook(deadline),
            Closed::TimedOut | Closed::Stopped => {
                self.dead_letters.close_hook(Some(Instant::now()))
            }
        };
        if !hook_finished {
            // Left to finish on its own thread; a later close must not wait for it.
            self.lifecycle.stop();
        }
        if closed != Closed::Begun && !self.announced.swap(true, SeqCst) {
            trace::closed(|| self.stats(), closed == Closed::Completed);
        }
        CloseReport {
            completed: closed == Closed::Completed && hook_finished,
            subscriptions,
            hook_running: !hook_finished,
        }
    }
}
