//! Delivery: how a published message reaches a subscription's worker. One file per kind:
//!
//! - `mailbox.rs`: a bounded mailbox per subscription, with its overflow policy;
//! - `priority.rs`: a bounded mailbox whose worker takes the most urgent message first;
//! - `log/`: a topic's shared log, read by each subscription at a position of its own;
//! - `group.rs`: a consumer group, one subscription over several workers;
//! - `inline.rs`: an inline subscriber, whose handler runs inside the publish: no mailbox;
//! - `observer.rs`: a subscriber of every topic whose name matches a pattern.
//!
//! `core.rs` is what every kind shares with the worker, the lifecycle and the engine: one
//! subscription's name, options, counters and wait-graph node, and how to retire it.

pub(crate) mod core;
pub(crate) mod group;
pub(crate) mod inline;
pub(crate) mod log;
pub(crate) mod mailbox;
pub(crate) mod observer;
pub(crate) mod priority;
