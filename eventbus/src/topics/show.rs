//! A dead letter's message as text, for a person to read (feature `dashboard`, which has
//! `serde`): its JSON when the topic's type implements `serde::Serialize`, else its `Debug`
//! (or `<TypeName>` without one), as `#[derive(Topic)]` recorded them.

use std::any::Any;
use std::fmt;

use crate::message::{AnyMessage, Message};
use crate::topic::Topic;

/// `message`, a `Message<T>` (or an observer's `Message<AnyMessage>`), as text; `None` if it
/// is neither.
pub(super) fn show<T: Topic>(message: &(dyn Any + Send + Sync)) -> Option<String> {
    if let Some(message) = message.downcast_ref::<Message<T>>() {
        return Some(typed(message.payload()));
    }
    let observed = message.downcast_ref::<Message<AnyMessage>>()?;
    Some(erased(observed.payload()))
}

fn typed<T: Topic>(value: &T) -> String {
    if let Some(Ok(json)) = T::__serializable(value).map(crate::message::Serializable::to_json) {
        return json.to_string();
    }
    struct Shown<'a, T>(&'a T);
    impl<T: Topic> fmt::Debug for Shown<'_, T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            T::__debug(self.0, f)
        }
    }
    format!("{:?}", Shown(value))
}

fn erased(value: &AnyMessage) -> String {
    if let Some(Ok(json)) = value.to_json() {
        return json.to_string();
    }
    format!("{value:?}")
}
