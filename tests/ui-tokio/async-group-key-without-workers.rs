use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct OrderPlaced {
    customer: u64,
}

fn customer_of(o: &OrderPlaced) -> u64 {
    o.customer
}

#[subscriber(key = customer_of)]
async fn reserve(_: &OrderPlaced) {}

fn main() {}
