use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping;

#[subscriber(workers = 4)]
async fn handle(_: &Ping) {}

fn main() {}
