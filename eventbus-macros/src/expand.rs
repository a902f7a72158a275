//! Code generation. The expansion names the runtime only by absolute path
//! (`::eventbus::...`), so users need nothing but `eventbus` in their `Cargo.toml`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{DeriveInput, GenericParam, ItemFn};

use crate::ast::{Extra, Handler, MessageParam};
use crate::errors::Errors;
use crate::valid::Settings;
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
    match handler {
        Some(handler) if errors.is_empty() => {
            let registration = registration(&handler, &settings);
            quote!(#function #registration)
        }
        _ => {
            let errors = errors.into_compile_errors();
            quote!(#function #errors)
        }
    }
}

fn registration(handler: &Handler<'_>, settings: &Settings) -> TokenStream {
    let function = &handler.function.sig.ident;
    let topic = handler.topic;
    let message = match handler.message {
        MessageParam::Payload => quote!(::eventbus::Message::payload(__message)),
        MessageParam::Whole => quote!(__message),
    };
    let mut states = Vec::new();
    let mut resolve = Vec::new();
    let mut arguments = Vec::new();
    for extra in &handler.extras {
        match *extra {
            Extra::State { ty, by_ref } => {
                let slot = format_ident!("__state_{}", states.len());
                states.push(quote_spanned!(ty.span()=> ::eventbus::__private::state_key::<#ty>()));
                resolve.push(quote_spanned! {ty.span()=>
                    let #slot = ::eventbus::__private::state::<#ty>(bus, &options)?;
                });
                arguments.push(if by_ref {
                    quote!(&#slot)
                } else {
                    quote!(::core::clone::Clone::clone(&#slot))
                });
            }
            // Spanned so that a parameter that is not `&Bus` is reported on its type.
            Extra::Bus(ty) => arguments.push(quote_spanned! {ty.span()=>
                <#ty as ::eventbus::__private::FromBus<'_>>::from_bus(__bus)
            }),
        }
    }
    let call = quote!(#function(#message #(, #arguments)*));
    // Spanned so that a return type that is neither `()` nor `Result<(), E>` is reported on
    // the return type.
    let result = match handler.output {
        Some(output) => quote_spanned! {output.span()=>
            let __result = #call;
            ::eventbus::__private::into_result(__result)
        },
        None => quote!(::eventbus::__private::into_result(#call)),
    };
    // Spanned so that "not a topic" is reported on the message type.
    let subscribe =
        quote_spanned!(topic.span()=> ::eventbus::__private::subscribe_registered::<#topic, _>);
    let name = match &settings.name {
        Some(name) => quote!(::core::option::Option::Some(#name)),
        None => quote!(::core::option::Option::None),
    };
    let Settings {
        capacity,
        overflow,
        retries,
        backoff_nanos,
        ..
    } = settings;
    let start = format_ident!("__eventbus_start_{}", function);
    let topic_name = format_ident!("__eventbus_topic_{}", function);
    quote! {
        #[doc(hidden)]
        const _: () = {
            fn #topic_name() -> &'static str {
                use ::eventbus::__private::{TopicNameFallback as _, TopicNameOfTopic as _};
                (&::eventbus::__private::TopicName::<#topic>::NEW).name()
            }
            fn #start(
                bus: &::eventbus::Bus,
                options: ::eventbus::Options,
            ) -> ::core::result::Result<::eventbus::Subscription, ::eventbus::SubscribeError> {
                #(#resolve)*
                #subscribe(
                    bus,
                    options,
                    move |__message: &::eventbus::Message<#topic>, __bus: &::eventbus::Bus| {
                        let _ = __bus;
                        #result
                    },
                )
            }
            ::eventbus::__private::inventory::submit! {
                ::eventbus::__private::Registration {
                    module_path: ::core::module_path!(),
                    function: ::core::stringify!(#function),
                    topic: #topic_name,
                    name: #name,
                    capacity: #capacity,
                    overflow: ::eventbus::Overflow::#overflow,
                    retries: #retries,
                    backoff_nanos: #backoff_nanos,
                    states: &[#(#states),*],
                    start: #start,
                }
            }
        };
    }
}

pub(crate) fn topic(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(error) => return error.into_compile_error(),
    };
    let mut errors = Errors::default();
    let args = attr::topic_args(&input.attrs, &mut errors);
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
        topic_name(&input, &base)
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
    quote! {
        #[automatically_derived]
        impl #impl_generics ::eventbus::Topic for #ident #ty_generics #where_clause {
            fn name() -> &'static str {
                #body
            }
        }
        #errors
    }
}

/// The body of `Topic::name`: a literal, or for a generic type the name with its arguments,
/// made once per instantiation.
fn topic_name(input: &DeriveInput, base: &str) -> TokenStream {
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
        ::eventbus::__private::generic_name::<Self>(|| {
            let args: &[::std::string::String] = &[#(#args),*];
            ::std::format!("{}<{}>", #base, args.join(", "))
        })
    }
}
