//! Nonsense in, clear errors out: never a hang, an abort or a silent loss.

use std::time::{Duration, Instant};

use eventbus::{
    Bus, Message, Options, PublishError, PublishTimeoutError, SubscribeError, Topic,
    TryPublishError,
};

#[derive(Topic, Debug, Clone, Copy, PartialEq)]
struct Job(u64);

fn always_fails(_: &Message<Job>) -> Result<(), String> {
    Err("nope".to_owned())
}

#[test]
fn capacities_out_of_range_are_refused_with_what_is_allowed() {
    let bus = Bus::builder().build();
    for capacity in [0, Options::MAX_CAPACITY + 1, usize::MAX] {
        let error = bus
            .try_subscribe::<Job>(
                Options::default().capacity(capacity).name("c"),
                always_fails,
            )
            .unwrap_err();
        assert!(
            matches!(error, SubscribeError::Capacity { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("from 1 to 16777216"), "{error}");
    }
    // The largest capacity is allowed.
    let big = bus.try_subscribe::<Job>(
        Options::default().capacity(Options::MAX_CAPACITY),
        always_fails,
    );
    big.unwrap().unsubscribe();
}

/// Run in a child process whose address space is too small for the mailbox asked for.
#[test]
fn a_mailbox_that_cannot_be_allocated_is_refused_not_an_abort() {
    if std::env::var_os("EVENTBUS_LOW_MEMORY_CHILD").is_some() {
        let bus = Bus::builder().build();
        let error = bus
            .try_subscribe::<Job>(
                Options::default().capacity(Options::MAX_CAPACITY),
                always_fails,
            )
            .unwrap_err();
        assert!(
            matches!(error, SubscribeError::OutOfMemory { .. }),
            "{error:?}"
        );
        println!("refused: {error}");
        return;
    }
    // This test as the harness names it: its path without the crate's name, so
    // `bad_input::a_mailbox_...` in the `it` binary.
    let test = concat!(
        module_path!(),
        "::a_mailbox_that_cannot_be_allocated_is_refused_not_an_abort"
    );
    let test = test.split_once("::").map_or(test, |(_, path)| path);
    let exe = std::env::current_exe().unwrap();
    // Room for the binary as mapped (its code alone is over 100 MB in a debug build with
    // every feature) and 120 MB more: too little for the 256 MiB mailbox.
    let limit_kb = mapped_bytes(&exe) / 1024 + 120_000;
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {limit_kb} && exec \"$0\" --exact --nocapture --test-threads 1 \"$1\""
        ))
        .arg(exe)
        .arg(test)
        .env("EVENTBUS_LOW_MEMORY_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("needs 268435456 bytes, which could not be allocated"),
        "{stdout}"
    );
}

/// The bytes a loader maps for `exe`: the sum of its ELF64 program headers' `PT_LOAD`
/// sizes (read from the file: this process's own maps may include the whole file, mapped
/// again to read debug info for a backtrace).
fn mapped_bytes(exe: &std::path::Path) -> u64 {
    use std::io::Read;
    let mut head = vec![0u8; 64 * 1024];
    let mut file = std::fs::File::open(exe).unwrap();
    let read = file.read(&mut head).unwrap();
    head.truncate(read);
    let u16_at = |at: usize| u64::from(u16::from_le_bytes([head[at], head[at + 1]]));
    let u64_at = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().unwrap());
    assert_eq!(&head[..4], b"\x7fELF", "an ELF executable");
    let (offset, size, count) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    (0..count)
        .map(|i| (offset + i * size) as usize)
        .filter(|&at| u32::from_le_bytes(head[at..at + 4].try_into().unwrap()) == 1)
        .map(|at| u64_at(at + 0x28))
        .sum()
}

#[test]
fn a_zero_backoff_retries_at_once() {
    let bus = Bus::builder().build();
    let subscription = bus.subscribe::<Job>(
        Options::default().retries(5).backoff(Duration::ZERO),
        always_fails,
    );
    bus.publish(Job(1)).unwrap();
    bus.close();
    assert_eq!(subscription.stats().failed, 6);
    assert_eq!(bus.dead_letters()[0].attempts(), 6);
}

#[test]
fn a_huge_backoff_and_huge_timeouts_do_not_overflow_or_hang_close_timeout() {
    let bus = Bus::builder().build();
    let subscription = bus.subscribe::<Job>(
        Options::default().retries(3).backoff(Duration::MAX),
        always_fails,
    );
    assert_eq!(bus.publish_timeout(Job(1), Duration::MAX), Ok(0));
    while subscription.stats().failed == 0 {
        std::thread::yield_now();
    }
    let start = Instant::now();
    let report = bus.close_timeout(Duration::from_millis(100));
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(!report.completed);
    // The forced stop ended the wait for the retry: the message is a dead letter.
    subscription.unsubscribe();
    let letters = bus.dead_letters();
    assert_eq!((letters.len(), letters[0].attempts()), (1, 1));
    assert!(
        Bus::builder()
            .build()
            .close_timeout(Duration::MAX)
            .completed
    );
}

#[test]
fn endless_retries_end_at_close_timeout_as_a_dead_letter() {
    let bus = Bus::builder().build();
    let subscription = bus.subscribe::<Job>(
        Options::default()
            .retries(u32::MAX)
            .backoff(Duration::from_micros(50)),
        always_fails,
    );
    bus.publish(Job(1)).unwrap();
    bus.publish(Job(2)).unwrap();
    // The worker is retrying Job(1) before the close starts, however late it was scheduled.
    while subscription.stats().failed < 2 {
        std::thread::yield_now();
    }
    let report = bus.close_timeout(Duration::from_millis(100));
    assert!(!report.completed);
    let left = &report.subscriptions[0];
    assert_eq!((left.queued, left.in_handler), (1, 1));
    // The message still queued at the forced stop is a dead letter as the close returns,
    // never attempted, its payload kept. (The one being retried may be one already too: the
    // stop ends its backoff, and its worker may run first.)
    let letters = bus.dead_letters();
    let queued = letters
        .iter()
        .find(|l| l.seq() == 1)
        .expect("the queued one is kept");
    assert_eq!(queued.attempts(), 0);
    assert_eq!(queued.payload::<Job>().map(|j| j.0), Some(2));
    assert!(queued.error().contains("close"), "{}", queued.error());
    // Wait (exactly) for the worker to stop, then look at what it left.
    let stats = subscription.unsubscribe();
    let mut letters = bus.dead_letters();
    letters.sort_by_key(|l| l.seq());
    assert_eq!(letters.len(), 2);
    assert_eq!((letters[0].seq(), letters[1].seq()), (0, 1));
    assert!(letters[0].attempts() > 1);
    assert_eq!(
        (stats.dead_lettered, stats.dropped, stats.queued),
        (2, 0, 0)
    );
    assert_eq!(
        stats.received,
        stats.delivered + stats.dead_lettered + stats.dropped + stats.queued + stats.in_handler
    );
}

#[test]
fn every_error_is_a_std_error_with_an_actionable_message() {
    fn is_error<E: std::error::Error + Send + Sync + 'static>(_: &E) {}
    let closed: PublishError<Job> = PublishError::Closed(Job(1));
    is_error(&closed);
    is_error(&PublishError::<Job>::WouldDeadlock(Job(1)));
    is_error(&PublishTimeoutError::<Job>::Timeout(Job(1)));
    is_error(&TryPublishError::<Job>::Full(Job(1)));
    is_error(&SubscribeError::Closed { name: "x".into() });
    let texts = [
        closed.to_string(),
        PublishTimeoutError::<Job>::Timeout(Job(4)).to_string(),
        SubscribeError::Capacity {
            name: "x".into(),
            capacity: 0,
        }
        .to_string(),
    ];
    assert_eq!(
        texts,
        [
            "the bus is closed; the message was not published and is handed back",
            "the publish timed out waiting for the topic's turn or for room in a `Block` \
             subscriber's mailbox; the message was not published and is handed back",
            "subscriber `x`: capacity 0 is not allowed; a mailbox holds from 1 to 16777216 messages",
        ]
    );
}
