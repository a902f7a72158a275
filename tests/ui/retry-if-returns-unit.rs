use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Order(u64);

fn is_transient(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::Interrupted
}

// Written out, `-> ()` cannot fail either.
#[subscriber(retry_if = is_transient, retries = 3)]
fn count(order: &Order) -> () {
    let _ = order.0;
}

fn main() {}
