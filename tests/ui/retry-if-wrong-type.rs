use std::fmt;

use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Order(u64);

#[derive(Debug)]
pub enum SaveError {
    Busy,
    Refused,
}

impl fmt::Display for SaveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not saved")
    }
}

// Written for an I/O error, but `save` fails with a `SaveError`.
fn is_transient(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::Interrupted
}

#[subscriber(retry_if = is_transient, retries = 3)]
fn save(order: &Order) -> Result<(), SaveError> {
    match order.0 {
        0 => Err(SaveError::Refused),
        1 => Err(SaveError::Busy),
        _ => Ok(()),
    }
}

fn main() {}
