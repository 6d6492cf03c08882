//! A model of CPython 3.11, 3.12 and 3.13 pending calls, GIL, eval breaker
//! and tracing.
//!
//! Owns: the versions as data ([`version`]), the semantic core with every
//! transition as one atomic step ([`core`]), the live driver of that core on
//! real OS threads ([`runtime`]) with its [`watchdog`], the cleanup queue's
//! pending-call scheduler ([`scheduler`]), the scenarios of issue 3
//! ([`scenarios`]), and the deterministic driver that explores every
//! interleaving of that core ([`explore`]). The examples' flags and the main
//! demo live with the examples (`examples/`).
//!
//! Uses [`crate::cleanup`]'s `Scheduler` trait to plug in as a scheduler;
//! never the other way round. Only [`scenarios`] (which wires a scenario
//! together, like an example would) also uses the greenlet API of
//! [`crate::coroutine`]; the model itself knows nothing of greenlets.

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
