use eventbus::subscriber;

pub struct NotATopic;

#[subscriber]
fn handle(_: &NotATopic) {}

fn main() {}
