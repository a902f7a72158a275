//! Subscribing an observer: a subscriber of every topic whose name matches a pattern, those
//! made later too (see `delivery/observer.rs`), its worker a thread or (feature `tokio`) a
//! task.

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
use crate::worker;
use crate::worker::thread::Run;
use crate::worker::{Context, Source};

use super::{interned, is_group, subscription_name, Engine, Entry, Launch};

impl Engine {
    /// Starts an observer of the topics whose names match `pattern` (`observer.rs`): a
    /// mailbox of `AnyMessage`s, and a thread worker running `handler`.
    pub(crate) fn observe(
        &self,
        pattern: &str,
        options: Options,
        handler: impl Run<AnyMessage>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        self.observe_with(
            pattern,
            options,
            Consumer::Worker,
            |source, core, context| worker::thread::spawn(source, core, context, handler),
        )
    }

    /// Starts an observer like [`observe`](Engine::observe) whose worker is a task running
    /// `handler` on the bus's runtime.
    #[cfg(feature = "tokio")]
    pub(crate) fn observe_task(
        &self,
        pattern: &str,
        options: Options,
        handler: impl worker::task::RunAsync<AnyMessage>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        let Some(runtime) = self.runtime.get().cloned() else {
            return Err(SubscribeError::NoRuntime {
                name: subscription_name(&options, self.next_subscription.load(Relaxed)),
            });
        };
        self.observe_with(
            pattern,
            options,
            Consumer::Task,
            move |source, core, context| {
                worker::task::spawn(&runtime, source, core, context, handler);
                Ok(())
            },
        )
    }

    /// Refuses a `retry_if` written for another type than an observer's handler's error
    /// (`error`), as `check_retry_if` does a subscriber's.
    pub(crate) fn check_observer_retry_if(
        &self,
        pattern: &str,
        options: &Options,
        error: Option<(std::any::TypeId, &'static str)>,
    ) -> Result<(), SubscribeError> {
        super::check_retry_if_of(self, || interned(pattern), options, error)
    }

    /// Starts an observer whose mailbox `launch` hands to its worker.
    fn observe_with(
        &self,
        pattern: &str,
        options: Options,
        consumer: Consumer,
        launch: impl Launch<AnyMessage>,
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
            this.start_observer(id, parsed, topic, options, consumer, launch)
        })
    }

    fn start_observer(
        &self,
        id: u64,
        pattern: Pattern,
        topic: &'static str,
        options: Options,
        consumer: Consumer,
        launch: impl Launch<AnyMessage>,
    ) -> Result<Arc<SubscriptionCore>, SubscribeError> {
        let name: Arc<str> = subscription_name(&options, id).into();
        let context = Context {
            bus: self.id,
            lifecycle: Arc::clone(&self.lifecycle),
            dead_letters: Arc::clone(&self.dead_letters),
        };
        let (turn, waits) = (Arc::new(Turn::default()), Arc::new(TopicWaits::default()));
        let handouts = Inlet::handouts(&turn, &waits);
        let (capacity, priority) = (options.capacity, options.priority.clone());
        // A task's mailbox announces every arrival (see `mailbox.rs`).
        let by_task = consumer != Consumer::Worker;
        let new_core = |retirer| {
            SubscriptionCore::new(id, Arc::clone(&name), topic, options, consumer, retirer)
        };
        let (outbox, source) = match priority {
            None => {
                let (outbox, inbox) = mailbox(capacity, handouts, by_task, new_core);
                (outbox, Source::Mailbox(inbox))
            }
            Some(priority) => {
                let (outbox, inbox) =
                    priority::mailbox(capacity, priority, handouts, by_task, new_core);
                (outbox, Source::Priority(inbox))
            }
        };
        let core = Arc::clone(&outbox.core);
        self.lifecycle.started(Arc::clone(&core));
        let spawned = launch(source, Arc::clone(&core), context);
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
