//! Metrics (feature `metrics`): a bus's counters, sampled on a timer by a thread of their
//! own and set, as absolute values, through the [`metrics`](https://docs.rs/metrics) crate's
//! facade, so the application picks the exporter (Prometheus, StatsD, ...).
//!
//! Nothing is added to the publish or delivery path: the sampler reads [`Bus::stats`] (one
//! brief lock of the subscription list, then plain atomic loads) every `interval`, and sets
//! each counter to the value it read (`Counter::absolute`) and each gauge to the level.
//!
//! | metric | kind | labels | from |
//! |---|---|---|---|
//! | `eventbus_published_total` | counter | `topic` | [`TopicStats::published`](crate::TopicStats::published) |
//! | `eventbus_received_total` | counter | `topic`, `subscriber` | [`SubscriptionStats::received`] |
//! | `eventbus_delivered_total` | counter | `topic`, `subscriber` | `delivered` |
//! | `eventbus_failed_total` | counter | `topic`, `subscriber` | `failed` (attempts, retries included) |
//! | `eventbus_retried_total` | counter | `topic`, `subscriber` | `retried` |
//! | `eventbus_dead_lettered_total` | counter | `topic`, `subscriber` | `dead_lettered` |
//! | `eventbus_dropped_total` | counter | `topic`, `subscriber` | `dropped` |
//! | `eventbus_filtered_total` | counter | `topic`, `subscriber` | `filtered` |
//! | `eventbus_queued` | gauge | `topic`, `subscriber` | `queued` |
//! | `eventbus_in_handler` | gauge | `topic`, `subscriber` | `in_handler` |
//! | `eventbus_capacity` | gauge | `topic`, `subscriber` | `capacity` (for `queued / capacity` alerts) |
//! | `eventbus_dead_letters` | gauge | | dead letters kept now |
//! | `eventbus_dead_letters_discarded_total` | counter | | dead letters the full store discarded |
//!
//! With the `nats` feature too, each bridge connected to the bus adds (summed over the bus's
//! bridges; see `eventbus::nats::BridgeStats`):
//!
//! | metric | kind | labels | from |
//! |---|---|---|---|
//! | `eventbus_nats_export_taken_total` | counter | `topic` | `ExportStats::taken` |
//! | `eventbus_nats_export_sent_total` | counter | `topic` | `sent` (resends included) |
//! | `eventbus_nats_export_resent_total` | counter | `topic` | `resent` |
//! | `eventbus_nats_export_acked_total` | counter | `topic` | `acked` |
//! | `eventbus_nats_export_dead_lettered_total` | counter | `topic` | `dead_lettered` |
//! | `eventbus_nats_export_pending` | gauge | `topic` | `pending` |
//! | `eventbus_nats_import_received_total` | counter | `topic`, `consumer` | `ImportStats::received` |
//! | `eventbus_nats_import_redelivered_total` | counter | `topic`, `consumer` | `redelivered` |
//! | `eventbus_nats_imported_total` | counter | `topic`, `consumer` | `imported` |
//! | `eventbus_nats_import_acked_total` | counter | `topic`, `consumer` | `acked` |
//! | `eventbus_nats_import_dead_lettered_total` | counter | `topic`, `consumer` | `dead_lettered` |
//! | `eventbus_nats_reconnects_total` | counter | | `BridgeStats::reconnects` |
//!
//! Subscriptions of one topic that share a name are summed into one series. A subscription
//! that is unsubscribed keeps its counters' last values; its gauges go to 0. A
//! counter never goes down (`Counter::absolute` keeps the largest value it was given): a
//! series whose subscriptions leave and come back under the same name shows nothing new
//! until the new sum passes the old one, so give subscriptions that come and go names of
//! their own. The labels do not name the bus: give one
//! process's buses their own recorders, or sample only one of them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{RecvTimeoutError, Sender};

use crate::bus::Bus;
use crate::stats::BusStats;
use crate::stats::SubscriptionStats;

/// The shortest sampling interval: a shorter one (zero, say) is taken as this.
pub const MIN_INTERVAL: Duration = Duration::from_millis(1);

/// Starts sampling `bus`'s stats into the `metrics` recorder every `interval`.
///
/// The sampler is a thread named `eventbus-metrics`. It stops when the returned handle is
/// dropped or [`stop`](MetricsHandle::stop)ped (after one last sample), and by itself at its
/// first tick after the bus has closed (that sample, of the closed bus, is its last), so the
/// final numbers are recorded. It does not keep the bus open.
///
/// Install the recorder (the exporter) before the first sample, or the values go nowhere
/// until it is installed: the next sample sets them all.
///
/// # Panics
///
/// If the thread cannot be started: see [`try_install`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use eventbus::{Bus, Message, Options, Topic};
///
/// #[derive(Topic)]
/// struct Tick;
///
/// let bus = Bus::builder().build();
/// // metrics_exporter_prometheus::PrometheusBuilder::new().install().unwrap(); say
/// let metrics = eventbus::metrics::install(&bus, Duration::from_secs(5));
/// bus.subscribe::<Tick>(Options::default().name("clock"), |_: &Message<Tick>| {});
/// bus.publish(Tick).unwrap();
/// bus.close();
/// metrics.stop(); // one last sample, then the thread ends
/// ```
pub fn install(bus: &Bus, interval: Duration) -> MetricsHandle {
    try_install(bus, interval).unwrap_or_else(|error| panic!("{error}"))
}

/// Starts sampling like [`install`], saying why it cannot.
///
/// # Errors
///
/// If the operating system will not start the sampler's thread.
pub fn try_install(bus: &Bus, interval: Duration) -> std::io::Result<MetricsHandle> {
    describe();
    let interval = interval.max(MIN_INTERVAL);
    let bus = bus.worker_handle();
    let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
    let thread = std::thread::Builder::new()
        .name("eventbus-metrics".into())
        .spawn(move || {
            let mut shown = Shown::default();
            loop {
                // Read before the sample: a bus closed by then is sampled once more, finished.
                let closed = bus.is_drained();
                record(&bus.stats(), &mut shown);
                if closed {
                    return;
                }
                match stopped.recv_timeout(interval) {
                    Err(RecvTimeoutError::Timeout) => {}
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                        record(&bus.stats(), &mut shown);
                        return;
                    }
                }
            }
        })
        .map_err(|error| {
            std::io::Error::new(
                error.kind(),
                format!("eventbus: could not start the metrics sampler's thread: {error}"),
            )
        })?;
    Ok(MetricsHandle {
        stop: Some(stop),
        thread: Some(thread),
        interval,
    })
}

/// The sampler [`install`] started; dropping it stops the sampler (after one last sample).
pub struct MetricsHandle {
    /// Dropped to stop the sampler.
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
    interval: Duration,
}

impl MetricsHandle {
    /// How often it samples.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Whether the sampler still runs: it ends by itself at its first tick after the bus
    /// has closed.
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the sampler after one last sample, and waits for it.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            // Recording is the recorder's code; if it panicked, the sampler is over anyway.
            let _ = thread.join();
        }
    }
}

impl Drop for MetricsHandle {
    fn drop(&mut self) {
        self.halt();
    }
}

impl fmt::Debug for MetricsHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsHandle")
            .field("interval", &self.interval)
            .field(
                "running",
                &self.thread.as_ref().is_some_and(|t| !t.is_finished()),
            )
            .finish()
    }
}

/// The help text of every metric, for exporters that show it.
fn describe() {
    use ::metrics::{describe_counter, describe_gauge};
    describe_counter!(
        "eventbus_published_total",
        "Messages published on the topic"
    );
    describe_counter!(
        "eventbus_received_total",
        "Messages handed to the subscription, dropped ones included"
    );
    describe_counter!("eventbus_delivered_total", "Messages its handler finished");
    describe_counter!("eventbus_failed_total", "Failed attempts, retries included");
    describe_counter!("eventbus_retried_total", "Retries made");
    describe_counter!("eventbus_dead_lettered_total", "Messages given up on");
    describe_counter!(
        "eventbus_dropped_total",
        "Messages its overflow policy (or a forced close) discarded"
    );
    describe_counter!("eventbus_filtered_total", "Messages its filter rejected");
    describe_gauge!("eventbus_queued", "Messages waiting in its mailbox");
    describe_gauge!("eventbus_in_handler", "Messages its handler is on");
    describe_gauge!("eventbus_capacity", "Its mailbox's size");
    describe_gauge!("eventbus_dead_letters", "Dead letters kept now");
    describe_counter!(
        "eventbus_dead_letters_discarded_total",
        "Dead letters the full store discarded"
    );
    #[cfg(feature = "nats")]
    {
        describe_counter!(
            "eventbus_nats_export_taken_total",
            "Messages the bridge took for export"
        );
        describe_counter!(
            "eventbus_nats_export_sent_total",
            "Publishes to the server, resends included"
        );
        describe_counter!("eventbus_nats_export_resent_total", "Publishes sent again");
        describe_counter!(
            "eventbus_nats_export_acked_total",
            "Exports the server stored"
        );
        describe_counter!(
            "eventbus_nats_export_dead_lettered_total",
            "Exports that could not be sent"
        );
        describe_gauge!(
            "eventbus_nats_export_pending",
            "Exports taken and not yet acknowledged"
        );
        describe_counter!(
            "eventbus_nats_import_received_total",
            "Deliveries from the server, redeliveries included"
        );
        describe_counter!(
            "eventbus_nats_import_redelivered_total",
            "Deliveries the server had made before"
        );
        describe_counter!(
            "eventbus_nats_imported_total",
            "Messages published on the bus"
        );
        describe_counter!(
            "eventbus_nats_import_acked_total",
            "Acks sent to the server"
        );
        describe_counter!(
            "eventbus_nats_import_dead_lettered_total",
            "Imports that could not be published"
        );
        describe_counter!(
            "eventbus_nats_reconnects_total",
            "Connections made again after one was lost"
        );
    }
}

/// What one series (a topic and subscriber name) sums.
#[derive(Default)]
struct Sums {
    received: u64,
    delivered: u64,
    failed: u64,
    retried: u64,
    dead_lettered: u64,
    dropped: u64,
    filtered: u64,
    queued: u64,
    in_handler: u64,
    capacity: u64,
}

impl Sums {
    fn add(&mut self, s: &SubscriptionStats) {
        self.received += s.received;
        self.delivered += s.delivered;
        self.failed += s.failed;
        self.retried += s.retried;
        self.dead_lettered += s.dead_lettered;
        self.dropped += s.dropped;
        self.filtered += s.filtered;
        self.queued += s.queued;
        self.in_handler += s.in_handler;
        self.capacity += s.capacity as u64;
    }
}

/// Sets every metric from one snapshot. `shown`: the series of the last snapshot; one whose
/// subscriptions are all gone has nothing queued or in a handler any more, so its gauges go
/// to 0 instead of keeping a level no alert could clear.
fn record(stats: &BusStats, shown: &mut Shown) {
    use ::metrics::{counter, gauge};
    for topic in &stats.topics {
        counter!("eventbus_published_total", "topic" => topic.name).absolute(topic.published);
    }
    let mut series: BTreeMap<(&'static str, &str), Sums> = BTreeMap::new();
    for s in &stats.subscriptions {
        series.entry((s.topic, &s.name)).or_default().add(s);
    }
    let now: BTreeSet<(&'static str, String)> = series
        .keys()
        .map(|&(topic, subscriber)| (topic, subscriber.to_owned()))
        .collect();
    for (topic, subscriber) in shown.subscriptions.difference(&now) {
        let labels = [
            ("topic", (*topic).to_owned()),
            ("subscriber", subscriber.clone()),
        ];
        gauge!("eventbus_queued", &labels).set(0.0);
        gauge!("eventbus_in_handler", &labels).set(0.0);
    }
    shown.subscriptions = now;
    for ((topic, subscriber), sums) in series {
        let labels = [
            ("topic", topic.to_owned()),
            ("subscriber", subscriber.to_owned()),
        ];
        counter!("eventbus_received_total", &labels).absolute(sums.received);
        counter!("eventbus_delivered_total", &labels).absolute(sums.delivered);
        counter!("eventbus_failed_total", &labels).absolute(sums.failed);
        counter!("eventbus_retried_total", &labels).absolute(sums.retried);
        counter!("eventbus_dead_lettered_total", &labels).absolute(sums.dead_lettered);
        counter!("eventbus_dropped_total", &labels).absolute(sums.dropped);
        counter!("eventbus_filtered_total", &labels).absolute(sums.filtered);
        gauge!("eventbus_queued", &labels).set(sums.queued as f64);
        gauge!("eventbus_in_handler", &labels).set(sums.in_handler as f64);
        gauge!("eventbus_capacity", &labels).set(sums.capacity as f64);
    }
    gauge!("eventbus_dead_letters").set(stats.dead_letters as f64);
    counter!("eventbus_dead_letters_discarded_total").absolute(stats.dead_letters_discarded);
    #[cfg(feature = "nats")]
    record_bridges(&stats.bridges, &mut shown.exports);
}

/// The series of the last sample, so that a gauge whose source is gone goes to 0.
#[derive(Default)]
struct Shown {
    /// Each (topic, subscriber) series.
    subscriptions: BTreeSet<(&'static str, String)>,
    /// Each exported topic (feature `nats`).
    #[cfg(feature = "nats")]
    exports: BTreeSet<&'static str>,
}

/// The NATS bridges' series, each summed over the bus's bridges (two bridges of one bus may
/// export one topic).
#[cfg(feature = "nats")]
fn record_bridges(
    bridges: &[crate::stats::bridge::BridgeStats],
    shown: &mut BTreeSet<&'static str>,
) {
    use ::metrics::{counter, gauge};
    let mut exports: BTreeMap<&'static str, [u64; 6]> = BTreeMap::new();
    let mut imports: BTreeMap<(&'static str, &str), [u64; 5]> = BTreeMap::new();
    let mut reconnects = 0;
    for bridge in bridges {
        reconnects += bridge.reconnects;
        for e in &bridge.exports {
            let sums = exports.entry(e.topic).or_default();
            let values = [
                e.taken,
                e.sent,
                e.resent,
                e.acked,
                e.dead_lettered,
                e.pending,
            ];
            for (sum, value) in sums.iter_mut().zip(values) {
                *sum += value;
            }
        }
        for i in &bridge.imports {
            let sums = imports.entry((i.topic, &i.name)).or_default();
            let values = [
                i.received,
                i.redelivered,
                i.imported,
                i.acked,
                i.dead_lettered,
            ];
            for (sum, value) in sums.iter_mut().zip(values) {
                *sum += value;
            }
        }
    }
    // A topic no bridge exports any more has nothing pending.
    let now: BTreeSet<&'static str> = exports.keys().copied().collect();
    for topic in shown.difference(&now) {
        gauge!("eventbus_nats_export_pending", "topic" => *topic).set(0.0);
    }
    *shown = now;
    for (topic, [taken, sent, resent, acked, dead, pending]) in exports {
        let labels = [("topic", topic.to_owned())];
        counter!("eventbus_nats_export_taken_total", &labels).absolute(taken);
        counter!("eventbus_nats_export_sent_total", &labels).absolute(sent);
        counter!("eventbus_nats_export_resent_total", &labels).absolute(resent);
        counter!("eventbus_nats_export_acked_total", &labels).absolute(acked);
        counter!("eventbus_nats_export_dead_lettered_total", &labels).absolute(dead);
        gauge!("eventbus_nats_export_pending", &labels).set(pending as f64);
    }
    for ((topic, consumer), [received, redelivered, imported, acked, dead]) in imports {
        let labels = [
            ("topic", topic.to_owned()),
            ("consumer", consumer.to_owned()),
        ];
        counter!("eventbus_nats_import_received_total", &labels).absolute(received);
        counter!("eventbus_nats_import_redelivered_total", &labels).absolute(redelivered);
        counter!("eventbus_nats_imported_total", &labels).absolute(imported);
        counter!("eventbus_nats_import_acked_total", &labels).absolute(acked);
        counter!("eventbus_nats_import_dead_lettered_total", &labels).absolute(dead);
    }
    counter!("eventbus_nats_reconnects_total").absolute(reconnects);
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use ::metrics::{
        Counter, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
    };

    use super::{record, Shown};
    use crate::{Bus, Message, Options, Topic};

    #[derive(Topic)]
    #[topic(crate = crate)]
    struct Tick;

    /// Every gauge's last level and counter's last value, by its name and labels.
    #[derive(Default)]
    struct Levels(Mutex<BTreeMap<String, f64>>);

    struct Level {
        series: String,
        levels: Arc<Levels>,
    }

    impl ::metrics::CounterFn for Level {
        fn increment(&self, _: u64) {}
        fn absolute(&self, value: u64) {
            self.levels
                .0
                .lock()
                .unwrap()
                .insert(self.series.clone(), value as f64);
        }
    }

    impl GaugeFn for Level {
        fn increment(&self, _: f64) {}
        fn decrement(&self, _: f64) {}
        fn set(&self, value: f64) {
            self.levels
                .0
                .lock()
                .unwrap()
                .insert(self.series.clone(), value);
        }
    }

    /// A recorder that keeps the gauges' levels, for `record` to be checked sample by sample.
    struct Capture(Arc<Levels>);

    impl Recorder for Capture {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            let labels: Vec<String> = key.labels().map(|l| l.value().to_owned()).collect();
            Counter::from_arc(Arc::new(Level {
                series: format!("{}{labels:?}", key.name()),
                levels: Arc::clone(&self.0),
            }))
        }
        fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
            let labels: Vec<String> = key.labels().map(|l| l.value().to_owned()).collect();
            Gauge::from_arc(Arc::new(Level {
                series: format!("{}{labels:?}", key.name()),
                levels: Arc::clone(&self.0),
            }))
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    #[test]
    fn a_series_whose_subscriptions_are_gone_shows_nothing_queued() {
        let levels = Arc::new(Levels::default());
        let capture = Capture(Arc::clone(&levels));
        let level = |name: &str| {
            let series = format!("{name}{:?}", ["Tick", "slow"]);
            levels.0.lock().unwrap().get(&series).copied()
        };
        let bus = Bus::builder().build();
        let (started, busy) = crossbeam_channel::bounded(1);
        let (hold, wait) = crossbeam_channel::bounded::<()>(0);
        let slow =
            bus.subscribe::<Tick>(Options::default().name("slow"), move |_: &Message<Tick>| {
                let _ = started.try_send(());
                let _ = wait.recv();
            });
        bus.publish(Tick).unwrap();
        busy.recv().unwrap();
        bus.publish(Tick).unwrap();
        let mut shown = Shown::default();
        ::metrics::with_local_recorder(&capture, || record(&bus.stats(), &mut shown));
        assert_eq!(
            (level("eventbus_queued"), level("eventbus_in_handler")),
            (Some(1.0), Some(1.0))
        );
        drop(hold);
        slow.unsubscribe();
        ::metrics::with_local_recorder(&capture, || record(&bus.stats(), &mut shown));
        assert_eq!(
            (level("eventbus_queued"), level("eventbus_in_handler")),
            (Some(0.0), Some(0.0)),
            "a gone subscription's gauges keep a level no alert could clear"
        );
        bus.close();
    }

    /// The bridges' series sum each topic's exports (and each import) over the bus's
    /// bridges, and count their reconnects.
    #[cfg(feature = "nats")]
    #[test]
    fn the_bridges_series_sum_over_the_bridges() {
        use crate::stats::bridge::{BridgeStats, ExportStats, ImportStats};
        let export = |acked, pending| ExportStats {
            topic: "orders.placed",
            subject: "eventbus.orders.placed".into(),
            taken: acked + pending,
            sent: acked + pending + 1,
            resent: 1,
            acked,
            dead_lettered: 0,
            pending,
        };
        let import = ImportStats {
            topic: "stock.reserved",
            name: "shop".into(),
            received: 12,
            redelivered: 2,
            imported: 10,
            acked: 10,
            skipped: 0,
            dead_lettered: 1,
            held: 1,
            recreated: 0,
            problem: None,
        };
        let bus = Bus::builder().build();
        let mut stats = bus.stats();
        stats.bridges = vec![
            BridgeStats {
                id: "a".into(),
                reconnects: 1,
                exports: vec![export(5, 2)],
                imports: vec![import],
            },
            BridgeStats {
                id: "b".into(),
                reconnects: 2,
                exports: vec![export(3, 0)],
                imports: vec![],
            },
        ];
        let levels = Arc::new(Levels::default());
        let capture = Capture(Arc::clone(&levels));
        let mut shown = Shown::default();
        ::metrics::with_local_recorder(&capture, || record(&stats, &mut shown));
        let value = |series: &str| levels.0.lock().unwrap().get(series).copied();
        assert_eq!(
            value(r#"eventbus_nats_export_acked_total["orders.placed"]"#),
            Some(8.0)
        );
        assert_eq!(
            value(r#"eventbus_nats_export_pending["orders.placed"]"#),
            Some(2.0)
        );
        assert_eq!(
            value(r#"eventbus_nats_export_resent_total["orders.placed"]"#),
            Some(2.0)
        );
        assert_eq!(
            value(r#"eventbus_nats_imported_total["stock.reserved", "shop"]"#),
            Some(10.0)
        );
        assert_eq!(
            value(r#"eventbus_nats_import_redelivered_total["stock.reserved", "shop"]"#),
            Some(2.0)
        );
        assert_eq!(value("eventbus_nats_reconnects_total[]"), Some(3.0));
        // The bridges gone: nothing is pending any more.
        stats.bridges.clear();
        ::metrics::with_local_recorder(&capture, || record(&stats, &mut shown));
        assert_eq!(
            value(r#"eventbus_nats_export_pending["orders.placed"]"#),
            Some(0.0)
        );
        bus.close();
    }
}
