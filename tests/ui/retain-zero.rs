use eventbus::Topic;

#[derive(Topic)]
#[topic(retain = 0)]
pub struct Ping;

fn main() {}
