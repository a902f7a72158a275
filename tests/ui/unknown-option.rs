use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping;

#[subscriber(capacty = 10)]
fn handle(_: &Ping) {}

fn main() {}
