//! Running trace and profile functions: `call_trace` running a Python-level
//! one ([`Hook`](super::Hook)) as a simulated frame with tracing suspended at
//! the events it receives, and the guard that leaves
//! `PyThreadState_EnterTracing`.
//!
//! Uses the hook kinds of `hook.rs`, the shared state and the check sites of
//! `gil.rs`.

use super::super::core::CheckSite;
use super::error::PyResult;
use super::gil::check;
use super::hook::HookEvent;
use super::Py;

/// Leaves `PyThreadState_EnterTracing` when the shielded code ends.
pub(super) struct TracingGuard<'a> {
    pub(super) py: &'a Py,
}

impl Drop for TracingGuard<'_> {
    fn drop(&mut self) {
        // PyThreadState_LeaveTracing
        self.py.lock().core.leave_tracing(self.py.idx);
    }
}

/// `call_trace` for `event`: each installed Python-level function runs
/// as a simulated frame between `PyThreadState_EnterTracing` and
/// `PyThreadState_LeaveTracing` (not at all while tracing is suspended).
pub(super) fn fire(py: &Py, event: HookEvent) -> PyResult<()> {
    let (trace, profile) = {
        let st = py.lock();
        if !st.core.is_traced(py.idx) {
            return Ok(());
        }
        let slot = &st.threads[py.idx];
        (slot.trace, slot.profile)
    };
    if trace.runs_at(event, true) {
        py.lock().stats.trace_function_runs += 1;
        py.with_tracing_suspended(|| {
            py.frame("trace_callback", |py| check(py, CheckSite::Resume))
        })?;
    }
    if profile.runs_at(event, false) {
        py.lock().stats.profile_function_runs += 1;
        py.with_tracing_suspended(|| {
            py.frame("profile_callback", |py| check(py, CheckSite::Resume))
        })?;
    }
    Ok(())
}
