use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping;

#[subscriber(workers = 0)]
fn handle(_: &Ping) {}

fn main() {}
