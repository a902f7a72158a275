//! A topic's subscriber list: its mailboxes in chunks, copied on write, so that subscribing
//! never waits behind a publish and a change copies one chunk, not the whole list.

use std::sync::Arc;

use crate::delivery::mailbox::Outbox;

/// How many mailboxes a chunk of the subscriber list holds.
const CHUNK: usize = 64;

/// A topic's mailboxes in chunks of [`CHUNK`], so that a change copies one chunk and the
/// chunks' pointers instead of the whole list: a hundred thousand subscribes would otherwise
/// copy five billion pointers.
pub(crate) struct Subscribers<T> {
    pub(super) chunks: Vec<Arc<Vec<Arc<Outbox<T>>>>>,
    len: usize,
}

impl<T> Subscribers<T> {
    pub(super) fn new() -> Self {
        Subscribers {
            chunks: Vec::new(),
            len: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Arc<Outbox<T>>> + '_ {
        self.chunks.iter().flat_map(|chunk| chunk.iter())
    }

    /// This list and `outboxes` at its end.
    pub(super) fn with(&self, outboxes: Vec<Arc<Outbox<T>>>) -> Self {
        let mut chunks = self.chunks.clone();
        let len = self.len + outboxes.len();
        for outbox in outboxes {
            match chunks.last_mut() {
                Some(last) if last.len() < CHUNK => Arc::make_mut(last).push(outbox),
                _ => chunks.push(Arc::new(vec![outbox])),
            }
        }
        Subscribers { chunks, len }
    }

    /// This list without the mailboxes `ids` (one subscription's, or a group's).
    pub(super) fn without(&self, ids: &[u64]) -> Self {
        let mut len = 0;
        let chunks = self
            .chunks
            .iter()
            .filter_map(|chunk| {
                let kept = if chunk.iter().any(|outbox| ids.contains(&outbox.core.id)) {
                    let kept: Vec<_> = chunk
                        .iter()
                        .filter(|outbox| !ids.contains(&outbox.core.id))
                        .cloned()
                        .collect();
                    Arc::new(kept)
                } else {
                    Arc::clone(chunk)
                };
                len += kept.len();
                (!kept.is_empty()).then_some(kept)
            })
            .collect();
        Subscribers { chunks, len }
    }
}

#[cfg(feature = "tokio")]
impl<T: 'static> Subscribers<T> {
    /// How many more publishes can surely hand a message to every one of these mailboxes
    /// without waiting (see `Outbox::room_now`); `usize::MAX` if none can make a publish
    /// wait. For the topic's order lock's holder, who alone puts messages in.
    pub(super) fn room(&self) -> usize {
        let mut room = usize::MAX;
        for chunk in &self.chunks {
            for outbox in chunk.iter() {
                room = room.min(outbox.room_now());
                if room == 0 {
                    return 0;
                }
            }
        }
        room
    }
}
