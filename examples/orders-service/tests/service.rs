//! The service end to end: requests into the router (no socket), a real SQLite database in a
//! temporary file, the bus's real subscribers.

use std::str::FromStr;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use orders_service::{bus, migrate, router, shut_down, App};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::SqlitePool;
use tower::ServiceExt;

/// A database file of its own for each test, removed at the end.
struct Database(std::path::PathBuf);

impl Database {
    fn new(name: &str) -> Self {
        let file =
            std::env::temp_dir().join(format!("orders-service-{name}-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&file);
        Database(file)
    }

    async fn pool(&self) -> SqlitePool {
        let url = format!("sqlite://{}", self.0.display());
        let options = SqliteConnectOptions::from_str(&url)
            .unwrap()
            .create_if_missing(true);
        let pool = SqlitePoolOptions::new()
            .connect_with(options)
            .await
            .unwrap();
        migrate(&pool).await.unwrap();
        pool
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}

async fn post_order(app: &App, id: i64, customer: &str, total_cents: i64) -> StatusCode {
    let body = serde_json::json!({ "id": id, "customer": customer, "total_cents": total_cents });
    let request = Request::post("/orders")
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    router(app.clone()).oneshot(request).await.unwrap().status()
}

async fn saved(pool: &SqlitePool, table: &str) -> Vec<i64> {
    let query = match table {
        "orders" => "SELECT id FROM orders ORDER BY id",
        _ => "SELECT order_id FROM outbox ORDER BY order_id",
    };
    sqlx::query_as::<_, (i64,)>(query)
        .fetch_all(pool)
        .await
        .unwrap()
        .into_iter()
        .map(|(id,)| id)
        .collect()
}

/// Shutting down in order (HTTP stopped, then the bus drained, then the pool closed) loses
/// no accepted order: each is in both tables and counted, however many were still queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutting_down_in_order_handles_every_accepted_order() {
    let database = Database::new("shutdown");
    let pool = database.pool().await;
    let app = App {
        bus: bus(pool.clone()),
        pool: pool.clone(),
    };
    let ids: Vec<i64> = (1..=300).collect();
    for &id in &ids {
        let customer = if id % 3 == 0 { "ada" } else { "bob" };
        assert_eq!(
            post_order(&app, id, customer, 100 + id).await,
            StatusCode::ACCEPTED
        );
    }
    let counts = app.bus.state::<orders_service::Counts>().unwrap();
    shut_down(app.clone()).await;
    assert!(pool.is_closed());
    // The pool is closed: read the file again through a new one.
    let pool = database.pool().await;
    assert_eq!(saved(&pool, "orders").await, ids);
    assert_eq!(saved(&pool, "outbox").await, ids);
    assert_eq!((counts.of("ada"), counts.of("bob")), (100, 200));
    // After the close, the service refuses new orders rather than losing them.
    assert_eq!(
        post_order(&app, 301, "ada", 1).await,
        StatusCode::SERVICE_UNAVAILABLE
    );
}

/// An order the database refuses (its CHECK constraint) is retried, then kept as a dead
/// letter with its error, never lost: the service can persist it and publish it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_the_database_refuses_becomes_a_dead_letter() {
    let database = Database::new("refused");
    let pool = database.pool().await;
    let app = App {
        bus: bus(pool.clone()),
        pool: pool.clone(),
    };
    assert_eq!(post_order(&app, 1, "ada", 500).await, StatusCode::ACCEPTED);
    assert_eq!(post_order(&app, 2, "ada", -5).await, StatusCode::ACCEPTED);
    app.bus.close_async().await;
    let letters = app.bus.take_dead_letters();
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0];
    assert_eq!(letter.subscriber(), "orders_service::save_order");
    assert!(
        letter.error().contains("CHECK constraint"),
        "{}",
        letter.error()
    );
    let order = letter.message::<orders_service::OrderPlaced>().unwrap();
    assert_eq!(order.id, 2);
    assert_eq!(saved(&pool, "orders").await, [1]);
    assert_eq!(saved(&pool, "outbox").await, [1, 2]);
}

/// Publish → `wait_idle_async()` → assert, with the service still running: no sleep, no
/// polling, and no close needed to see what the subscribers did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_order_is_saved_once_the_bus_is_idle() {
    let database = Database::new("idle");
    let pool = database.pool().await;
    let app = App {
        bus: bus(pool.clone()),
        pool: pool.clone(),
    };
    for id in 1..=20 {
        assert_eq!(post_order(&app, id, "ada", 100).await, StatusCode::ACCEPTED);
    }
    app.bus.wait_idle_async().await;
    let ids: Vec<i64> = (1..=20).collect();
    assert_eq!(saved(&pool, "orders").await, ids);
    assert_eq!(saved(&pool, "outbox").await, ids);
    let counts = app.bus.state::<orders_service::Counts>().unwrap();
    assert_eq!(counts.of("ada"), 20);
    // Still open: another order goes through the same way.
    assert_eq!(post_order(&app, 21, "ada", 100).await, StatusCode::ACCEPTED);
    app.bus.wait_idle_async().await;
    assert_eq!(saved(&pool, "orders").await.len(), 21);
    shut_down(app).await;
}
