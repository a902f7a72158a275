use eventbus::{observer, AnyMessage};

#[observer("orders.*", workers = 4)]
fn audit(_: &AnyMessage) {}

fn main() {}
