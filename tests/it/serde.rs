//! The `serde` feature: stats, close reports and dead-letter metadata serialize for export.
//! Run with `--features serde`.

use eventbus::{Bus, Message, Options, Topic};

#[derive(Topic)]
struct Charge;

#[test]
fn stats_and_dead_letters_serialize() {
    let bus = Bus::builder().build();
    bus.subscribe::<Charge>(Options::default().name("billing"), |_: &Message<Charge>| {
        Err::<(), _>("declined")
    });
    bus.publish(Charge).unwrap();
    let report = bus.close_timeout(std::time::Duration::from_secs(20));

    let stats = serde_json::to_value(bus.stats()).unwrap();
    assert_eq!(stats["topics"][0]["name"], "Charge");
    assert_eq!(stats["subscriptions"][0]["name"], "billing");
    assert_eq!(stats["subscriptions"][0]["overflow"], "Block");
    assert_eq!(stats["subscriptions"][0]["dead_lettered"], 1);
    let letter = serde_json::to_value(&bus.dead_letters()[0]).unwrap();
    assert_eq!(
        letter,
        serde_json::json!({
            "topic": "Charge", "seq": 0, "subscriber": "billing",
            "error": "declined", "attempts": 1
        })
    );
    let report = serde_json::to_value(report).unwrap();
    assert_eq!(report["completed"], true);
}
