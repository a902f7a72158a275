use eventbus::{subscriber, Topic};

#[derive(Topic)]
#[topic(retain = 100)]
pub struct Job {
    urgency: u8,
}

fn urgency(job: &Job) -> u8 {
    job.urgency
}

#[subscriber(priority = urgency)]
fn handle(_: &Job) {}

fn main() {}
