use eventbus::{subscriber, Topic};

#[derive(Topic)]
#[topic(retain = 100)]
pub struct OrderPlaced;

#[subscriber(overflow = DropNewest)]
fn late(_: &OrderPlaced) {}

fn main() {}
