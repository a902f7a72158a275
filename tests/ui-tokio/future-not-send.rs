use std::rc::Rc;

use eventbus::{subscriber, Topic};

#[derive(Topic)]
pub struct Ping;

#[subscriber]
async fn handle(_: &Ping) {
    let held = Rc::new(1);
    tokio::task::yield_now().await;
    drop(held);
}

fn main() {}
