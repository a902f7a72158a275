use eventbus::{observer, AnyMessage};

#[observer("orders.*")]
async fn audit(_: &AnyMessage) {}

fn main() {}
