//! Two processes, one event flow, through NATS JetStream: a shop publishes `OrderPlaced`, a
//! warehouse (another process) reserves stock for each and publishes `StockReserved`, which
//! the shop receives. Each bus exports what it publishes and imports what it needs.
//!
//! ```sh
//! nats-server -js -a 127.0.0.1 -p 4222 -sd /tmp/eventbus-nats
//! cargo run --example nats_shop --features nats -- --role warehouse
//! cargo run --example nats_shop --features nats -- --role shop
//! ```
//!
//! Options: `--url nats://127.0.0.1:4222` (the default), `--orders N` (5): the shop places N
//! orders and waits for their reservations; the warehouse handles N orders, then stops.
//! Either may start first: the durable consumers keep what the other sent meanwhile.
//!
//! Two copies of the warehouse share the work: each import of `warehouse` gets its share of
//! the orders, each order goes to one copy. A copy cannot know its share in advance, so give
//! the warehouses `--idle SECS`: each stops once it has had no order for that long.
//!
//! ```sh
//! cargo run --example nats_shop --features nats -- --role warehouse --orders 100 --idle 5 &
//! cargo run --example nats_shop --features nats -- --role warehouse --orders 100 --idle 5 &
//! cargo run --example nats_shop --features nats -- --role shop --orders 100
//! ```
//!
//! Those copies handle one customer's orders in any order. With `--keyed PARTITIONS` on
//! every process, the shop exports the orders keyed on their customer (`export_keyed`, on
//! that many partition subjects) and the warehouses import them keyed (`import_keyed`):
//! the copies share the partitions, and each customer's orders are reserved in the order
//! they were placed, by one copy at a time, even while copies come and go.
//!
//! ```sh
//! cargo run --example nats_shop --features nats -- --role warehouse --orders 100 --idle 5 --keyed 8 &
//! cargo run --example nats_shop --features nats -- --role warehouse --orders 100 --idle 5 --keyed 8 &
//! cargo run --example nats_shop --features nats -- --role shop --orders 100 --keyed 8
//! ```

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use eventbus::nats::Bridge;
use eventbus::{Bus, Message, Options, Topic};
use serde::{Deserialize, Serialize};

#[derive(Topic, Serialize, Deserialize, Debug)]
#[topic(name = "shop.orders.placed")]
pub struct OrderPlaced {
    pub id: u64,
    pub item: String,
    /// Order `id` is placed by customer `id % CUSTOMERS`.
    pub customer: u64,
}

/// How many customers place the orders.
const CUSTOMERS: u64 = 5;

#[derive(Topic, Serialize, Deserialize, Debug)]
#[topic(name = "shop.stock.reserved")]
pub struct StockReserved {
    pub order: u64,
}

struct Args {
    role: String,
    url: String,
    orders: u64,
    /// The warehouse stops after this long without an order.
    idle: Option<Duration>,
    /// Orders keyed on their customer, on this many partitions.
    keyed: Option<u32>,
}

fn args() -> Result<Args, String> {
    let mut args = Args {
        role: String::new(),
        url: "nats://127.0.0.1:4222".into(),
        orders: 5,
        idle: None,
        keyed: None,
    };
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        let value = given
            .next()
            .ok_or_else(|| format!("`{flag}` needs a value"))?;
        match flag.as_str() {
            "--role" => args.role = value,
            "--url" => args.url = value,
            "--orders" => {
                args.orders = value
                    .parse()
                    .map_err(|e| format!("--orders `{value}`: {e}"))?
            }
            "--idle" => {
                let secs: f64 = value
                    .parse()
                    .map_err(|e| format!("--idle `{value}`: {e}"))?;
                args.idle = Some(
                    Duration::try_from_secs_f64(secs)
                        .map_err(|e| format!("--idle `{value}`: {e}"))?,
                );
            }
            "--keyed" => {
                let partitions = value
                    .parse()
                    .map_err(|e| format!("--keyed `{value}`: {e}"))?;
                args.keyed = Some(partitions);
            }
            _ => return Err(format!("unknown option `{flag}`")),
        }
    }
    match args.role.as_str() {
        "shop" | "warehouse" => Ok(args),
        _ => Err("give `--role shop` or `--role warehouse`".into()),
    }
}

#[tokio::main]
async fn main() {
    let args = match args() {
        Ok(args) => args,
        Err(error) => {
            eprintln!(
                "nats_shop: {error}\nusage: nats_shop --role shop|warehouse \
                 [--url nats://127.0.0.1:4222] [--orders 5] [--idle SECS] \
                 [--keyed PARTITIONS]"
            );
            std::process::exit(2);
        }
    };
    // Errors as sentences (`Display`), not as the `Debug` of a `main` returning `Result`.
    let url = args.url.clone();
    if let Err(error) = run(args).await {
        eprintln!("nats_shop: {error}");
        let unreachable = matches!(
            error.downcast_ref::<eventbus::nats::Error>(),
            Some(eventbus::nats::Error::Connect { .. })
        );
        if unreachable {
            eprintln!(
                "hint: is a NATS server with JetStream running at {url}? For example:\n  \
                 nats-server -js -a 127.0.0.1 -p 4222 -sd /tmp/eventbus-nats"
            );
        }
        std::process::exit(1);
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let bus = Bus::builder().build();
    let bridge = Bridge::connect(&bus, &args.url).await?;
    // Counts what this role is waiting for; `done` fires when it reaches `--orders`.
    let seen = Arc::new(AtomicU64::new(0));
    let done = Arc::new(tokio::sync::Notify::new());
    let (wanted, counter, notify) = (args.orders, Arc::clone(&seen), Arc::clone(&done));
    let heard = Arc::new(tokio::sync::Notify::new());
    let tick = Arc::clone(&heard);
    let count = move || {
        tick.notify_one();
        if counter.fetch_add(1, SeqCst) + 1 == wanted {
            notify.notify_one();
        }
    };

    if args.role == "shop" {
        // Subscribed before the import starts: an imported message is published on this bus
        // at once, and a mailbox topic keeps nothing for subscribers that come later.
        bus.subscribe_async::<StockReserved, _, _, _>(
            Options::default().name("shop::confirm"),
            move |m: Message<StockReserved>| {
                println!("shop: stock reserved for order {}", m.order);
                count();
                async {}
            },
        );
        bridge.import::<StockReserved>("shop").await?;
        match args.keyed {
            Some(partitions) => {
                bridge
                    .export_keyed::<OrderPlaced>(partitions, |o| o.customer)
                    .await?
            }
            None => bridge.export::<OrderPlaced>().await?,
        }
        for id in 1..=args.orders {
            bus.publish_async(OrderPlaced {
                id,
                item: format!("item-{id}"),
                customer: id % CUSTOMERS,
            })
            .await?;
            println!("shop: placed order {id}");
        }
    } else {
        // Exported, and subscribed to, before the import starts (see the shop's side).
        bridge.export::<StockReserved>().await?;
        let publisher = bus.clone();
        bus.subscribe_async::<OrderPlaced, _, _, _>(
            Options::default().name("warehouse::reserve"),
            move |m: Message<OrderPlaced>| {
                let bus = publisher.clone();
                let count = count.clone();
                async move {
                    println!("warehouse: reserving {} for order {}", m.item, m.id);
                    bus.publish_async(StockReserved { order: m.id })
                        .await
                        .map_err(|e| e.to_string())?;
                    count();
                    Ok::<(), String>(())
                }
            },
        );
        match args.keyed {
            // The shop's export declares the partition count; the copies share them.
            Some(_) => bridge.import_keyed::<OrderPlaced>("warehouse").await?,
            None => bridge.import::<OrderPlaced>("warehouse").await?,
        }
    }
    match args.idle {
        // A copy among others: done at its share, which ends when the orders stop coming.
        Some(idle) if args.role == "warehouse" => loop {
            tokio::select! {
                _ = done.notified() => break,
                _ = heard.notified() => {}
                _ = tokio::time::sleep(idle) => break,
            }
        },
        _ if wanted > 0 => done.notified().await,
        _ => {}
    }
    // Everything accepted for export is sent and acknowledged before this returns.
    bridge.close_timeout(Duration::from_secs(30)).await?;
    bus.close_async().await;
    println!(
        "{}: done, {} of {}",
        args.role,
        seen.load(SeqCst),
        args.orders
    );
    Ok(())
}
