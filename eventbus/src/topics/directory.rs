//! The directory: a bus's topics by [`TypeId`], found on every publish without a lock, a
//! read-modify-write or a thread-local.
//!
//! Topics are made on first use and never removed, so the directory only grows. Most of it is
//! a fixed table of write-once slots, probed linearly from the type's hash: a publish reads at
//! most [`PROBES`] slots with plain loads, and publishers of different topics share nothing
//! but read-only cache lines. A slot, once filled, never changes, so a reader that finds an
//! empty slot knows the type is in no later one (a writer fills the first free slot it
//! meets). A topic whose probe run is full (a program with many topics, or an unlucky hash)
//! goes to a copy-on-write map instead, which costs a reference count per publish.
//!
//! A topic type with an index (`numbering::TopicIndex`: `#[derive(Topic)]` on a type without
//! generic parameters) is also put in a table by that index once made, as its state's `Any`:
//! a publish finds it there with a load and one type check, no hash, probe or second
//! virtual call (12 to 26 instructions a delivery at 1 subscriber; BENCHMARKS.md, "Plain
//! messages, the append in line, a topic by its index").

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;

use crate::lifecycle::Topics;
use crate::numbering::TopicIndex;
use crate::topics::any::AnyTopic;

/// Slots in the table; a power of two. 128 slots of 40 bytes: 5 KiB per bus.
const SLOTS: usize = 128;

/// How many slots a lookup reads before it tries the overflow map.
const PROBES: usize = 8;

/// Slots in the table by topic index: topic types past the first this many in the process
/// are found by `TypeId` only. 256 slots of 24 bytes: 6 KiB per bus.
const INDEXED: usize = 256;

type Slot = OnceLock<(TypeId, Arc<dyn AnyTopic>)>;

/// Topics by `TypeId`. A `TypeId` is already a hash, so it is used as it is.
type TopicMap = HashMap<TypeId, Arc<dyn AnyTopic>, BuildHasherDefault<TypeIdHasher>>;

pub(crate) struct Directory {
    slots: [Slot; SLOTS],
    /// Topics that found no free slot in their probe run; copy-on-write.
    overflow: ArcSwap<TopicMap>,
    /// The topics of types with an index, by it: write-once too.
    by_index: Box<[OnceLock<Arc<dyn Any + Send + Sync>>]>,
}

impl Directory {
    pub(crate) fn new() -> Self {
        Directory {
            slots: std::array::from_fn(|_| Slot::new()),
            overflow: ArcSwap::from_pointee(TopicMap::default()),
            by_index: (0..INDEXED).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The topic of a type with `index`, if it was made and put in the table by index: the
    /// publish path's first look.
    #[inline(always)]
    pub(crate) fn find_indexed(
        &self,
        index: Option<&TopicIndex>,
    ) -> Option<&(dyn Any + Send + Sync)> {
        Some(&**self.by_index.get(index?.get()?)?.get()?)
    }

    /// Puts `topic`, made and in the directory, in the table by its type's `index`, if the
    /// index is inside it.
    pub(crate) fn index(&self, index: &TopicIndex, topic: &Arc<dyn AnyTopic>) {
        if let Some(slot) = self.by_index.get(index.get_or_give()) {
            slot.get_or_init(|| Arc::clone(topic).into_any());
        }
    }

    /// The slots a topic may be in, in the order they are filled.
    fn probe(&self, key: TypeId) -> impl Iterator<Item = &Slot> {
        let mut hasher = TypeIdHasher::default();
        key.hash(&mut hasher);
        let start = hasher.finish() as usize;
        (0..PROBES).map(move |i| &self.slots[start.wrapping_add(i) % SLOTS])
    }

    /// The topic, if it is in the table: the publish path.
    #[inline]
    pub(crate) fn find(&self, key: TypeId) -> Option<&Arc<dyn AnyTopic>> {
        for slot in self.probe(key) {
            match slot.get() {
                Some((of, topic)) if *of == key => return Some(topic),
                Some(_) => {}
                None => return None,
            }
        }
        None
    }

    /// The topic, if someone has made it: in the table or the overflow map.
    pub(crate) fn get(&self, key: TypeId) -> Option<Arc<dyn AnyTopic>> {
        if let Some(topic) = self.find(key) {
            return Some(Arc::clone(topic));
        }
        self.overflow.load().get(&key).cloned()
    }

    /// The topic, made with `make` if no one has made it yet.
    pub(crate) fn get_or_make(
        &self,
        key: TypeId,
        make: impl FnOnce() -> Arc<dyn AnyTopic>,
    ) -> Arc<dyn AnyTopic> {
        if let Some(topic) = self.find(key) {
            return Arc::clone(topic);
        }
        if let Some(topic) = self.overflow.load().get(&key) {
            return Arc::clone(topic);
        }
        let made = make();
        for slot in self.probe(key) {
            let (of, topic) = slot.get_or_init(|| (key, Arc::clone(&made)));
            if *of == key {
                return Arc::clone(topic);
            }
        }
        self.overflow.rcu(|current| {
            let mut next = TopicMap::clone(current);
            next.entry(key).or_insert_with(|| Arc::clone(&made));
            next
        });
        match self.overflow.load().get(&key) {
            Some(topic) => Arc::clone(topic),
            None => unreachable!("the topic was just inserted and topics are never removed"),
        }
    }

    /// Every topic made so far.
    pub(crate) fn all(&self) -> Vec<Arc<dyn AnyTopic>> {
        let table = self.slots.iter().filter_map(|slot| slot.get());
        let mut all: Vec<_> = table.map(|(_, topic)| Arc::clone(topic)).collect();
        all.extend(self.overflow.load().values().cloned());
        all
    }
}

impl Topics for Directory {
    fn quiet(&self, seen: &mut Vec<u64>) -> bool {
        for topic in self.all() {
            match topic.quiet_published() {
                Some(published) => seen.push(published),
                None => return false,
            }
        }
        true
    }

    fn clear(&self) {
        for topic in self.all() {
            topic.clear();
        }
    }

    fn close_numbering(&self) {
        for topic in self.all() {
            topic.close_numbering();
        }
    }
}

#[derive(Default)]
struct TypeIdHasher(u64);

impl Hasher for TypeIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // `TypeId` writes through `write_u64`/`write_u128`; fold anything else in.
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 ^= value;
    }

    fn write_u128(&mut self, value: u128) {
        self.0 ^= value as u64 ^ (value >> 64) as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topics::state::TopicState;

    macro_rules! topics {
        ($($name:ident)*) => {
            $(
                struct $name;
                impl crate::topic::Topic for $name {
                    fn name() -> &'static str {
                        stringify!($name)
                    }
                }
            )*
        };
    }

    struct Of<const X: usize, const Y: usize>;
    impl<const X: usize, const Y: usize> crate::topic::Topic for Of<X, Y> {
        fn name() -> &'static str {
            "of"
        }
    }

    fn make<T: crate::topic::Topic>(directory: &Directory) -> Arc<dyn AnyTopic> {
        directory.get_or_make(TypeId::of::<T>(), || Arc::new(TopicState::<T>::new()))
    }

    /// 160 topics, `Of<0, 0>` to `Of<15, 9>`, in a fixed order.
    fn all_of(directory: &Directory) -> Vec<Arc<dyn AnyTopic>> {
        macro_rules! grid {
            ($($x:literal)*; $ys:tt) => { [$(grid!(@row $x, $ys)),*] };
            (@row $x:literal, [$($y:literal)*]) => { [$(make::<Of<$x, $y>>(directory)),*] };
        }
        let rows = grid!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; [0 1 2 3 4 5 6 7 8 9]);
        rows.into_iter().flatten().collect()
    }

    /// More topics than slots: every probe run fills and some overflow; each is found again
    /// as itself.
    #[test]
    fn every_topic_is_found_as_itself_in_the_table_or_the_overflow() {
        let directory = Directory::new();
        let first = all_of(&directory);
        let again = all_of(&directory);
        for (first, again) in first.iter().zip(&again) {
            assert!(Arc::ptr_eq(first, again));
        }
        assert!(!directory.overflow.load().is_empty());
        assert_eq!(directory.all().len(), 160);
        let distinct: std::collections::HashSet<_> =
            first.iter().map(|t| Arc::as_ptr(t) as *const u8).collect();
        assert_eq!(distinct.len(), 160);
    }

    /// Threads making the same topics at once all get the one that was kept.
    #[test]
    fn threads_making_a_topic_at_once_share_one() {
        let directory = Directory::new();
        let start = std::sync::Barrier::new(4);
        let made: Vec<Vec<Arc<dyn AnyTopic>>> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        start.wait();
                        all_of(&directory)
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        for other in &made[1..] {
            for (a, b) in made[0].iter().zip(other) {
                assert!(Arc::ptr_eq(a, b));
            }
        }
        assert_eq!(directory.all().len(), 160);
    }

    topics!(A B);

    #[test]
    fn a_topic_in_the_table_is_found_without_the_map() {
        let directory = Directory::new();
        assert!(directory.find(TypeId::of::<A>()).is_none());
        let a = directory.get_or_make(TypeId::of::<A>(), || Arc::new(TopicState::<A>::new()));
        let b = directory.get_or_make(TypeId::of::<B>(), || Arc::new(TopicState::<B>::new()));
        assert!(Arc::ptr_eq(directory.find(TypeId::of::<A>()).unwrap(), &a));
        assert!(Arc::ptr_eq(directory.find(TypeId::of::<B>()).unwrap(), &b));
        assert_eq!(a.name(), "A");
    }

    #[test]
    fn a_topic_put_in_by_index_is_found_there_as_its_state() {
        let directory = Directory::new();
        let index = TopicIndex::new();
        assert!(
            directory.find_indexed(None).is_none(),
            "a type with no index"
        );
        assert!(
            directory.find_indexed(Some(&index)).is_none(),
            "not given yet"
        );
        let a = directory.get_or_make(TypeId::of::<A>(), || Arc::new(TopicState::<A>::new()));
        assert!(
            directory.find_indexed(Some(&index)).is_none(),
            "made, not put in"
        );
        directory.index(&index, &a);
        let found = directory.find_indexed(Some(&index)).unwrap();
        let state = found.downcast_ref::<TopicState<A>>().unwrap();
        let made = a.as_any().downcast_ref::<TopicState<A>>().unwrap();
        assert!(std::ptr::eq(state, made), "the one state, not a copy");
        assert!(found.downcast_ref::<TopicState<B>>().is_none());
    }
}
