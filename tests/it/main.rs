//! The integration tests, one module per feature, in one binary: the crate and its
//! dependencies are linked once, not once per test file (the layout of cargo's own
//! `tests/testsuite/main.rs`). A module that needs a feature of the crate is compiled only
//! with it; a filter runs one module, as in
//! `cargo test -p eventbus --features nats --test it nats_bridge::`.
//!
//! The few tests that cannot share a binary are files of their own in `tests/`:
//! `layout::SEPARATE` lists them and says why.

// `pub`: each module was a test crate of its own, whose `pub` items were reachable, and
// stay so (the workspace warns of `unreachable_pub`).

#[cfg(feature = "tokio")]
pub mod async_hook;
#[cfg(feature = "tokio")]
pub mod async_observer;
#[cfg(feature = "tokio")]
pub mod async_subscribers;
pub mod bad_input;
pub mod closing;
#[cfg(feature = "dashboard")]
pub mod dashboard;
pub mod dead_letters;
pub mod delivery;
pub mod dispatcher;
pub mod edges;
pub mod faults;
pub mod filters;
pub mod groups;
pub mod hooks;
pub mod idle;
pub mod inline;
pub mod layers;
pub mod layout;
pub mod log_topics;
#[cfg(feature = "tokio")]
pub mod matrix;
#[cfg(feature = "metrics")]
pub mod metrics;
#[cfg(feature = "nats")]
pub mod nats_bridge;
pub mod observers;
pub mod overflow;
pub mod priority;
pub mod redelivery;
pub mod retries;
#[cfg(feature = "tokio")]
pub mod retry_if;
#[cfg(feature = "serde")]
pub mod serde;
pub mod stats;
pub mod unsubscribe;

mod support;
