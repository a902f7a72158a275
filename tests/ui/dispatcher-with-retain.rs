use eventbus::Topic;

#[derive(Topic)]
#[topic(retain = 100, dispatcher)]
pub struct Kept(u64);

fn main() {}
