use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Order(u64);

fn is_big(cents: &u64) -> bool {
    *cents > 100
}

#[subscriber(filter = is_big)]
fn review(_: &Order) {}

fn main() {}
