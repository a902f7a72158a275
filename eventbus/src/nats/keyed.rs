//! Keyed work across processes: a keyed export puts each message on its key's partition's
//! subject ([`partitioner`]), and the members of a keyed import share the partitions
//! ([`Member`]), one owner per partition at a time, with a fenced hand-over.
//!
//! # The algorithm
//!
//! The partition count of a topic's stream is declared once, in the registry stream
//! [`DECLARED`] (subject `eventbus-keyed.<stream>`), by the first keyed export; every keyed
//! export and import of the stream agrees with it. (A key-value bucket would do, but
//! async-nats 0.51's bucket calls failed against nats-server 2.9.10 here, on an answer they
//! could not parse; so the registries are plain streams used the way buckets are.) The members of the keyed import `name` of a stream
//! meet in the registry stream `eventbus-keyed-<stream>`, which keeps one message per
//! subject and drops each one lease (its `max_age`) after it was stored:
//!
//! - `<registry>.<name>.m.<member>`: a member is alive; stored every quarter lease, purged
//!   when it leaves.
//! - `<registry>.<name>.p.<partition>`: the partition's lease, holding its owner; taken
//!   with a create (`Nats-Expected-Last-Subject-Sequence: 0`), renewed every quarter lease
//!   with a compare-and-set on its own sequence, purged when given back.
//!
//! Every member computes the same assignment from the sorted live members: partition `p`
//! goes to member `p % n`. A member releases what it owns and should not (fenced, below),
//! and takes what it should own as soon as its lease is free; it looks again every quarter
//! lease and at once when a member comes (its first entry, seen on a core subscription to
//! the registry's subjects) or goes or gives a lease back (it publishes a nudge on
//! [`NUDGE`]`.<stream>.<name>`). Each partition has a durable pull consumer, `<name>-keyed-<p>`, filtered on the
//! partition's subject, with at most **one** message unacknowledged: the server gives a
//! partition's next message only once the previous one is acked, whoever holds it, so a
//! partition's messages are handled in stream order across owners.
//!
//! The hand-over is fenced: the old owner stops asking for messages, finishes the message
//! in hand (published on its bus and acked), waits until the server shows nothing
//! unacknowledged on the partition's consumer, and only then gives the lease back; the new
//! owner starts only once it holds the lease. A member that crashes stops renewing: its
//! leases lapse after one lease, and its unacknowledged message (at most one per partition)
//! is sent again after the ack wait, before anything later of that partition.
//!
//! Lock order: none is taken here (each member's state is its task's own).

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;

use super::*;
use import::{Importer, Stop};

/// The registry stream holding each keyed stream's partition count (subject
/// `eventbus-keyed.<stream>`); `eventbus-keyed-<stream>` is where that stream's keyed
/// imports meet.
pub(super) const DECLARED: &str = "eventbus-keyed";
/// The first token of the core subjects that wake a keyed import's members.
pub(super) const NUDGE: &str = "eventbus-nudge";
/// The most partitions a keyed export may ask for (each is a consumer per keyed import).
pub(super) const MAX_PARTITIONS: u32 = 1024;
/// A member's lease, unless [`ImportOptions::lease`] says otherwise.
pub(super) const LEASE: Duration = Duration::from_secs(10);
/// The shortest lease: the server's shortest `max_age`, a few renewals.
pub(super) const MIN_LEASE: Duration = Duration::from_millis(400);

/// The type a key function returns, named for [`PartitionKey`]'s bound (implemented for
/// every `Fn(&T) -> K`; there is nothing to implement).
pub trait KeyOutput<T> {
    /// What the key function returns.
    type Key: Hash;
}

impl<T, K: Hash, F: Fn(&T) -> K> KeyOutput<T> for F {
    type Key = K;
}

/// A key function for [`Bridge::export_keyed`]: any `Fn(&T) -> K` with `K: Hash`, as
/// [`Options::key`] takes for a local keyed group (closures need no annotation).
///
/// # Examples
///
/// ```
/// use eventbus::nats::PartitionKey;
///
/// struct Order { customer: String }
///
/// fn takes<T>(_: impl PartitionKey<T>) {}
/// takes::<Order>(|o| o.customer.clone());
/// takes::<Order>(|o: &Order| o.customer.len());
/// ```
pub trait PartitionKey<T>: KeyOutput<T> + Fn(&T) -> <Self as KeyOutput<T>>::Key {}

impl<T, F: KeyOutput<T> + Fn(&T) -> <F as KeyOutput<T>>::Key> PartitionKey<T> for F {}

/// A keyed export's choice of partition for a message.
pub(super) type Partitioner<T> = Arc<dyn Fn(&T) -> u32 + Send + Sync>;

/// The partition of a message: its key hashed with 64-bit FNV-1a (the bytes `Hash` feeds
/// it, so the same in every process of one build and platform), modulo `partitions`.
pub(super) fn partitioner<T: 'static>(
    partitions: u32,
    key: impl PartitionKey<T> + Send + Sync + 'static,
) -> Partitioner<T> {
    Arc::new(move |value: &T| {
        let mut hasher = Fnv(FNV_OFFSET);
        key(value).hash(&mut hasher);
        (hasher.finish() % u64::from(partitions)) as u32
    })
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// 64-bit FNV-1a: a hash that does not change between runs or processes.
struct Fnv(u64);

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(FNV_PRIME);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Refuses a partition count the bridge cannot use.
pub(super) fn check_partitions(topic: &'static str, partitions: u32) -> Result<(), Error> {
    if partitions == 0 || partitions > MAX_PARTITIONS {
        return Err(Error::Keyed {
            topic,
            why: format!(
                "{partitions} partitions: a keyed export has 1 to {MAX_PARTITIONS} (each \
                 partition is a consumer of every keyed import)"
            ),
        });
    }
    Ok(())
}

/// The partition count of `stream`'s keyed exports, if one was declared.
///
/// # Errors
///
/// [`Error::Keyed`] if the declaration is not a count the bridge can use (another
/// program wrote it): waiting for a readable one would wait forever, without a word.
pub(super) async fn declared(
    js: &jetstream::Context,
    topic: &'static str,
    stream: &str,
) -> Result<Option<u32>, Error> {
    let declarations = registry(js, DECLARED, Duration::ZERO, topic).await?;
    let subject = format!("{DECLARED}.{stream}");
    let message = match declarations.get_last_raw_message_by_subject(&subject).await {
        Ok(message) => message,
        Err(error) if error.kind() == stream::LastRawMessageErrorKind::NoMessageFound => {
            return Ok(None)
        }
        Err(error) => return Err(server(topic, error)),
    };
    let text = String::from_utf8_lossy(&message.payload);
    match text.parse::<u32>() {
        Ok(partitions) if check_partitions(topic, partitions).is_ok() => Ok(Some(partitions)),
        _ => Err(Error::Keyed {
            topic,
            why: format!(
                "the partition count declared for the stream `{stream}` (subject `{subject}` \
                 of the stream `{DECLARED}`) is `{text}`, not a number from 1 to \
                 {MAX_PARTITIONS}; another program wrote it"
            ),
        }),
    }
}

/// Declares that `stream`'s keyed exports have `partitions` partitions (stored if none is,
/// with a compare-and-set); refused if another export declared another count.
pub(super) async fn declare(
    js: &jetstream::Context,
    topic: &'static str,
    stream: &str,
    partitions: u32,
) -> Result<(), Error> {
    registry(js, DECLARED, Duration::ZERO, topic).await?;
    let subject = format!("{DECLARED}.{stream}");
    let first = create(js, subject, partitions.to_string()).await;
    match first {
        Ok(_) => return Ok(()),
        Err(error) if error.kind() == PublishErrorKind::WrongLastSequence => {}
        Err(error) => return Err(server(topic, error)),
    }
    match declared(js, topic, stream).await? {
        Some(declared) if declared == partitions => Ok(()),
        other => Err(Error::Keyed {
            topic,
            why: format!(
                "the stream `{stream}` is exported keyed with {} partitions (in the stream \
                 `{DECLARED}`); every keyed export of a topic uses one count",
                other.map_or("other".to_string(), |n| n.to_string())
            ),
        }),
    }
}

/// Stores `value` on `subject` if the subject holds nothing; its stream sequence.
async fn create(
    js: &jetstream::Context,
    subject: String,
    value: String,
) -> Result<u64, PublishError> {
    compare_and_set(js, subject, value, 0).await
}

/// Stores `value` on `subject` if the subject's last message is `revision` (0: none); the
/// new revision.
async fn compare_and_set(
    js: &jetstream::Context,
    subject: String,
    value: String,
    revision: u64,
) -> Result<u64, PublishError> {
    let publish = PublishMessage::build()
        .payload(value.into())
        .expected_last_subject_sequence(revision);
    let ack = js.send_publish(subject, publish).await?.await?;
    Ok(ack.sequence)
}

/// The registry stream `name` (subjects `name.>`, one message kept per subject, each
/// dropped `max_age` after it was stored, or never if zero), made if missing.
async fn registry(
    js: &jetstream::Context,
    name: &str,
    max_age: Duration,
    topic: &'static str,
) -> Result<stream::Stream, Error> {
    let config = stream::Config {
        name: name.to_string(),
        subjects: vec![format!("{name}.>")],
        max_messages_per_subject: 1,
        max_age,
        storage: stream::StorageType::File,
        ..Default::default()
    };
    streams::make_stream(js, config)
        .await
        .map_err(|(what, source)| Error::Server {
            topic,
            what,
            source,
        })
}

fn server(topic: &'static str, error: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::Server {
        topic,
        what: "use the keyed imports' registry",
        source: Box::new(error),
    }
}

/// One member of a keyed import: this bridge's share of the partitions of `T`'s stream
/// under one import name.
pub(super) struct Member<T> {
    pub(super) shared: Arc<Shared>,
    pub(super) bus: Bus,
    pub(super) topic: &'static str,
    pub(super) name: String,
    pub(super) stream: String,
    /// The lease asked for (a registry made earlier keeps its own).
    pub(super) lease: Duration,
    pub(super) counters: Arc<stats::ImportCounters>,
    /// The partitions this member holds the lease of.
    pub(super) owned: BTreeMap<u32, Owned>,
    /// Partitions being given back (or lost): their tasks run on their own, so the member
    /// goes on renewing its other leases meanwhile; awaited when the import stops.
    pub(super) releasing: Vec<tokio::task::JoinHandle<()>>,
    pub(super) kind: PhantomData<fn() -> T>,
}

/// A partition this member owns: its lease and the task handling its messages.
pub(super) struct Owned {
    /// The lease's stream sequence, for the next compare-and-set.
    revision: u64,
    /// Tells the task to stop after the message in hand.
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    consumer: consumer::PullConsumer,
}

/// What a member needs once the topic is known to be keyed.
struct Ready {
    partitions: u32,
    /// The registry where the members meet.
    registry: stream::Stream,
    /// The topic's stream.
    stream: stream::Stream,
    lease: Duration,
}

impl<T: Topic + DeserializeOwned> Member<T> {
    pub(super) async fn run(mut self, mut stopped: tokio::sync::watch::Receiver<bool>) {
        let ready = tokio::select! {
            ready = self.ready() => ready,
            _ = stopped.changed() => return,
        };
        self.serve(&ready, &mut stopped).await;
        let owned = std::mem::take(&mut self.owned);
        let releases: Vec<_> = owned
            .into_values()
            .map(|owned| self.release(&ready, owned))
            .collect();
        for release in releases
            .into_iter()
            .chain(std::mem::take(&mut self.releasing))
        {
            let _ = release.await;
        }
        let subject = self.member_subject();
        let leave = ready.registry.purge().filter(subject);
        let _ = tokio::time::timeout(ACK_TIMEOUT, leave).await;
        self.nudge().await;
    }

    /// Waits until a keyed export declared the partitions, then gets the topic's stream
    /// and the registry, trying again with backoff while the server cannot be reached.
    async fn ready(&self) -> Ready {
        let js = &self.shared.js;
        for attempt in 0u32.. {
            let ready = async {
                let partitions = match declared(js, self.topic, &self.stream).await {
                    Ok(partitions) => partitions?,
                    // Unreadable: trying again helps only once someone puts it right, so
                    // the import says why it waits (its call returned long ago).
                    Err(Error::Keyed { why, .. }) => {
                        *self.counters.problem.lock() = Some(why);
                        return None;
                    }
                    Err(_) => return None,
                };
                let stream = self.shared.ensure_stream(self.topic).await.ok()?;
                let registry = registry(js, &self.registry_name(), self.lease, self.topic)
                    .await
                    .ok()?;
                let age = registry.cached_info().config.max_age;
                let lease = if age >= MIN_LEASE { age } else { self.lease };
                Some(Ready {
                    partitions,
                    registry,
                    stream,
                    lease,
                })
            };
            if let Some(ready) = ready.await {
                *self.counters.problem.lock() = None;
                return ready;
            }
            tokio::time::sleep(backoff(attempt)).await;
        }
        unreachable!("the attempts never run out")
    }

    fn registry_name(&self) -> String {
        format!("{DECLARED}-{}", self.stream)
    }

    /// The subjects of this import's entries in the registry.
    fn prefix(&self) -> String {
        format!("{}.{}", self.registry_name(), self.name)
    }

    fn member_subject(&self) -> String {
        format!("{}.m.{}", self.prefix(), self.shared.id)
    }

    fn lease_subject(&self, partition: u32) -> String {
        format!("{}.p.{partition}", self.prefix())
    }

    /// The core subject (kept in no stream) that wakes the members when one left or gave
    /// a lease back.
    fn nudge_subject(&self) -> String {
        format!("{NUDGE}.{}.{}", self.stream, self.name)
    }

    async fn nudge(&self) {
        let nudge = self
            .shared
            .client
            .publish(self.nudge_subject(), Vec::new().into());
        let _ = tokio::time::timeout(ACK_TIMEOUT, nudge).await;
    }

    /// Renews, looks and moves partitions until the import stops.
    async fn serve(&mut self, ready: &Ready, stopped: &mut tokio::sync::watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(ready.lease / 4);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut changes = None;
        let mut nudges = None;
        let mut members: Vec<String> = Vec::new();
        let member_prefix = format!("{}.m.", self.prefix());
        loop {
            let renew = tokio::select! {
                _ = tick.tick() => true,
                change = next_core(&mut changes) => match change {
                    Some(subject) => match subject.strip_prefix(&member_prefix) {
                        // A member that was not there: look now.
                        Some(member) if !members.iter().any(|m| m == member) => false,
                        _ => continue,
                    },
                    None => {
                        changes = None;
                        continue;
                    }
                },
                nudge = next_core(&mut nudges) => match nudge {
                    Some(_) => false,
                    None => {
                        nudges = None;
                        continue;
                    }
                },
                _ = stopped.changed() => return,
            };
            if *stopped.borrow() {
                return;
            }
            if renew {
                let client = &self.shared.client;
                if changes.is_none() {
                    changes = client.subscribe(format!("{}.>", self.prefix())).await.ok();
                }
                if nudges.is_none() {
                    nudges = client.subscribe(self.nudge_subject()).await.ok();
                }
                self.renew().await;
            }
            let Some(live) = self.members(ready).await else {
                continue;
            };
            members = live;
            self.rebalance(ready, &members, stopped).await;
        }
    }

    /// Renews this member's entry and its leases; a lease that cannot be renewed is lost
    /// (it lapsed, and may have been taken): its task stops, and it is not given back.
    async fn renew(&mut self) {
        let js = &self.shared.js;
        if let Ok(ack) = js
            .publish(self.member_subject(), self.shared.id.clone().into())
            .await
        {
            let _ = ack.await;
        }
        let mut lost = Vec::new();
        let prefix = self.prefix();
        for (partition, owned) in &mut self.owned {
            let subject = format!("{prefix}.p.{partition}");
            let value = self.shared.id.clone();
            match compare_and_set(js, subject, value, owned.revision).await {
                Ok(revision) => owned.revision = revision,
                Err(error) if error.kind() == PublishErrorKind::WrongLastSequence => {
                    lost.push(*partition)
                }
                // The server did not answer: the lease may still be this member's.
                Err(_) => {}
            }
        }
        for partition in lost {
            if let Some(owned) = self.owned.remove(&partition) {
                // Not awaited here: the other leases must be renewed meanwhile.
                let _ = owned.stop.send(true);
                self.releasing.push(owned.task);
            }
        }
    }

    /// The live members, sorted; `None` if the registry cannot be read.
    async fn members(&self, ready: &Ready) -> Option<Vec<String>> {
        let prefix = format!("{}.m.", self.prefix());
        let filter = format!("{prefix}*");
        let mut subjects = ready.registry.info_with_subjects(filter).await.ok()?;
        let mut members = Vec::new();
        while let Some(entry) = import::next(&mut subjects).await {
            let (subject, _) = entry.ok()?;
            if let Some(member) = subject.strip_prefix(&prefix) {
                members.push(member.to_string());
            }
        }
        members.sort();
        Some(members)
    }

    /// Releases what this member should no longer own (all at once), then takes what it
    /// should own and is free.
    async fn rebalance(
        &mut self,
        ready: &Ready,
        members: &[String],
        stopped: &tokio::sync::watch::Receiver<bool>,
    ) {
        let me = members.iter().position(|m| *m == self.shared.id);
        let mine = |partition: u32| me == Some(partition as usize % members.len().max(1));
        let leaving: Vec<u32> = self.owned.keys().copied().filter(|p| !mine(*p)).collect();
        let leaving: Vec<(u32, Owned)> = leaving
            .into_iter()
            .filter_map(|p| Some((p, self.owned.remove(&p)?)))
            .collect();
        // Not awaited here: a release takes up to half a lease (its fence), and this
        // member's other leases must be renewed meanwhile. Each nudges when it is done.
        self.releasing.retain(|release| !release.is_finished());
        for (_, owned) in leaving {
            let release = self.release(ready, owned);
            self.releasing.push(release);
        }
        for partition in 0..ready.partitions {
            if !mine(partition) || self.owned.contains_key(&partition) || *stopped.borrow() {
                continue;
            }
            let subject = self.lease_subject(partition);
            let taken = create(&self.shared.js, subject, self.shared.id.clone()).await;
            let Ok(revision) = taken else {
                continue;
            };
            match self.start(ready, partition, revision, stopped).await {
                Some(owned) => {
                    self.owned.insert(partition, owned);
                }
                // Deleted by its sequence: never a lease another member took since.
                None => {
                    let _ = ready.registry.delete_message(revision).await;
                }
            }
        }
    }

    /// Starts handling `partition`, whose lease this member just took.
    async fn start(
        &self,
        ready: &Ready,
        partition: u32,
        revision: u64,
        stopped: &tokio::sync::watch::Receiver<bool>,
    ) -> Option<Owned> {
        let durable = durable_name(&self.name, partition);
        let config = consumer::pull::Config {
            durable_name: Some(durable.clone()),
            filter_subject: partition_subject(self.topic, partition),
            deliver_policy: consumer::DeliverPolicy::All,
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: ACK_WAIT,
            // One at a time: the next only once this one is settled, whoever holds it.
            max_ack_pending: 1,
            ..Default::default()
        };
        let consumer = ready
            .stream
            .get_or_create_consumer(&durable, config)
            .await
            .ok()?;
        let importer = Importer {
            shared: Arc::clone(&self.shared),
            bus: self.bus.clone(),
            topic: self.topic,
            name: durable,
            subscriber: format!("nats-import:{}", self.name).into(),
            consumer: Some(consumer.clone()),
            expected: 0,
            looked: None,
            copies: copies::Copies::new(&self.stream, &self.name, &self.shared.id),
            // Each message in the order it comes: the consumer gives one at a time.
            alone: false,
            counters: Arc::clone(&self.counters),
        };
        let (stop, stopping) = tokio::sync::watch::channel(false);
        let poll = (ready.lease / 4).min(Duration::from_secs(1));
        let task = self.shared.runtime.spawn(work::<T>(
            importer,
            consumer.clone(),
            stopping,
            stopped.clone(),
            poll,
        ));
        Some(Owned {
            revision,
            stop,
            task,
            consumer,
        })
    }

    /// Gives `partition` back, fenced: its task stops after the message in hand; the bus's
    /// subscriptions of the topic finish what they had been given by then (an import is
    /// acked once the bus accepted it, not once it was handled); the server shows nothing
    /// unacknowledged on its consumer. Each wait ends after half a lease at most (a stuck
    /// handler, an ack that was lost: the server sends that message again before any later
    /// one). Then the lease is deleted by its sequence (so never a lease another member took
    /// since it lapsed), and the members are nudged.
    fn release(&self, ready: &Ready, owned: Owned) -> tokio::task::JoinHandle<()> {
        let registry = ready.registry.clone();
        let (bus, topic) = (self.bus.clone(), self.topic);
        let (client, nudge) = (self.shared.client.clone(), self.nudge_subject());
        // The member renews its other leases meanwhile: this runs on its own.
        let fence = (ready.lease / 2).min(ACK_WAIT);
        self.shared.runtime.spawn(async move {
            let Owned {
                revision,
                stop,
                task,
                mut consumer,
            } = owned;
            let _ = stop.send(true);
            let _ = task.await;
            let _ = tokio::time::timeout(fence, handled(&bus, topic)).await;
            let settled = async {
                loop {
                    match consumer.info().await {
                        Ok(info) if info.num_ack_pending == 0 => return,
                        _ => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                }
            };
            let _ = tokio::time::timeout(fence, settled).await;
            let _ = registry.delete_message(revision).await;
            let _ =
                tokio::time::timeout(ACK_TIMEOUT, client.publish(nudge, Vec::new().into())).await;
        })
    }
}

/// Returns once the subscriptions of `topic` on `bus` have finished (delivered,
/// dead-lettered or dropped) as many messages as they had received when this was called,
/// each name's subscriptions summed (the stats name a subscription, they have no id).
async fn handled(bus: &Bus, topic: &str) {
    let totals = |done: bool| {
        let mut by_name = BTreeMap::<String, u64>::new();
        for s in bus
            .stats()
            .subscriptions
            .iter()
            .filter(|s| s.topic == topic)
        {
            let count = match done {
                true => s.delivered + s.dead_lettered + s.dropped,
                false => s.received,
            };
            *by_name.entry(s.name.clone()).or_default() += count;
        }
        by_name
    };
    let targets = totals(false);
    loop {
        let done = totals(true);
        if targets
            .iter()
            .all(|(name, received)| done.get(name).map_or(true, |done| done >= received))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The durable consumer of a keyed import's partition.
pub(super) fn durable_name(name: &str, partition: u32) -> String {
    format!("{name}-keyed-{partition}")
}

/// The next message's subject on a core subscription, or never without one; `None` when
/// it ended.
async fn next_core(subscription: &mut Option<async_nats::Subscriber>) -> Option<String> {
    match subscription {
        Some(subscription) => Some(import::next(subscription).await?.subject.to_string()),
        None => std::future::pending().await,
    }
}

/// One owned partition's task: asks for one message at a time and handles it (published
/// on the bus, then acked), until told to stop (checked between messages) or the import
/// stops.
async fn work<T: Topic + DeserializeOwned>(
    mut importer: Importer,
    consumer: consumer::PullConsumer,
    stop: tokio::sync::watch::Receiver<bool>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
    poll: Duration,
) {
    let mut attempt = 0u32;
    loop {
        // A member gone without a word (its sender dropped) stops its tasks too.
        if *stop.borrow() || stop.has_changed().is_err() || *stopped.borrow() {
            return;
        }
        // Not raced against `stop`: a request dropped after it was sent would leave its
        // message unacknowledged until the ack wait runs out.
        let batch = consumer
            .batch()
            .max_messages(1)
            .expires(poll)
            .messages()
            .await;
        let mut batch = match batch {
            Ok(batch) => {
                attempt = 0;
                batch
            }
            Err(_) => {
                tokio::time::sleep(backoff(attempt)).await;
                attempt = attempt.saturating_add(1);
                continue;
            }
        };
        while let Some(next) = import::next(&mut batch).await {
            let Ok(message) = next else { break };
            match importer.handle::<T>(message, &mut stopped).await {
                Some(Stop::Done) => return,
                Some(Stop::Again) => break,
                None => {}
            }
        }
    }
}
