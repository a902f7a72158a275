use eventbus::{observer, AnyMessage};

#[observer("")]
fn audit(_: &AnyMessage) {}

fn main() {}
