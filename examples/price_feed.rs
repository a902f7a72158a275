//! A price feed that keeps only the latest prices: a fast publisher, a slow display with a
//! small `DropOldest` mailbox. The display never holds the feed up; what it skipped is counted.
//!
//! Run it with `cargo run --example price_feed`.

use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use eventbus::{subscriber, Bus, Message, Topic};

#[derive(Topic, Debug)]
#[topic(name = "prices.acme")]
pub struct Price {
    pub cents: u64,
}

static SHOWN: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

/// Slow: a screen redraw per price. Four slots, oldest make way.
#[subscriber(capacity = 4, overflow = DropOldest, name = "display")]
fn display(price: &Message<Price>) {
    thread::sleep(Duration::from_millis(5));
    SHOWN.lock().unwrap().push((price.seq(), price.cents));
}

fn main() {
    let bus = Bus::new();
    for tick in 0..500u64 {
        bus.publish(Price {
            cents: 10_000 + (tick * 37) % 250,
        })
        .expect("the bus is open");
        thread::sleep(Duration::from_micros(100));
    }
    bus.close();

    let shown = SHOWN.lock().unwrap();
    let stats = bus.stats();
    let display = &stats.subscriptions[0];
    println!(
        "published 500 prices; the display showed {} and skipped {} (dropped oldest)",
        display.delivered, display.dropped
    );
    println!("last shown: seq {:?}", shown.last());
    println!("\n{stats}");
}
