use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping {
    weight: f64,
}

fn weight_of(p: &Ping) -> f64 {
    p.weight
}

#[subscriber(workers = 4, key = weight_of)]
fn handle(_: &Ping) {}

fn main() {}
