//! Importing a topic: a durable JetStream consumer read by one task ([`Importer`]) that
//! publishes each message on the bus in the stream's order, acking it once the bus took it.

use super::*;
use copies::{Copies, REFRESH};

/// How many messages an import's consumer may have sent and not had acked.
pub(super) const IMPORT_WINDOW: i64 = 1024;
/// How often an importer waiting for a missing message asks for the consumer's ack floor.
pub(super) const GAP_LOOK: Duration = Duration::from_secs(1);

/// One import's task state.
///
/// The consumer acks each message (`AckPolicy::Explicit`) and may have [`IMPORT_WINDOW`]
/// messages unacked; the importer handles them strictly in stream order. A message that arrives
/// before the one expected (the one expected was lost on the way, and will be sent again
/// once its ack wait runs out, before the later ones, which were sent after it) is neither
/// handled nor acked: it comes again in its turn. One that arrives after (a redelivery of a
/// message already published, whose ack was lost) is only acked. A missing message the
/// consumer's ack floor has passed (handled in an earlier run, or deleted) is not waited for.
pub(super) struct Importer {
    pub(super) shared: Arc<Shared>,
    pub(super) bus: Bus,
    pub(super) topic: &'static str,
    pub(super) name: String,
    pub(super) subscriber: Arc<str>,
    /// The consumer, to ask for its ack floor.
    pub(super) consumer: Option<consumer::PullConsumer>,
    /// The stream sequence of the next message to handle.
    pub(super) expected: u64,
    /// When the importer last asked for the ack floor while waiting for a missing message.
    pub(super) looked: Option<std::time::Instant>,
    /// This copy's entry in the registry of the import's copies.
    pub(super) copies: Copies,
    /// Whether this copy is the import's only one as far as it knows: it keeps the strict
    /// order then; with others it handles its share in the order it arrives.
    pub(super) alone: bool,
    pub(super) counters: Arc<stats::ImportCounters>,
}

/// Why an importer stopped handling messages.
pub(super) enum Stop {
    /// Asked to, or the bus closed: the message in hand is not acked (sent again later).
    Done,
    /// The message stream ended or failed: make it again.
    Again,
}

impl Importer {
    pub(super) async fn run<T: Topic + DeserializeOwned>(
        mut self,
        consumer: consumer::PullConsumer,
        stopped: tokio::sync::watch::Receiver<bool>,
    ) {
        self.serve::<T>(consumer, stopped).await;
        self.copies.leave(&self.shared.js).await;
    }

    async fn serve<T: Topic + DeserializeOwned>(
        &mut self,
        consumer: consumer::PullConsumer,
        mut stopped: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut consumer = Some(consumer);
        let mut attempt = 0u32;
        loop {
            if *stopped.borrow() {
                return;
            }
            // Making the consumer again waits for a server that may be down: a close must
            // not wait for that.
            let messages = tokio::select! {
                messages = self.open(consumer.take()) => messages,
                _ = stopped.changed() => return,
            };
            let stop = match messages {
                Some(mut messages) => {
                    // The backoff starts again once messages come: a subscription made
                    // again and again without hearing anything waits longer each time.
                    let before = self
                        .counters
                        .received
                        .load(std::sync::atomic::Ordering::Relaxed);
                    let stop = self.pump::<T>(&mut messages, &mut stopped).await;
                    if self
                        .counters
                        .received
                        .load(std::sync::atomic::Ordering::Relaxed)
                        > before
                    {
                        attempt = 0;
                    }
                    stop
                }
                None => Stop::Again,
            };
            match stop {
                Stop::Done => return,
                Stop::Again => {
                    let wait = tokio::time::sleep(backoff(attempt));
                    attempt = attempt.saturating_add(1);
                    tokio::select! {
                        _ = wait => {}
                        _ = stopped.changed() => return,
                    }
                }
            }
        }
    }

    /// The consumer's messages: from `consumer`, or from the consumer made again; the next
    /// expected is past its ack floor.
    pub(super) async fn open(
        &mut self,
        consumer: Option<consumer::PullConsumer>,
    ) -> Option<consumer::pull::Stream> {
        let mut consumer = match consumer {
            Some(consumer) => consumer,
            None => {
                let stream = self.shared.ensure_stream(self.topic).await.ok()?;
                let consumer = self.shared.consumer(&stream, self.topic, &self.name);
                consumer.await.ok()?
            }
        };
        // Registered (and acked) before the first pull request: any message the server
        // gives this copy, it gives after the registry lists it.
        self.copies.register(&self.shared.js).await.ok()?;
        let info = consumer.info().await.ok()?.clone();
        let others = self.copies.others(&self.shared.js).await;
        self.review(&info, others.unwrap_or(!self.alone));
        let floor = info.ack_floor.stream_sequence;
        self.expected = self.expected.max(floor + 1);
        self.consumer = Some(consumer.clone());
        consumer
            .stream()
            .max_messages_per_batch(256)
            .heartbeat(Duration::from_secs(1))
            .expires(Duration::from_secs(5))
            .messages()
            .await
            .ok()
    }

    pub(super) async fn pump<T: Topic + DeserializeOwned>(
        &mut self,
        messages: &mut consumer::pull::Stream,
        stopped: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Stop {
        let mut refresh = tokio::time::interval(REFRESH);
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        refresh.tick().await;
        loop {
            let next = tokio::select! {
                next = next(messages) => next,
                _ = refresh.tick() => {
                    self.refresh().await;
                    continue;
                }
                _ = stopped.changed() => return Stop::Done,
            };
            let message = match next {
                None => return Stop::Again,
                Some(Ok(message)) => message,
                Some(Err(error)) => match error.kind() {
                    // Heartbeats missed. While the server is away the stream goes on (the
                    // client connects again). If the server answers, this pull subscription
                    // stopped hearing it: make it again, from the consumer's ack floor (what
                    // it had not acked comes again after the ack wait).
                    consumer::pull::MessagesErrorKind::MissingHeartbeat => {
                        let answers = tokio::select! {
                            answers = self.server_answers() => answers,
                            _ = stopped.changed() => return Stop::Done,
                        };
                        if answers {
                            stats::bump(&self.counters.recreated);
                            return Stop::Again;
                        }
                        continue;
                    }
                    _ => return Stop::Again,
                },
            };
            if let Some(stop) = self.handle::<T>(message, stopped).await {
                return stop;
            }
        }
    }

    /// Whether the server answers a question about the consumer (within the client's
    /// request timeout).
    pub(super) async fn server_answers(&mut self) -> bool {
        match &mut self.consumer {
            Some(consumer) => consumer.info().await.is_ok(),
            None => false,
        }
    }

    /// Renews this copy's registration and looks at the others (see [`review`](Self::review)).
    pub(super) async fn refresh(&mut self) {
        let _ = self.copies.register(&self.shared.js).await;
        let Some(others) = self.copies.others(&self.shared.js).await else {
            return;
        };
        let Some(consumer) = &mut self.consumer else {
            return;
        };
        if let Ok(info) = consumer.info().await {
            let info = info.clone();
            self.review(&info, others);
        }
    }

    /// Chooses the order to keep. With other copies, this one handles what it is given in
    /// the order it comes (each copy's share in stream order, none across copies). Alone
    /// again, it goes back to the strict order only once the consumer has nothing
    /// unacknowledged (the ack floor has reached the last message delivered): what the
    /// others held unacknowledged comes again later, below messages this copy handled, and
    /// the strict order would wait for each of them; with nothing pending, everything
    /// below the floor is settled and the strict order starts right after it.
    pub(super) fn review(&mut self, info: &consumer::Info, others: bool) {
        if others {
            self.alone = false;
        } else if !self.alone && info.ack_floor.stream_sequence >= info.delivered.stream_sequence {
            self.alone = true;
            self.expected = self.expected.max(info.ack_floor.stream_sequence + 1);
            self.looked = None;
        }
    }

    /// Before waiting for a missing message to be sent again, asks the server whether it
    /// is handled already: everything up to the consumer's ack floor is (acked, terminated,
    /// or deleted from the stream), which covers a message acked in an earlier run after one
    /// before it whose ack was lost. Asks at most once per [`GAP_LOOK`].
    pub(super) async fn look_past_gap(&mut self) {
        if self
            .looked
            .is_some_and(|looked| looked.elapsed() < GAP_LOOK)
        {
            return;
        }
        self.looked = Some(std::time::Instant::now());
        // The missing message may be another copy's: then it is not missing.
        if self.copies.others(&self.shared.js).await == Some(true) {
            self.alone = false;
            self.looked = None;
            return;
        }
        let Some(consumer) = &mut self.consumer else {
            return;
        };
        if let Ok(info) = consumer.info().await {
            let floor = info.ack_floor.stream_sequence;
            if floor >= self.expected {
                self.expected = floor + 1;
                self.looked = None;
            }
        }
    }

    /// Publishes one message on the bus and acks it; or acks a redelivery, or terminates a
    /// message that cannot be decoded. `None`: go on with the next.
    pub(super) async fn handle<T: Topic + DeserializeOwned>(
        &mut self,
        message: jetstream::Message,
        stopped: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Option<Stop> {
        let seq = match message.info() {
            Ok(info) => {
                stats::bump(&self.counters.received);
                if info.delivered > 1 {
                    stats::bump(&self.counters.redelivered);
                }
                info.stream_sequence
            }
            Err(_) => return Some(Stop::Again),
        };
        if self.alone && seq > self.expected {
            self.look_past_gap().await;
        }
        if self.alone && seq < self.expected {
            self.skip(&message).await;
            return None;
        }
        if self.alone && seq > self.expected {
            // Not acked: it comes again, after the missing one.
            stats::bump(&self.counters.held);
            return None;
        }
        self.looked = None;
        let origin = message
            .headers
            .as_ref()
            .and_then(|h| h.get(ORIGIN_HEADER))
            .map(|v| v.as_str() == self.shared.id);
        if origin == Some(true) {
            self.done(seq);
            self.skip(&message).await;
            return None;
        }
        let value = match serde_json::from_slice::<T>(&message.payload) {
            Ok(value) => value,
            Err(error) => {
                let error = Failure::text(format_args!(
                    "cannot decode stream message {seq} of `{}` as JSON: {error}",
                    self.topic
                ));
                let letter = DeadLetter::undecodable(
                    self.topic,
                    seq,
                    Arc::clone(&self.subscriber),
                    error,
                    message.payload.to_vec(),
                );
                self.bus.record_dead_letter(letter);
                stats::bump(&self.counters.dead_lettered);
                self.done(seq);
                // Terminated, so it is never sent again.
                let _ = message.ack_with(AckKind::Term).await;
                return None;
            }
        };
        let mut publish = Imported(Box::pin(self.bus.publish_async(value)));
        // Most publishes are accepted at once; one the bus makes wait gets progress acks.
        let at_once = poll_fn(|cx| match Pin::new(&mut publish).poll(cx) {
            Poll::Ready(published) => Poll::Ready(Some(published)),
            Poll::Pending => Poll::Ready(None),
        });
        let published = match at_once.await {
            Some(published) => published,
            None => {
                let mut progress = tokio::time::interval(ACK_WAIT / 3);
                progress.tick().await;
                loop {
                    tokio::select! {
                        published = &mut publish => break published,
                        _ = progress.tick() => {
                            let _ = message.ack_with(AckKind::Progress).await;
                        }
                        // Dropped unpublished (`publish_async` is cancel-safe), not acked.
                        _ = stopped.changed() => return Some(Stop::Done),
                    }
                }
            }
        };
        drop(publish);
        match published {
            Ok(_) => {
                stats::bump(&self.counters.imported);
                self.done(seq);
                self.ack(&message).await;
                None
            }
            // An inline subscriber refused it: it would refuse it again, so it is kept as a
            // dead letter (its bytes and the refusal) and terminated, never sent again.
            Err(crate::error::PublishError::Rejected { rejection, .. }) => {
                let letter = DeadLetter::undecodable(
                    self.topic,
                    seq,
                    Arc::clone(&self.subscriber),
                    Failure::text(rejection),
                    message.payload.to_vec(),
                );
                self.bus.record_dead_letter(letter);
                stats::bump(&self.counters.dead_lettered);
                self.done(seq);
                let _ = message.ack_with(AckKind::Term).await;
                None
            }
            // The bus closed (or would deadlock, which a task outside the bus cannot cause):
            // not acked, so sent again to the next run.
            Err(_) => Some(Stop::Done),
        }
    }
}

impl Importer {
    /// `seq` is handled: the next expected is after it (a copy among others may be given
    /// a lower one later, sent again from a copy that stopped).
    fn done(&mut self, seq: u64) {
        self.expected = self.expected.max(seq + 1);
    }

    /// Acks `message`, counted once the ack is sent.
    async fn ack(&self, message: &jetstream::Message) {
        if message.ack().await.is_ok() {
            stats::bump(&self.counters.acked);
        }
    }

    /// Acks `message` without publishing it: a copy already imported, or this bridge's own.
    async fn skip(&self, message: &jetstream::Message) {
        stats::bump(&self.counters.skipped);
        self.ack(message).await;
    }
}

/// An importer's `publish_async`, marked as such on the thread polling it (see
/// `message/origin.rs`).
pub(super) struct Imported<F>(Pin<Box<F>>);

impl<F: Future> Future for Imported<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        struct Unmark;
        impl Drop for Unmark {
            fn drop(&mut self) {
                crate::message::origin::set_importing(false);
            }
        }
        crate::message::origin::set_importing(true);
        let _unmark = Unmark;
        self.0.as_mut().poll(cx)
    }
}

pub(super) async fn next<S: Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    poll_fn(|cx| Pin::new(&mut *stream).poll_next(cx)).await
}
