//! `#[topic(crate = path)]` and `#[subscriber(crate = path)]`: the macros used through a
//! re-export of `eventbus`, as a framework that wraps it would offer them. The path is
//! resolved where the macro is used, like any path written there.

/// What a framework crate would hold: `eventbus` under another name.
mod framework {
    pub(crate) use ::eventbus as bus_lib;
}

use framework::bus_lib::Bus;

#[derive(framework::bus_lib::Topic, Debug)]
#[topic(crate = framework::bus_lib, name = "crate_path.ping")]
pub struct Ping(u32);

/// Generic: its name is made through the runtime's helpers, named by the path too.
#[derive(framework::bus_lib::Topic, Debug)]
#[topic(crate = crate::framework::bus_lib)]
pub struct Envelope<T>(T);

mod handlers {
    use std::sync::Mutex;

    use super::{Envelope, Ping};
    use crate::framework::bus_lib::{subscriber, Bus, Message, State};

    pub(crate) static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

    #[subscriber(crate = crate::framework::bus_lib, retries = 1, backoff = "1ms")]
    fn forward(ping: &Message<Ping>, bus: &Bus, prefix: State<String>) {
        SEEN.lock()
            .unwrap()
            .push(format!("{}{} #{}", *prefix, ping.0, ping.seq()));
        bus.publish(Envelope(ping.0 * 10)).unwrap();
    }

    #[subscriber(crate = super::framework::bus_lib, name = "unwrap")]
    fn unwrap(envelope: &Envelope<u32>) -> Result<(), String> {
        SEEN.lock()
            .unwrap()
            .push(format!("envelope {}", envelope.0));
        Ok(())
    }
}

#[test]
fn topics_and_subscribers_work_through_a_reexport() {
    assert_eq!(
        <Ping as framework::bus_lib::Topic>::name(),
        "crate_path.ping"
    );
    assert_eq!(
        <Envelope<u32> as framework::bus_lib::Topic>::name(),
        "Envelope<u32>"
    );

    let bus = Bus::builder()
        .registered_in("crate_path::handlers")
        .state(String::from("ping "))
        .build();
    bus.publish(Ping(4)).unwrap();
    bus.close();
    assert_eq!(
        *handlers::SEEN.lock().unwrap(),
        ["ping 4 #0", "envelope 40"]
    );

    let registered: Vec<_> = Bus::registered()
        .into_iter()
        .map(|s| (s.name, s.topic))
        .collect();
    assert_eq!(
        registered,
        [
            (
                "crate_path::handlers::forward".to_owned(),
                "crate_path.ping"
            ),
            ("unwrap".to_owned(), "Envelope<u32>")
        ]
    );
}
