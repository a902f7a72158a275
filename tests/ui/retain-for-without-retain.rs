use eventbus::Topic;

#[derive(Topic)]
#[topic(retain_for = "1h")]
pub struct Ping;

fn main() {}
