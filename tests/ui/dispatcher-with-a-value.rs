use eventbus::Topic;

#[derive(Topic)]
#[topic(dispatcher = true)]
pub struct Click(u64);

fn main() {}
