use eventbus::Topic;

#[derive(Topic)]
#[topic(crate = eventbus::<u8>)]
pub struct Ping;

fn main() {}
