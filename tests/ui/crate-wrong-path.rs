mod framework {
    #[allow(unused_imports)]
    pub use ::eventbus as bus_lib;
}

#[derive(eventbus::Topic)]
#[topic(crate = framework::bus)]
pub struct Ping;

#[eventbus::subscriber(crate = framework::bus)]
fn handle(_: &eventbus::Message<Ping>, _: &eventbus::Bus, _: eventbus::State<u8>) -> Result<(), String> {
    Ok(())
}

fn main() {}
