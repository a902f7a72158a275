//! The page's trends: a bounded ring of the bus's counters, one sample a second for the last
//! [`KEPT`] seconds, from which `/api/state` gives each topic and subscription its rates
//! (computed here, so the page has them from its first poll) and a short history of its rate
//! and mailbox depth for the page's charts.
//!
//! Samples are taken at most once a [`PERIOD`]: by the standalone server's sampling thread
//! every second, and by each state request that finds the newest sample a period old (the
//! only sampler of a [`DashboardService`](super::DashboardService), which has no thread of
//! its own: its history fills while someone watches). A subscription is known by its topic,
//! its name and its place among the subscriptions of that name on that topic, as the page
//! knows it.
//!
//! The ring's lock is a leaf: it is taken with no lock of the bus held (the stats are read
//! before), and nothing is taken inside it.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{json, Map, Value};

use crate::stats::{BusStats, SubscriptionStats};

/// How often a sample is taken.
pub(crate) const PERIOD: Duration = Duration::from_secs(1);

/// How many samples are kept: five minutes' worth.
pub(crate) const KEPT: usize = 300;

/// The rates cover up to this much of the newest history.
const RATE_WINDOW: Duration = Duration::from_secs(5);

/// A sample is due this long after the one before (a poll a little early still takes one).
const DUE: Duration = Duration::from_millis(900);

/// A subscription as the page knows it: its topic, its name, and which of the subscriptions
/// of that name on that topic it is (from 1, in the order they subscribed).
type SubscriptionKey = (&'static str, String, u32);

/// The counters one sample keeps of a subscription.
#[derive(Clone, Copy)]
struct Counts {
    received: u64,
    /// Finished one way or another: delivered, dead-lettered or dropped.
    out: u64,
    queued: u64,
}

struct Sample {
    at: Instant,
    /// Each topic's `published`.
    topics: HashMap<&'static str, u64>,
    subscriptions: HashMap<SubscriptionKey, Counts>,
}

/// The ring of samples.
pub(crate) struct History {
    /// The newest [`KEPT`] samples, oldest first; a leaf lock (see the module docs).
    samples: Mutex<VecDeque<Sample>>,
}

impl History {
    /// A history whose first sample is `stats`, taken now.
    pub(crate) fn new(stats: &BusStats) -> Self {
        let history = History {
            samples: Mutex::new(VecDeque::with_capacity(KEPT)),
        };
        history.record(Instant::now(), stats);
        history
    }

    /// Keeps `stats`, read at `at`, if a sample is due.
    pub(crate) fn record(&self, at: Instant, stats: &BusStats) {
        // Lock order: the ring, a leaf, with no lock of the bus held; see the module docs.
        let mut samples = self.samples.lock();
        if samples
            .back()
            .is_some_and(|last| at.saturating_duration_since(last.at) < DUE)
        {
            return;
        }
        if samples.len() == KEPT {
            samples.pop_front();
        }
        samples.push_back(Sample {
            at,
            topics: stats.topics.iter().map(|t| (t.name, t.published)).collect(),
            subscriptions: keyed(&stats.subscriptions)
                .map(|(key, s)| (key, counts(s)))
                .collect(),
        });
    }

    /// `stats` (read at `at`) as JSON, each topic with its `rate` (published a second) and
    /// `history`, each subscription with its `rate_in` (received a second), `rate_out`
    /// (finished a second: delivered, dead-lettered or dropped, so `rate_in == rate_out`
    /// for one that keeps up) and `history`. A history is `{"t": [..], "rate": [..]}`
    /// (a subscription's also `"depth"`, its mailbox's `queued`): `t` in seconds before
    /// `at`, oldest first, a point per sample after the first.
    pub(crate) fn annotate(&self, at: Instant, stats: &BusStats) -> Value {
        let mut value = serde_json::to_value(stats).unwrap_or(Value::Null);
        // Lock order: the ring, a leaf, with no lock of the bus held; see the module docs.
        let samples = self.samples.lock();
        let base = base(&samples, at);
        let since = |sample: &Sample| at.saturating_duration_since(sample.at).as_secs_f64();
        if let Some(Value::Array(topics)) = value.get_mut("topics") {
            for (json, topic) in topics.iter_mut().zip(&stats.topics) {
                let rate = base.and_then(|b| {
                    let before = b.topics.get(topic.name)?;
                    Some(per_second(*before, topic.published, since(b)))
                });
                let mut history = Series::new(false);
                for (a, b) in samples.iter().zip(samples.iter().skip(1)) {
                    if let (Some(x), Some(y)) = (a.topics.get(topic.name), b.topics.get(topic.name))
                    {
                        let seconds = b.at.saturating_duration_since(a.at).as_secs_f64();
                        history.point(since(b), per_second(*x, *y, seconds), 0);
                    }
                }
                extend(json, [("rate", json!(rate)), ("history", history.json())]);
            }
        }
        if let Some(Value::Array(subscriptions)) = value.get_mut("subscriptions") {
            for (json, (key, s)) in subscriptions.iter_mut().zip(keyed(&stats.subscriptions)) {
                let now = counts(s);
                let before = base.and_then(|b| Some((b.subscriptions.get(&key)?, since(b))));
                let rate_in = before.map(|(b, secs)| per_second(b.received, now.received, secs));
                let rate_out = before.map(|(b, secs)| per_second(b.out, now.out, secs));
                let mut history = Series::new(true);
                for (a, b) in samples.iter().zip(samples.iter().skip(1)) {
                    let (Some(x), Some(y)) = (a.subscriptions.get(&key), b.subscriptions.get(&key))
                    else {
                        continue;
                    };
                    let seconds = b.at.saturating_duration_since(a.at).as_secs_f64();
                    history.point(since(b), per_second(x.out, y.out, seconds), y.queued);
                }
                extend(
                    json,
                    [
                        ("rate_in", json!(rate_in)),
                        ("rate_out", json!(rate_out)),
                        ("history", history.json()),
                    ],
                );
            }
        }
        value
    }
}

/// The sample the rates are measured from: the oldest within [`RATE_WINDOW`] of `at`, or the
/// newest if none is that recent (nobody watched for a while).
fn base(samples: &VecDeque<Sample>, at: Instant) -> Option<&Sample> {
    samples
        .iter()
        .find(|s| at.saturating_duration_since(s.at) <= RATE_WINDOW)
        .or_else(|| samples.back())
}

/// Each subscription with its key, in the stats' order.
fn keyed(
    subscriptions: &[SubscriptionStats],
) -> impl Iterator<Item = (SubscriptionKey, &SubscriptionStats)> {
    let mut seen: HashMap<(&'static str, &str), u32> = HashMap::new();
    subscriptions.iter().map(move |s| {
        let n = seen.entry((s.topic, s.name.as_str())).or_insert(0);
        *n += 1;
        ((s.topic, s.name.clone(), *n), s)
    })
}

fn counts(s: &SubscriptionStats) -> Counts {
    Counts {
        received: s.received,
        out: s.delivered + s.dead_lettered + s.dropped,
        queued: s.queued,
    }
}

/// From `before` to `now` over `seconds`, rounded to a tenth; 0 over no time.
fn per_second(before: u64, now: u64, seconds: f64) -> f64 {
    if seconds <= 0.0 {
        return 0.0;
    }
    let rate = now.saturating_sub(before) as f64 / seconds;
    (rate * 10.0).round() / 10.0
}

/// One chart's points: a topic's rate, or a subscription's rate and depth.
struct Series {
    t: Vec<f64>,
    rate: Vec<f64>,
    /// `None` for a topic, which has no mailbox.
    depth: Option<Vec<u64>>,
}

impl Series {
    fn new(with_depth: bool) -> Self {
        Series {
            t: Vec::new(),
            rate: Vec::new(),
            depth: with_depth.then(Vec::new),
        }
    }

    fn point(&mut self, ago: f64, rate: f64, depth: u64) {
        self.t.push(-(ago * 10.0).round() / 10.0);
        self.rate.push(rate);
        if let Some(series) = &mut self.depth {
            series.push(depth);
        }
    }

    fn json(self) -> Value {
        let mut fields = Map::new();
        fields.insert("t".into(), json!(self.t));
        fields.insert("rate".into(), json!(self.rate));
        if let Some(depth) = self.depth {
            fields.insert("depth".into(), json!(depth));
        }
        Value::Object(fields)
    }
}

fn extend<const N: usize>(value: &mut Value, fields: [(&str, Value); N]) {
    if let Value::Object(object) = value {
        for (name, field) in fields {
            object.insert(name.into(), field);
        }
    }
}
