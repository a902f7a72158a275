//! Subscribing an inline subscriber (`delivery/inline.rs`): its options checked (it has no
//! mailbox, worker or start), and its handler put on its topic's list.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::delivery::core::{Consumer, SubscriptionCore};
use crate::delivery::inline::{self, InlineRun};
use crate::error::SubscribeError;
use crate::options::{Options, Overflow, Start};
use crate::topic::Topic;

use super::{subscription_name, typed, Engine, Entry};

/// Why `options` cannot be an inline subscriber's, if they cannot.
fn refused(options: &Options) -> Option<&'static str> {
    if options.workers != 1 || options.key.is_some() {
        return Some(
            "`workers` and `key` make a consumer group, whose workers take turns at a \
             mailbox; an inline handler runs on each publisher's thread: drop them, or \
             subscribe with `subscribe_group`",
        );
    }
    if options.capacity != Options::DEFAULT_CAPACITY || options.overflow != Overflow::Block {
        return Some(
            "a capacity or an overflow policy is a mailbox's; an inline subscriber has none \
             (its handler runs inside the publish): drop them",
        );
    }
    if options.retries != 0 {
        return Some(
            "retries would run again while every other publisher of the topic waits; a \
             refusal goes back to the publisher (`PublishError::Rejected`), who may publish \
             again: drop `retries`",
        );
    }
    if options.retry_if.is_some() {
        return Some(
            "`retry_if` chooses which failures are retried; an inline subscriber retries \
             none (a refusal goes back to the publisher): drop it",
        );
    }
    if options.priority.is_some() {
        return Some(
            "a priority orders a mailbox; an inline subscriber has none (its handler runs \
             inside each publish, in topic order): drop it",
        );
    }
    if options.start != Start::Now {
        return Some(
            "a start is where a log reader begins; an inline handler sees each message as it \
             is published: drop it",
        );
    }
    None
}

impl Engine {
    /// Starts an inline subscriber of `T`: `handler` runs inside every publish of `T`.
    pub(crate) fn subscribe_inline<T: Topic>(
        &self,
        options: Options,
        handler: InlineRun<T>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        let id = self.next_subscription.fetch_add(1, Relaxed);
        let name: Arc<str> = subscription_name(&options, id).into();
        // On a dispatcher topic too: its handler runs in the publish, before the message is
        // queued (`topics/dispatcher.rs`).
        if let Some(why) = refused(&options) {
            return Err(SubscribeError::Inline {
                name: name.to_string(),
                topic: T::name(),
                why,
            });
        }
        if let Some(Err(written_for)) = options.filter.as_ref().map(|f| f.check::<T>()) {
            return Err(SubscribeError::Filter {
                name: name.to_string(),
                topic: T::name(),
                written_for,
            });
        }
        // Counted, so that a close cannot finish half-way through a subscribe.
        if !self.lifecycle.begin_subscribe() {
            return Err(SubscribeError::Closed {
                name: name.to_string(),
            });
        }
        let topic = self.topic::<T>();
        let entry = inline::inline(id, handler, |retirer| {
            SubscriptionCore::new(
                id,
                Arc::clone(&name),
                T::name(),
                options,
                Consumer::Publisher,
                retirer,
            )
        });
        let core = Arc::clone(&entry.core);
        typed::<T>(&*topic).add_inline(Arc::new(entry));
        // Lock order: row 2 (`subscriptions`), nothing else held; see engine/mod.rs.
        self.subscriptions.lock().push(Entry {
            core: Arc::clone(&core),
            topic: Some(topic),
        });
        self.lifecycle.end_subscribe();
        Ok(core)
    }
}
