use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping;

#[subscriber(crate = "eventbus")]
fn handle(_: &Ping) {}

fn main() {}
