//! The examples as a user runs them: every example's command line, the
//! main demo's output, and the examples under valgrind.

#[path = "../common/mod.rs"]
mod common;

#[cfg(feature = "hub")]
mod chat;
#[cfg(feature = "cpython-model")]
mod demo;
mod flags;
#[cfg(feature = "hub")]
mod hub_valgrind;
mod valgrind;
