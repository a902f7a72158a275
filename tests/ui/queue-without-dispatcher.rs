use eventbus::Topic;

#[derive(Topic)]
#[topic(queue = 64)]
pub struct Click(u64);

fn main() {}
