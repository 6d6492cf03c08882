//! The three CPython versions as data: which recursion guard, which eval
//! breaker, how big the pending-call ring is, and what happens after the eval
//! breaker is handled at a traced function entry. The rules in
//! [`core`](super::core) read these facts; there is one copy of the rules.
//!
//! Owns: [`PyVersion`] (and [`UnknownVersion`]), [`VersionSpec`] with its
//! kinds ([`RecursionGuard`], [`BreakerModel`], [`TracedResume`]) and
//! [`MAX_CALLS_PER_MAKE`]. Uses only `std`.

use std::fmt;
use std::str::FromStr;

/// A modelled CPython version.
///
/// # Examples
/// ```
/// use greenlet::interp_shim::PyVersion;
///
/// let v: PyVersion = "3.12".parse().unwrap();
/// assert_eq!(v, PyVersion::V3_12);
/// assert_eq!(v.to_string(), "3.12");
/// assert!(PyVersion::V3_11 < v && v < PyVersion::V3_13);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PyVersion {
    /// CPython 3.11: one shared eval breaker stored by `COMPUTE_EVAL_BREAKER`,
    /// a process-global `busy`, `DO_TRACING` re-dispatching a traced RESUME.
    V3_11,
    /// CPython 3.12: `busy` per interpreter under the pending lock, a final
    /// recompute in `_Py_HandlePending`, tracing through instrumentation.
    V3_12,
    /// CPython 3.13: per-thread eval-breaker bits, `handling_thread`.
    V3_13,
}

/// How `make_pending_calls` refuses to recurse.
///
/// # Examples
/// ```
/// use greenlet::interp_shim::version::RecursionGuard;
/// use greenlet::interp_shim::PyVersion;
///
/// assert_eq!(PyVersion::V3_11.spec().guard, RecursionGuard::StaticBusy);
/// assert_eq!(PyVersion::V3_12.spec().guard, RecursionGuard::LockedBusy);
/// assert_eq!(PyVersion::V3_13.spec().guard, RecursionGuard::HandlingThread);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecursionGuard {
    /// `static int busy` in `make_pending_calls` (3.11): a recursive call
    /// returns 0 and changes nothing.
    StaticBusy,
    /// `pending->busy` read and written under `pending->lock` (3.12): same
    /// outcome, different storage.
    LockedBusy,
    /// `pending->handling_thread` (3.13): a recursive call clears the calling
    /// thread's `CALLS_TO_DO` bit (after setting it on the handling thread,
    /// which is itself here) and returns 0.
    HandlingThread,
}

/// Where the eval breaker lives.
///
/// # Examples
/// ```
/// use greenlet::interp_shim::version::BreakerModel;
/// use greenlet::interp_shim::PyVersion;
///
/// assert_eq!(PyVersion::V3_12.spec().breaker, BreakerModel::SharedComputed);
/// assert_eq!(PyVersion::V3_13.spec().breaker, BreakerModel::PerThreadBits);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BreakerModel {
    /// One int per interpreter, written with a plain store by
    /// `COMPUTE_EVAL_BREAKER` evaluated as the calling thread (3.11, 3.12).
    SharedComputed,
    /// One atomic bit set per thread state (3.13).
    PerThreadBits,
}

/// What a traced function entry (RESUME with oparg < 2) does after the eval
/// breaker was handled.
///
/// # Examples
/// ```
/// use greenlet::interp_shim::version::TracedResume;
/// use greenlet::interp_shim::PyVersion;
///
/// // Only 3.11 lands on the same traced RESUME again.
/// assert_eq!(PyVersion::V3_11.spec().traced_resume, TracedResume::Redispatch);
/// assert_eq!(PyVersion::V3_12.spec().traced_resume, TracedResume::Continue);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TracedResume {
    /// 3.11 `DO_TRACING`: checks the breaker before advancing `next_instr`,
    /// so `DISPATCH()` lands on the same RESUME again.
    Redispatch,
    /// 3.12/3.13 `INSTRUMENTED_RESUME`: a `TARGET` that has already advanced;
    /// execution continues at the next instruction.
    Continue,
}

/// The facts of one version that the rules depend on.
///
/// # Examples
/// ```
/// use greenlet::interp_shim::{PyVersion, VersionSpec};
///
/// let spec: VersionSpec = PyVersion::V3_13.spec();
/// assert_eq!(spec.version, PyVersion::V3_13);
/// assert_eq!(spec.ring_capacity, 32);
/// assert!(spec.resignal_after_bound && !spec.final_recompute);
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VersionSpec {
    /// Which version.
    pub version: PyVersion,
    /// Calls the ring `Py_AddPendingCall` targets can hold: `NPENDINGCALLS`
    /// is 32 with one slot kept empty in 3.11/3.12 (31); 3.13's main-thread
    /// queue holds 32.
    pub ring_capacity: usize,
    /// The recursion guard of `make_pending_calls`.
    pub guard: RecursionGuard,
    /// The eval breaker's representation.
    pub breaker: BreakerModel,
    /// The continuation at a traced RESUME.
    pub traced_resume: TracedResume,
    /// `_Py_HandlePending` ends with an unconditional `COMPUTE_EVAL_BREAKER`
    /// (3.12 only).
    pub final_recompute: bool,
    /// `make_pending_calls` signals again when its loop bound left calls in
    /// the queue (3.13: `if (npending > 0) signal_pending_calls(...)`; checked
    /// on 3.13.0: of 32 calls queued by a running call, the same make runs
    /// 31 and the 32nd runs at a later check site with nothing added).
    /// 3.11/3.12 do not.
    pub resignal_after_bound: bool,
    /// `_Py_FinishPendingCalls` repeats `make_pending_calls` until both
    /// queues are empty, whatever the flags say and even after a callback
    /// failed (3.13: `do { ... } while (npending > 0)`; checked on 3.13.0
    /// with `probes/finish_pending_calls.py`: 32 calls queued at
    /// finalization by a call run there all run before `atexit`, one make
    /// running at most 32 of the 33). 3.11/3.12 make one: 3.11 only if
    /// `calls_to_do` is set, 3.12 always (`probes/finish_pending_calls_entry.sh`
    /// disassembles the installed 3.11.7, 3.12.1 and 3.13.0). The model makes
    /// one only when it can run something: on 3.12 `calls_to_do` is clear
    /// only while the ring is empty (it is cleared by a claimed make alone,
    /// which then runs every queued call, the ring holding fewer than its
    /// loop bound, and each call added meanwhile sets it again), and 3.13's
    /// first make with nothing queued would only clear the main thread's bit
    /// before `Py_FinalizeEx` goes on; so the omitted makes change nothing.
    pub finish_until_empty: bool,
    /// `Thread.join()` returns only after the joined OS thread has ended,
    /// its thread-local destructors (where greenlet queues the dying
    /// thread's state and calls `Py_AddPendingCall`) included. 3.13 joins
    /// through `_ThreadHandle.join()`, which joins the OS thread; 3.11/3.12
    /// return when the thread's `_tstate_lock` is released
    /// (`tstate_delete_common` → `release_sentinel`), before those
    /// destructors. `probes/exit_order.py` shows it (300 joins per run): on
    /// 3.11 and 3.12 most joins return before the push, on 3.13 none do.
    pub join_waits_for_thread_exit: bool,
}

/// Calls one `make_pending_calls` runs at most before returning (the loop
/// bound `NPENDINGCALLS` in 3.11/3.12, and 3.13's main-thread batch).
pub const MAX_CALLS_PER_MAKE: u32 = 32;

impl PyVersion {
    /// Every modelled version, oldest first.
    pub const ALL: [PyVersion; 3] = [PyVersion::V3_11, PyVersion::V3_12, PyVersion::V3_13];

    /// The facts of this version.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::PyVersion;
    ///
    /// assert_eq!(PyVersion::V3_11.spec().ring_capacity, 31);
    /// assert!(PyVersion::V3_12.spec().final_recompute);
    /// ```
    pub fn spec(self) -> VersionSpec {
        match self {
            PyVersion::V3_11 => VersionSpec {
                version: self,
                ring_capacity: 31,
                guard: RecursionGuard::StaticBusy,
                breaker: BreakerModel::SharedComputed,
                traced_resume: TracedResume::Redispatch,
                final_recompute: false,
                resignal_after_bound: false,
                finish_until_empty: false,
                join_waits_for_thread_exit: false,
            },
            PyVersion::V3_12 => VersionSpec {
                version: self,
                ring_capacity: 31,
                guard: RecursionGuard::LockedBusy,
                breaker: BreakerModel::SharedComputed,
                traced_resume: TracedResume::Continue,
                final_recompute: true,
                resignal_after_bound: false,
                finish_until_empty: false,
                join_waits_for_thread_exit: false,
            },
            PyVersion::V3_13 => VersionSpec {
                version: self,
                ring_capacity: 32,
                guard: RecursionGuard::HandlingThread,
                breaker: BreakerModel::PerThreadBits,
                traced_resume: TracedResume::Continue,
                final_recompute: false,
                resignal_after_bound: true,
                finish_until_empty: true,
                join_waits_for_thread_exit: true,
            },
        }
    }

    /// "3.11", "3.12" or "3.13".
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::PyVersion;
    ///
    /// let names: Vec<&str> = PyVersion::ALL.iter().map(|v| v.name()).collect();
    /// assert_eq!(names, ["3.11", "3.12", "3.13"]);
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            PyVersion::V3_11 => "3.11",
            PyVersion::V3_12 => "3.12",
            PyVersion::V3_13 => "3.13",
        }
    }
}

impl fmt::Display for PyVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A version string that is not one of the modelled versions.
///
/// # Examples
/// ```
/// use greenlet::interp_shim::{PyVersion, UnknownVersion};
///
/// let err: UnknownVersion = "3.10".parse::<PyVersion>().unwrap_err();
/// assert_eq!(err.given, "3.10");
/// assert!(err.to_string().contains("3.11, 3.12 and 3.13"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported Python version {given:?}: the model covers 3.11, 3.12 and 3.13")]
pub struct UnknownVersion {
    /// What was given.
    pub given: String,
}

impl FromStr for PyVersion {
    type Err = UnknownVersion;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PyVersion::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| UnknownVersion {
                given: s.to_string(),
            })
    }
}
