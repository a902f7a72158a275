//! The `#[derive(Topic)]` and `#[subscriber]` macros of the `eventbus` crate.
//!
//! This crate is an implementation detail: depend on `eventbus`, which re-exports both.
//! Each macro goes parse (`attr`, `ast`) → validate (`valid`) → expand (`expand`), reporting
//! every problem it finds at once, at its span.

mod ast;
mod attr;
mod errors;
mod expand;
mod valid;

use proc_macro::TokenStream;

/// Makes a type a topic. See `eventbus::Topic`.
///
/// Options, in `#[topic(...)]`:
///
/// - `name = "orders.placed"`: the name shown in stats and dead letters (default: the type's
///   name, with its type arguments for a generic type).
/// - `crate = path`: the path the expansion names `eventbus` by (default `::eventbus`), for a
///   crate that re-exports `eventbus` (`crate = my_framework::eventbus`). It is a path, not a
///   string, resolved where the derive is used.
#[proc_macro_derive(Topic, attributes(topic))]
pub fn derive_topic(input: TokenStream) -> TokenStream {
    expand::topic(input.into()).into()
}

/// Registers a function as a subscriber, started by `Bus::new()`. See `eventbus`'s crate docs.
///
/// Options, all optional: `capacity = 100`, `overflow = Block | DropOldest | DropNewest`,
/// `retries = 3`, `backoff = "10ms"`, `name = "billing"`, `filter = is_big`,
/// `start = Earliest`, `workers = 4` (a consumer group), `key = customer_of` (its workers
/// chosen by key), `priority = urgency` (a `fn(&T) -> u8`: a priority mailbox, most urgent
/// first; not with `workers`, `key`, `inline` nor on a log topic), `retry_if = is_transient`
/// (a `fn(&E) -> bool` over the handler's error type: `false` makes that error permanent, a
/// dead letter after one attempt), `inline` (the handler runs inside the publish, on the
/// publisher's thread; an `Err` refuses the publish), and `crate = path`: the path the
/// expansion names `eventbus` by (default `::eventbus`), for a crate that re-exports
/// `eventbus` (`crate = my_framework::eventbus`). It is a path, not a string, resolved where
/// the attribute is used.
#[proc_macro_attribute]
pub fn subscriber(args: TokenStream, input: TokenStream) -> TokenStream {
    expand::subscriber(args.into(), input.into()).into()
}

/// Registers a function as an observer of every topic whose name matches a pattern, started
/// by `Bus::new()`. See `eventbus::Bus::observe`.
///
/// `#[observer("orders.*", capacity = 1000, overflow = DropOldest)] fn audit(m: &AnyMessage)`:
/// the pattern first (`*` one segment, `>` the rest), then any of `capacity`, `overflow`,
/// `retries`, `backoff`, `name`, `filter` (a `fn(&AnyMessage) -> bool`), `priority` (a
/// `fn(&AnyMessage) -> u8`), `retry_if` (a `fn(&E) -> bool` over the handler's error type)
/// and `crate`.
///
/// An `async fn` observer (`#[observer("orders.*")] async fn audit(m: &AnyMessage)`, feature
/// `tokio` of `eventbus`) runs as one tokio task on the bus's runtime, with the same
/// parameters, options and promises: see `eventbus::Bus::observe_async`. Without `tokio` it
/// is a compile error at the function's name.
#[proc_macro_attribute]
pub fn observer(args: TokenStream, input: TokenStream) -> TokenStream {
    expand::observer(args.into(), input.into()).into()
}
