//! Dead letters back to their subscriber: redelivery of a letter's message to the very
//! subscription that gave up on it, a letter's message shown as text, and letters recorded
//! from outside a worker.

use crate::dead_letter::DeadLetter;
use crate::error::RedeliverError;
use crate::topics::any::Redelivery;
use crate::worker;

use super::Engine;

impl Engine {
    /// Keeps a dead letter no subscriber made (feature `nats`: an import that could not be
    /// decoded), shown to the hook like any other.
    #[cfg(feature = "nats")]
    pub(crate) fn record_dead_letter(&self, letter: crate::dead_letter::DeadLetter) {
        self.dead_letters.push(letter);
    }

    /// Hands a dead letter's message back to the subscription that gave up on it, and takes
    /// the letter out of the store. The letter is claimed first, so two redeliveries of one
    /// letter cannot both go ahead; one that is refused puts it back in its place.
    pub(crate) fn redeliver(&self, letter: &DeadLetter) -> Result<(), RedeliverError> {
        let (at, letter) = self
            .dead_letters
            .claim(letter)
            .ok_or(RedeliverError::NotFound)?;
        let refused = |why| match why {
            Redelivery::Log => RedeliverError::LogTopic {
                topic: letter.topic(),
            },
            Redelivery::Unsubscribed => RedeliverError::Unsubscribed {
                subscriber: letter.subscriber().to_owned(),
                topic: letter.topic(),
            },
            Redelivery::Full => RedeliverError::Full {
                subscriber: letter.subscriber().to_owned(),
            },
            Redelivery::Closed => RedeliverError::Closed,
            Redelivery::Rejected => RedeliverError::Rejected {
                subscriber: letter.subscriber().to_owned(),
            },
        };
        // `get`, not `find`: the topic may be in the directory's overflow map.
        let redelivered = match self.topics.get(letter.topic_type()) {
            Some(topic) => {
                let publisher = worker::current(self.id);
                topic.redeliver(
                    letter.any_message(),
                    self.mailbox_of(letter.subscription()),
                    &self.lifecycle,
                    publisher.as_ref(),
                )
            }
            None => Err(Redelivery::Unsubscribed),
        };
        self.lifecycle.poke();
        match redelivered {
            Ok(()) => {
                crate::util::unwind::drop_quietly(letter);
                Ok(())
            }
            Err(why) => {
                let error = refused(why);
                self.dead_letters.restore(at, letter);
                Err(error)
            }
        }
    }

    /// A dead letter's message as text (see `topics/show.rs`): `None` when no topic of the
    /// bus has its type (an import that could not be decoded, say).
    #[cfg(feature = "dashboard")]
    pub(crate) fn show_dead_letter(&self, letter: &DeadLetter) -> Option<String> {
        self.topics
            .get(letter.topic_type())?
            .show(letter.any_message())
    }

    /// Where a letter of subscription `id` goes back to: the mailbox on its topic's list,
    /// which for a worker of a group without a key is the one its workers share.
    fn mailbox_of(&self, id: u64) -> u64 {
        // Lock order: row 2 (`subscriptions`), nothing else held; see engine/mod.rs.
        let subscriptions = self.subscriptions.lock();
        let shared = subscriptions
            .iter()
            .find_map(|entry| entry.core.shared_mailbox_of(id));
        shared.unwrap_or(id)
    }
}
