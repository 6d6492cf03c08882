//! The live scenarios of greenlet's thread-exit livelock, shared by the
//! examples and the tests: the seed report's reproducer, the coverage.py-like
//! churn, a full pending-call ring, finalization, a panicking finalizer.
//!
//! Owns: the scenario configurations and reports, and which explorer mode
//! stands for each live mode ([`TraceMode::explored_as`]). Uses the
//! [`Interpreter`](super::Interpreter), the [`PendingCallScheduler`](super::PendingCallScheduler), [`explore::Mode`](super::explore::Mode),
//! [`crate::cleanup`] and the greenlet API (`getcurrent()`, `Greenlet::on_finalize`): every simulated thread routes
//! its greenlet state to the scenario's queue (`cleanup::set_thread_queue`)
//! first thing, and a finalizer's simulated Python code finds its [`Py`](super::Py)
//! through [`Py::current`](super::Py::current) (the drain runs on the main thread inside
//! `make_pending_calls`).
//!
//! One file per scenario family (`seed.rs`, `greenlet_switch.rs`, `churn.rs`,
//! `ring_full.rs`, `finalization.rs`) above the two they share: the options
//! and report types (`options.rs`) and the harness with the helpers of the
//! scenarios' simulated Python code (`harness.rs`).

mod churn;
mod finalization;
mod greenlet_switch;
mod harness;
mod options;
mod ring_full;
mod seed;

pub use self::churn::{churn, churn_with, ChurnConfig};
pub use self::finalization::{finalization, panicking_finalizers};
pub use self::greenlet_switch::{greenlet_switch_in_cleanup, GreenletSwitchReport, Kick};
pub use self::options::{RunOptions, ScenarioReport, TraceMode, UnknownTraceMode};
pub use self::ring_full::{ring_full, RingFullConfig};
pub use self::seed::{seed, seed_entering, seed_with, FirstEntry, SeedConfig, UnknownFirstEntry};
