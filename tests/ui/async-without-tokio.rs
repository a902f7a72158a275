use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping;

#[subscriber]
async fn handle(_: &Ping) {}

fn main() {}
