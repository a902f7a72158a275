//! The rules: which option values and which handler signatures are allowed, and what to say
//! about the rest.

use proc_macro2::TokenStream;
use quote::{quote, ToTokens};
use syn::{FnArg, ItemFn, LitInt, LitStr, Path, Type};

use crate::ast::Handler;
use crate::attr::{path_text, SubscriberArgs};
use crate::errors::Errors;

/// The same bound as the runtime's `MAX_CAPACITY`.
const MAX_CAPACITY: usize = 1 << 24;
/// The same bound as the runtime's `MAX_WORKERS`.
const MAX_WORKERS: usize = 256;
const DEFAULT_CAPACITY: usize = 1024;
const DEFAULT_BACKOFF_NANOS: u64 = 10_000_000;

/// `start = Now | Earliest | Seq(n) | Since("10m")`.
#[derive(Clone, Copy)]
pub(crate) enum StartAt {
    Now,
    Earliest,
    Seq(u64),
    Since(u64),
}

const START_VALUES: &str = "Now, Earliest, Seq(n), Since(\"10m\")";

fn start(value: &syn::Expr, errors: &mut Errors) -> StartAt {
    use syn::{Expr, ExprCall, ExprLit, Lit};
    let bad = |errors: &mut Errors| {
        errors.spanned(
            value,
            format_args!("expected where to start: one of {START_VALUES}"),
        );
        StartAt::Now
    };
    match value {
        Expr::Path(path) if path.path.is_ident("Now") => StartAt::Now,
        Expr::Path(path) if path.path.is_ident("Earliest") => StartAt::Earliest,
        Expr::Call(ExprCall { func, args, .. }) if args.len() == 1 => {
            let Expr::Path(func) = &**func else {
                return bad(errors);
            };
            match (
                func.path.get_ident().map(ToString::to_string).as_deref(),
                &args[0],
            ) {
                (
                    Some("Seq"),
                    Expr::Lit(ExprLit {
                        lit: Lit::Int(n), ..
                    }),
                ) => match n.base10_parse::<u64>() {
                    Ok(n) => StartAt::Seq(n),
                    Err(_) => bad(errors),
                },
                (
                    Some("Since"),
                    Expr::Lit(ExprLit {
                        lit: Lit::Str(d), ..
                    }),
                ) => match parse_duration(&d.value()) {
                    Ok(nanos) => StartAt::Since(nanos),
                    Err(problem) => {
                        errors.spanned(
                            d,
                            format_args!(
                                "malformed duration {:?}: {problem}; expected e.g. \"10m\" \
                                     (units: ns, us, ms, s, m, h)",
                                d.value()
                            ),
                        );
                        StartAt::Now
                    }
                },
                _ => bad(errors),
            }
        }
        _ => bad(errors),
    }
}

/// A subscriber's settings, checked, with defaults filled in.
pub(crate) struct Settings {
    pub(crate) capacity: usize,
    pub(crate) overflow: syn::Ident,
    pub(crate) retries: u32,
    pub(crate) backoff_nanos: u64,
    pub(crate) name: Option<LitStr>,
    /// `filter = path`: a function `fn(&T) -> bool`.
    pub(crate) filter: Option<syn::Path>,
    /// `retry_if = path`: a function `fn(&E) -> bool` of the handler's error `E`.
    pub(crate) retry_if: Option<syn::Path>,
    /// `start = ...`: where a subscription to a log topic starts.
    pub(crate) start: StartAt,
    /// `workers = N`: a consumer group's size (1: no group).
    pub(crate) workers: usize,
    /// `key = path`: a function `fn(&T) -> K` where `K: Hash`.
    pub(crate) key: Option<syn::Path>,
    /// `priority = path`: a function `fn(&T) -> u8`, the higher the more urgent.
    pub(crate) priority: Option<syn::Path>,
    /// `inline`: the handler runs inside the publish, on the publisher's thread.
    pub(crate) inline: bool,
    /// The path the expansion names the runtime by: `::eventbus`, or `crate = path`.
    pub(crate) krate: TokenStream,
}

pub(crate) fn settings(args: SubscriberArgs, errors: &mut Errors) -> Settings {
    let capacity = match &args.capacity {
        None => DEFAULT_CAPACITY,
        Some(lit) => match lit.base10_parse::<usize>() {
            Ok(0) => {
                errors.spanned(
                    lit,
                    "`capacity` may not be 0: a mailbox holds at least one message",
                );
                DEFAULT_CAPACITY
            }
            Ok(n) if n > MAX_CAPACITY => {
                errors.spanned(
                    lit,
                    format_args!("`capacity` may be at most {MAX_CAPACITY} (16 bytes a slot)"),
                );
                DEFAULT_CAPACITY
            }
            Ok(n) => n,
            Err(_) => {
                errors.spanned(lit, "`capacity` takes a whole number from 1 to 16777216");
                DEFAULT_CAPACITY
            }
        },
    };
    let retries = match &args.retries {
        None => 0,
        Some(lit) => lit.base10_parse::<u32>().unwrap_or_else(|_| {
            errors.spanned(lit, "`retries` takes a whole number from 0 to 4294967295");
            0
        }),
    };
    let overflow = match &args.overflow {
        None => syn::Ident::new("Block", proc_macro2::Span::call_site()),
        Some(path) => {
            let policy = path.segments.last().map(|s| s.ident.clone());
            match policy {
                Some(ident)
                    if ["Block", "DropOldest", "DropNewest"].contains(&&*ident.to_string()) =>
                {
                    ident
                }
                _ => {
                    errors.spanned(
                        path,
                        format_args!(
                            "unknown overflow policy `{}`; expected one of: Block, DropOldest, DropNewest",
                            path_text(path)
                        ),
                    );
                    syn::Ident::new("Block", path_span(path))
                }
            }
        }
    };
    let backoff_nanos = match &args.backoff {
        None => DEFAULT_BACKOFF_NANOS,
        Some(lit) => parse_duration(&lit.value()).unwrap_or_else(|problem| {
            errors.spanned(
                lit,
                format_args!(
                    "malformed backoff {:?}: {problem}; expected a whole number and a unit, \
                     e.g. \"10ms\" (units: ns, us, ms, s, m, h)",
                    lit.value()
                ),
            );
            DEFAULT_BACKOFF_NANOS
        }),
    };
    if let Some(name) = &args.name {
        if name.value().trim().is_empty() {
            errors.spanned(name, "`name` may not be empty");
        }
    }
    let start = args
        .start
        .as_ref()
        .map_or(StartAt::Now, |value| start(value, errors));
    let workers = match &args.workers {
        None => 1,
        Some(lit) => match lit.base10_parse::<usize>() {
            Ok(0) => {
                errors.spanned(
                    lit,
                    "`workers` may not be 0: a group has at least one worker",
                );
                1
            }
            Ok(n) if n > MAX_WORKERS => {
                errors.spanned(
                    lit,
                    format_args!("`workers` may be at most {MAX_WORKERS} (one thread each)"),
                );
                1
            }
            Ok(n) => n,
            Err(_) => {
                errors.spanned(
                    lit,
                    format_args!("`workers` takes a whole number from 1 to {MAX_WORKERS}"),
                );
                1
            }
        },
    };
    if let (Some(key), None) = (&args.key, &args.inline) {
        let parsed = args.workers.as_ref().map(LitInt::base10_parse::<usize>);
        if matches!(parsed, None | Some(Ok(1))) {
            errors.spanned(
                key,
                "`key` picks one of a group's workers: add `workers = N` (N > 1), e.g. \
                 `#[subscriber(workers = 4, key = customer_of)]`",
            );
        }
    }
    if args.inline.is_some() {
        refuse_with_inline(&args, errors);
    } else if let Some(priority) = &args.priority {
        let group = args
            .workers
            .as_ref()
            .map(|w| ("workers", w.to_token_stream()));
        let key = args.key.as_ref().map(|k| ("key", k.to_token_stream()));
        for (with, at) in group.into_iter().chain(key) {
            errors.spanned(
                &at,
                format_args!(
                    "`priority` cannot go with `{with}`: `workers` and `key` make a consumer \
                     group, whose workers share a mailbox or keep one order per key; a \
                     priority reorders one worker's mailbox: drop `{with}` or `priority = {}`",
                    path_text(priority)
                ),
            );
        }
    }
    Settings {
        inline: args.inline.is_some(),
        capacity,
        overflow,
        retries,
        backoff_nanos,
        retry_if: args.retry_if,
        name: args.name,
        filter: args.filter,
        start,
        workers,
        key: args.key,
        priority: args.priority,
        krate: crate_path(args.krate, errors),
    }
}

/// The path the expansion names the runtime by: `crate = path` if given (a module path,
/// resolved where the macro is used), else `::eventbus`.
pub(crate) fn crate_path(krate: Option<Path>, errors: &mut Errors) -> TokenStream {
    match krate {
        None => quote!(::eventbus),
        Some(path) => {
            if let Some(segment) = path.segments.iter().find(|s| !s.arguments.is_none()) {
                errors.spanned(
                    &segment.arguments,
                    "`crate` takes the path of the `eventbus` crate or of a re-export of it, \
                     without generic arguments",
                );
                // The derive's impl is still emitted: with the default path, rustc adds no
                // second error about the same arguments.
                return quote!(::eventbus);
            }
            quote!(#path)
        }
    }
}

fn path_span(path: &syn::Path) -> proc_macro2::Span {
    path.segments
        .last()
        .map_or_else(proc_macro2::Span::call_site, |s| s.ident.span())
}

/// A topic's `retain = N, retain_for = "1h"`: the most messages kept, and the oldest age
/// in nanoseconds.
pub(crate) fn retention(
    retain: Option<&syn::LitInt>,
    retain_for: Option<&syn::LitStr>,
    errors: &mut Errors,
) -> Option<(usize, Option<u64>)> {
    let age = retain_for.and_then(|lit| match parse_duration(&lit.value()) {
        Ok(0) => {
            errors.spanned(lit, "`retain_for` may not be 0: the log would keep nothing");
            None
        }
        Ok(nanos) => Some(nanos),
        Err(problem) => {
            errors.spanned(
                lit,
                format_args!(
                    "malformed retain_for {:?}: {problem}; expected a whole number and a unit, \
                     e.g. \"1h\" (units: ns, us, ms, s, m, h)",
                    lit.value()
                ),
            );
            None
        }
    });
    let Some(retain) = retain else {
        if let Some(lit) = retain_for {
            errors.spanned(
                lit,
                "`retain_for` needs `retain` too: a log is bounded by a number of messages, \
                 e.g. `#[topic(retain = 10_000, retain_for = \"1h\")]`",
            );
        }
        return None;
    };
    match retain.base10_parse::<usize>() {
        Ok(0) => {
            errors.spanned(
                retain,
                "`retain` may not be 0: a log keeps at least one message",
            );
            None
        }
        Ok(messages) => Some((messages, age)),
        Err(_) => {
            errors.spanned(retain, "`retain` is too large for a `usize`");
            None
        }
    }
}

/// A topic's `dispatcher` and `queue = N`: the queue's capacity, if it has a dispatcher (1024
/// unless `queue` says otherwise). A log topic cannot have one: its subscriptions read the log
/// at positions of their own, so there is nothing to hand out.
pub(crate) fn dispatcher(
    flag: Option<&syn::Path>,
    queue: Option<&syn::LitInt>,
    log: bool,
    errors: &mut Errors,
) -> Option<usize> {
    const DEFAULT_QUEUE: usize = 1024;
    let Some(flag) = flag else {
        if let Some(queue) = queue {
            errors.spanned(
                queue,
                "`queue` is the size of a dispatcher's queue: write `#[topic(dispatcher, \
                 queue = N)]`",
            );
        }
        return None;
    };
    if log {
        errors.spanned(
            flag,
            "a log topic cannot have a dispatcher: its subscriptions read the log at \
             positions of their own, so there is nothing to hand out; remove `dispatcher` \
             or `retain`",
        );
        return None;
    }
    let Some(queue) = queue else {
        return Some(DEFAULT_QUEUE);
    };
    match queue.base10_parse::<usize>() {
        Ok(0) => {
            errors.spanned(
                queue,
                "`queue` may not be 0: no publish would find room in it",
            );
            None
        }
        Ok(messages) => Some(messages),
        Err(_) => {
            errors.spanned(queue, "`queue` is too large for a `usize`");
            None
        }
    }
}

/// An observer's pattern: topic-name segments split by `.`, where `*` is one segment and
/// `>` the rest (last only). The same rules as the runtime's `Pattern::parse`.
pub(crate) fn pattern(pattern: &LitStr, errors: &mut Errors) {
    let text = pattern.value();
    let parts: Vec<&str> = text.split('.').collect();
    let last = parts.len() - 1;
    let problem = if text.is_empty() {
        Some("it is empty")
    } else {
        parts.iter().enumerate().find_map(|(at, part)| match *part {
            "" => Some("it has an empty segment (`..`, or a `.` at either end)"),
            ">" if at != last => Some("`>` may only be its last segment"),
            ">" | "*" => None,
            _ if part.contains(['*', '>']) => {
                Some("`*` and `>` stand for whole segments: `orders.*`, not `orders*`")
            }
            _ if part.contains(char::is_whitespace) => Some("it has white space in a segment"),
            _ => None,
        })
    };
    if let Some(problem) = problem {
        errors.spanned(
            pattern,
            format_args!(
                "malformed pattern {text:?}: {problem}; a pattern is topic-name segments split \
                 by `.`, where `*` matches one segment and `>` the rest, e.g. \"orders.*\" or \
                 \"payments.>\""
            ),
        );
    }
}

/// `"10ms"` as nanoseconds.
pub(crate) fn parse_duration(text: &str) -> Result<u64, &'static str> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    if digits == 0 {
        return Err("it does not start with a number");
    }
    let number: u64 = text[..digits]
        .parse()
        .map_err(|_| "the number is too large")?;
    let scale: u64 = match text[digits..].trim_start() {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "" => return Err("it has no unit"),
        _ => return Err("the unit is not one of ns, us, ms, s, m, h"),
    };
    number.checked_mul(scale).ok_or("it is too long")
}

/// Checks the function's signature and gives its typed view when a subscriber may have it.
pub(crate) fn handler<'a>(function: &'a ItemFn, errors: &mut Errors) -> Option<Handler<'a>> {
    let sig = &function.sig;
    let mut ok = true;
    if let Some(token) = &sig.unsafety {
        errors.spanned(token, "a subscriber cannot be `unsafe`");
        ok = false;
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.spanned(
            &sig.generics,
            "a subscriber cannot be generic: it subscribes to one topic type, named in its \
             first parameter",
        );
        ok = false;
    }
    let parameters: Vec<&FnArg> = sig.inputs.iter().collect();
    let message = match parameters.first() {
        None => {
            errors.at(
                sig.paren_token.span.join(),
                "a subscriber takes the message as its first parameter: `&T` or `&Message<T>` \
                 where `T: Topic`",
            );
            None
        }
        Some(FnArg::Receiver(receiver)) => {
            errors.spanned(
                receiver,
                "a subscriber is a free function: `self` is not allowed; take the message \
                 (`&T` or `&Message<T>`) instead",
            );
            None
        }
        Some(FnArg::Typed(param)) => match &*param.ty {
            Type::Reference(reference) if reference.mutability.is_none() => Some(reference),
            other => {
                errors.spanned(
                    other,
                    "a subscriber takes its message by shared reference: `&T` or \
                     `&Message<T>` where `T: Topic`",
                );
                None
            }
        },
    };
    let mut extras = Vec::new();
    let mut bus_seen = false;
    for param in parameters.iter().skip(1) {
        let ty = match param {
            FnArg::Typed(param) => &*param.ty,
            FnArg::Receiver(receiver) => {
                errors.spanned(receiver, "`self` is not allowed in a subscriber");
                ok = false;
                continue;
            }
        };
        // What a parameter is given is the runtime's `FromBus` to decide, checked in the
        // expansion at the parameter's span; only a second `&Bus` is refused here, as it
        // can be told from the text alone.
        if is_bus_reference(ty) {
            if bus_seen {
                errors.spanned(ty, "a subscriber takes `&Bus` at most once");
                ok = false;
                continue;
            }
            bus_seen = true;
        }
        extras.push(ty);
    }
    match message {
        Some(message) if ok => Some(Handler::new(function, message, extras)),
        _ => None,
    }
}

/// `retry_if` asks about the handler's error, so the handler must be able to fail. Only a
/// handler without a return type is told here; the expansion ties `retry_if`'s argument to
/// the error type of a declared one (an explicit `-> ()` included).
pub(crate) fn retry_if(settings: &Settings, handler: &Handler<'_>, errors: &mut Errors) {
    let (Some(retry_if), None, false) = (&settings.retry_if, handler.output, settings.inline)
    else {
        return;
    };
    errors.spanned(
        retry_if,
        format_args!(
            "`retry_if` chooses which of the handler's errors are retried, but `{}` cannot \
             fail: it returns `()`; return `Result<(), E>` and give `retry_if` a \
             `fn(&E) -> bool`, or drop `retry_if = {}`",
            handler.function.sig.ident,
            path_text(retry_if)
        ),
    );
}

/// `&Bus` or `&path::Bus`.
fn is_bus_reference(ty: &Type) -> bool {
    let Type::Reference(reference) = ty else {
        return false;
    };
    let Type::Path(path) = &*reference.elem else {
        return false;
    };
    path.qself.is_none()
        && path
            .path
            .segments
            .last()
            .is_some_and(|last| last.ident == "Bus" && last.arguments.is_none())
}

/// Reports each option `inline` cannot go with, at the option.
fn refuse_with_inline(args: &SubscriberArgs, errors: &mut Errors) {
    let mailbox = "an inline subscriber has no mailbox: its handler runs inside the publish";
    let group = "a group's workers take turns at a mailbox; an inline handler runs on each \
                 publisher's thread";
    let retries = "a refusal goes back to the publisher (`PublishError::Rejected`), who may \
                   publish again; retrying would hold up every publisher of the topic";
    let retry_if = "it chooses which failures are retried, and an inline subscriber retries \
                    none: a refusal goes back to the publisher (`PublishError::Rejected`), who \
                    may publish again";
    let start = "an inline handler sees each message as it is published";
    let order = "a priority reorders a mailbox; an inline handler runs inside each publish, in \
                 topic order";
    let refused: [(&str, Option<&dyn quote::ToTokens>, &str); 9] = [
        ("capacity", args.capacity.as_ref().map(|v| v as _), mailbox),
        ("overflow", args.overflow.as_ref().map(|v| v as _), mailbox),
        ("retries", args.retries.as_ref().map(|v| v as _), retries),
        ("backoff", args.backoff.as_ref().map(|v| v as _), retries),
        ("retry_if", args.retry_if.as_ref().map(|v| v as _), retry_if),
        ("start", args.start.as_ref().map(|v| v as _), start),
        ("workers", args.workers.as_ref().map(|v| v as _), group),
        ("key", args.key.as_ref().map(|v| v as _), group),
        ("priority", args.priority.as_ref().map(|v| v as _), order),
    ];
    for (key, span, why) in refused {
        if let Some(span) = span {
            errors.spanned(span, format_args!("`{key}` cannot go with `inline`: {why}"));
        }
    }
}
