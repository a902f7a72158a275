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

/// A parameter after the message.
pub(crate) enum Extra<'a> {
    /// `State<T>` (`by_ref: false`) or `&State<T>`; `ty` is the `T`.
    State { ty: &'a Type, by_ref: bool },
    /// Any other shared reference: it must be `&Bus`, which the compiler checks.
    Bus(&'a Type),
}

impl<'a> Extra<'a> {
    /// What a parameter of type `ty` is, if a subscriber may have it.
    pub(crate) fn of(ty: &'a Type) -> Option<Self> {
        if let Some(state) = generic_argument(ty, "State") {
            return Some(Extra::State {
                ty: state,
                by_ref: false,
            });
        }
        match ty {
            Type::Reference(reference) if reference.mutability.is_none() => {
                match generic_argument(&reference.elem, "State") {
                    Some(state) => Some(Extra::State {
                        ty: state,
                        by_ref: true,
                    }),
                    None => Some(Extra::Bus(ty)),
                }
            }
            _ => None,
        }
    }
}

/// A subscriber function, as far as the expansion needs it.
pub(crate) struct Handler<'a> {
    pub(crate) function: &'a ItemFn,
    /// The `T` of `&T` or `&Message<T>`.
    pub(crate) topic: &'a Type,
    pub(crate) message: MessageParam,
    /// The parameters after the message.
    pub(crate) extras: Vec<Extra<'a>>,
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
        extras: Vec<Extra<'a>>,
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
