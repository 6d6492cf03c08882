//! A greenlet's finalizers ([`Finalizers`]) and running them, each isolated
//! ([`run_finalizers`]), and dropping the other user values a greenlet
//! leaves (its closure, a panic's payload) with a panic reported
//! ([`drop_quietly`]).
//!
//! Uses the record (for its label), the crate's diagnostics and the error
//! module's panic message.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::super::error::panic_message;
use super::Record;
use crate::diag::diag_error;

/// A callback run when a greenlet is finalized.
pub(crate) type Finalizer = Box<dyn FnOnce() + Send + 'static>;

/// A greenlet's finalizers, in the order they were registered: the first
/// kept inline, so that the usual one finalizer allocates no list.
#[derive(Default)]
pub(crate) struct Finalizers {
    first: Option<Finalizer>,
    rest: Vec<Finalizer>,
}

impl Finalizers {
    /// No finalizer.
    pub(super) const fn new() -> Finalizers {
        Finalizers {
            first: None,
            rest: Vec::new(),
        }
    }

    /// Whether there is none.
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    pub(super) fn push(&mut self, finalizer: Finalizer) {
        if self.first.is_none() {
            self.first = Some(finalizer);
        } else {
            self.rest.push(finalizer);
        }
    }
}

impl IntoIterator for Finalizers {
    type Item = Finalizer;
    type IntoIter =
        std::iter::Chain<std::option::IntoIter<Finalizer>, std::vec::IntoIter<Finalizer>>;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.rest)
    }
}

/// Run finalizers, each isolated: a panicking one is reported (`diag_error!`)
/// and the others still run. Returns the first panic's payload, for a caller
/// that wants to re-raise it (the cleanup queue counts finalizer panics).
/// `label` names the greenlet in that report; it is called only then (a
/// label is formatted, ~2,000 instructions, and most finalizers never panic).
pub(crate) fn run_finalizers(
    finalizers: impl IntoIterator<Item = Finalizer>,
    label: impl Fn() -> String,
) -> Option<Box<dyn std::any::Any + Send>> {
    let mut first_panic = None;
    for finalizer in finalizers {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(finalizer)) {
            diag_error!(
                "greenlet: a finalizer of {} panicked: {}",
                label(),
                panic_message(&*payload)
            );
            first_panic.get_or_insert(payload);
        }
    }
    first_panic
}

/// Drop a value whose destructor is user code, reporting a panic.
pub(crate) fn drop_quietly<T>(value: T, record: &Record) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(move || drop(value))) {
        diag_error!(
            "greenlet: dropping the closure of {} panicked: {}",
            record.label(),
            panic_message(&*panic)
        );
    }
}
