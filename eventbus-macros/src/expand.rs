//! Code generation. The expansion names the runtime only by absolute path, `::eventbus`, so
//! users need nothing but `eventbus` in their `Cargo.toml`; or, with `crate = path`, by the
//! path given, for crates that re-export `eventbus` under another name. `#[subscriber]`
//! writes that path once, in a `use` in its block, and names the alias everywhere else.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{DeriveInput, GenericParam, ItemFn};

use crate::ast::{Handler, MessageParam};
use crate::errors::Errors;
use crate::valid::{Settings, StartAt};
use crate::{attr, valid};

pub(crate) fn subscriber(args: TokenStream, input: TokenStream) -> TokenStream {
    let function: ItemFn = match syn::parse2(input.clone()) {
        Ok(function) => function,
        Err(_) => {
            let error = syn::Error::new_spanned(
                &input,
                "`#[subscriber]` goes on a free function: `fn handler(message: &T)`",
            );
            let error = error.into_compile_error();
            return quote!(#input #error);
        }
    };
    let mut errors = Errors::default();
    let settings = valid::settings(attr::subscriber_args(args, &mut errors), &mut errors);
    let handler = valid::handler(&function, &mut errors);
    if let Some(handler) = &handler {
        valid::retry_if(&settings, handler, &mut errors);
        if settings.inline && handler.asynchronous {
            errors.spanned(
                function.sig.asyncness,
                "an inline subscriber runs inside the publish, on the publisher's thread, so it \
                 is a sync `fn`: drop `async`, or drop `inline` for an async subscriber",
            );
        }
    }
    match handler {
        Some(handler) if errors.is_empty() => {
            let registration = registration(&handler, &settings, None);
            quote!(#function #registration)
        }
        _ => {
            let errors = errors.into_compile_errors();
            quote!(#function #errors)
        }
    }
}

/// `#[observer("pattern", ...)]`: a subscriber of every topic whose name matches.
pub(crate) fn observer(args: TokenStream, input: TokenStream) -> TokenStream {
    let function: ItemFn = match syn::parse2(input.clone()) {
        Ok(function) => function,
        Err(_) => {
            let error = syn::Error::new_spanned(
                &input,
                "`#[observer]` goes on a free function: `fn audit(m: &AnyMessage)`",
            );
            let error = error.into_compile_error();
            return quote!(#input #error);
        }
    };
    let mut errors = Errors::default();
    let (pattern, args) = attr::observer_args(args, &mut errors);
    let settings = valid::settings(args, &mut errors);
    if let Some(pattern) = &pattern {
        valid::pattern(pattern, &mut errors);
    }
    let handler = valid::handler(&function, &mut errors);
    if let Some(handler) = &handler {
        valid::retry_if(&settings, handler, &mut errors);
        let any_message = match handler.topic {
            syn::Type::Path(path) => path
                .path
                .segments
                .last()
                .is_some_and(|last| last.ident == "AnyMessage" && last.arguments.is_none()),
            _ => false,
        };
        if matches!(handler.message, MessageParam::Whole) || !any_message {
            errors.spanned(
                handler.topic,
                "an observer takes `&AnyMessage`, which has the topic and seq: \
                 `fn audit(m: &AnyMessage)`",
            );
        }
    }
    match (handler, pattern) {
        (Some(handler), Some(pattern)) if errors.is_empty() => {
            let registration = registration(&handler, &settings, Some(&pattern));
            quote!(#function #registration)
        }
        _ => {
            let errors = errors.into_compile_errors();
            quote!(#function #errors)
        }
    }
}

/// A registration for a `#[subscriber]` or, with a `pattern`, an `#[observer]`.
fn registration(
    handler: &Handler<'_>,
    settings: &Settings,
    pattern: Option<&syn::LitStr>,
) -> TokenStream {
    let function = &handler.function.sig.ident;
    let topic = handler.topic;
    // The runtime is named once, by an alias in the expansion's block, so that a wrong
    // `crate = path` is one error, at the path, however often the expansion uses it.
    let runtime = &settings.krate;
    let krate = &quote!(__eventbus);
    // Spanned so that the error lands on the path, not the whole attribute.
    let path_span = runtime
        .clone()
        .into_iter()
        .last()
        .map_or_else(Span::call_site, |token| token.span());
    let alias = at(&quote!(as #krate), path_span);
    // A sync handler gets `&Message<T>`; an async one owns its `Message<T>` (so its future
    // can hold it across `.await`s) and lends it to the function.
    let asynchronous = handler.asynchronous;
    let message = match (handler.message, asynchronous) {
        (MessageParam::Payload, false) if pattern.is_some() => quote!(__message),
        (MessageParam::Payload, true) if pattern.is_some() => quote!(&__message),
        (MessageParam::Payload, false) => quote!(#krate::Message::payload(__message)),
        (MessageParam::Whole, false) => quote!(__message),
        (MessageParam::Payload, true) => quote!(#krate::Message::payload(&__message)),
        (MessageParam::Whole, true) => quote!(&__message),
    };
    let mut states = Vec::new();
    let mut resolve = Vec::new();
    let mut arguments = Vec::new();
    // An async handler's future owns a share of each state.
    let mut share = Vec::new();
    // Each parameter after the message is supplied through the runtime's `FromBus`:
    // looked up once when the subscriber starts (its slot), made for each call. Spanned so
    // that a parameter that cannot be supplied is reported on its type.
    for (at_index, &ty) in handler.extras.iter().enumerate() {
        let slot = format_ident!("__slot_{}", at_index);
        let krate = at(krate, ty.span());
        let from_bus = quote_spanned!(ty.span()=> <#ty as #krate::__private::FromBus<'_>>);
        states.push(quote_spanned!(ty.span()=> #from_bus::STATE));
        resolve.push(quote_spanned! {ty.span()=>
            let #slot = #from_bus::slot(bus, &options)?;
        });
        share.push(quote!(let #slot = ::core::clone::Clone::clone(&#slot);));
        let bus = if asynchronous {
            quote!(&__bus)
        } else {
            quote!(__bus)
        };
        arguments.push(quote_spanned!(ty.span()=> #from_bus::from_bus(&#slot, #bus)));
    }
    let call = if asynchronous {
        quote!(#function(#message #(, #arguments)*).await)
    } else {
        quote!(#function(#message #(, #arguments)*))
    };
    // A concrete error is kept whole (see `__private::Outcome`). Spanned so that a return
    // type that is neither `()` nor `Result<(), E>` is reported on the return type.
    let result = match handler.output {
        Some(output) => {
            let krate = at(krate, output.span());
            quote_spanned! {output.span()=>
                let __result = #call;
                (&#krate::__private::Outcome(&__result)).kind().into_result(__result)
            }
        }
        None => quote! {
            #call;
            ::core::result::Result::Ok(())
        },
    };
    // Spanned so that "not a topic" is reported on the message type.
    let subscribe = {
        let krate = at(krate, topic.span());
        quote_spanned!(topic.span()=> #krate::__private::subscribe_registered::<#topic, _>)
    };
    let handle = if let (Some(pattern), true) = (pattern, asynchronous) {
        // Spanned so that a future that is not `Send`, or a missing `tokio` feature, is
        // reported at the handler.
        let span = handler.function.sig.ident.span();
        let observe_async = {
            let krate = at(krate, span);
            quote_spanned!(span=> #krate::__private::observe_registered_async)
        };
        let attempt = quote_spanned! {span=>
            async move {
                let _ = &__bus;
                #result
            }
        };
        // Spanned so that a first parameter that is not `&AnyMessage` is reported on it.
        let parameter = quote_spanned!(topic.span()=> #topic);
        // The closure too, where a missing `tokio` feature is reported; its `use` is not
        // (unused when the handler returns `()`, which is no concern of the user's).
        let uses = quote!(use #krate::__private::{ViaError as _, ViaHandlerResult as _};);
        let closure = quote_spanned! {span=>
            move |__message: #parameter, __bus: #krate::Bus| {
                #uses
                #(#share)*
                #attempt
            }
        };
        quote!(#observe_async(bus, #pattern, options, #closure))
    } else if let Some(pattern) = pattern {
        // Spanned so that a first parameter that is not `&AnyMessage` is reported on it.
        let observe = {
            let krate = at(krate, topic.span());
            quote_spanned!(topic.span()=> #krate::__private::observe_registered)
        };
        let parameter = quote_spanned!(topic.span()=> &#topic);
        quote! {
            #observe(
                bus,
                #pattern,
                options,
                move |__message: #parameter, __bus: &#krate::Bus| {
                    use #krate::__private::{ViaError as _, ViaHandlerResult as _};
                    let _ = __bus;
                    #result
                },
            )
        }
    } else if asynchronous {
        // Spanned so that a future that is not `Send`, or a missing `tokio` feature, is
        // reported at the handler.
        let span = handler.function.sig.ident.span();
        let krate = at(krate, span);
        let subscribe_async = quote_spanned!(span=>
            #krate::__private::subscribe_registered_async::<#topic, _, _>
        );
        // The future is spanned at the handler, where a `!Send` future is reported.
        let attempt = quote_spanned! {span=>
            async move {
                let _ = &__bus;
                #result
            }
        };
        quote! {
            #subscribe_async(
                bus,
                options,
                move |__message: #krate::Message<#topic>, __bus: #krate::Bus| {
                    use #krate::__private::{ViaError as _, ViaHandlerResult as _};
                    #(#share)*
                    #attempt
                },
            )
        }
    } else {
        let subscribe = if settings.inline {
            let krate = at(krate, topic.span());
            quote_spanned!(topic.span()=> #krate::__private::subscribe_registered_inline::<#topic, _>)
        } else {
            subscribe
        };
        quote! {
            #subscribe(
                bus,
                options,
                move |__message: &#krate::Message<#topic>, __bus: &#krate::Bus| {
                    use #krate::__private::{ViaError as _, ViaHandlerResult as _};
                    let _ = __bus;
                    #result
                },
            )
        }
    };
    let name = match &settings.name {
        Some(name) => quote!(::core::option::Option::Some(#name)),
        None => quote!(::core::option::Option::None),
    };
    let Settings {
        capacity,
        overflow,
        retries,
        backoff_nanos,
        start: from,
        workers,
        ..
    } = settings;
    // Spanned so that a filter of the wrong type is reported on its path.
    let filter = settings.filter.as_ref().map(|filter| {
        let krate = at(krate, filter.span());
        let of = match pattern {
            Some(_) => quote!(#krate::AnyMessage),
            None => quote!(#topic),
        };
        quote_spanned! {filter.span()=>
            let options = #krate::Options::filter::<#of>(options, #filter);
        }
    });
    // Spanned so that a key function of the wrong type is reported on its path.
    let key = settings.key.as_ref().map(|key| {
        let krate = at(krate, key.span());
        quote_spanned! {key.span()=>
            let options = #krate::Options::key::<#topic, _>(options, #key);
        }
    });
    // Spanned so that a priority function of the wrong type is reported on its path; on a
    // log topic (known only to the topic's derive) refused by a `const`, as `DropNewest` is.
    let priority = settings.priority.as_ref().map(|priority| {
        let krate = at(krate, priority.span());
        let (of, refuse_on_log) = match pattern {
            Some(_) => (quote!(#krate::AnyMessage), None),
            None => (
                quote!(#topic),
                Some(quote_spanned! {priority.span()=>
                    const _: () = #krate::__private::refuse_priority_on_log::<#topic>();
                }),
            ),
        };
        quote_spanned! {priority.span()=>
            #refuse_on_log
            let options = #krate::Options::priority::<#of>(options, #priority);
        }
    });
    // Spanned so that a function of another type than the handler's error, or a handler that
    // cannot fail, is reported on its path.
    let retry_if = settings
        .retry_if
        .as_ref()
        .zip(handler.output)
        .map(|(retry_if, output)| {
            let krate = at(krate, retry_if.span());
            // A return type without an error (`-> ()`) is reported once, at `retry_if`.
            let output = at(&output.to_token_stream(), retry_if.span());
            quote_spanned! {retry_if.span()=>
                let options = #krate::__private::retry_if::<#output>(options, #retry_if);
            }
        });
    let from = match *from {
        StartAt::Now => quote!(#krate::Start::Now),
        StartAt::Earliest => quote!(#krate::Start::Earliest),
        StartAt::Seq(n) => quote!(#krate::Start::Seq(#n)),
        StartAt::Since(nanos) => {
            quote!(#krate::Start::Since(::core::time::Duration::from_nanos(#nanos)))
        }
    };
    // A log topic is known only to the topic's derive, so the refusal is a `const` that the
    // compiler evaluates with the topic's type; spanned at the policy the user wrote.
    let refuse_drop_newest = (overflow == "DropNewest").then(|| {
        let krate = at(krate, overflow.span());
        quote_spanned! {overflow.span()=>
            const _: () = #krate::__private::refuse_drop_newest_on_log::<#topic>();
        }
    });
    let start = format_ident!("__eventbus_start_{}", function);
    let topic_name = format_ident!("__eventbus_topic_{}", function);
    let topic_fn = match pattern {
        Some(pattern) => quote! {
            fn #topic_name() -> &'static str {
                #pattern
            }
        },
        None => quote! {
            fn #topic_name() -> &'static str {
                use #krate::__private::{TopicNameFallback as _, TopicNameOfTopic as _};
                (&#krate::__private::TopicName::<#topic>::NEW).name()
            }
        },
    };
    quote! {
        #[doc(hidden)]
        const _: () = {
            use #runtime #alias;

            #refuse_drop_newest
            #topic_fn
            fn #start(
                bus: &#krate::Bus,
                options: #krate::Options,
            ) -> ::core::result::Result<#krate::Subscription, #krate::SubscribeError> {
                #(#resolve)*
                #filter
                #key
                #priority
                #retry_if
                #handle
            }
            #krate::__private::inventory::submit! {
                #krate::__private::Registration {
                    module_path: ::core::module_path!(),
                    function: ::core::stringify!(#function),
                    topic: #topic_name,
                    name: #name,
                    capacity: #capacity,
                    overflow: #krate::Overflow::#overflow,
                    retries: #retries,
                    backoff_nanos: #backoff_nanos,
                    workers: #workers,
                    from: #from,
                    states: &[#(#states),*],
                    asynchronous: #asynchronous,
                    start: #start,
                }
            }
        };
    }
}

/// `krate` with every token at `span`, for a `quote_spanned!` that puts an error on the
/// user's code: tokens interpolated there keep their own span, which would widen the error's
/// span to the attribute.
fn at(krate: &TokenStream, span: Span) -> TokenStream {
    krate
        .clone()
        .into_iter()
        .map(|mut token| {
            if let TokenTree::Group(group) = &token {
                let mut inner = Group::new(group.delimiter(), at(&group.stream(), span));
                inner.set_span(span);
                token = TokenTree::Group(inner);
            }
            token.set_span(span);
            token
        })
        .collect()
}

pub(crate) fn topic(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(error) => return error.into_compile_error(),
    };
    let mut errors = Errors::default();
    let args = attr::topic_args(&input.attrs, &mut errors);
    let krate = valid::crate_path(args.krate, &mut errors);
    let retention = valid::retention(args.retain.as_ref(), args.retain_for.as_ref(), &mut errors)
        .map(|(messages, age)| {
            let age = age.map(|nanos| quote!(.max_age(::core::time::Duration::from_nanos(#nanos))));
            quote! {
                fn retention() -> ::core::option::Option<#krate::Retention> {
                    ::core::option::Option::Some(#krate::Retention::messages(#messages) #age)
                }
                const LOG: bool = true;
            }
        });
    let log = args.retain.is_some() || args.retain_for.is_some();
    let dispatcher = valid::dispatcher(
        args.dispatcher.as_ref(),
        args.queue.as_ref(),
        log,
        &mut errors,
    )
    .map(|queue| {
        quote! {
            fn dispatcher() -> ::core::option::Option<usize> {
                ::core::option::Option::Some(#queue)
            }
        }
    });
    if let Some(name) = &args.name {
        if name.value().trim().is_empty() {
            errors.spanned(name, "a topic's `name` may not be empty");
        }
    }
    let mut generics_ok = true;
    for param in &input.generics.params {
        if let GenericParam::Lifetime(lifetime) = param {
            errors.spanned(
                lifetime,
                "a topic cannot have lifetime parameters: its messages are shared across \
                 threads and must be `'static`",
            );
            generics_ok = false;
        }
    }
    let base = args
        .name
        .as_ref()
        .map_or_else(|| input.ident.to_string(), |name| name.value());
    let body = if !generics_ok {
        quote!(#base)
    } else {
        topic_name(&input, &base, &krate)
    };
    let ident = &input.ident;
    let mut generics = input.generics.clone();
    {
        let where_clause = generics.make_where_clause();
        for param in &input.generics.params {
            if let GenericParam::Type(param) = param {
                let param = &param.ident;
                where_clause
                    .predicates
                    .push(syn::parse_quote!(#param: 'static));
            }
        }
        where_clause.predicates.push(syn::parse_quote!(
            Self: ::core::marker::Send + ::core::marker::Sync + 'static
        ));
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let errors = errors.into_compile_errors();
    if !generics_ok {
        return errors;
    }
    let shown = ident.to_string();
    // One `static` per type: in a generic impl it would be shared by every instantiation.
    let index = input.generics.params.is_empty().then(|| {
        quote! {
            fn __index() -> ::core::option::Option<&'static #krate::__private::TopicIndex> {
                static INDEX: #krate::__private::TopicIndex = #krate::__private::TopicIndex::new();
                ::core::option::Option::Some(&INDEX)
            }
        }
    });
    quote! {
        #[automatically_derived]
        impl #impl_generics #krate::Topic for #ident #ty_generics #where_clause {
            fn name() -> &'static str {
                #body
            }
            #retention
            #dispatcher
            #index
            fn __debug(
                value: &Self,
                f: &mut ::core::fmt::Formatter<'_>,
            ) -> ::core::fmt::Result {
                use #krate::__private::{DebugFallback as _, ViaDebug as _};
                (&#krate::__private::PayloadOf(value)).debug_payload(f, #shown)
            }
            fn __serializable(
                value: &Self,
            ) -> ::core::option::Option<&dyn #krate::__private::Serializable> {
                use #krate::__private::{SerializeFallback as _, ViaSerialize as _};
                (&#krate::__private::PayloadOf(value)).serializable()
            }
        }
        #errors
    }
}

/// The body of `Topic::name`: a literal, or for a generic type the name with its arguments,
/// made once per instantiation.
fn topic_name(input: &DeriveInput, base: &str, krate: &TokenStream) -> TokenStream {
    let args: Vec<TokenStream> = input
        .generics
        .params
        .iter()
        .filter_map(|param| match param {
            GenericParam::Type(param) => {
                let ident = &param.ident;
                Some(quote!(::std::string::ToString::to_string(::core::any::type_name::<#ident>())))
            }
            GenericParam::Const(param) => {
                let ident = &param.ident;
                Some(quote!(::std::string::ToString::to_string(&#ident)))
            }
            GenericParam::Lifetime(_) => None,
        })
        .collect();
    if args.is_empty() {
        return base.to_token_stream();
    }
    quote! {
        #krate::__private::generic_name::<Self>(|| {
            let args: &[::std::string::String] = &[#(#args),*];
            ::std::format!("{}<{}>", #base, args.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use proc_macro2::{TokenStream, TokenTree};
    use quote::quote;

    fn idents(tokens: TokenStream, found: &mut Vec<String>) {
        for token in tokens {
            match token {
                TokenTree::Ident(ident) => found.push(ident.to_string()),
                TokenTree::Group(group) => idents(group.stream(), found),
                TokenTree::Punct(_) | TokenTree::Literal(_) => {}
            }
        }
    }

    /// With `crate = path`, every path to the runtime goes through `path`: a crate that
    /// re-exports `eventbus` works without depending on it under that name. (The integration
    /// tests cannot show this, as they can always name `::eventbus`.)
    #[test]
    fn with_crate_the_expansions_never_name_eventbus() {
        let expansions = [
            super::topic(quote! {
                #[topic(crate = my_framework::bus, name = "ping")]
                pub struct Ping<T, const N: usize>([T; N]);
            }),
            super::subscriber(
                quote!(crate = my_framework::bus, retries = 1),
                quote! {
                    fn whole(_: &Message<Ping<u8, 1>>, _: &Bus, _: State<Db>, _: &State<Db>) {}
                },
            ),
            super::subscriber(
                quote!(crate = ::my_framework::bus),
                quote! {
                    fn payload(_: &Ping<u8, 1>) -> Result<(), String> { Ok(()) }
                },
            ),
        ];
        for expansion in expansions {
            let mut found = Vec::new();
            idents(expansion.clone(), &mut found);
            assert!(!found.iter().any(|i| i == "eventbus"), "{expansion}");
            assert!(!found.iter().any(|i| i == "compile_error"), "{expansion}");
            assert!(found.iter().any(|i| i == "my_framework"), "{expansion}");
        }
    }
}
