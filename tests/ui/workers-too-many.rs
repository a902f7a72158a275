use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping;

#[subscriber(workers = 1000)]
fn handle(_: &Ping) {}

fn main() {}
