//! The `tracing` feature: a span per delivery attempt (held across an async handler's awaits,
//! and following from the span current where its message was published), `warn` events for
//! drops and dead letters and for the first publish to a topic that never had a subscriber,
//! an `info` event on close. Run with `--features tracing` (and `tokio` for the async test).

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use eventbus::{Bus, Message, Options, Overflow, Topic};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

#[derive(Topic, Debug, Clone, Copy)]
struct Tick(u64);

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A span as the recording layer saw it made: its name and its fields as text.
#[derive(Clone, Debug, PartialEq)]
struct Seen {
    name: &'static str,
    fields: String,
}

/// What the recording layer saw: each event with the span current for it, and each
/// `follows_from` link, both as the spans were at that moment (ids are reused once a span
/// closes, so they are resolved when recorded, never later).
#[derive(Default)]
struct Recorded {
    spans: Mutex<HashMap<Id, Seen>>,
    events: Mutex<Vec<(String, Option<Seen>)>>,
    links: Mutex<Vec<(Seen, Seen)>>,
}

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if !self.0.is_empty() {
            self.0.push(' ');
        }
        self.0.push_str(&format!("{}={:?}", field.name(), value));
    }
}

struct Recorder(&'static Recorded);

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attributes: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut fields = Fields(String::new());
        attributes.record(&mut fields);
        let seen = Seen {
            name: attributes.metadata().name(),
            fields: fields.0,
        };
        self.0.spans.lock().unwrap().insert(id.clone(), seen);
    }

    fn on_follows_from(&self, span: &Id, follows: &Id, _: Context<'_, S>) {
        let spans = self.0.spans.lock().unwrap();
        if let (Some(span), Some(follows)) = (spans.get(span), spans.get(follows)) {
            let link = (span.clone(), follows.clone());
            self.0.links.lock().unwrap().push(link);
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, context: Context<'_, S>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        let current = context
            .event_span(event)
            .and_then(|span| self.0.spans.lock().unwrap().get(&span.id()).cloned());
        self.0.events.lock().unwrap().push((fields.0, current));
    }
}

/// The process's one global subscriber: the `fmt` output into a buffer, and the recording
/// layer. Installed by the first test that asks; the tests look only at what is theirs.
fn global() -> &'static (Captured, Recorded) {
    static GLOBAL: OnceLock<(Captured, Recorded)> = OnceLock::new();
    static INSTALLED: OnceLock<()> = OnceLock::new();
    let global = GLOBAL.get_or_init(Default::default);
    INSTALLED.get_or_init(|| {
        let writer = global.0.clone();
        let fmt = tracing_subscriber::fmt::layer()
            .with_writer(move || writer.clone())
            .with_ansi(false);
        let subscriber = tracing_subscriber::registry()
            .with(fmt)
            .with(Recorder(&global.1));
        tracing::subscriber::set_global_default(subscriber).unwrap();
    });
    global
}

#[test]
fn attempts_drops_dead_letters_and_the_close_are_traced() {
    let captured = &global().0;

    let bus = Bus::builder().build();
    let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(0);
    let (started_tx, started_rx) = crossbeam_channel::bounded::<()>(1);
    bus.subscribe::<Tick>(
        Options::default()
            .name("ticker")
            .capacity(1)
            .overflow(Overflow::DropNewest),
        move |m: &Message<Tick>| {
            tracing::info!("handling");
            if m.0 == 0 {
                started_tx.send(()).unwrap();
                let _ = release_rx.recv();
                return Err("tick zero is bad");
            }
            Ok(())
        },
    );
    bus.publish(Tick(0)).unwrap();
    started_rx.recv().unwrap();
    bus.publish(Tick(1)).unwrap();
    bus.publish(Tick(2)).unwrap(); // dropped: the one slot holds 1
    drop(release_tx);
    bus.close();

    let text = captured.text();
    let has = |needle: &str| text.lines().any(|line| line.contains(needle));
    assert!(
        has("eventbus.attempt{topic=\"Tick\" seq=0 subscriber=\"ticker\" attempt=1}"),
        "{text}"
    );
    assert!(
        has("WARN") && has("eventbus: message dropped") && has("seq=2"),
        "{text}"
    );
    assert!(
        has("eventbus: dead letter") && has("error=\"tick zero is bad\""),
        "{text}"
    );
    assert!(
        has("INFO") && has("eventbus: closed") && has("delivered=1"),
        "{text}"
    );
}

/// Issue 18: a publish that no subscriber hears, because none ever subscribed (say, their
/// crate was not linked in), is a `warn`, once per topic, naming the topic and the likely
/// cause. A topic that has had a subscriber is quiet, even when it has none left.
#[test]
fn the_first_publish_to_a_topic_never_subscribed_to_warns_once() {
    #[derive(Topic)]
    #[topic(name = "audit.unheard")]
    struct Unheard;

    #[derive(Topic)]
    #[topic(name = "audit.heard")]
    struct Heard;

    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    // Scoped to this thread, which is the one that publishes, so that the other test's
    // global subscriber neither gets these events nor adds its own here.
    tracing::subscriber::with_default(subscriber, || {
        let bus = Bus::builder().build();
        bus.publish(Unheard).unwrap();
        bus.publish(Unheard).unwrap();
        let heard = bus.subscribe::<Heard>(Options::default(), |_: &Message<Heard>| {});
        bus.publish(Heard).unwrap();
        heard.unsubscribe();
        bus.publish(Heard).unwrap(); // no subscriber now, but it had one
        bus.close();
    });

    let text = captured.text();
    let warnings: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("WARN") && line.contains("never had a subscriber"))
        .collect();
    assert_eq!(warnings.len(), 1, "{text}");
    let warning = warnings[0];
    assert!(warning.contains("topic=\"audit.unheard\""), "{warning}");
    assert!(warning.contains("`use handlers as _;`"), "{warning}");
    assert!(!text.contains("audit.heard"), "{text}");
}

/// Issue 32: a thread subscriber's attempt span follows from the span that was current where
/// its message was published, so a trace goes on past the bus.
#[test]
fn a_thread_attempt_follows_from_the_span_that_published_its_message() {
    #[derive(Topic, Debug)]
    #[topic(name = "trace.thread")]
    struct Placed(u64);

    let recorded = &global().1;
    let bus = Bus::builder().build();
    bus.subscribe::<Placed>(Options::default().name("counter"), |m: &Message<Placed>| {
        tracing::info!(placed = m.0, "counted");
    });
    tracing::info_span!("http.request", path = "/thread").in_scope(|| {
        bus.publish(Placed(7)).unwrap();
    });
    bus.close();

    let attempt = Seen {
        name: "eventbus.attempt",
        fields: "topic=\"trace.thread\" seq=0 subscriber=\"counter\" attempt=1".into(),
    };
    let request = Seen {
        name: "http.request",
        fields: "path=\"/thread\"".into(),
    };
    let links = recorded.links.lock().unwrap().clone();
    assert!(links.contains(&(attempt.clone(), request)), "{links:#?}");
    let events = recorded.events.lock().unwrap().clone();
    let counted = events
        .iter()
        .find(|(fields, _)| fields.contains("placed=7"));
    assert_eq!(
        counted.map(|(_, span)| span.clone()),
        Some(Some(attempt)),
        "{events:#?}"
    );
}

/// Issue 32: each attempt of an async subscriber runs inside its own `eventbus.attempt` span,
/// the same fields as a thread subscriber's, current across the handler's awaits (which may
/// resume on another thread), and following from the publisher's span.
/// A runtime of two workers, for the async subscribers' tests.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn an_async_attempt_is_a_span_across_its_awaits_that_follows_from_the_publisher() {
    use tracing::Instrument;

    #[derive(Topic, Debug)]
    #[topic(name = "trace.async")]
    struct Saved(u64);

    let recorded = &global().1;
    let runtime = runtime();
    runtime.block_on(async {
        let bus = Bus::builder().build();
        let attempts = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let options = Options::default()
            .name("saver")
            .retries(1)
            .backoff(std::time::Duration::from_millis(1));
        bus.subscribe_async(options, move |m: Message<Saved>| {
            let attempts = Arc::clone(&attempts);
            async move {
                tracing::info!(saved = m.0, "before the await");
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                tokio::task::yield_now().await;
                tracing::info!(saved = m.0, "after the await");
                let attempt = attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if attempt == 0 {
                    return Err("the database was busy");
                }
                Ok(())
            }
        });
        // Not current between polls: an event of the publisher's own task is outside it.
        let request = tracing::info_span!("http.request", path = "/async");
        bus.publish_async(Saved(9))
            .instrument(request)
            .await
            .unwrap();
        tracing::info!("between");
        bus.close_async().await;
    });

    let attempt = |n: u32| Seen {
        name: "eventbus.attempt",
        fields: format!("topic=\"trace.async\" seq=0 subscriber=\"saver\" attempt={n}"),
    };
    let events = recorded.events.lock().unwrap().clone();
    let ours: Vec<(&str, Option<Seen>)> = events
        .into_iter()
        .filter(|(fields, _)| fields.contains("saved=9"))
        .map(|(fields, span)| {
            let when = if fields.contains("before") {
                "before"
            } else {
                "after"
            };
            (when, span)
        })
        .collect();
    let expected = vec![
        ("before", Some(attempt(1))),
        ("after", Some(attempt(1))),
        ("before", Some(attempt(2))),
        ("after", Some(attempt(2))),
    ];
    assert_eq!(ours, expected);
    let request = Seen {
        name: "http.request",
        fields: "path=\"/async\"".into(),
    };
    let links = recorded.links.lock().unwrap().clone();
    for n in [1, 2] {
        assert!(links.contains(&(attempt(n), request.clone())), "{links:#?}");
    }
}

#[test]
fn an_async_observers_attempt_is_a_span_across_its_awaits_that_follows_from_the_publisher() {
    use tracing::Instrument;

    #[derive(Topic, Debug)]
    #[topic(name = "trace.observed")]
    struct Audited;

    let recorded = &global().1;
    let runtime = runtime();
    runtime.block_on(async {
        let bus = Bus::builder().build();
        let options = Options::default().name("auditor");
        bus.observe_async(
            "trace.observed",
            options,
            |_m: eventbus::AnyMessage| async {
                tracing::info!(audit = 7, "before the await");
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                tokio::task::yield_now().await;
                tracing::info!(audit = 7, "after the await");
            },
        )
        .unwrap();
        let request = tracing::info_span!("http.request", path = "/observed");
        bus.publish_async(Audited)
            .instrument(request)
            .await
            .unwrap();
        bus.close_async().await;
    });

    let attempt = Seen {
        name: "eventbus.attempt",
        fields: "topic=\"trace.observed\" seq=0 subscriber=\"auditor\" attempt=1".into(),
    };
    let events = recorded.events.lock().unwrap().clone();
    let ours: Vec<Option<Seen>> = events
        .into_iter()
        .filter(|(fields, _)| fields.contains("audit=7"))
        .map(|(_, span)| span)
        .collect();
    assert_eq!(ours, vec![Some(attempt.clone()), Some(attempt.clone())]);
    let request = Seen {
        name: "http.request",
        fields: "path=\"/observed\"".into(),
    };
    let links = recorded.links.lock().unwrap().clone();
    assert!(links.contains(&(attempt, request)), "{links:#?}");
}
