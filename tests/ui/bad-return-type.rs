use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping;

#[subscriber]
fn handle(_: &Ping) -> u32 {
    7
}

fn main() {}
