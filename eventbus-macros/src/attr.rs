//! Parsing the macros' options: `#[subscriber(key = value, ...)]` and
//! `#[topic(key = value, ...)]`. Values are kept as written, with their spans; `valid` judges
//! them.

use proc_macro2::TokenStream;
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::{Attribute, Expr, ExprLit, Lit, LitInt, LitStr, Path};

use crate::errors::Errors;

pub(crate) const SUBSCRIBER_OPTIONS: &str =
    "capacity, overflow, retries, backoff, retry_if, name, filter, start, workers, key, priority, \
     inline, crate";
pub(crate) const TOPIC_OPTIONS: &str = "name, retain, retain_for, dispatcher, queue, crate";

/// `#[subscriber(...)]` as written.
#[derive(Default)]
pub(crate) struct SubscriberArgs {
    pub(crate) capacity: Option<LitInt>,
    pub(crate) overflow: Option<Path>,
    pub(crate) retries: Option<LitInt>,
    pub(crate) backoff: Option<LitStr>,
    /// `retry_if = f`: a function `fn(&E) -> bool` of the handler's error.
    pub(crate) retry_if: Option<Path>,
    pub(crate) name: Option<LitStr>,
    pub(crate) filter: Option<Path>,
    pub(crate) start: Option<Expr>,
    pub(crate) workers: Option<LitInt>,
    pub(crate) key: Option<Path>,
    pub(crate) priority: Option<Path>,
    /// `inline`, a flag: the handler runs inside the publish.
    pub(crate) inline: Option<Path>,
    pub(crate) krate: Option<Path>,
}

pub(crate) fn subscriber_args(args: TokenStream, errors: &mut Errors) -> SubscriberArgs {
    let mut parsed = SubscriberArgs::default();
    let parser = syn::meta::parser(|meta| {
        let Some(key) = meta.path.get_ident().map(ToString::to_string) else {
            skip_value(&meta)?;
            errors.spanned(&meta.path, unknown_option("subscriber", &meta.path));
            return Ok(());
        };
        if key == "inline" {
            if skip_value(&meta)?.is_some() {
                errors.spanned(
                    &meta.path,
                    "`inline` takes no value: write `#[subscriber(inline)]`",
                );
            }
            set(&mut parsed.inline, Some(meta.path.clone()), &meta, errors);
            return Ok(());
        }
        let Some(value) = skip_value(&meta)? else {
            errors.spanned(
                &meta.path,
                format_args!("`{key}` needs a value, e.g. `{}`", example(&key)),
            );
            return Ok(());
        };
        match key.as_str() {
            "capacity" => set(
                &mut parsed.capacity,
                int(&key, value, errors),
                &meta,
                errors,
            ),
            "retries" => set(&mut parsed.retries, int(&key, value, errors), &meta, errors),
            "backoff" => set(
                &mut parsed.backoff,
                string(&key, value, errors),
                &meta,
                errors,
            ),
            "retry_if" => set(
                &mut parsed.retry_if,
                function(&key, value, errors),
                &meta,
                errors,
            ),
            "name" => set(&mut parsed.name, string(&key, value, errors), &meta, errors),
            "crate" => set(&mut parsed.krate, path(value, errors), &meta, errors),
            "filter" => set(
                &mut parsed.filter,
                function(&key, value, errors),
                &meta,
                errors,
            ),
            "start" => set(&mut parsed.start, Some(value), &meta, errors),
            "workers" => set(&mut parsed.workers, int(&key, value, errors), &meta, errors),
            "key" => set(&mut parsed.key, key_function(value, errors), &meta, errors),
            "priority" => set(
                &mut parsed.priority,
                function(&key, value, errors),
                &meta,
                errors,
            ),
            "overflow" => {
                let path = match value {
                    Expr::Path(path) if path.qself.is_none() => Some(path.path),
                    other => {
                        errors.spanned(
                            other,
                            "expected an overflow policy: Block, DropOldest or DropNewest",
                        );
                        None
                    }
                };
                set(&mut parsed.overflow, path, &meta, errors);
            }
            _ => errors.spanned(&meta.path, unknown_option("subscriber", &meta.path)),
        }
        Ok(())
    });
    if let Err(error) = parser.parse2(args) {
        errors.push(error);
    }
    parsed
}

pub(crate) const OBSERVER_OPTIONS: &str =
    "capacity, overflow, retries, backoff, retry_if, name, filter, priority, crate";

/// `#[observer("pattern", ...)]` as written: the pattern, and the options (a subscriber's,
/// less those an observer cannot take, which are reported).
pub(crate) fn observer_args(
    args: TokenStream,
    errors: &mut Errors,
) -> (Option<LitStr>, SubscriberArgs) {
    let mut tokens = args.into_iter().peekable();
    let first: TokenStream = tokens
        .by_ref()
        .take_while(|t| !matches!(t, proc_macro2::TokenTree::Punct(p) if p.as_char() == ','))
        .collect();
    let rest: TokenStream = tokens.collect();
    let pattern = match syn::parse2::<LitStr>(first.clone()) {
        Ok(pattern) => Some(pattern),
        Err(_) => {
            let message = "`#[observer]` takes a pattern of topic names first, e.g. \
                           `#[observer(\"orders.*\", capacity = 1000)]`";
            if first.is_empty() {
                errors.at(proc_macro2::Span::call_site(), message);
            } else {
                errors.spanned(&first, message);
            }
            None
        }
    };
    let mut parsed = subscriber_args(rest, errors);
    let not_here = |errors: &mut Errors, key: &str, span: &dyn quote::ToTokens| {
        errors.spanned(
            span,
            format_args!("`{key}` is not an observer option; expected one of: {OBSERVER_OPTIONS}"),
        );
    };
    if let Some(workers) = parsed.workers.take() {
        not_here(errors, "workers", &workers);
    }
    if let Some(key) = parsed.key.take() {
        not_here(errors, "key", &key);
    }
    if let Some(start) = parsed.start.take() {
        not_here(errors, "start", &start);
    }
    if let Some(inline) = parsed.inline.take() {
        not_here(errors, "inline", &inline);
    }
    (pattern, parsed)
}

/// `#[topic(...)]` as written.
#[derive(Default)]
pub(crate) struct TopicArgs {
    pub(crate) name: Option<LitStr>,
    pub(crate) retain: Option<LitInt>,
    pub(crate) retain_for: Option<LitStr>,
    /// `dispatcher`, a flag: where it was written.
    pub(crate) dispatcher: Option<Path>,
    pub(crate) queue: Option<LitInt>,
    pub(crate) krate: Option<Path>,
}

pub(crate) fn topic_args(attrs: &[Attribute], errors: &mut Errors) -> TopicArgs {
    let mut parsed = TopicArgs::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("topic")) {
        if !matches!(attr.meta, syn::Meta::List(_)) {
            errors.spanned(
                attr,
                format_args!("expected `#[topic(key = value, ...)]` with keys: {TOPIC_OPTIONS}"),
            );
            continue;
        }
        let result = attr.parse_nested_meta(|meta| {
            let value = skip_value(&meta)?;
            let key = meta.path.get_ident().map(ToString::to_string);
            match (key.as_deref().unwrap_or_default(), value) {
                ("name", Some(value)) => {
                    set(
                        &mut parsed.name,
                        string("name", value, errors),
                        &meta,
                        errors,
                    );
                }
                ("crate", Some(value)) => {
                    set(&mut parsed.krate, path(value, errors), &meta, errors);
                }
                ("retain", Some(value)) => {
                    set(
                        &mut parsed.retain,
                        int("retain", value, errors),
                        &meta,
                        errors,
                    );
                }
                ("retain_for", Some(value)) => {
                    let value = string("retain_for", value, errors);
                    set(&mut parsed.retain_for, value, &meta, errors);
                }
                ("dispatcher", None) => {
                    set(
                        &mut parsed.dispatcher,
                        Some(meta.path.clone()),
                        &meta,
                        errors,
                    );
                }
                ("dispatcher", Some(value)) => errors.spanned(
                    value,
                    "`dispatcher` takes no value: write `#[topic(dispatcher)]`, and \
                     `queue = N` beside it for the queue's size",
                ),
                ("queue", Some(value)) => {
                    set(
                        &mut parsed.queue,
                        int("queue", value, errors),
                        &meta,
                        errors,
                    );
                }
                (key @ ("name" | "crate" | "retain" | "retain_for" | "queue"), None) => errors
                    .spanned(
                        &meta.path,
                        format_args!("`{key}` needs a value, e.g. `{}`", example(key)),
                    ),
                _ => errors.spanned(&meta.path, unknown_option("topic", &meta.path)),
            }
            Ok(())
        });
        if let Err(error) = result {
            errors.push(error);
        }
    }
    parsed
}

/// Takes `= value` if there is one, so parsing goes on after a bad key.
fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<Option<Expr>> {
    if meta.input.peek(syn::Token![=]) {
        meta.value()?.parse().map(Some)
    } else {
        Ok(None)
    }
}

fn set<T>(slot: &mut Option<T>, value: Option<T>, meta: &ParseNestedMeta<'_>, errors: &mut Errors) {
    let Some(value) = value else { return };
    if slot.is_some() {
        errors.spanned(
            &meta.path,
            format_args!("duplicate option `{}`", path_text(&meta.path)),
        );
    } else {
        *slot = Some(value);
    }
}

fn int(key: &str, value: Expr, errors: &mut Errors) -> Option<LitInt> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Int(int), ..
        }) => Some(int),
        other => {
            let message = format!("`{key}` takes a whole number, e.g. `{}`", example(key));
            errors.spanned(other, message);
            None
        }
    }
}

fn string(key: &str, value: Expr, errors: &mut Errors) -> Option<LitStr> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Str(string),
            ..
        }) => Some(string),
        other => {
            let message = format!("`{key}` takes a string, e.g. `{}`", example(key));
            errors.spanned(other, message);
            None
        }
    }
}

/// `crate = some::path`: a path as written, resolved where the macro is used.
fn path(value: Expr, errors: &mut Errors) -> Option<Path> {
    match value {
        Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => Some(path.path),
        Expr::Lit(ExprLit {
            lit: Lit::Str(string),
            ..
        }) => {
            let message = format!(
                "`crate` takes a path, not a string: `crate = {}`",
                string.value()
            );
            errors.spanned(string, message);
            None
        }
        other => {
            let message = format!("`crate` takes a path, e.g. `{}`", example("crate"));
            errors.spanned(other, message);
            None
        }
    }
}

/// The path of a function, as `filter = is_big`, `priority = urgency` or
/// `retry_if = is_transient` names one.
fn function(key: &str, value: Expr, errors: &mut Errors) -> Option<Path> {
    match value {
        Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => Some(path.path),
        other => {
            let signature = match key {
                "priority" => "`fn(&T) -> u8`,",
                "retry_if" => "`fn(&E) -> bool`, where `E` is the handler's error type,",
                _ => "`fn(&T) -> bool`,",
            };
            let message = format!(
                "`{key}` takes the path of a function {signature} e.g. `{}`",
                example(key)
            );
            errors.spanned(other, message);
            None
        }
    }
}

/// The path of a key function, as `key = customer_of` names one.
fn key_function(value: Expr, errors: &mut Errors) -> Option<Path> {
    match value {
        Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => Some(path.path),
        other => {
            errors.spanned(
                other,
                "`key` takes the path of a function `fn(&T) -> K` where `K: Hash`, e.g. \
                 `key = customer_of`",
            );
            None
        }
    }
}

fn example(key: &str) -> &'static str {
    match key {
        "workers" => "workers = 4",
        "key" => "key = customer_of",
        "filter" => "filter = is_big",
        "priority" => "priority = urgency",
        "retry_if" => "retry_if = is_transient",
        "crate" => "crate = my_framework::eventbus",
        "capacity" => "capacity = 100",
        "retries" => "retries = 3",
        "backoff" => "backoff = \"10ms\"",
        "overflow" => "overflow = DropOldest",
        "retain" => "retain = 10_000",
        "start" => "start = Earliest",
        "retain_for" => "retain_for = \"1h\"",
        "queue" => "queue = 1024",
        _ => "name = \"billing\"",
    }
}

/// What an unknown key of `#[subscriber(...)]` or `#[topic(...)]` gets: the valid keys.
fn unknown_option(kind: &str, path: &Path) -> String {
    let expected = if kind == "topic" {
        TOPIC_OPTIONS
    } else {
        SUBSCRIBER_OPTIONS
    };
    format!(
        "unknown {kind} option `{}`; expected one of: {expected}",
        path_text(path)
    )
}

pub(crate) fn path_text(path: &Path) -> String {
    quote::quote!(#path).to_string().replace(' ', "")
}
