//! The `tracing` feature: a span per delivery attempt, `warn` events for drops and dead
//! letters, an `info` event on close. Run with `--features tracing`.

use std::io::Write;
use std::sync::{Arc, Mutex};

use eventbus::{Bus, Message, Options, Overflow, Topic};

#[derive(Topic, Debug, Clone, Copy)]
struct Tick(u64);

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

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

    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
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
