use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Job {
    urgency: u8,
}

fn urgency(job: &Job) -> bool {
    job.urgency > 5
}

#[subscriber(priority = urgency)]
fn handle(_: &Job) {}

fn main() {}
