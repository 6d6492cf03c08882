//! The live runtime's counters ([`InterpreterStats`]), kept in the shared
//! state and read by [`Interpreter::stats`](super::Interpreter::stats).
//!
//! A leaf: uses nothing of the runtime.

/// Counters of the live runtime.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::interp_shim::{PyVersion, Interpreter, InterpreterStats, Watchdog};
///
/// let rt = Interpreter::new(PyVersion::V3_12);
/// assert_eq!(rt.stats(), InterpreterStats::default());
/// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
///     py.add_pending_call(|_| Ok(())).expect("the ring has room");
///     py.loop_iter()
/// })
/// .unwrap();
/// let stats = rt.stats();
/// assert_eq!((stats.pending_calls_added, stats.pending_calls_run), (1, 1));
/// assert_eq!((stats.pending_calls_rejected, stats.redispatches), (0, 0));
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InterpreterStats {
    /// `Py_AddPendingCall` pushes that succeeded.
    pub pending_calls_added: u64,
    /// `Py_AddPendingCall` pushes refused because the ring was full.
    pub pending_calls_rejected: u64,
    /// Pending calls run by `make_pending_calls`.
    pub pending_calls_run: u64,
    /// `make_pending_calls` that started draining.
    pub makes_started: u64,
    /// `make_pending_calls` that returned at once because one was running
    /// (the 3.12 "extra trips", the 3.11 spin).
    pub makes_recursive: u64,
    /// Traced RESUME re-dispatches (3.11 `DO_TRACING`).
    pub redispatches: u64,
    /// GIL hand-overs (`take_gil` successes).
    pub gil_switches: u64,
    /// Drop requests made by waiters that timed out.
    pub drop_requests: u64,
    /// Python-level signal handler runs.
    pub signal_handlers_run: u64,
    /// Runs of a Python trace function (one per event it receives).
    pub trace_function_runs: u64,
    /// Runs of a Python profile function (one per event it receives).
    pub profile_function_runs: u64,
}
