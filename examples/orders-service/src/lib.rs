//! An orders service: axum takes `POST /orders` and publishes `OrderPlaced` with
//! `publish_async`; three subscribers handle it apart from the request:
//!
//! - `save_order` (async) writes the order through the SQLite pool the bus holds as state;
//! - `email` (async) writes the confirmation it would send into an outbox table;
//! - `count_by_customer` (sync) keeps a per-customer count in memory.
//!
//! The bus sits in axum's state beside the pool; shutting down stops HTTP first, then drains
//! the bus (every accepted order is handled), then closes the pool ([`shut_down`]).

use std::collections::HashMap;
use std::sync::Mutex;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use eventbus::{subscriber, Bus, Topic};
use serde::{Deserialize, Serialize};
use sqlx::SqlitePool;

/// What `POST /orders` publishes.
#[derive(Topic, Debug, Clone, Serialize, Deserialize)]
pub struct OrderPlaced {
    pub id: i64,
    pub customer: String,
    pub total_cents: i64,
}

/// Orders per customer, kept by the sync subscriber.
#[derive(Debug, Default)]
pub struct Counts(Mutex<HashMap<String, u64>>);

impl Counts {
    pub fn of(&self, customer: &str) -> u64 {
        let counts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        counts.get(customer).copied().unwrap_or(0)
    }
}

/// Makes the tables the subscribers write.
pub async fn migrate(pool: &SqlitePool) -> Result<(), sqlx::Error> {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS orders (
            id INTEGER PRIMARY KEY,
            customer TEXT NOT NULL,
            total_cents INTEGER NOT NULL CHECK (total_cents > 0))",
    )
    .execute(pool)
    .await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS outbox (
            order_id INTEGER PRIMARY KEY,
            body TEXT NOT NULL)",
    )
    .execute(pool)
    .await?;
    Ok(())
}

#[subscriber(capacity = 1024, retries = 2, backoff = "5ms")]
async fn save_order(
    order: &OrderPlaced,
    db: eventbus::State<SqlitePool>,
) -> Result<(), sqlx::Error> {
    // Idempotent for a redelivery, but not past the CHECK: `OR IGNORE` would skip that too.
    sqlx::query(
        "INSERT INTO orders (id, customer, total_cents) VALUES (?, ?, ?)
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(order.id)
    .bind(&order.customer)
    .bind(order.total_cents)
    .execute(&*db)
    .await?;
    Ok(())
}

#[subscriber(capacity = 1024, retries = 2, backoff = "5ms")]
async fn email(order: &OrderPlaced, db: eventbus::State<SqlitePool>) -> Result<(), sqlx::Error> {
    let body = format!(
        "Dear {}, order {} ({} cents) is placed.",
        order.customer, order.id, order.total_cents
    );
    sqlx::query("INSERT INTO outbox (order_id, body) VALUES (?, ?) ON CONFLICT DO NOTHING")
        .bind(order.id)
        .bind(body)
        .execute(&*db)
        .await?;
    Ok(())
}

#[subscriber(capacity = 1024)]
fn count_by_customer(order: &OrderPlaced, counts: &eventbus::State<Counts>) {
    let mut counts = counts.0.lock().unwrap_or_else(|e| e.into_inner());
    *counts.entry(order.customer.clone()).or_default() += 1;
}

/// The bus with this crate's subscribers, on the current tokio runtime, holding the pool
/// and the counts as its state.
pub fn bus(pool: SqlitePool) -> Bus {
    Bus::builder()
        .state(pool)
        .state(Counts::default())
        .registered_in(module_path!())
        .build()
}

/// What the handlers share: axum's state, beside which the bus sits with no ceremony.
#[derive(Clone, Debug)]
pub struct App {
    pub bus: Bus,
    pub pool: SqlitePool,
}

/// The routes: `POST /orders`, `GET /orders/count`, `GET /customers/{customer}/orders`.
pub fn router(app: App) -> Router {
    Router::new()
        .route("/orders", post(place))
        .route("/orders/count", get(count))
        .route("/customers/{customer}/orders", get(by_customer))
        .with_state(app)
}

/// `202 Accepted` with the order's seq once the bus accepted it (the subscribers have not
/// handled it yet); `503` once the bus is closing.
async fn place(
    State(app): State<App>,
    Json(order): Json<OrderPlaced>,
) -> Result<(StatusCode, String), (StatusCode, String)> {
    match app.bus.publish_async(order).await {
        Ok(seq) => Ok((StatusCode::ACCEPTED, seq.to_string())),
        Err(e) => Err((StatusCode::SERVICE_UNAVAILABLE, e.to_string())),
    }
}

async fn count(State(app): State<App>) -> Result<String, (StatusCode, String)> {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM orders")
        .fetch_one(&app.pool)
        .await
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    Ok(n.to_string())
}

async fn by_customer(State(app): State<App>, Path(customer): Path<String>) -> String {
    let counts = app.bus.state::<Counts>().expect("the bus holds the counts");
    counts.of(&customer).to_string()
}

/// Stops in the order that loses nothing: HTTP first (no new orders; `serve` has returned
/// when this is called), then the bus (every accepted order handled, or kept as a dead
/// letter), then the pool the subscribers wrote through.
pub async fn shut_down(app: App) {
    app.bus.close_async().await;
    let letters = app.bus.take_dead_letters();
    if !letters.is_empty() {
        eprintln!("{} order(s) failed; kept as dead letters:", letters.len());
        for letter in &letters {
            eprintln!("  {letter}");
        }
    }
    app.pool.close().await;
}
