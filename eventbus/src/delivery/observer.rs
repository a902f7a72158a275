//! Observers: subscribers of every topic whose name matches a pattern (`Bus::observe`,
//! `#[observer]`), with one mailbox of [`AnyMessage`]s, one worker, and everything else a
//! subscriber has.
//!
//! # Patterns
//!
//! A topic name is split at `.` into segments; a pattern's `*` matches one segment, `>` one
//! or more (last only, as in NATS subjects), anything else that segment itself. A segment
//! with a `<` is a name whatever it holds: a generic topic is named with its type arguments
//! (`Gen<u8>`), so its `>` is a bracket, not the wildcard.
//!
//! # Attaching, and the one order per topic
//!
//! An observer is on the observer list of each topic it matches (`topics/state.rs`), beside the
//! topic's mailboxes: a publish offers it the message under the topic's order lock, after
//! the mailboxes, so it sees each topic's messages in that topic's order. The bus keeps its
//! observers in one list (`engine/`), and a topic made later is given the matching ones
//! before any publisher can find it; adding an observer and making a topic take the same
//! lock, so a topic is either made before the observer (and attached by it) or after (and
//! given it), never both or neither.
//!
//! # Locks
//!
//! Publishers of different topics may reach one observer at once, and a mailbox takes one
//! publisher at a time (`mailbox.rs`). So each observer has a turn: a lock a publisher takes
//! while it holds its topic's order lock, for the hand-out (and, with `Block`, the wait for
//! room). Order: a topic's order lock, then observer turns in the order the observers were
//! added (the same on every topic's list), never the other way. A handler that waits for a
//! turn records it in the wait graph (`deadlock.rs`), like a wait for an order lock; the
//! turn's holder records what it waits on in the turn's `waits` and its topic's, and where it
//! holds the turn across its publish's other waits, the turn's `waits` point at its topic's
//! (`Entered::held_across_waits`). The turn is the mailbox's order lock for its worker's
//! retire (see `mailbox.rs`): once it is free after the retire, a publisher that takes it
//! later reads the retired flag; while it is held across waits, its holder is blocked where
//! its topic's record says (`TopicWaits::blocked_elsewhere`), and reads the flag when it
//! wakes.

use std::sync::atomic::Ordering::AcqRel;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Receiver;
use parking_lot::{Mutex, MutexGuard};

use crate::deadlock::{self, NoLock, Patience, TopicWaits, WaitNode};
use crate::delivery::mailbox::{Handouts, Offer, OrderLock, Outbox, Room};
use crate::message::shared::shared;
use crate::message::Message;
use crate::message::{AnyMessage, Envelope};

/// A topic-name pattern: `orders.*`, `payments.>`, `orders.placed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Name(String),
    /// `*`
    One,
    /// `>`
    Rest,
}

impl Pattern {
    /// The pattern written `text`; else what is wrong with it.
    pub(crate) fn parse(text: &str) -> Result<Pattern, &'static str> {
        if text.is_empty() {
            return Err("it is empty");
        }
        let parts: Vec<&str> = text.split('.').collect();
        let last = parts.len() - 1;
        let mut segments = Vec::with_capacity(parts.len());
        for (at, part) in parts.into_iter().enumerate() {
            segments.push(match part {
                "" => return Err("it has an empty segment (`..`, or a `.` at either end)"),
                ">" if at != last => return Err("`>` may only be its last segment"),
                ">" => Segment::Rest,
                "*" => Segment::One,
                // A generic topic's name: `Gen<u8>`, `Pair<u8, u16>`.
                _ if part.contains('<') && !part.contains('*') => Segment::Name(part.to_owned()),
                _ if part.contains(['*', '>']) => {
                    return Err("`*` and `>` stand for whole segments: `orders.*`, not `orders*`")
                }
                _ if part.contains(char::is_whitespace) => {
                    return Err("it has white space in a segment")
                }
                _ => Segment::Name(part.to_owned()),
            });
        }
        Ok(Pattern { segments })
    }

    /// Whether topic `name` matches.
    pub(crate) fn matches(&self, name: &str) -> bool {
        let mut names = name.split('.');
        for segment in &self.segments {
            match segment {
                Segment::Rest => return names.next().is_some(),
                Segment::One => {
                    if names.next().is_none() {
                        return false;
                    }
                }
                Segment::Name(expected) => {
                    if names.next() != Some(expected.as_str()) {
                        return false;
                    }
                }
            }
        }
        names.next().is_none()
    }
}

/// An observer's turn: held by the one publisher at its mailbox.
#[derive(Default)]
pub(crate) struct Turn(Mutex<()>);

impl OrderLock for Turn {
    fn is_free(&self) -> bool {
        !self.0.is_locked()
    }
}

/// The publishers' end of an observer: its pattern, its turn and its mailbox.
pub(crate) struct Inlet {
    pattern: Pattern,
    turn: Arc<Turn>,
    /// What the turn's holder waits on.
    waits: Arc<TopicWaits>,
    pub(crate) outbox: Outbox<AnyMessage>,
}

/// How long a publisher may wait for an observer's turn.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TurnWait {
    Forever,
    Until(Instant),
    Never,
}

/// Why a publisher did not get an observer's turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoTurn {
    WouldDeadlock,
    GaveUp,
}

/// A publisher's turn at one observer.
pub(crate) struct Entered<'a> {
    inlet: &'a Inlet,
    /// Declared before the turn, so cleared before the turn is let go.
    _under: Option<deadlock::HeldUnder<'a>>,
    _turn: MutexGuard<'a, ()>,
}

impl Inlet {
    /// The handouts its mailbox's worker looks at when retired: the turn, and what its
    /// holder waits on.
    pub(crate) fn handouts(turn: &Arc<Turn>, waits: &Arc<TopicWaits>) -> Handouts {
        Handouts {
            order: Arc::clone(turn) as Arc<dyn OrderLock>,
            waits: Arc::clone(waits),
        }
    }

    pub(crate) fn new(
        pattern: Pattern,
        turn: Arc<Turn>,
        waits: Arc<TopicWaits>,
        outbox: Outbox<AnyMessage>,
    ) -> Self {
        Inlet {
            pattern,
            turn,
            waits,
            outbox,
        }
    }

    /// The observer's subscription id.
    pub(crate) fn id(&self) -> u64 {
        self.outbox.core.id
    }

    /// Whether it observes topic `name`.
    pub(crate) fn matches(&self, name: &str) -> bool {
        self.pattern.matches(name)
    }

    /// A message this observer could not be offered (its turn would never come to the
    /// handler publishing it): counted as received and dropped. Written without the turn,
    /// so with read-modify-writes; only a publish out of a wait cycle comes here.
    pub(crate) fn left_out<T>(&self, message: &Message<T>, why: &'static str) {
        let core = &self.outbox.core;
        core.counters.received.fetch_add(1, AcqRel);
        core.counters.dropped.fetch_add(1, AcqRel);
        crate::trace::dropped(message.topic(), message.seq(), &core.name, why);
    }

    /// Whether a publish would have to wait for room in its mailbox now (see
    /// `Outbox::would_block`); without the turn, only a look.
    pub(crate) fn would_block(&self) -> bool {
        self.outbox.would_block()
    }

    /// Whether a publisher holds its turn now; only a look.
    #[cfg(feature = "tokio")]
    pub(crate) fn turn_taken(&self) -> bool {
        self.turn.0.is_locked()
    }

    /// Whether a task of the handler `waiter`, waiting for this observer's turn, would wait
    /// on itself: the turn is held by a publisher that waits, through the others, on that
    /// handler.
    #[cfg(feature = "tokio")]
    pub(crate) fn turn_leads_back(&self, waiter: &WaitNode) -> bool {
        self.turn_taken() && deadlock::turn_leads_back(waiter, &self.waits)
    }

    /// The observer's node in the wait graph.
    pub(crate) fn node(&self) -> &Arc<WaitNode> {
        &self.outbox.core.node
    }

    /// Waits (as a task) until its mailbox may have room: see `Outbox::room`.
    #[cfg(feature = "tokio")]
    pub(crate) async fn room(&self) {
        self.outbox.room().await
    }

    /// Takes the observer's turn, for a publisher holding its topic's order lock (whose
    /// waits are `topic`); `publisher` is the handler publishing, if any.
    pub(crate) fn enter<'a>(
        &'a self,
        wait: TurnWait,
        publisher: Option<&Arc<WaitNode>>,
        topic: &TopicWaits,
    ) -> Result<Entered<'a>, NoTurn> {
        // Lock order: row 5 (this observer's turn), tried, under row 4; see engine/mod.rs.
        if let Some(turn) = self.turn.0.try_lock() {
            return Ok(Entered {
                inlet: self,
                _under: None,
                _turn: turn,
            });
        }
        // This thread's own, held across its publish's waits: a publish from one of that
        // publish's inline handlers would wait for itself.
        if self.waits.held_here() {
            return Err(NoTurn::WouldDeadlock);
        }
        let patience = match wait {
            TurnWait::Forever => Patience::Forever,
            TurnWait::Until(deadline) => Patience::Until(deadline),
            TurnWait::Never => return Err(NoTurn::GaveUp),
        };
        // The topic's publisher is blocked on this observer while it waits.
        let node = &self.outbox.core.node;
        let taken = topic.waiting_for_turn(node, &self.waits, || {
            // Lock order: row 5, under row 4 (and earlier observers' turns); see engine/mod.rs.
            deadlock::lock_order(&self.turn.0, &self.waits, publisher, patience)
        });
        match taken {
            Ok(turn) => Ok(Entered {
                inlet: self,
                _under: None,
                _turn: turn,
            }),
            Err(NoLock::WouldDeadlock) => Err(NoTurn::WouldDeadlock),
            Err(NoLock::GaveUp) => Err(NoTurn::GaveUp),
        }
    }
}

impl<'a> Entered<'a> {
    /// For a turn held across the rest of its publish (the waits for other turns and for room
    /// in mailboxes or the log, filters and inline handlers): a handler waiting for it follows
    /// the waits of the topic whose publisher holds it (`topic`), where that publisher records
    /// them, and finds a cycle through it. Once per turn taken.
    pub(crate) fn held_across_waits(&mut self, topic: &Arc<TopicWaits>) {
        debug_assert!(self._under.is_none(), "one record per turn taken");
        self._under = Some(self.inlet.waits.held_under(topic));
    }

    /// Whether a publish would have to wait for room (see `Outbox::would_block`).
    pub(crate) fn would_block(&self) -> bool {
        self.inlet.would_block()
    }

    /// The observer's node in the wait graph.
    pub(crate) fn node(&self) -> &Arc<WaitNode> {
        self.inlet.node()
    }

    /// As `Outbox::wait_for_room`; the turn is held, so room found stays.
    pub(crate) fn wait_for_room(
        &self,
        deadline: Option<Instant>,
        stop: &Receiver<()>,
        topic: &TopicWaits,
    ) -> Room {
        let outbox = &self.inlet.outbox;
        self.inlet.waits.waiting_on(&outbox.core.node, || {
            outbox.wait_for_room(deadline, stop, topic)
        })
    }

    /// Whether its mailbox is full now; the turn is held, so room found stays.
    pub(crate) fn is_full(&self) -> bool {
        self.inlet.outbox.is_full()
    }

    /// Offers the observer a message it was handed before (a dead letter's), as it is.
    pub(crate) fn offer_again(
        &self,
        message: Message<AnyMessage>,
        stop: &Receiver<()>,
        topic: &TopicWaits,
    ) -> Offer {
        self.inlet.outbox.offer(message, stop, topic)
    }

    /// Offers the observer its share of `message` (one of the publish's references).
    pub(crate) fn offer<T: crate::topic::Topic>(
        &self,
        message: Message<T>,
        stop: &Receiver<()>,
        topic: &TopicWaits,
    ) -> Offer {
        let outbox = &self.inlet.outbox;
        let (seq, name) = (message.seq(), message.topic());
        let recorded = crate::message::Recorded {
            debug: T::__debug,
            serializable: T::__serializable,
        };
        let any = AnyMessage::new(message, recorded);
        let wrapped = match shared(seq, name, Envelope::new(any), 1).next() {
            Some(one) => Message::new(one),
            None => unreachable!("`shared` hands out the count asked for"),
        };
        if outbox.would_block() {
            self.inlet
                .waits
                .waiting_on(&outbox.core.node, || outbox.offer(wrapped, stop, topic))
        } else {
            outbox.offer(wrapped, stop, topic)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Pattern;

    #[test]
    fn patterns_match_by_segment() {
        let cases = [
            ("orders.*", "orders.placed", true),
            ("orders.*", "orders", false),
            ("orders.*", "orders.placed.eu", false),
            ("orders.>", "orders.placed.eu", true),
            ("orders.>", "orders", false),
            (">", "anything.at.all", true),
            ("*.placed", "orders.placed", true),
            ("orders.placed", "orders.placed", true),
            ("orders.placed", "orders.placedx", false),
            ("OrderPlaced", "OrderPlaced", true),
            ("Gen<u8>", "Gen<u8>", true),
            ("Gen<u8>", "Gen<u16>", false),
            ("jobs.Pair<u8, u16>", "jobs.Pair<u8, u16>", true),
        ];
        for (pattern, name, expected) in cases {
            let parsed = Pattern::parse(pattern).unwrap();
            assert_eq!(parsed.matches(name), expected, "{pattern} ~ {name}");
        }
    }

    #[test]
    fn malformed_patterns_say_why() {
        for bad in [
            "",
            "orders..x",
            ".orders",
            "orders.",
            "orders.>.x",
            "orders*",
            "a b",
        ] {
            assert!(Pattern::parse(bad).is_err(), "{bad:?}");
        }
    }
}
