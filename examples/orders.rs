//! A small shop on the bus: an order service publishing from several threads, an email sender
//! that is slow, a warehouse of four workers (a consumer group: one customer's orders stay in
//! order on one worker) that fails now and then, an audit observer of every `orders.*` topic,
//! and a price feed that keeps only the latest prices. Prints the stats table, each warehouse
//! worker's share and the dead letters on close.
//!
//! Run it with `cargo run --example orders`. With `-- --dashboard` (and feature
//! `dashboard`) it keeps trading with the live page up until Ctrl-C.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use eventbus::{observer, subscriber, AnyMessage, Bus, Message, Topic};

#[derive(Topic, Debug, Clone)]
#[topic(name = "orders.placed")]
pub struct OrderPlaced {
    pub id: u64,
    pub customer: u64,
    pub items: u32,
}

#[derive(Topic, Debug, Clone)]
#[topic(name = "warehouse.reserved")]
pub struct StockReserved {
    pub order: u64,
}

#[derive(Topic, Debug, Clone)]
#[topic(name = "prices.tick")]
pub struct PriceTick {
    pub symbol: &'static str,
    pub cents: u64,
}

#[derive(Debug)]
pub enum WarehouseError {
    Busy,
    OutOfStock { items: u32 },
}

impl std::fmt::Display for WarehouseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WarehouseError::Busy => f.write_str("warehouse busy, try again"),
            WarehouseError::OutOfStock { items } => write!(f, "out of stock for {items} items"),
        }
    }
}

/// Slow: every email takes a few milliseconds. It has a big mailbox and `Block`, so orders
/// wait for it rather than lose an email.
#[subscriber(capacity = 512, name = "email")]
fn send_email(order: &OrderPlaced) {
    thread::sleep(Duration::from_millis(2));
    let _ = order.customer;
}

/// Orders the warehouse has already been "busy" for once.
static BUSY_ONCE: Mutex<BTreeSet<u64>> = Mutex::new(BTreeSet::new());

fn customer_of(order: &OrderPlaced) -> u64 {
    order.customer
}

/// Four workers, one mailbox each; a customer's orders always go to the same one, in order.
/// Fails now and then: every fifth order is "busy" at its first attempt (a retry fixes it);
/// orders of more than nine items are out of stock (no retry helps, so they become dead
/// letters).
#[subscriber(workers = 4, key = customer_of, capacity = 256, retries = 2, backoff = "1ms", name = "warehouse")]
fn reserve_stock(order: &Message<OrderPlaced>, bus: &Bus) -> Result<(), WarehouseError> {
    if order.id % 5 == 4 && BUSY_ONCE.lock().unwrap().insert(order.id) {
        return Err(WarehouseError::Busy);
    }
    if order.items > 9 {
        return Err(WarehouseError::OutOfStock { items: order.items });
    }
    bus.publish(StockReserved { order: order.id })
        .map(|_| ())
        .map_err(|_| WarehouseError::Busy)
}

#[subscriber(name = "shipping")]
fn ship(reserved: &StockReserved) {
    let _ = reserved.order;
}

static AUDITED: AtomicU64 = AtomicU64::new(0);

/// Sees every order topic (`orders.placed`, and any `orders.*` added later), each in its
/// topic's order. An audit trail must not slow the shop: it drops its oldest if it falls
/// behind, and says how many in the stats.
#[observer("orders.*", capacity = 1000, overflow = DropOldest, name = "audit")]
fn audit(m: &AnyMessage) {
    if AUDITED.fetch_add(1, Ordering::Relaxed) < 3 {
        println!("audit: {} #{}: {:?}", m.topic(), m.seq(), m);
    }
}

/// A display that only cares about the latest prices: a tiny mailbox that drops the oldest.
#[subscriber(capacity = 4, overflow = DropOldest, name = "ticker")]
fn show_price(tick: &PriceTick) {
    thread::sleep(Duration::from_micros(200));
    let _ = (tick.symbol, tick.cents);
}

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
                    let id = desk * 1000 + n;
                    let items = u32::try_from((id * 7) % 12).unwrap_or(0);
                    bus.publish(OrderPlaced {
                        id,
                        customer: n % 17,
                        items,
                    })
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
            let id = 10_000 + n;
            let items = u32::try_from((id * 7) % 12).unwrap_or(0);
            bus.publish(OrderPlaced {
                id,
                customer: n % 17,
                items,
            })
            .expect("the bus is open");
            for cents in 0..20 {
                bus.publish(PriceTick {
                    symbol: "ACME",
                    cents: 10_000 + (n * 20 + cents) % 500,
                })
                .expect("the bus is open");
            }
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
