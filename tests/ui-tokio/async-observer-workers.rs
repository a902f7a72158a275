use eventbus::{observer, AnyMessage};

#[observer("orders.*", workers = 2)]
async fn audit(_: &AnyMessage) {}

fn main() {}
