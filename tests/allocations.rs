//! No allocation on the publish path beyond the message's one shared allocation, and none at
//! all when the topic has no subscribers. Counted with dhat's allocator, so the test is exact.

use eventbus::{Bus, Message, Options, Topic};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

#[derive(Topic)]
struct Ping(u64);

#[derive(Topic)]
struct Unheard(#[allow(dead_code)] u64);

fn blocks() -> u64 {
    dhat::HeapStats::get().total_blocks
}

#[test]
fn publishing_allocates_one_arc_per_message_and_nothing_without_subscribers() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let bus = Bus::builder().build();
    let (started_tx, started_rx) = std::sync::mpsc::sync_channel::<u64>(1);
    let (release_tx, release_rx) = std::sync::mpsc::sync_channel::<()>(0);
    bus.subscribe::<Ping>(
        Options::default().capacity(2048),
        move |m: &Message<Ping>| {
            if m.0 < 2 {
                started_tx.send(m.0).unwrap();
                let _ = release_rx.recv();
            }
        },
    );
    // The first publish of a topic makes its state. The worker stalls on message 0 and then on
    // message 1: the first stall warms up what blocking on a channel allocates once per
    // thread, so during the second only the publishing thread allocates while we count.
    bus.publish(Ping(0)).unwrap();
    bus.publish(Ping(1)).unwrap();
    bus.publish(Unheard(0)).unwrap();
    assert_eq!(started_rx.recv().unwrap(), 0);
    release_tx.send(()).unwrap();
    assert_eq!(started_rx.recv().unwrap(), 1);

    // A warm-up round: the first publishes on a thread may allocate once (arc-swap's lazily
    // made per-thread state); after that, none.
    for i in 1..=1000 {
        bus.publish(Unheard(i)).unwrap();
    }
    let before = blocks();
    for i in 1..=1000 {
        bus.publish(Unheard(i)).unwrap();
    }
    assert_eq!(
        blocks() - before,
        0,
        "a publish with no subscribers allocated"
    );

    let before = blocks();
    for i in 2..=1001 {
        bus.publish(Ping(i)).unwrap();
    }
    assert_eq!(
        blocks() - before,
        1000,
        "a publish allocated more than its one shared message"
    );

    drop(release_tx);
    bus.close();
}
