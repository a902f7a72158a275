use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping;

#[subscriber]
fn handle(_: &Ping, _: &String) {}

fn main() {}
