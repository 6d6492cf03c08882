//! Which kind of trace or profile function a thread has installed
//! ([`Hook`]) and the events ([`HookEvent`]) at which a Python one runs.
//!
//! A leaf: uses nothing of the runtime; `state.rs` keeps each thread's
//! hooks and `tracing.rs` runs them.

/// A trace or profile function installed on a thread.
///
/// Which kind matters on 3.11: CPython calls the function at each event
/// (`call_trace`) between `PyThreadState_EnterTracing` and
/// `PyThreadState_LeaveTracing`. A function written in C (cProfile,
/// coverage's CTracer) runs no bytecode there; a Python function does, and
/// its `RESUME` is a check site reached with tracing suspended, so a pending
/// call handled there runs untraced. Checked on CPython 3.11.7: a pending call
/// that adds a second one and then enters a function livelocks under
/// `sys.settrace(f)` and under `cProfile`, not under `sys.setprofile(f)` with
/// a Python `f` (whose `c_return` event after the adding C call is where the
/// first call gets run).
///
/// Which events reach it (checked on 3.11.7, 3.12.1, 3.13.0 with
/// `probes/trace_events.py`): a trace function that returns `None`
/// ([`Hook::Python`], the seed's `lambda *a: None`) is called for `call`
/// events only (the global function, once per new frame; with no local
/// function nothing else is sent for that frame); one that returns itself
/// ([`Hook::PythonLocal`]) also gets that frame's `return` (and `line` and
/// `exception` events, not modelled); a profile function gets `call`,
/// `return`, `c_call` and `c_return` whatever it returns (3.11
/// `call_trace` through `trace_trampoline`/`profile_trampoline`; 3.12+
/// `legacy_tracing.c`). Each run of a Python function is a frame entry
/// with tracing suspended: an untraced check site. The 3.11 trap itself
/// does not depend on the events (`DO_TRACING` is taken by every
/// instruction of a traced thread before any event is delivered: the
/// probe's `spin-with-None-local` hangs on 3.11.7).
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::interp_shim::{Hook, Outcome, PyErr, PyVersion, Interpreter, Watchdog};
///
/// // 3.11: a pending call adds another, then enters a function. Under a
/// // profile function written in Python both calls run (a C one would spin).
/// let rt = Interpreter::new(PyVersion::V3_11);
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
    /// A Python function that returns `None` (`lambda *a: None`): as a
    /// trace function it runs (its simulated frame `trace_callback`) at
    /// `call` events only; as a profile function (`profile_callback`) at
    /// every event.
    Python,
    /// A Python trace function that returns itself, so it is also the
    /// frame's local trace function and runs at `return` events too. As a
    /// profile function the same as [`Hook::Python`].
    PythonLocal,
}

impl Hook {
    /// Whether a Python function runs at `event`, installed as a trace
    /// (`trace == true`) or profile function.
    pub(super) fn runs_at(self, event: HookEvent, trace: bool) -> bool {
        match (self, trace) {
            (Hook::Off | Hook::C, _) => false,
            (Hook::Python | Hook::PythonLocal, false) => true,
            (Hook::Python, true) => event == HookEvent::Call,
            (Hook::PythonLocal, true) => event != HookEvent::CFunction,
        }
    }
}

/// An event a trace or profile function receives (`PyTrace_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HookEvent {
    /// A Python frame starts (`PyTrace_CALL`): trace and profile functions.
    Call,
    /// A Python frame returns (`PyTrace_RETURN`): trace and profile functions.
    Return,
    /// A builtin function is called / returns
    /// (`PyTrace_C_CALL`/`PyTrace_C_RETURN`): profile functions only.
    CFunction,
}
