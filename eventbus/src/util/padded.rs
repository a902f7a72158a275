//! A value on a cache line of its own, so that a flag one thread writes does not slow the
//! readers of its neighbours (false sharing).

/// A value on a cache line of its own.
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);
