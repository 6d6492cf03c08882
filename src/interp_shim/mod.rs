//! A model of CPython 3.11, 3.12 and 3.13 pending calls, GIL, eval breaker
//! and tracing.
//!
//! Owns: the versions as data ([`version`]), the semantic core with every
//! transition as one atomic step ([`core`]).
//!
//! Uses [`crate::cleanup`]'s `Scheduler` trait to plug in as a scheduler;
//! never the other way round.

pub mod core;
pub mod explore;
pub mod version;

pub use self::core::{
    CheckSite, Continuation, InterpCore, MakeBegin, RingFull, Summary, ThreadIdx, MAIN_THREAD,
};
pub use self::version::{PyVersion, UnknownVersion, VersionSpec, MAX_CALLS_PER_MAKE};
