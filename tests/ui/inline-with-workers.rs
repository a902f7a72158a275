use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Transfer {
    cents: i64,
}

// An inline handler runs on the publisher's thread: it has no workers, no mailbox, no retries.
#[subscriber(inline, workers = 4, capacity = 10, retries = 3)]
fn limits(t: &Transfer) -> Result<(), String> {
    if t.cents > 1_000 {
        return Err("over the limit".into());
    }
    Ok(())
}

fn main() {}
