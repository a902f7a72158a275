//! A tokio service: async subscribers with shared state (a stand-in for a database pool),
//! `publish_async` from request-handling tasks, a subscription read as a stream, a clean
//! `close_async`, and the stats table.
//!
//! Run it with `cargo run --example async_orders --features tokio`.

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use eventbus::{subscriber, Bus, Message, Options, State, Topic};
use futures_core::Stream;

#[derive(Topic, Debug)]
#[topic(name = "orders.placed")]
pub struct OrderPlaced {
    pub id: u64,
    pub cents: u64,
}

#[derive(Topic, Debug)]
#[topic(name = "orders.saved")]
pub struct OrderSaved {
    pub id: u64,
}

/// Stands in for a database pool: every query awaits.
#[derive(Default, Debug)]
pub struct Db {
    rows: Mutex<Vec<(u64, u64)>>,
}

impl Db {
    async fn insert(&self, id: u64, cents: u64) -> Result<(), DbError> {
        tokio::time::sleep(Duration::from_millis(1)).await;
        if cents == 0 {
            return Err(DbError(format!(
                "order {id}: an order of 0 cents is refused"
            )));
        }
        self.rows
            .lock()
            .map_err(|_| DbError("poisoned".into()))?
            .push((id, cents));
        Ok(())
    }
}

#[derive(Debug)]
pub struct DbError(String);

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DbError {}

#[subscriber(capacity = 100, retries = 2, backoff = "5ms", name = "save_order")]
async fn save_order(order: &OrderPlaced, db: State<Db>, bus: &Bus) -> Result<(), DbError> {
    db.insert(order.id, order.cents).await?;
    bus.publish_async(OrderSaved { id: order.id }).await.ok();
    Ok(())
}

#[subscriber(name = "email")]
async fn email(saved: &Message<OrderSaved>) {
    tokio::time::sleep(Duration::from_millis(2)).await;
    println!("email: order {} saved (#{})", saved.id, saved.seq());
}

fn here() -> &'static str {
    module_path!()
}

#[tokio::main]
async fn main() {
    // Takes the current runtime; starts this example's two subscribers.
    let bus = Bus::builder()
        .state(Db::default())
        .registered_in(here())
        .build();
    // A dashboard reads saved orders as a stream.
    let mut saved = bus.stream::<OrderSaved>(Options::default().name("dashboard"));
    let dashboard = tokio::spawn(async move {
        let mut count = 0;
        while let Some(order) = poll_fn(|cx| Pin::new(&mut saved).poll_next(cx)).await {
            count += 1;
            println!("dashboard: {count} saved so far (latest {})", order.id);
        }
        count
    });
    // Request handlers: tasks that publish without blocking a runtime thread.
    let requests: Vec<_> = (0..4)
        .map(|client| {
            let bus = bus.clone();
            tokio::spawn(async move {
                for n in 0..5u64 {
                    let id = client * 100 + n;
                    let cents = if id == 102 { 0 } else { 1_000 + id };
                    bus.publish_async(OrderPlaced { id, cents }).await.unwrap();
                }
            })
        })
        .collect();
    for request in requests {
        request.await.unwrap();
    }
    bus.close_async().await;
    let shown = dashboard.await.unwrap();
    println!("\n{}\n", bus.stats());
    for letter in bus.dead_letters() {
        println!("dead letter: {letter}");
    }
    let rows = bus.state::<Db>().unwrap().rows.lock().unwrap().len();
    println!("saved {rows} orders; the dashboard saw {shown}");
}
