//! The wire format of the NATS bridge: what a program in another language reads and writes
//! to take part. Documentation only (no items), so `cargo doc -p eventbus` shows it without
//! the `nats` feature; the bridge itself is `eventbus::nats` (feature `nats`).
//!
//! The server is NATS with JetStream (the bridge is tested against `nats-server` 2.9.10).
//! Every topic crosses on one subject, kept in one stream that holds that subject alone (a
//! keyed topic also on its partitions' subjects, in the same stream: see
//! [Keyed topics](#keyed-topics)).
//!
//! # Subject
//!
//! `eventbus.` followed by the topic's name (`Topic::name()`, `#[topic(name = "..")]`),
//! split at its dots into tokens. In each token every character other than an ASCII letter,
//! an ASCII digit or `-` is written `~XX`, one `~XX` per byte of its UTF-8 encoding, in
//! upper-case hex; an empty token (two dots in a row, or a dot at either end) is `~2E`. So
//! two topic names never share a subject, and no subject holds a wildcard.
//!
//! | topic name | subject |
//! |---|---|
//! | `orders.placed` | `eventbus.orders.placed` |
//! | `Wrapper<u32>` (a generic type's default name) | `eventbus.Wrapper~3Cu32~3E` |
//! | `a_b c` | `eventbus.a~5Fb~20c` |
//! | `a..b` | `eventbus.a.~2E.b` |
//! | `*.>` | `eventbus.~2A.~3E` |
//!
//! `Bridge::subject::<T>()` computes it.
//!
//! # Stream
//!
//! The subject with every `.` written `_` (escaped tokens never hold a `_`):
//! `eventbus.orders.placed` is the stream `eventbus_orders_placed`
//! (`Bridge::stream_name::<T>()`), or the name the bridge's `StreamOptions` give. Its
//! subjects are that one subject; the bridge makes it with file storage, the default limits
//! retention (or the options' limits and replicas) and a duplicate window of 2 minutes (the
//! max age, if shorter). A stream made beforehand by anyone is used as it is, so an
//! operator may set retention and replicas there: under the default name the bridge adds
//! the subject if it is missing; under a name the options give, it must hold the subject
//! alone. The
//! stream must exist before a foreign producer publishes (JetStream refuses a publish to a
//! subject no stream holds): make it as above, or call `Bridge::ensure_stream::<T>()` from
//! an eventbus process first. A stream of *another* name that covers the subject makes the
//! bridge fail with JetStream's error 10065 ("subjects overlap").
//!
//! # Body
//!
//! The topic's value as JSON, UTF-8, in serde's shape for the Rust type (`serde_json`): a
//! struct is an object of its fields (`{"id":7}`), a newtype struct its inner value, a unit
//! struct `null`, an enum externally tagged (`{"Placed":{"id":7}}`), unless the type's
//! serde attributes say otherwise. A body an importer cannot decode as its topic's type is
//! a dead letter on the importing bus (subscriber `nats-import:<name>`, seq the stream
//! sequence, payload the raw bytes as `Vec<u8>`) and is terminated on the server (`+TERM`),
//! so it is never sent again; the import goes on.
//!
//! # Headers
//!
//! An export sets the first three on every message, and no header but these four. **All are optional on import**: a
//! message with no headers at all is imported like one from a bridge.
//!
//! | header | value | set by an export | read by an import |
//! |---|---|---|---|
//! | `Nats-Msg-Id` | `<bridge id>-<seq>` | always | no (the server de-duplicates by it for 2 minutes: send one, unique per message, if you may send a message twice) |
//! | `Eventbus-Seq` | the message's seq in its topic on the exporting bus, in decimal: 0 for the first message a bus publishes on the topic, counting up by one, and 0 again when that process starts again | always | no |
//! | `Eventbus-Origin` | the exporting bridge's id (`Bridge::id()`): random per `Bridge::connect`, letters and digits | always | yes: an importer skips (acks without publishing) a message its own bridge exported |
//! | `Nats-Expected-Last-Msg-Id` | the `Nats-Msg-Id` of the message sent before it | on most: not on a bridge's first message of the topic, nor on one sent again after a failure, nor on the first one sent after those | no (a JetStream publish expectation, checked by the server, which stores it with the message) |
//!
//! The seq names a message within one run of one exporting bus; across several exporters
//! of one topic, or restarts, the pair (`Eventbus-Origin`, `Eventbus-Seq`) does. The order
//! of the stream (its stream sequence) is the order importers keep: each exporting bus's
//! messages stay in that bus's order, and several exporters interleave.
//!
//! # A foreign producer
//!
//! Make the stream (or let an eventbus process make it, `Bridge::ensure_stream::<T>()`),
//! then publish the JSON body on the subject with a JetStream publish (which awaits the
//! server's ack), optionally with a `Nats-Msg-Id`. In Python, with nats-py:
//!
//! ```text
//! js = nc.jetstream()
//! await js.add_stream(name="eventbus_orders_placed", subjects=["eventbus.orders.placed"])
//! await js.publish("eventbus.orders.placed", b'{"id": 7}', headers={"Nats-Msg-Id": "py-7"})
//! ```
//!
//! Importers publish it on their bus in stream order, like any other message.
//!
//! # A foreign consumer
//!
//! Make a durable consumer of your own on the topic's stream (not an importer's name: a
//! consumer name is shared work, see below), read the body as JSON and the headers above,
//! and ack. The registry streams `eventbus-copies`, `eventbus-keyed` and
//! `eventbus-keyed-<topic stream>` are the bridge's own: leave them alone.
//!
//! # Imports, as the server sees them
//!
//! `import::<T>(name)` is a durable pull consumer named `name` (ASCII letters, digits, `-`
//! and `_`, at most 200) on the topic's stream: deliver all, explicit acks, an ack wait of
//! 5 s, up to 1024 unacknowledged. Bridges importing a topic under one name share that
//! consumer and split the stream between them; each registers in `eventbus-copies` so the
//! others know it is there.
//!
//! # Keyed topics
//!
//! A keyed export (`Bridge::export_keyed::<T>(partitions, key)`) sends each message on a
//! partition subject instead of the topic's: the subject, then the token `~p` (which an
//! escaped topic name never holds), then the partition's number from 0:
//! `eventbus.orders.placed.~p.3`. The partition is the key's `Hash` bytes hashed with
//! 64-bit FNV-1a (offset `0xcbf29ce484222325`, prime `0x100000001b3`), modulo the
//! partition count. The topic's stream holds `eventbus.orders.placed.~p.*` as well as the
//! subject, so it keeps every message of the topic in one order (a plain import reads all
//! of them); a foreign producer takes part in a keyed topic by publishing on the partition
//! subjects.
//!
//! The partition count is declared in the stream `eventbus-keyed` (subjects
//! `eventbus-keyed.>`, one message per subject): subject `eventbus-keyed.<topic stream>`,
//! the count in decimal, stored by the first keyed export with
//! `Nats-Expected-Last-Subject-Sequence: 0`; later exports must agree.
//!
//! The members of a keyed import `name` meet in the stream `eventbus-keyed-<topic stream>`
//! (subjects `eventbus-keyed-<topic stream>.>`, one message per subject, each dropped one
//! lease after it was stored: its `max_age`, 10 s unless the first member asked otherwise):
//!
//! | subject | holds | written |
//! |---|---|---|
//! | `<registry>.<name>.m.<bridge id>` | the member's bridge id | every quarter lease while the member runs; purged when it stops |
//! | `<registry>.<name>.p.<partition>` | the owner's bridge id | taken with `Nats-Expected-Last-Subject-Sequence: 0`, renewed every quarter lease expecting its own last sequence, purged when given back |
//!
//! A member that gives a lease back or leaves also publishes an empty message on the core
//! subject `eventbus-nudge.<topic stream>.<name>` (kept in no stream) to wake the others.
//! Each partition is read through the durable pull consumer `<name>-keyed-<partition>`
//! on the topic's stream: filtered on the partition's subject, deliver all, explicit acks,
//! an ack wait of 5 s, and **one** message unacknowledged at most, which is what keeps a
//! partition's order across owners.
