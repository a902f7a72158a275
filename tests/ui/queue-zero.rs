use eventbus::Topic;

#[derive(Topic)]
#[topic(dispatcher, queue = 0)]
pub struct Click(u64);

fn main() {}
