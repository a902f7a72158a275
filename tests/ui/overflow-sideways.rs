use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping;

#[subscriber(overflow = Sideways)]
fn handle(_: &Ping) {}

fn main() {}
