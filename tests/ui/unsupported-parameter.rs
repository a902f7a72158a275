use eventbus::{subscriber, Bus, Topic};

#[derive(Topic)]
pub struct Ping;

#[subscriber]
fn handle(_: &Ping, _: &Bus, _extra: u32) {}

fn main() {}
