use eventbus::Topic;

#[derive(Topic)]
pub struct Borrowed<'a>(&'a str);

fn main() {}
