use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Job {
    customer: u64,
    urgency: u8,
}

fn urgency(job: &Job) -> u8 {
    job.urgency
}

fn customer_of(job: &Job) -> u64 {
    job.customer
}

// A priority reorders one worker's mailbox; a group has several workers.
#[subscriber(workers = 4, key = customer_of, priority = urgency)]
fn handle(_: &Job) {}

fn main() {}
