use eventbus::{observer, Topic};

#[derive(Topic)]
pub struct Ping;

#[observer("orders.*")]
fn audit(_: &Ping) {}

fn main() {}
