use eventbus::{observer, AnyMessage};

#[observer(capacity = 10)]
fn audit(_: &AnyMessage) {}

fn main() {}
