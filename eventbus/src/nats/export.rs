//! Exporting a topic: an async subscriber hands each message to a sender task
//! ([`Handoff`]), which publishes it to JetStream in the topic's order, up to [`WINDOW`]
//! awaiting their acks at once ([`Sender`]).

use super::*;

/// How many exports of one topic may wait for the server's ack at once.
pub(super) const WINDOW: usize = 256;

/// One message on its way to the server.
pub(super) struct Outgoing<T> {
    pub(super) message: crate::message::Message<T>,
    /// Payload, `Nats-Msg-Id` and headers; no expectation (a resend carries none).
    pub(super) publish: PublishMessage,
    pub(super) id: Arc<str>,
    /// The topic's subject, or for a keyed export its key's partition's.
    pub(super) subject: async_nats::Subject,
}

/// A message sent, its ack to come.
pub(super) struct Sent<T> {
    pub(super) out: Outgoing<T>,
    pub(super) ack: Pin<Box<dyn Future<Output = Result<PublishAck, PublishError>> + Send>>,
}

/// What an export subscriber hands its sender: the next message, in the topic's order.
pub(super) struct Handoff<T> {
    pub(super) to_sender: tokio::sync::mpsc::Sender<Outgoing<T>>,
    /// How many messages the subscriber handed over.
    pub(super) handed: u64,
    /// How many the sender has settled (acked, or dead letters), from the sender.
    pub(super) settled: tokio::sync::watch::Receiver<u64>,
    pub(super) bus: Bus,
    /// The bridge's id, for the message ids.
    pub(super) id: Arc<str>,
    /// Where messages go: the topic's subject, or for a keyed export the partitions'
    /// subjects and the function picking one by the message's key.
    pub(super) route: Route<T>,
}

/// The subject an export sends a message on.
pub(super) enum Route<T> {
    /// The topic's subject.
    Topic(async_nats::Subject),
    /// The subject of the partition the key picks (see `keyed`).
    Keyed {
        subjects: Vec<async_nats::Subject>,
        partition: keyed::Partitioner<T>,
    },
}

impl<T: Topic + Serialize> Handoff<T> {
    /// The message with its payload, headers and subject, ready for the sender.
    fn prepare(
        &self,
        message: crate::message::Message<T>,
    ) -> Result<Outgoing<T>, serde_json::Error> {
        let subject = match &self.route {
            Route::Topic(subject) => subject.clone(),
            Route::Keyed {
                subjects,
                partition,
            } => subjects[partition(message.payload()) as usize].clone(),
        };
        let payload = serde_json::to_vec(message.payload())?;
        let seq = message.seq().to_string();
        let id: Arc<str> = format!("{}-{seq}", self.id).into();
        let publish = PublishMessage::build()
            .payload(payload.into())
            .message_id(&*id)
            .header(SEQ_HEADER, seq.as_str())
            .header(ORIGIN_HEADER, &*self.id);
        Ok(Outgoing {
            message,
            publish,
            id,
            subject,
        })
    }

    /// Serializes the message and hands it to the sender, waiting for room in its window
    /// (backpressure); once the bus is closing, also for the server's ack, so a close of
    /// the bus flushes the exports.
    pub(super) fn hand(
        &mut self,
        message: crate::message::Message<T>,
    ) -> impl Future<Output = Result<(), BoxError>> {
        // Imported: never exported again (on a log topic, where no filter could tell), and
        // neither routed nor serialized: the key function is the user's code, and need not
        // run for a message that goes nowhere.
        let prepared = (!message.is_imported()).then(|| self.prepare(message));
        self.handed += u64::from(matches!(prepared, Some(Ok(_))));
        let handed = self.handed;
        let to_sender = self.to_sender.clone();
        let mut settled = self.settled.clone();
        let bus = self.bus.worker_handle();
        async move {
            let Some(prepared) = prepared else {
                return Ok(());
            };
            let out = prepared?;
            if to_sender.send(out).await.is_err() {
                return Err("the bridge's sender has stopped".into());
            }
            if bus.is_closed() {
                let _ = settled.wait_for(|settled| *settled >= handed).await;
            }
            Ok(())
        }
    }
}

/// Sends one exported topic's messages to the server, in order, up to [`WINDOW`] of them
/// awaiting their acks at once.
///
/// The order holds with a window because each message is sent expecting the previous one
/// to be the stream's last (`Nats-Expected-Last-Msg-Id`): the server stores a message only
/// right after its predecessor, so a message lost on the way (a connection that broke) makes
/// every later one be refused, never stored ahead of it. Any failure, refusal or missing ack
/// switches to one at a time: everything not acked is sent again in order, each awaited,
/// without expectation (the `Nats-Msg-Id` makes the server drop a copy that had arrived),
/// then the window opens again. A topic exported by several processes interleaves, so
/// expectations fail and it goes one at a time more often: slower, never out of order.
pub(super) struct Sender<T> {
    pub(super) shared: Arc<Shared>,
    pub(super) topic: &'static str,
    /// The export subscriber's name and id, for dead letters.
    pub(super) name: Arc<str>,
    pub(super) subscription: u64,
    pub(super) bus: Bus,
    pub(super) window: VecDeque<Sent<T>>,
    /// The id of the last message sent in the window: the next one's expectation.
    pub(super) last_sent: Option<Arc<str>>,
    pub(super) settled: tokio::sync::watch::Sender<u64>,
    pub(super) counters: Arc<stats::ExportCounters>,
}

impl<T: Topic> Sender<T> {
    pub(super) async fn run(
        mut self,
        mut from: tokio::sync::mpsc::Receiver<Outgoing<T>>,
        mut finish: tokio::sync::watch::Receiver<bool>,
    ) {
        let (mut open, mut finishing) = (true, false);
        loop {
            if !open && self.window.is_empty() {
                return;
            }
            let (waiting, room) = (!self.window.is_empty(), self.window.len() < WINDOW);
            tokio::select! {
                biased;
                acked = front(&mut self.window), if waiting => self.settle(acked).await,
                next = from.recv(), if open && room => match next {
                    Some(out) => {
                        stats::bump(&self.counters.taken);
                        self.send(out).await
                    }
                    None => open = false,
                },
                // The subscription is gone: take what it handed over, then stop.
                _ = finish.changed(), if !finishing => {
                    finishing = true;
                    from.close();
                }
            }
        }
    }

    /// Sends `out` in the window, expecting the previous message to be the stream's last.
    pub(super) async fn send(&mut self, out: Outgoing<T>) {
        let mut publish = out.publish.clone();
        if let Some(last) = &self.last_sent {
            publish = publish.expected_last_message_id(&**last);
        }
        stats::bump(&self.counters.sent);
        let ack: Pin<Box<dyn Future<Output = _> + Send>> = match self
            .shared
            .js
            .send_publish(out.subject.clone(), publish)
            .await
        {
            Ok(ack) => ack.into_future(),
            Err(error) => Box::pin(async move { Err(error) }),
        };
        self.last_sent = Some(Arc::clone(&out.id));
        self.window.push_back(Sent { out, ack });
    }

    /// The oldest message's ack came.
    pub(super) async fn settle(&mut self, acked: Result<PublishAck, PublishError>) {
        let Some(sent) = self.window.pop_front() else {
            return;
        };
        match acked {
            Ok(_) => {
                stats::bump(&self.counters.acked);
                self.settled()
            }
            Err(error) if !transient(&error) => {
                self.dead_letter(sent.out, Failure::error(error));
                self.one_at_a_time(Vec::new()).await;
            }
            Err(_) => self.one_at_a_time(vec![sent.out]).await,
        }
    }

    /// Sends `first`, then everything still in the window, one at a time, each awaited.
    pub(super) async fn one_at_a_time(&mut self, first: Vec<Outgoing<T>>) {
        let rest: Vec<Outgoing<T>> = self.window.drain(..).map(|sent| sent.out).collect();
        for out in first.into_iter().chain(rest) {
            self.send_alone(out).await;
        }
        self.last_sent = None;
    }

    /// Sends one message and awaits its ack, again and again while the server cannot be
    /// reached, until the bridge's close gives up; a refusal makes it a dead letter.
    pub(super) async fn send_alone(&mut self, out: Outgoing<T>) {
        for attempt in 0u32.. {
            if self.shared.give_up.load(SeqCst) {
                let why = "the bridge closed before the NATS server acknowledged this export";
                return self.dead_letter(out, Failure::text(why));
            }
            let publish = out.publish.clone();
            stats::bump(&self.counters.sent);
            stats::bump(&self.counters.resent);
            let acked = match self
                .shared
                .js
                .send_publish(out.subject.clone(), publish)
                .await
            {
                Ok(ack) => ack.await,
                Err(error) => Err(error),
            };
            match acked {
                Ok(_) => {
                    stats::bump(&self.counters.acked);
                    return self.settled();
                }
                Err(error) if !transient(&error) => {
                    return self.dead_letter(out, Failure::error(error))
                }
                Err(error) => {
                    if error.kind() == PublishErrorKind::StreamNotFound {
                        // A server started afresh, or the stream deleted: make it again.
                        let _ = self.shared.ensure_stream(self.topic).await;
                    }
                }
            }
            tokio::time::sleep(backoff(attempt)).await;
        }
    }

    pub(super) fn settled(&self) {
        self.settled.send_modify(|settled| *settled += 1);
    }

    /// A message that cannot be sent: a dead letter of the export subscriber, with its value.
    pub(super) fn dead_letter(&self, out: Outgoing<T>, error: Failure) {
        let letter = DeadLetter::new(
            out.message,
            self.subscription,
            Arc::clone(&self.name),
            error,
            1,
        );
        self.bus.record_dead_letter(letter);
        stats::bump(&self.counters.dead_lettered);
        self.settled();
    }
}

/// The oldest message's ack (the window is not empty when this is polled).
pub(super) async fn front<T>(window: &mut VecDeque<Sent<T>>) -> Result<PublishAck, PublishError> {
    match window.front_mut() {
        Some(sent) => sent.ack.as_mut().await,
        None => std::future::pending().await,
    }
}

/// Whether a failed send may succeed if sent again: the server cannot be reached or has not
/// answered, no stream answers, or the stream's last message was not the one expected.
pub(super) fn transient(error: &PublishError) -> bool {
    matches!(
        error.kind(),
        PublishErrorKind::TimedOut
            | PublishErrorKind::BrokenPipe
            | PublishErrorKind::MaxAckPending
            | PublishErrorKind::StreamNotFound
            | PublishErrorKind::WrongLastMessageId
    )
}

/// The wait before try number `attempt` (from 0): doubling from 50 ms to at most 2 s.
pub(super) fn backoff(attempt: u32) -> Duration {
    BACKOFF.0.saturating_mul(1 << attempt.min(8)).min(BACKOFF.1)
}
