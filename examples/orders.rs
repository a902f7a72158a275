//! A small shop on the bus: an order service publishing from several threads, an email sender
//! that is slow, a warehouse of four workers (a consumer group: one customer's orders stay in
//! order on one worker) that fails now and then, an audit observer of every `orders.*` topic,
//! and a price feed that keeps only the latest prices. Prints the stats table, each warehouse
//! worker's share and the dead letters on close.
//!
//! Run it with `cargo run --example orders`. With `-- --dashboard` (and feature
//! `dashboard`) it keeps trading with the live page up until Ctrl-C.

mod shop;

use std::sync::atomic::Ordering;
use std::thread;

use eventbus::Bus;
use shop::{OrderPlaced, PriceTick, AUDITED};

fn main() {
    if std::env::args().any(|arg| arg == "--dashboard") {
        return dashboard::run();
    }
    let bus = Bus::new();

    thread::scope(|scope| {
        for desk in 0..3u64 {
            let bus = bus.clone();
            scope.spawn(move || {
                for n in 0..100u64 {
                    bus.publish(shop::order(desk * 1000 + n, n % 17))
                        .expect("the bus is open");
                }
            });
        }
        let feed = bus.clone();
        scope.spawn(move || {
            for cents in 0..2_000 {
                feed.publish(PriceTick {
                    symbol: "ACME",
                    cents: 10_000 + cents,
                })
                .expect("the bus is open");
            }
        });
    });

    bus.close();

    let stats = bus.stats();
    println!();
    println!("{stats}");
    println!();
    if let Some(warehouse) = stats.subscriptions.iter().find(|s| s.name == "warehouse") {
        for worker in &warehouse.workers {
            println!(
                "warehouse worker {}: {} received, {} delivered, {} dead",
                worker.index, worker.received, worker.delivered, worker.dead_lettered
            );
        }
    }
    println!("audit saw {} order(s)", AUDITED.load(Ordering::Relaxed));
    println!();
    // Kept in the order they failed, which four workers make a shuffle: shown in topic order.
    let mut letters = bus.dead_letters();
    letters.sort_by_key(|letter| (letter.topic(), letter.seq()));
    println!("{} dead letter(s), in topic order:", letters.len());
    for letter in letters.iter().take(10) {
        match letter.payload::<OrderPlaced>() {
            Some(order) => println!("  {letter} (order {})", order.id),
            None => println!("  {letter}"),
        }
    }
    if letters.len() > 10 {
        println!("  ... and {} more", letters.len() - 10);
    }
}

/// `--dashboard`: the same shop, trading at a steady pace, with the live page up until Ctrl-C.
#[cfg(feature = "dashboard")]
mod dashboard {
    use std::time::Duration;

    use super::*;

    pub(super) fn run() {
        let addr = std::env::var("EVENTBUS_DASHBOARD_ADDR").unwrap_or("127.0.0.1:9000".into());
        let bus = Bus::new();
        let page = match eventbus::dashboard::serve(&bus, addr.as_str()) {
            Ok(page) => page,
            Err(error) => {
                eprintln!(
                    "cannot serve the dashboard on {addr}: {error} (set EVENTBUS_DASHBOARD_ADDR)"
                );
                std::process::exit(1);
            }
        };
        println!("dashboard at {} — Ctrl-C to stop", page.url());
        for n in 0u64.. {
            shop::trade(&bus, n);
            thread::sleep(Duration::from_millis(25));
        }
    }
}

/// `--dashboard` without the feature: says how to get it.
#[cfg(not(feature = "dashboard"))]
mod dashboard {
    pub(super) fn run() {
        eprintln!(
            "--dashboard needs feature `dashboard`: \
             cargo run --example orders --features dashboard -- --dashboard"
        );
        std::process::exit(2);
    }
}
