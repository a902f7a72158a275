use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping {
    customer: u64,
}

fn customer_of(p: &Ping) -> u64 {
    p.customer
}

#[subscriber(key = customer_of)]
fn handle(_: &Ping) {}

fn main() {}
