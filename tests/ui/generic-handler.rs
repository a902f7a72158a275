use eventbus::{subscriber, Topic};

#[subscriber]
fn handle<T: Topic>(_: &T) {}

fn main() {}
