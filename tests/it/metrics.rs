//! Feature `metrics`: the bus's counters reach a real Prometheus exporter, scraped over HTTP
//! as Prometheus would.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use eventbus::{Bus, Message, Options, Overflow, Topic};
use metrics_exporter_prometheus::PrometheusBuilder;

use crate::support;
use support::net::{free_port, get};

#[derive(Topic)]
#[topic(name = "orders.placed")]
struct OrderPlaced(u32);

/// `GET /metrics`, as Prometheus scrapes it.
fn scrape(addr: SocketAddr) -> std::io::Result<String> {
    let (status, body) = get(addr, "/metrics")?;
    assert_eq!(status, 200, "{body}");
    Ok(body)
}

/// The value of the series `name{labels}` (labels as the exporter writes them), if present.
fn value(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.trim().parse().unwrap())
}

/// Scrapes until `check` holds, or fails after `within` with the last body.
fn scrape_until(addr: SocketAddr, within: Duration, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + within;
    loop {
        // The listener starts on the exporter's own runtime: refused until it is up.
        if let Ok(body) = scrape(addr) {
            if check(&body) || Instant::now() > deadline {
                return body;
            }
        } else if Instant::now() > deadline {
            panic!("no exporter listening on {addr}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Both tests record into the one global recorder, and the unlabelled gauges (such as
/// `eventbus_dead_letters`) are shared: one test's samplers would overwrite the other's
/// values. Each test holds this while its samplers run.
static RECORDER: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn recorder() -> std::sync::MutexGuard<'static, ()> {
    RECORDER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[test]
fn the_counters_reach_prometheus_and_are_scraped_over_http() {
    let _recorder = recorder();
    let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .install()
        .expect("the exporter starts");

    let bus = Bus::builder().dead_letter_capacity(2).build();
    let metrics = eventbus::metrics::install(&bus, Duration::from_millis(10));
    let (hold, wait) = std::sync::mpsc::channel::<()>();
    let (started, busy) = std::sync::mpsc::channel();
    bus.subscribe::<OrderPlaced>(
        Options::default()
            .name("billing")
            .retries(1)
            .backoff(Duration::ZERO),
        |m: &Message<OrderPlaced>| {
            if m.0 % 2 == 1 {
                Err(format!("order {} declined", m.0))
            } else {
                Ok(())
            }
        },
    );
    bus.subscribe::<OrderPlaced>(
        Options::default()
            .name("ticker")
            .capacity(2)
            .overflow(Overflow::DropNewest),
        move |m: &Message<OrderPlaced>| {
            if m.0 == 0 {
                started.send(()).unwrap();
                let _ = wait.recv();
            }
        },
    );
    bus.subscribe::<OrderPlaced>(
        Options::default()
            .name("big")
            .filter(|o: &OrderPlaced| o.0 >= 5),
        |_: &Message<OrderPlaced>| {},
    );
    bus.publish(OrderPlaced(0)).unwrap();
    busy.recv().unwrap(); // ticker holds 0: its mailbox of 2 takes 1 and 2, drops 3..=6
    for id in 1..=6 {
        bus.publish(OrderPlaced(id)).unwrap();
    }

    // While the bus runs, the timer samples: ticker's mailbox is full.
    let queued = r#"eventbus_queued{topic="orders.placed",subscriber="ticker"}"#;
    let body = scrape_until(addr, Duration::from_secs(20), |body| {
        value(body, queued) == Some(2.0)
    });
    assert_eq!(value(&body, queued), Some(2.0), "{body}");
    let capacity = r#"eventbus_capacity{topic="orders.placed",subscriber="ticker"}"#;
    assert_eq!(value(&body, capacity), Some(2.0), "{body}");

    drop(hold);
    bus.close();
    metrics.stop(); // its last sample is of the closed bus: exact
    let body = scrape(addr).unwrap();
    let expect = |series: &str, want: f64| {
        assert_eq!(value(&body, series), Some(want), "{series} in\n{body}");
    };
    expect(r#"eventbus_published_total{topic="orders.placed"}"#, 7.0);
    let billing = r#"{topic="orders.placed",subscriber="billing"}"#;
    expect(&format!("eventbus_received_total{billing}"), 7.0);
    expect(&format!("eventbus_delivered_total{billing}"), 4.0);
    expect(&format!("eventbus_failed_total{billing}"), 6.0); // 1, 3, 5: twice each
    expect(&format!("eventbus_retried_total{billing}"), 3.0);
    expect(&format!("eventbus_dead_lettered_total{billing}"), 3.0);
    expect(&format!("eventbus_queued{billing}"), 0.0);
    let ticker = r#"{topic="orders.placed",subscriber="ticker"}"#;
    expect(&format!("eventbus_received_total{ticker}"), 7.0);
    expect(&format!("eventbus_delivered_total{ticker}"), 3.0);
    expect(&format!("eventbus_dropped_total{ticker}"), 4.0);
    expect(&format!("eventbus_queued{ticker}"), 0.0);
    let big = r#"{topic="orders.placed",subscriber="big"}"#;
    expect(&format!("eventbus_received_total{big}"), 2.0);
    expect(&format!("eventbus_filtered_total{big}"), 5.0);
    expect("eventbus_dead_letters", 2.0);
    expect("eventbus_dead_letters_discarded_total", 1.0);
    assert!(
        body.contains("# TYPE eventbus_received_total counter"),
        "{body}"
    );
    assert!(body.contains("# TYPE eventbus_queued gauge"), "{body}");
}

#[derive(Topic)]
struct Tick;

/// The sampler ends by itself once the bus has closed, and does not keep it open.
#[test]
fn the_sampler_stops_once_the_bus_has_closed() {
    let _recorder = recorder();
    let bus = Bus::builder().build();
    let metrics = eventbus::metrics::install(&bus, Duration::from_millis(1));
    bus.subscribe::<Tick>(Options::default(), |_: &Message<Tick>| {});
    bus.publish(Tick).unwrap();
    assert!(metrics.is_running());
    drop(bus); // the last handle: closes the bus, though the sampler holds one of its own
    let deadline = Instant::now() + Duration::from_secs(20);
    while metrics.is_running() {
        assert!(Instant::now() < deadline, "the sampler outlived its bus");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        eventbus::metrics::install(&Bus::builder().build(), Duration::ZERO).interval(),
        eventbus::metrics::MIN_INTERVAL
    );
}
