use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Transfer {
    cents: i64,
}

fn is_transient(e: &String) -> bool {
    e.starts_with("busy")
}

// An inline handler's refusal goes back to the publisher: it is never retried.
#[subscriber(inline, retry_if = is_transient)]
fn limits(t: &Transfer) -> Result<(), String> {
    if t.cents > 1_000 {
        return Err("over the limit".into());
    }
    Ok(())
}

fn main() {}
