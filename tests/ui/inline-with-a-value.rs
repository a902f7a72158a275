use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Transfer {
    cents: i64,
}

#[subscriber(inline = true)]
fn limits(t: &Transfer) {
    let _ = t.cents;
}

fn main() {}
