//! Trace and profile functions: which kind a thread has installed
//! ([`Hook`]), the events they receive, `call_trace` running a Python-level
//! one as a simulated frame with tracing suspended, and the guard that
//! leaves `PyThreadState_EnterTracing`.
//!
//! Uses the shared state and the check sites of `gil.rs`.

use super::super::core::CheckSite;
use super::error::PyResult;
use super::gil::check;
use super::Py;

/// A trace or profile function installed on a thread.
///
/// Which kind matters on 3.11: CPython calls the function at each event
/// (`call_trace`) between `ThreadHandleState_EnterTracing` and
/// `ThreadHandleState_LeaveTracing`. A function written in C (cProfile,
/// coverage's CTracer) runs no bytecode there; a Python function does, and
/// its `RESUME` is a check site reached with tracing suspended, so a pending
/// call handled there runs untraced. Checked on CPython 3.11.7: a pending call
/// that adds a second one and then enters a function livelocks under
/// `sys.settrace(f)` and under `cProfile`, not under `sys.setprofile(f)` with
/// a Python `f` (whose `c_return` event after the adding C call is where the
/// first call gets run).
///
/// Modelled events: `call` and `return` of Python frames (trace and profile
/// functions), `c_call` and `c_return` (profile functions). Not modelled:
/// `line`/`exception` events of a *local* trace function; the seed's trace
/// function (`lambda *a: None`) returns `None`, so CPython sends it none.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::interp_shim::{Hook, Outcome, PyErr, PyVersion, Runtime, Watchdog};
///
/// // 3.11: a pending call adds another, then enters a function. Under a
/// // profile function written in Python both calls run (a C one would spin).
/// let rt = Runtime::new(PyVersion::V3_11);
/// let room = |e: greenlet::interp_shim::RingFull| PyErr::exception("RuntimeError", e.to_string());
/// let outcome = rt
///     .run(Watchdog::Report(Duration::from_secs(20)), move |py| {
///         py.setprofile(Hook::Python)?;
///         py.c_call(|| {
///             py.add_pending_call(move |py| {
///                 py.call("first", |py| {
///                     py.c_call(|| py.add_pending_call(|_| Ok(())))?.map_err(room)?;
///                     py.call("inner", |_| Ok(()))
///                 })
///             })
///         })?
///         .map_err(room)?;
///         py.call("after", |_| Ok(()))
///     })
///     .unwrap();
/// assert!(matches!(outcome, Outcome::Finished(Ok(()))));
/// assert_eq!(rt.stats().pending_calls_run, 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hook {
    /// None installed (`sys.settrace(None)`).
    Off,
    /// A function written in C (`PyEval_SetTrace`/`PyEval_SetProfile`).
    C,
    /// A Python function: each event runs its simulated frame
    /// (`trace_callback` / `profile_callback`).
    Python,
}

/// An event a trace or profile function receives (`PyTrace_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HookEvent {
    /// A Python frame starts (`PyTrace_CALL`): trace and profile functions.
    Call,
    /// A Python frame returns (`PyTrace_RETURN`): trace and profile functions.
    Return,
    /// A C function is called / returns (`PyTrace_C_CALL`/`PyTrace_C_RETURN`):
    /// profile functions only.
    CFunction,
}

/// Leaves `ThreadHandleState_EnterTracing` when the shielded code ends.
pub(super) struct TracingGuard<'a> {
    pub(super) py: &'a Py,
}

impl Drop for TracingGuard<'_> {
    fn drop(&mut self) {
        // ThreadHandleState_LeaveTracing
        self.py.lock().core.leave_tracing(self.py.idx);
    }
}

/// `call_trace` for `event`: each installed Python-level function runs
/// as a simulated frame between `ThreadHandleState_EnterTracing` and
/// `ThreadHandleState_LeaveTracing` (not at all while tracing is suspended).
pub(super) fn fire(py: &Py, event: HookEvent) -> PyResult<()> {
    let (trace, profile) = {
        let st = py.lock();
        if !st.core.is_traced(py.idx) {
            return Ok(());
        }
        let slot = &st.threads[py.idx];
        (slot.trace, slot.profile)
    };
    if trace == Hook::Python && event != HookEvent::CFunction {
        py.with_tracing_suspended(|| {
            py.frame("trace_callback", |py| check(py, CheckSite::Resume))
        })?;
    }
    if profile == Hook::Python {
        py.with_tracing_suspended(|| {
            py.frame("profile_callback", |py| check(py, CheckSite::Resume))
        })?;
    }
    Ok(())
}
