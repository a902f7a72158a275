use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Order(u64);

#[subscriber(filter = |o: &Order| o.0 > 100)]
fn review(_: &Order) {}

fn main() {}
