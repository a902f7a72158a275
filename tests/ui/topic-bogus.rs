use eventbus::Topic;

#[derive(Topic)]
#[topic(bogus)]
pub struct Ping;

fn main() {}
