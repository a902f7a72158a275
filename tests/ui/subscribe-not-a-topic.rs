use eventbus::{Bus, Message, Options};

pub struct NotATopic;

fn main() {
    let bus = Bus::builder().build();
    bus.subscribe::<NotATopic>(Options::default(), |_: &Message<NotATopic>| {});
}
