use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping;

#[subscriber(capacity = 0, capacity = 5, overflow = Sideways, retries = "3", colour = "red")]
fn handle(_: &Ping) {}

fn main() {}
