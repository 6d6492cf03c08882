//! The unwind payloads that deliver a cancellation ([`CancelUnwind`]) or an
//! elapsed `timeout` ([`TimeoutUnwind`]) at a parking point, and that the
//! task body and `timeout` recognise when they catch an unwind.
//!
//! Owns: the two payload types. Uses nothing.

/// The unwind payload of a cancellation delivered at a parking point.
pub(crate) struct CancelUnwind;

/// The unwind payload of an elapsed `timeout` scope (its id).
pub(crate) struct TimeoutUnwind(pub(crate) u64);
