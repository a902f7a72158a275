use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Order(u64);

fn is_transient(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::Interrupted
}

// An async handler's error is its future's: here a `String`, not an I/O error.
#[subscriber(retry_if = is_transient, retries = 3, workers = 2)]
async fn save(order: &Order) -> Result<(), String> {
    if order.0 == 0 {
        return Err("refused".to_owned());
    }
    Ok(())
}

fn main() {}
