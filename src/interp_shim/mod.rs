//! A model of CPython 3.11, 3.12 and 3.13 pending calls, GIL, eval breaker
//! and tracing. This module is the crate's `cpython-model` feature (on by
//! default): with the feature off, `interp_shim` is not compiled.
//!
//! Owns: the versions as data ([`version`]), the semantic core with every
//! transition as one atomic step ([`core`]), the live driver of that core on
//! real OS threads ([`runtime`]) with its [`watchdog`], the cleanup queue's
//! pending-call scheduler ([`scheduler`]), the live scenarios that reproduce
//! greenlet's thread-exit livelock and check the fixes ([`scenarios`]), and
//! the deterministic driver that explores every interleaving of that core
//! ([`explore`]). The examples' flags and the main demo live with the
//! examples (`examples/`).
//!
//! Uses: [`crate::cleanup`] (its `Scheduler` trait, to plug in as a
//! scheduler, and its policy core, which the explorer steps); never the
//! other way round. [`crate::coroutine`]: the runtime's greenlets
//! ([`PyGreenlet`], `runtime/greenlets.rs`) switch on the crate's own
//! greenlets and carry their values as `coroutine::Value`, and
//! [`scenarios`] wires a scenario together with the greenlet API as an
//! example would; the semantic core ([`core`]) and the explorer's CPython
//! host know nothing of them (the explorer models a greenlet switch as
//! data). `crate::hub::pending`: the explorer's hub host steps the hub's
//! pending-call slot rules. `crate::diag`: diagnostics.

pub mod core;
pub mod explore;
pub mod runtime;
pub mod scenarios;
pub mod scheduler;
pub mod version;
pub mod watchdog;

pub use self::core::{RingFull, Summary, ThreadIdx, MAIN_THREAD};
pub use self::runtime::{
    ExitOrder, Hook, Interpreter, InterpreterStats, Outcome, PendingCall, Py, PyErr, PyEvent,
    PyGreenlet, PyResult, RunError, SignalDisposition, SignalHandler, ThreadHandle,
    UnknownExitOrder, EARLY_VERDICT_REDISPATCHES, SWITCH_INTERVAL,
};
pub use self::scheduler::PendingCallScheduler;
pub use self::version::{PyVersion, UnknownVersion, VersionSpec, MAX_CALLS_PER_MAKE};
pub use self::watchdog::{HangCause, HangReport, QueueAtHang, ThreadDump, Watchdog};
