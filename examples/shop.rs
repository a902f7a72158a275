//! The shop of the orders demo: its topics, subscribers and observer, and one step of its
//! trading. `orders.rs` runs it; `tests/it/dashboard.rs` includes this file too, to
//! take the README's screenshot of the live page from the demo itself (so a change to the
//! shop that the screenshot does not show fails that test).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use eventbus::{observer, subscriber, AnyMessage, Bus, Message, Topic};

#[derive(Topic, Debug, Clone)]
#[topic(name = "orders.placed")]
pub(crate) struct OrderPlaced {
    pub(crate) id: u64,
    pub(crate) customer: u64,
    pub(crate) items: u32,
}

#[derive(Topic, Debug, Clone)]
#[topic(name = "warehouse.reserved")]
pub(crate) struct StockReserved {
    pub(crate) order: u64,
}

#[derive(Topic, Debug, Clone)]
#[topic(name = "prices.tick")]
pub(crate) struct PriceTick {
    pub(crate) symbol: &'static str,
    pub(crate) cents: u64,
}

#[derive(Debug)]
pub(crate) enum WarehouseError {
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

pub(crate) static AUDITED: AtomicU64 = AtomicU64::new(0);

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

/// One step of steady trading, as the live demo does it: an order and twenty price ticks.
#[cfg_attr(not(feature = "dashboard"), allow(dead_code))] // only `--dashboard` trades steadily
pub(crate) fn trade(bus: &Bus, n: u64) {
    bus.publish(order(10_000 + n, n % 17))
        .expect("the bus is open");
    for cents in 0..20 {
        bus.publish(PriceTick {
            symbol: "ACME",
            cents: 10_000 + (n * 20 + cents) % 500,
        })
        .expect("the bus is open");
    }
}

/// An order of the demo's: its size follows from its id (over nine items is out of stock).
pub(crate) fn order(id: u64, customer: u64) -> OrderPlaced {
    OrderPlaced {
        id,
        customer,
        items: u32::try_from((id * 7) % 12).unwrap_or(0),
    }
}
