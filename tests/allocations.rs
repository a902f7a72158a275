//! No allocation on the publish path beyond the message's one shared allocation, and none at
//! all when the topic has no subscribers; once messages are let go of, their blocks are reused
//! and a publish allocates nothing. Counted with dhat's allocator, so the tests are exact.

use eventbus::{Bus, Message, Options, Topic};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

#[derive(Topic)]
struct Ping(u64);

#[derive(Topic)]
struct Unheard(#[allow(dead_code)] u64);

/// dhat counts every thread's allocations in the process, the test harness's too: when the
/// two measurements were two tests, the harness reporting one as finished (which allocates)
/// could fall in the other's count (CI once read 1005 for 1000 publishes). One test that
/// runs them in turn leaves no other test to finish meanwhile.
#[test]
fn allocations() {
    publishing_allocates_one_block_per_message_and_nothing_without_subscribers();
    a_publish_reuses_the_block_of_a_message_let_go_of();
}

fn blocks() -> u64 {
    dhat::HeapStats::get().total_blocks
}

fn publishing_allocates_one_block_per_message_and_nothing_without_subscribers() {
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

    // The worker holds message 1, so the topic's blocks are all in use but one (message 0's,
    // let go of): each publish makes a block, or reuses that one.
    let before = blocks();
    for i in 2..=1001 {
        bus.publish(Ping(i)).unwrap();
    }
    let made = blocks() - before;
    assert!(
        (999..=1000).contains(&made),
        "1000 publishes made {made} allocations: a publish allocates its one shared message, \
         or reuses a block"
    );

    drop(release_tx);
    bus.close();
}

#[derive(Topic)]
struct Tock(#[allow(dead_code)] u64);

fn a_publish_reuses_the_block_of_a_message_let_go_of() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let bus = Bus::builder().build();
    let delivered = || {
        bus.stats()
            .subscriptions
            .iter()
            .map(|s| s.delivered)
            .sum::<u64>()
    };
    bus.subscribe::<Tock>(Options::default(), |_: &Message<Tock>| {});
    // Each message is let go of (its block back in the topic's pool) before the worker counts
    // it delivered; waiting for that count makes the next publish find the block. The first
    // rounds make the topic's state and the worker's once-per-thread state.
    let mut made = 0;
    for i in 0..1010 {
        let before = blocks();
        bus.publish(Tock(i)).unwrap();
        if i >= 10 {
            made += blocks() - before;
        }
        while delivered() <= i {
            std::thread::yield_now();
        }
    }
    // dhat counts every thread's allocations: a worker of the measurement before this one may
    // still be exiting. Without reuse this is 1000.
    assert!(
        made <= 2,
        "1000 publishes, one at a time, made {made} allocations: a block let go of was not reused"
    );
    bus.close();
}
