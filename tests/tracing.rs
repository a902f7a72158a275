//! The `tracing` feature: a span per delivery attempt, `warn` events for drops and dead
//! letters and for the first publish to a topic that never had a subscriber, an `info` event
//! on close. Run with `--features tracing`.

use std::io::Write;
use std::sync::{Arc, Mutex};

use eventbus::{Bus, Message, Options, Overflow, Topic};

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

#[test]
fn attempts_drops_dead_letters_and_the_close_are_traced() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();

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
