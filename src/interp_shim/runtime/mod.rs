//! The live driver of the CPython model: real OS threads, a real GIL with a
//! switch interval, `Py_AddPendingCall` from any thread, and simulated Python
//! code as Rust closures on a [`Py`] context handle.
//!
//! Owns, one concern per file: the [`Interpreter`] (one interpreter of one
//! [`PyVersion`](super::PyVersion)), running it under the [`Watchdog`](super::Watchdog) and
//! building its [`HangReport`](super::HangReport) (`interpreter.rs`); its counters
//! ([`InterpreterStats`], `stats.rs`); the [`Py`] handle of a
//! model thread and its operations (`py.rs`); the GIL, the eval breaker's
//! check sites, `Py_AddPendingCall` and `make_pending_calls` (`gil.rs`);
//! builtin, foreign and blocking C calls (`c_calls.rs`); the kinds of trace
//! and profile function ([`Hook`], `hook.rs`) and running them
//! (`tracing.rs`); the stored callables, pending calls and signal
//! dispositions (`callbacks.rs`); `handle_signals` (`signals.rs`); model
//! threads, their start, their exit and the interpreter's shutdown
//! (`threads.rs`) in the chosen [`ExitOrder`] (`exit_order.rs`);
//! [`PyEvent`] (`threading.Event`, `event.rs`); greenlets with their own
//! frame stacks ([`PyGreenlet`], `greenlets.rs`); the errors and outcomes
//! (`error.rs`); and the state all of them share under one lock, with the
//! thread-local that records which model thread the calling OS thread is
//! (`state.rs`).
//!
//! The types the shared state holds live in leaf files (`hook.rs`,
//! `exit_order.rs`, `stats.rs`, `callbacks.rs`), so `state.rs` imports none of
//! the files that use it. One tie remains by nature: the operations take the
//! [`Py`] handle and `py.rs` calls them, and a stored callable receives a
//! `&Py`. State that CPython
//! keeps outside ceval also lives here, not in the core: the signal module's
//! tripped flag, and whether a trace or profile function is written in C or
//! in Python ([`Hook`]; a Python one runs as a simulated frame at each event,
//! with tracing suspended).
//!
//! Uses: the semantic core (`core::InterpCore`), the one copy of the rules.
//! The runtime keeps the core behind one `parking_lot::Mutex` with one
//! `Condvar`; every core method call is one atomic step under that lock, and
//! the runtime never decides a rule itself: it only blocks, sleeps, runs
//! callbacks and handlers where the core's answers say CPython would.
//!
//! # Harness escapes (not interpreter state)
//! - A watchdog in [`Watchdog::Report`](super::Watchdog::Report) mode sets a harness-level *cancel*
//!   flag when it fires. From then on every operation of simulated Python
//!   code (check sites, GIL takes, sleeps, waits, joins) returns
//!   [`PyErr::Cancelled`], so the spinning thread's simulated frames unwind
//!   with an `Err` and [`Interpreter::run`] can return the report as a value. No
//!   CPython thread could do this; it exists so tests can observe a livelock
//!   without killing the test process. Rust code of a scenario that never
//!   calls into its [`Py`] (a plain `loop {}`) cannot be cancelled.
//! - At shutdown, [`Interpreter::run`] joins every OS thread it started (so their
//!   thread-local destructors, where greenlet queues a dying thread's state,
//!   have run) before `_Py_FinishPendingCalls`. CPython's
//!   `threading._shutdown` waits only for the thread states, so a real
//!   interpreter may race here and leak such a state at exit.
//! - Once finalization has begun, a daemon thread blocked in a sleep, wait
//!   or join stops blocking and ends at its GIL take, as it would in CPython
//!   when it next woke; the harness then joins its OS thread.
//!
//! # One schedule rule (a choice among CPython's schedules)
//! A thread whose thread state is deleted still runs its OS thread's
//! thread-local destructors, without the GIL; greenlet queues the dying
//! thread's state there and may call `Py_AddPendingCall`. In CPython another
//! thread can take the GIL and run Python code meanwhile, so whether that code
//! sees the queued state before or after the pending call was added depends
//! on the OS scheduler. The live runtime fixes that order by default
//! ([`ExitOrder::Settled`]): a GIL take waits while another thread is still
//! in its thread-local destructors. Every live run therefore follows one
//! order, and the seed's livelock reproduces on every run, not only on
//! most. That order is the rare one on real 3.11/3.12 (`probes/exit_order.py`:
//! right after `Thread.join()` the push was still pending in 80–95 % of
//! joins; 3.13's `join()` waits for the OS thread, see
//! [`VersionSpec::join_waits_for_thread_exit`](super::VersionSpec::join_waits_for_thread_exit));
//! the [explorer](super::explore) and [`ExitOrder::Racing`] cover the others.
//! The end of the
//! destructors is seen by a thread-local set first on each model thread,
//! whose destructor runs last. A destructor that waits for another model
//! thread to take the GIL would hang under this rule (the watchdog fires);
//! greenlet's never does, but a test that replays one of the explorer's
//! other orders with gates in the destructors does, and runs with
//! [`ExitOrder::Racing`].

mod c_calls;
mod callbacks;
mod error;
mod event;
mod exit_order;
mod gil;
mod greenlets;
mod hook;
mod interpreter;
mod py;
mod signals;
mod state;
mod stats;
mod threads;
mod tracing;

pub use self::callbacks::{PendingCall, SignalDisposition, SignalHandler};
pub use self::error::{Outcome, PyErr, PyResult, RunError};
pub use self::event::PyEvent;
pub use self::exit_order::{ExitOrder, UnknownExitOrder};
pub use self::gil::SWITCH_INTERVAL;
pub use self::greenlets::PyGreenlet;
pub use self::hook::Hook;
pub use self::interpreter::{Interpreter, EARLY_VERDICT_REDISPATCHES};
pub use self::py::Py;

pub(crate) use self::state::Shared;
pub use self::stats::InterpreterStats;
pub use self::threads::ThreadHandle;
