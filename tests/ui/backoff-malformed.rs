use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping;

#[subscriber(backoff = "10 fortnights")]
fn handle(_: &Ping) {}

fn main() {}
