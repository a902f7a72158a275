use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping;

#[derive(Topic)]
pub struct Pong {
    customer: u64,
}

fn customer_of(p: &Pong) -> u64 {
    p.customer
}

#[subscriber(workers = 4, key = customer_of)]
fn handle(_: &Ping) {}

fn main() {}
