//! A typed view of what the macros are applied to: a subscriber function's signature, and a
//! topic type's name and generics.

use syn::{GenericArgument, ItemFn, PathArguments, ReturnType, Type, TypeReference};

/// How the handler takes its message.
#[derive(Clone, Copy)]
pub(crate) enum MessageParam {
    /// `&T`
    Payload,
    /// `&Message<T>`
    Whole,
}

/// A subscriber function, as far as the expansion needs it.
pub(crate) struct Handler<'a> {
    pub(crate) function: &'a ItemFn,
    /// The `T` of `&T` or `&Message<T>`.
    pub(crate) topic: &'a Type,
    pub(crate) message: MessageParam,
    /// The types of the parameters after the message: what each is given is decided by
    /// the runtime's `FromBus` trait, not by how it is spelled.
    pub(crate) extras: Vec<&'a Type>,
    /// The declared return type, if any.
    pub(crate) output: Option<&'a Type>,
    /// `async fn`: its worker is a task.
    pub(crate) asynchronous: bool,
}

impl<'a> Handler<'a> {
    /// The view of `function`, whose first parameter is `message` and the rest `extras`
    /// (`valid::handler` has checked the rest of the signature).
    pub(crate) fn new(
        function: &'a ItemFn,
        message: &'a TypeReference,
        extras: Vec<&'a Type>,
    ) -> Self {
        let (topic, form) = match generic_argument(&message.elem, "Message") {
            Some(inner) => (inner, MessageParam::Whole),
            None => (&*message.elem, MessageParam::Payload),
        };
        let output = match &function.sig.output {
            ReturnType::Default => None,
            ReturnType::Type(_, ty) => Some(&**ty),
        };
        Handler {
            asynchronous: function.sig.asyncness.is_some(),
            function,
            topic,
            message: form,
            extras,
            output,
        }
    }
}

/// `T` if `ty` is written `Name<T>` (or `path::Name<T>`).
fn generic_argument<'a>(ty: &'a Type, name: &str) -> Option<&'a Type> {
    let Type::Path(path) = ty else { return None };
    if path.qself.is_some() {
        return None;
    }
    let last = path.path.segments.last()?;
    if last.ident != name {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.iter().collect::<Vec<_>>().as_slice() {
        [GenericArgument::Type(inner)] => Some(inner),
        _ => None,
    }
}
