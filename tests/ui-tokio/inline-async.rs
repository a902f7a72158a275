use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Transfer {
    cents: i64,
}

// An inline handler runs inside the publish: it cannot be `async`.
#[subscriber(inline)]
async fn limits(t: &Transfer) {
    let _ = t.cents;
}

fn main() {}
