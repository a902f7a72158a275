use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping;

pub struct Service;

impl Service {
    #[subscriber]
    fn handle(&self) {}
}

fn main() {}
