//! Whether a message came from a NATS import (feature `nats`): set on the thread that polls
//! an importer's publish, and kept in the message where it is published, so the bridge's
//! export can leave an imported message out wherever it sees it: in a filter at publish for
//! a mailbox topic, or on its worker as it reads a log topic.

use std::cell::Cell;

thread_local! {
    /// Set on this thread while an importer's `publish_async` is being polled.
    static IMPORTING: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is publishing for an importer now.
#[inline]
pub(crate) fn importing() -> bool {
    IMPORTING.with(Cell::get)
}

/// Marks (or unmarks) this thread as publishing for an importer.
pub(crate) fn set_importing(on: bool) {
    IMPORTING.with(|importing| importing.set(on));
}
