//! Dead letters: messages a subscriber gave up on, kept with their last error, in a bounded
//! store that counts what it had to discard; and the `on_dead_letter` hook's thread (the
//! `on_dead_letter_async` hook's task is `async_hook.rs`).
//!
//! A letter remembers which subscription gave up on it and its message's type, so the engine
//! can hand the very message back to that subscription ([`Bus::redeliver`](crate::Bus::redeliver)):
//! the type finds the topic, and the topic (which knows its message type) downcasts it.

use std::any::{Any, TypeId};
use std::collections::VecDeque;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex;

use crate::handler::Failure;
use crate::message::{AnyMessage, Message};
use crate::trace;
use crate::util::unwind::drop_quietly;

#[cfg(feature = "tokio")]
pub(crate) mod async_hook;

/// A message whose every attempt failed, with what went wrong.
///
/// # Examples
///
/// ```
/// use eventbus::{Bus, Message, Options, Topic};
///
/// #[derive(Topic, Debug, PartialEq)]
/// struct Charge(u32);
///
/// let bus = Bus::builder().build();
/// bus.subscribe::<Charge>(Options::default().name("billing"), |_: &Message<Charge>| {
///     Err::<(), _>("card declined")
/// });
/// bus.publish(Charge(30)).unwrap();
/// bus.close();
///
/// let letters = bus.dead_letters();
/// assert_eq!(letters[0].subscriber(), "billing");
/// assert_eq!(letters[0].error(), "card declined");
/// assert_eq!(letters[0].payload::<Charge>(), Some(&Charge(30)));
/// ```
#[derive(Clone)]
pub struct DeadLetter {
    topic: &'static str,
    seq: u64,
    subscriber: Arc<str>,
    error: Failure,
    attempts: u32,
    /// The subscriber's reference to the shared `Message<T>`, kept whole so
    /// [`DeadLetter::payload`] can hand it back.
    message: Arc<dyn Any + Send + Sync>,
    /// The subscription that gave up on it (its id on the bus): where a redelivery goes.
    subscription: u64,
    /// `TypeId::of::<T>()`: the bus's key for the message's topic.
    topic_type: TypeId,
}

impl DeadLetter {
    pub(crate) fn new<T: Send + Sync + 'static>(
        message: Message<T>,
        subscription: u64,
        subscriber: Arc<str>,
        error: Failure,
        attempts: u32,
    ) -> Self {
        // An observer's letter (its message an `AnyMessage`) is found under the topic of the
        // value it wraps: that topic redelivers it to the observer.
        let any: &dyn Any = &message;
        let topic_type = match any.downcast_ref::<Message<AnyMessage>>() {
            Some(observed) => observed.payload().topic_type(),
            None => TypeId::of::<T>(),
        };
        DeadLetter {
            topic: message.topic(),
            seq: message.seq(),
            subscriber,
            error,
            attempts,
            message: Arc::new(message),
            subscription,
            topic_type,
        }
    }

    /// The id of the subscription that gave up on it.
    pub(crate) fn subscription(&self) -> u64 {
        self.subscription
    }

    /// The key of its topic in the bus's directory.
    pub(crate) fn topic_type(&self) -> TypeId {
        self.topic_type
    }

    /// The `Message<T>`, without its type: the topic downcasts it.
    pub(crate) fn any_message(&self) -> &(dyn Any + Send + Sync) {
        &*self.message
    }

    /// Whether `other` is this letter (or a clone of it): the same message, given up on by
    /// the same subscription.
    pub(crate) fn is(&self, other: &DeadLetter) -> bool {
        Arc::ptr_eq(&self.message, &other.message) && self.subscription == other.subscription
    }

    /// A dead letter for bytes that came from outside the bus and could not become a
    /// message of `topic` (feature `nats`: an import that could not be decoded). Its
    /// payload is the raw bytes: [`payload::<Vec<u8>>()`](DeadLetter::payload).
    #[cfg(feature = "nats")]
    pub(crate) fn undecodable(
        topic: &'static str,
        seq: u64,
        subscriber: Arc<str>,
        error: Failure,
        bytes: Vec<u8>,
    ) -> Self {
        // No subscription of the bus gave up on it (ids start at 1): it cannot be redelivered.
        DeadLetter::new(Message::alone(seq, topic, bytes), 0, subscriber, error, 1)
    }

    /// The message's topic.
    pub fn topic(&self) -> &'static str {
        self.topic
    }

    /// The message's place in its topic's order.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The name of the subscriber that gave up on it.
    pub fn subscriber(&self) -> &str {
        &self.subscriber
    }

    /// The last attempt's error text, or the panic's message.
    ///
    /// The error itself, when the handler returned a `std::error::Error` (see
    /// [`HandlerResult`](crate::HandlerResult)), is this letter's
    /// [`source()`](std::error::Error::source), with its own chain behind it.
    pub fn error(&self) -> &str {
        self.error.message()
    }

    /// How many attempts were made.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The published value, if it is a `T`. For an observer's letter, both the
    /// [`AnyMessage`] it was handed and the value of the topic it observed.
    pub fn payload<T: 'static>(&self) -> Option<&T> {
        self.message::<T>().map(Message::payload)
    }

    /// The whole message, if it is a `Message<T>`. For an observer's letter, both the
    /// `Message<AnyMessage>` it was handed and the message of the topic it observed.
    pub fn message<T: 'static>(&self) -> Option<&Message<T>> {
        let message = self.message.downcast_ref::<Message<T>>();
        message.or_else(|| {
            let observed = self.message.downcast_ref::<Message<AnyMessage>>()?;
            observed.payload().message::<T>()
        })
    }
}

impl fmt::Debug for DeadLetter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadLetter")
            .field("topic", &self.topic)
            .field("seq", &self.seq)
            .field("subscriber", &self.subscriber)
            .field("error", &self.error)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for DeadLetter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} #{} at {} after {} attempt(s): {}",
            self.topic,
            self.seq,
            self.subscriber,
            self.attempts,
            self.error.message()
        )
    }
}

/// A dead letter is the error of a message given up on; its source is the handler's error,
/// when the handler returned a `std::error::Error`.
impl std::error::Error for DeadLetter {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self.error.as_error() {
            Some(error) => Some(error),
            None => None,
        }
    }
}

thread_local! {
    /// Whether this thread is a bus's `on_dead_letter` hook thread, or is polling an
    /// `on_dead_letter_async` hook's task.
    static IN_HOOK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the caller runs in a hook (its thread, or its task's poll): a close from there
/// cannot wait for the hook.
pub(crate) fn in_hook() -> bool {
    IN_HOOK.with(std::cell::Cell::get)
}

/// The bus's dead-letter hook, as the builder was given it: one of the two, never both.
pub(crate) enum Hook {
    /// `on_dead_letter`: a callback shown each dead letter, on a thread of its own.
    Thread(Box<dyn FnMut(&DeadLetter) + Send>),
    /// `on_dead_letter_async`: an async callback, on a task of the runtime given.
    #[cfg(feature = "tokio")]
    Task(async_hook::AsyncHook, tokio::runtime::Handle),
}

/// Where a new dead letter is offered to the hook, without waiting.
enum Inlet {
    Thread(Sender<DeadLetter>),
    #[cfg(feature = "tokio")]
    Task(tokio::sync::mpsc::Sender<DeadLetter>),
}

impl Inlet {
    /// Hands `letter` to the hook unless its queue is full (or the hook is gone); a letter it
    /// did not take comes back, for the caller to drop where user code may run.
    fn offer(&self, letter: DeadLetter) -> Option<DeadLetter> {
        match self {
            Inlet::Thread(sender) => sender.try_send(letter).err().map(|e| e.into_inner()),
            #[cfg(feature = "tokio")]
            Inlet::Task(sender) => sender.try_send(letter).err().map(|e| match e {
                tokio::sync::mpsc::error::TrySendError::Full(letter)
                | tokio::sync::mpsc::error::TrySendError::Closed(letter) => letter,
            }),
        }
    }
}

/// How many dead letters may wait for the hook; past that the hook skips them (counted).
const HOOK_BACKLOG: usize = 1024;

/// Its metadata, without the message: topic, seq, subscriber, error, attempts.
#[cfg(feature = "serde")]
impl serde::Serialize for DeadLetter {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut letter = serializer.serialize_struct("DeadLetter", 5)?;
        letter.serialize_field("topic", self.topic)?;
        letter.serialize_field("seq", &self.seq)?;
        letter.serialize_field("subscriber", &*self.subscriber)?;
        letter.serialize_field("error", self.error.message())?;
        letter.serialize_field("attempts", &self.attempts)?;
        letter.end()
    }
}

/// Holds the newest `capacity` dead letters; the oldest make way and are counted. Shows each
/// new one to the dead-letter hook, if there is one, off the workers' path: a worker only
/// hands it to the hook's thread or task, never waits for it.
pub(crate) struct DeadLetterStore {
    capacity: usize,
    /// Guards the letters and the discard count together, so a reader sees them agree.
    letters: Mutex<Letters>,
    /// To the hook's thread or task; taken (closing the queue) when the bus has closed.
    hook: Mutex<Option<Inlet>>,
    /// Disconnected when the hook's thread or task has finished: it holds the only sender.
    hook_done: Option<Receiver<()>>,
    hook_skipped: AtomicU64,
}

impl fmt::Debug for DeadLetterStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadLetterStore")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct Letters {
    kept: VecDeque<DeadLetter>,
    discarded: u64,
}

impl DeadLetterStore {
    /// # Errors
    ///
    /// If the hook's thread cannot be started.
    pub(crate) fn new(capacity: usize, hook: Option<Hook>) -> std::io::Result<Self> {
        let (sender, hook_done) = match hook {
            None => (None, None),
            #[cfg(feature = "tokio")]
            Some(Hook::Task(hook, runtime)) => {
                let (tx, done_rx) = async_hook::spawn(&runtime, hook);
                (Some(Inlet::Task(tx)), Some(done_rx))
            }
            Some(Hook::Thread(mut hook)) => {
                let (tx, rx) = crossbeam_channel::bounded::<DeadLetter>(HOOK_BACKLOG);
                let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(0);
                std::thread::Builder::new()
                    .name("eventbus-dead-letters".into())
                    .spawn(move || {
                        IN_HOOK.with(|in_hook| in_hook.set(true));
                        for letter in rx {
                            // A panicking hook must not stop the next letter being shown, and
                            // a letter whose message panics when dropped must not stop it
                            // either.
                            let _ = catch_unwind(AssertUnwindSafe(|| hook(&letter)));
                            drop_quietly(letter);
                        }
                        drop_quietly(hook);
                        drop(done_tx);
                    })?;
                (Some(Inlet::Thread(tx)), Some(done_rx))
            }
        };
        Ok(DeadLetterStore {
            capacity,
            letters: Mutex::new(Letters::default()),
            hook: Mutex::new(sender),
            hook_done,
            hook_skipped: AtomicU64::new(0),
        })
    }

    pub(crate) fn push(&self, letter: DeadLetter) {
        // The discarded letter is dropped after the lock is let go of: its message's `Drop`
        // is user code.
        drop_quietly(self.push_keeping(letter));
    }

    /// Keeps `letter`, and hands back the oldest one if it was discarded to make room.
    pub(crate) fn push_keeping(&self, letter: DeadLetter) -> Option<DeadLetter> {
        let error = letter.error.message();
        trace::dead_letter(
            letter.topic,
            letter.seq,
            &letter.subscriber,
            letter.attempts,
            error,
        );
        // Kept first, then shown to the hook: what the hook does with it (`Bus::redeliver`,
        // `Bus::dead_letters`) finds it kept.
        // Lock order: row 9 (`hook`), a leaf, let go before `letters`; see engine/mod.rs.
        let shown = self.hook.lock().is_some().then(|| letter.clone());
        let oldest = self.keep(letter);
        if let Some(shown) = shown {
            // Lock order: row 9 (`hook`), a leaf, `letters` let go; see engine/mod.rs.
            let refused = match &*self.hook.lock() {
                Some(inlet) => inlet.offer(shown).inspect(|_| {
                    self.hook_skipped.fetch_add(1, Relaxed);
                }),
                None => Some(shown),
            };
            // Not taken (the hook behind, or gone since): the copy goes once the lock is let
            // go, quietly. It may be the message's last reference by now (the kept letter
            // taken out meanwhile), and its `Drop` is user code.
            drop_quietly(refused);
        }
        oldest
    }

    /// Keeps `letter`, and hands back the oldest one if it was discarded to make room.
    fn keep(&self, letter: DeadLetter) -> Option<DeadLetter> {
        // Lock order: row 9 (`letters`), a leaf; see engine/mod.rs.
        let mut letters = self.letters.lock();
        if self.capacity == 0 {
            letters.discarded += 1;
            Some(letter)
        } else {
            let oldest = if letters.kept.len() == self.capacity {
                letters.discarded += 1;
                letters.kept.pop_front()
            } else {
                None
            };
            letters.kept.push_back(letter);
            oldest
        }
    }

    pub(crate) fn snapshot(&self) -> Vec<DeadLetter> {
        // Lock order: row 9 (`letters`), a leaf; see engine/mod.rs.
        self.letters.lock().kept.iter().cloned().collect()
    }

    pub(crate) fn take(&self) -> Vec<DeadLetter> {
        // Lock order: row 9 (`letters`), a leaf; see engine/mod.rs.
        self.letters.lock().kept.drain(..).collect()
    }

    /// Takes `letter` out of the store, with its place, if it is still there.
    pub(crate) fn claim(&self, letter: &DeadLetter) -> Option<(usize, DeadLetter)> {
        // Lock order: row 9 (`letters`), a leaf; see engine/mod.rs.
        let mut letters = self.letters.lock();
        let at = letters.kept.iter().position(|kept| kept.is(letter))?;
        letters.kept.remove(at).map(|letter| (at, letter))
    }

    /// Puts a claimed letter back at its place (a redelivery that was refused). If the store
    /// filled up meanwhile, the oldest makes way, counted, as for a new letter.
    pub(crate) fn restore(&self, at: usize, letter: DeadLetter) {
        let discarded = {
            // Lock order: row 9 (`letters`), a leaf; see engine/mod.rs.
            let mut letters = self.letters.lock();
            let at = at.min(letters.kept.len());
            letters.kept.insert(at, letter);
            if letters.kept.len() > self.capacity {
                letters.discarded += 1;
                letters.kept.pop_front()
            } else {
                None
            }
        };
        drop_quietly(discarded);
    }

    pub(crate) fn discarded(&self) -> u64 {
        // Lock order: row 9 (`letters`), a leaf; see engine/mod.rs.
        self.letters.lock().discarded
    }

    pub(crate) fn len(&self) -> usize {
        // Lock order: row 9 (`letters`), a leaf; see engine/mod.rs.
        self.letters.lock().kept.len()
    }

    pub(crate) fn hook_skipped(&self) -> u64 {
        self.hook_skipped.load(Relaxed)
    }

    /// No more dead letters will come: lets the hook finish what it was handed, waiting for
    /// it until `deadline` (not at all with `Some(now)`); whether it has finished.
    pub(crate) fn close_hook(&self, deadline: Option<Instant>) -> bool {
        // Lock order: row 9 (`hook`), a leaf; see engine/mod.rs.
        self.hook.lock().take();
        let Some(done) = &self.hook_done else {
            return true;
        };
        let ended = match deadline {
            None => done.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(deadline) => done.recv_deadline(deadline),
        };
        matches!(ended, Err(RecvTimeoutError::Disconnected))
    }
}
