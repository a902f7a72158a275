//! Topics at run time: each topic's one order (numbering and hand-out to every mailbox, as
//! one step under the topic's order lock, `state.rs`, or through a dispatcher's queue,
//! `dispatcher.rs`), its subscriber list
//! (`subscribers.rs`), redelivery of a dead letter (`redeliver.rs`) and
//! its message shown as text (`show.rs`), the type-erased view the
//! engine keeps (`any.rs`), and the bus's directory that finds a topic by its type on every
//! publish (`directory.rs`).

pub(crate) mod any;
pub(crate) mod directory;
pub(crate) mod dispatcher;
mod redeliver;
#[cfg(feature = "dashboard")]
mod show;
pub(crate) mod state;
pub(crate) mod subscribers;
