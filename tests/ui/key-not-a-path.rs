use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping;

#[subscriber(workers = 4, key = "customer")]
fn handle(_: &Ping) {}

fn main() {}
