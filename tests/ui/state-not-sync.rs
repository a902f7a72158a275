use std::cell::Cell;

use eventbus::{subscriber, State, Topic};

#[derive(Topic)]
pub struct Ping;

#[subscriber]
fn handle(_: &Ping, _: State<Cell<u32>>) {}

fn main() {}
