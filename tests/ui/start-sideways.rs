use eventbus::{subscriber, Topic};

#[derive(Topic)]
#[topic(retain = 100)]
pub struct Ping;

#[subscriber(start = Sideways)]
fn on_ping(_: &Ping) {}

fn main() {}
