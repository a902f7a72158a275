use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping;

#[subscriber]
fn handle(_ping: Ping) {}

fn main() {}
