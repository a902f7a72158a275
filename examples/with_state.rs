//! A handler with shared state: an inventory "database" given to the builder once and taken
//! by the subscriber as `State<Inventory>`, beside the `&Bus` it publishes with.
//!
//! Run it with `cargo run --example with_state`.

use std::collections::HashMap;
use std::sync::Mutex;

use eventbus::{subscriber, Bus, State, Topic};

#[derive(Topic, Debug)]
pub struct OrderPlaced {
    pub id: u64,
    pub sku: &'static str,
    pub quantity: u32,
}

#[derive(Topic, Debug)]
pub struct OutOfStock {
    pub order: u64,
    pub sku: &'static str,
}

/// Stands in for a database pool.
#[derive(Debug)]
pub struct Inventory(Mutex<HashMap<&'static str, u32>>);

#[derive(Debug)]
pub struct InventoryError(String);

impl std::fmt::Display for InventoryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[subscriber(retries = 3, backoff = "1ms", name = "reserve")]
fn reserve(order: &OrderPlaced, stock: State<Inventory>, bus: &Bus) -> Result<(), InventoryError> {
    let mut stock = stock
        .0
        .lock()
        .map_err(|_| InventoryError("poisoned".into()))?;
    let left = stock
        .get_mut(order.sku)
        .ok_or_else(|| InventoryError(format!("unknown sku {}", order.sku)))?;
    if *left < order.quantity {
        drop(stock);
        bus.publish(OutOfStock {
            order: order.id,
            sku: order.sku,
        })
        .map_err(|e| InventoryError(e.to_string()))?;
        return Ok(());
    }
    *left -= order.quantity;
    Ok(())
}

#[subscriber(name = "notify")]
fn notify(out: &OutOfStock) {
    println!("order {} waits: {} is out of stock", out.order, out.sku);
}

fn main() {
    let inventory = Inventory(Mutex::new(HashMap::from([("mug", 3), ("tee", 10)])));
    let bus = Bus::builder().state(inventory).registered().build();
    let orders = [("mug", 2), ("tee", 4), ("mug", 2), ("hat", 1), ("tee", 6)];
    for (id, (sku, quantity)) in (1..).zip(orders) {
        bus.publish(OrderPlaced { id, sku, quantity }).unwrap();
    }
    bus.close();

    let stock = bus.state::<Inventory>().unwrap();
    let mut left: Vec<_> = stock
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|(k, v)| (*k, *v))
        .collect();
    left.sort_unstable();
    println!("stock left: {left:?}");
    for letter in bus.dead_letters() {
        println!("dead letter: {letter}");
    }
}
