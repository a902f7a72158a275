//! A typed view of what the macros are applied to: a subscriber function's signature, and a
//! topic type's name and generics.

use syn::{GenericArgument, ItemFn, PathArguments, ReturnType, Type, TypeReference};

/// How the handler takes its message.
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
    /// The second parameter's type, if there is one (it must be `&Bus`).
    pub(crate) bus: Option<&'a Type>,
    /// The declared return type, if any.
    pub(crate) output: Option<&'a Type>,
}

impl<'a> Handler<'a> {
    /// The view of `function`, whose first parameter is `message` and second, if any, `bus`
    /// (`valid::handler` has checked the rest of the signature).
    pub(crate) fn new(
        function: &'a ItemFn,
        message: &'a TypeReference,
        bus: Option<&'a Type>,
    ) -> Self {
        let (topic, form) = match message_type(&message.elem) {
            Some(inner) => (inner, MessageParam::Whole),
            None => (&*message.elem, MessageParam::Payload),
        };
        let output = match &function.sig.output {
            ReturnType::Default => None,
            ReturnType::Type(_, ty) => Some(&**ty),
        };
        Handler {
            function,
            topic,
            message: form,
            bus,
            output,
        }
    }
}

/// `T` if `ty` is written `Message<T>` (or `path::Message<T>`).
fn message_type(ty: &Type) -> Option<&Type> {
    let Type::Path(path) = ty else { return None };
    if path.qself.is_some() {
        return None;
    }
    let last = path.path.segments.last()?;
    if last.ident != "Message" {
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
