//! Feature `metrics`: a bus's counters served at `/metrics` for Prometheus, with
//! `metrics-exporter-prometheus`.
//!
//! Run it with `cargo run --example metrics --features metrics`, and while it
//! runs, `curl http://127.0.0.1:9100/metrics`. `--addr 127.0.0.1:9200` listens elsewhere;
//! `--seconds 60` runs longer (default 20). At the end it scrapes itself once and prints
//! the bus's series.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use eventbus::{Bus, Message, Options, Overflow, Topic};
use metrics_exporter_prometheus::PrometheusBuilder;

#[derive(Topic)]
#[topic(name = "orders.placed")]
struct OrderPlaced {
    id: u64,
    cents: u64,
}

fn main() {
    // An error is a sentence for the user, not a `Debug` dump.
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut addr: SocketAddr = "127.0.0.1:9100".parse()?;
    let mut seconds = 20;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--addr", Some(value)) => addr = value.parse()?,
            ("--seconds", Some(value)) => seconds = value.parse()?,
            _ => {
                return Err(format!("unknown argument `{arg}`: use --addr A or --seconds N").into())
            }
        }
    }

    // The exporter first, so the first sample has somewhere to go.
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .install()
        .map_err(|e| {
            format!("cannot serve /metrics at {addr}: {e} (is the port taken? try --addr)")
        })?;
    let bus = Bus::builder().build();
    let metrics = eventbus::metrics::install(&bus, Duration::from_secs(1));

    bus.subscribe::<OrderPlaced>(
        Options::default()
            .name("billing")
            .retries(2)
            .backoff(Duration::from_millis(1)),
        |m: &Message<OrderPlaced>| {
            if m.cents > 9_000 {
                return Err(format!(
                    "order {}: {} cents is over the limit",
                    m.id, m.cents
                ));
            }
            Ok(())
        },
    );
    bus.subscribe::<OrderPlaced>(
        Options::default()
            .name("analytics")
            .capacity(16)
            .overflow(Overflow::DropOldest),
        |_: &Message<OrderPlaced>| std::thread::sleep(Duration::from_millis(5)),
    );

    println!("serving http://{addr}/metrics for {seconds} s");
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut id = 0;
    while Instant::now() < end {
        id += 1;
        bus.publish(OrderPlaced {
            id,
            cents: id * 37 % 10_000,
        })?;
        std::thread::sleep(Duration::from_millis(2));
    }
    bus.close();
    metrics.stop(); // the last sample is of the closed bus

    let mut stream = TcpStream::connect(addr)?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    for line in response.lines().filter(|l| l.starts_with("eventbus_")) {
        println!("{line}");
    }
    Ok(())
}
