use eventbus::{observer, AnyMessage};

#[observer("orders.>.x")]
fn audit(_: &AnyMessage) {}

fn main() {}
