//! Subscribing an observer: a subscriber of every topic whose name matches a pattern, those
//! made later too (see `delivery/observer.rs`).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::deadlock::TopicWaits;
use crate::delivery::core::{Consumer, SubscriptionCore};
use crate::delivery::mailbox::mailbox;
use crate::delivery::observer::{Inlet, Pattern, Turn};
use crate::delivery::priority;
use crate::error::SubscribeError;
use crate::message::AnyMessage;
use crate::options::Options;
use crate::options::Start;
use crate::worker::thread::Run;
use crate::worker::{self, Context, Source};

use super::{interned, is_group, subscription_name, Engine, Entry};

impl Engine {
    /// Starts an observer of the topics whose names match `pattern` (`observer.rs`): a
    /// mailbox of `AnyMessage`s, and a thread worker running `handler`.
    pub(crate) fn observe(
        &self,
        pattern: &str,
        options: Options,
        handler: impl Run<AnyMessage>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        let name = || subscription_name(&options, self.next_subscription.load(Relaxed));
        let parsed = Pattern::parse(pattern).map_err(|why| SubscribeError::Pattern {
            name: name(),
            pattern: pattern.to_owned(),
            why,
        })?;
        let topic = interned(pattern);
        if is_group(&options) {
            return Err(SubscribeError::Group {
                name: name(),
                topic,
                why: "an observer has one worker, which sees each topic's messages in order",
            });
        }
        if options.start != Start::Now {
            return Err(SubscribeError::NoLog {
                name: name(),
                topic,
            });
        }
        self.subscribe_checked::<AnyMessage, _>(topic, None, options, 1, |this, id, options| {
            let name: Arc<str> = subscription_name(&options, id).into();
            this.start_observer(id, name, parsed, topic, options, handler)
        })
    }

    pub(super) fn start_observer(
        &self,
        id: u64,
        name: Arc<str>,
        pattern: Pattern,
        topic: &'static str,
        options: Options,
        handler: impl Run<AnyMessage>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        let context = Context {
            bus: self.id,
            lifecycle: Arc::clone(&self.lifecycle),
            dead_letters: Arc::clone(&self.dead_letters),
        };
        let (turn, waits) = (Arc::new(Turn::default()), Arc::new(TopicWaits::default()));
        let handouts = Inlet::handouts(&turn, &waits);
        let (capacity, priority) = (options.capacity, options.priority.clone());
        let new_core = |retirer| {
            SubscriptionCore::new(
                id,
                Arc::clone(&name),
                topic,
                options,
                Consumer::Worker,
                retirer,
            )
        };
        let (outbox, source) = match priority {
            None => {
                let (outbox, inbox) = mailbox(capacity, handouts, false, new_core);
                (outbox, Source::Mailbox(inbox))
            }
            Some(priority) => {
                let (outbox, inbox) =
                    priority::mailbox(capacity, priority, handouts, false, new_core);
                (outbox, Source::Priority(inbox))
            }
        };
        let core = Arc::clone(&outbox.core);
        self.lifecycle.started(Arc::clone(&core));
        let spawned = worker::thread::spawn(source, Arc::clone(&core), context, handler);
        if let Err(source) = spawned {
            self.lifecycle.finished(&core);
            return Err(SubscribeError::Spawn {
                name: name.to_string(),
                source,
            });
        }
        let inlet = Arc::new(Inlet::new(pattern, turn, waits, outbox));
        {
            // Lock order: row 1 (`observers`); row 3 (`attach`) inside it; see engine/mod.rs.
            let mut observers = self.observers.lock();
            observers.push(Arc::clone(&inlet));
            for topic in self.topics.all() {
                if inlet.matches(topic.name()) {
                    topic.attach(Arc::clone(&inlet));
                }
            }
        }
        // Lock order: row 2 (`subscriptions`), after row 1 is let go; see engine/mod.rs.
        self.subscriptions.lock().push(Entry {
            core: Arc::clone(&core),
            topic: None,
        });
        Ok(core)
    }
}
