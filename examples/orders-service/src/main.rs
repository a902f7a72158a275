//! `cargo run -p orders-service [-- ADDRESS [DATABASE]]` (default `127.0.0.1:3000` and
//! `sqlite://orders.db`), then
//! `curl -X POST localhost:3000/orders -H 'content-type: application/json' -d '{"id":1,"customer":"ada","total_cents":1250}'`.
//! Ctrl-C (or SIGTERM) stops it in order: HTTP, then the bus, then the pool.

use std::str::FromStr;

use orders_service::{bus, migrate, router, shut_down, App};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("orders-service: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let address = args.next().unwrap_or_else(|| "127.0.0.1:3000".into());
    let database = args.next().unwrap_or_else(|| "sqlite://orders.db".into());
    let options = SqliteConnectOptions::from_str(&database)?.create_if_missing(true);
    let pool = SqlitePoolOptions::new().connect_with(options).await?;
    migrate(&pool).await?;
    let app = App {
        bus: bus(pool.clone()),
        pool,
    };
    let listener = tokio::net::TcpListener::bind(&address).await?;
    println!("orders-service on http://{address}");
    axum::serve(listener, router(app.clone()))
        .with_graceful_shutdown(signal())
        .await?;
    println!("HTTP stopped; draining the bus");
    shut_down(app).await;
    println!("stopped");
    Ok(())
}

/// Ctrl-C, or SIGTERM on Unix.
async fn signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
