use std::rc::Rc;

use eventbus::{observer, AnyMessage};

#[observer("orders.*")]
async fn audit(_: &AnyMessage) {
    let held = Rc::new(1);
    tokio::task::yield_now().await;
    drop(held);
}

fn main() {}
