//! Dead letters as a repair queue: a payment handler rejects some payments; after the "fix"
//! (here: raising a limit), the dead letters are taken out of the store and republished.
//!
//! Run it with `cargo run --example repair_dead_letters`.

use std::sync::atomic::{AtomicU64, Ordering};

use eventbus::{subscriber, Bus, DeadLetter, Topic};

#[derive(Topic, Debug, Clone)]
#[topic(name = "payments.requested")]
pub struct Payment {
    pub account: u32,
    pub cents: u64,
}

/// The limit a payment may not exceed; "the fix" raises it.
static LIMIT: AtomicU64 = AtomicU64::new(10_000);

#[subscriber(retries = 1, backoff = "1ms", name = "payments")]
fn pay(payment: &Payment) -> Result<(), String> {
    let limit = LIMIT.load(Ordering::SeqCst);
    if payment.cents > limit {
        return Err(format!("{} cents is over the {limit} limit", payment.cents));
    }
    Ok(())
}

fn main() {
    let bus = Bus::builder()
        .registered()
        .on_dead_letter(|letter: &DeadLetter| println!("(hook) dead letter: {letter}"))
        .build();
    for (account, cents) in [(1, 500), (2, 25_000), (3, 9_000), (4, 12_000)] {
        bus.publish(Payment { account, cents }).unwrap();
    }
    // Wait for the first round to finish without closing the bus.
    while bus.stats().subscriptions[0].queued > 0 {
        std::thread::yield_now();
    }

    let letters = bus.take_dead_letters();
    println!("{} payment(s) failed:", letters.len());
    for letter in &letters {
        println!("  {letter}");
    }

    println!("raising the limit and republishing them");
    LIMIT.store(50_000, Ordering::SeqCst);
    for letter in &letters {
        if let Some(payment) = letter.payload::<Payment>() {
            bus.publish(payment.clone()).unwrap();
        }
    }
    bus.close();

    let stats = bus.stats();
    println!(
        "\nafter the repair: {} delivered, {} dead letter(s) left",
        stats.subscriptions[0].delivered,
        bus.dead_letters().len()
    );
    println!("\n{stats}");
}
