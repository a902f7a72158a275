//! A report service that starts late and rebuilds from the log: orders are published on a
//! log topic that keeps the last 1,000; the report subscribes after 300 of them with
//! `Start::Earliest`, gets those 300 in order, then the live ones, with no gap and no repeat.
//!
//! Run it with `cargo run --example replay`.

use std::sync::{Arc, Mutex};

use eventbus::{Bus, Message, Options, Start, Topic};

#[derive(Topic, Debug)]
#[topic(name = "orders.placed", retain = 1_000, retain_for = "1h")]
pub struct OrderPlaced {
    pub id: u64,
    pub cents: u64,
}

#[derive(Default, Debug)]
struct Report {
    orders: u64,
    revenue_cents: u64,
    last_seq: Option<u64>,
}

fn main() {
    let bus = Bus::builder().build();
    // The shop has been running for a while before the report service starts.
    for id in 0..300 {
        bus.publish(OrderPlaced {
            id,
            cents: 1_000 + id,
        })
        .unwrap();
    }
    let report = Arc::new(Mutex::new(Report::default()));
    let totals = Arc::clone(&report);
    let subscription = bus.subscribe::<OrderPlaced>(
        Options::default().name("report").start(Start::Earliest),
        move |order: &Message<OrderPlaced>| {
            let mut report = totals.lock().unwrap();
            // One order, no gap, no repeat: every seq is the one after the last.
            assert_eq!(report.last_seq.map_or(0, |last| last + 1), order.seq());
            report.last_seq = Some(order.seq());
            report.orders += 1;
            report.revenue_cents += order.cents;
        },
    );
    // The shop goes on while the report catches up.
    for id in 300..500 {
        bus.publish(OrderPlaced {
            id,
            cents: 1_000 + id,
        })
        .unwrap();
    }
    let stats = subscription.unsubscribe();
    bus.close();
    let report = report.lock().unwrap();
    println!(
        "report rebuilt from the log: {} orders, {:.2} in revenue, up to seq {:?}",
        report.orders,
        report.revenue_cents as f64 / 100.0,
        report.last_seq
    );
    println!("\n{}", bus.stats());
    assert_eq!((report.orders, stats.delivered), (500, 500));
}
