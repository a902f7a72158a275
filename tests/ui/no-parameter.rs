use eventbus::subscriber;

#[subscriber]
fn handle() {}

fn main() {}
