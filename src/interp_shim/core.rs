//! The semantic core of the CPython model: the interpreter state that pending
//! calls, the GIL, the eval breaker and tracing touch, and every transition
//! on it as one method, each one atomic step.
//!
//! This is the one copy of the rules. The live runtime calls these methods
//! from real OS threads with the state behind a lock; the explorer calls them
//! from a deterministic scheduler that tries every interleaving. Nothing here
//! blocks, sleeps, or runs user code: where CPython would run a callback or a
//! signal handler, or wait for the GIL, a method returns and the driver does
//! it. Per-version differences come from [`VersionSpec`], not from copies.
//!
//! Uses only [`version`](super::version).

use std::collections::VecDeque;
use std::fmt;

use super::version::{
    BreakerModel, PyVersion, RecursionGuard, TracedResume, VersionSpec, MAX_CALLS_PER_MAKE,
};

/// Index of a modelled Python thread; the main thread is always 0.
pub type ThreadIdx = usize;

/// The main thread's index.
pub const MAIN_THREAD: ThreadIdx = 0;

/// A bit of 3.13's per-thread eval breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
enum Bit {
    GilDropRequest = 1,
    SignalsPending = 2,
    CallsToDo = 4,
}

/// One Python thread state, as far as the model needs it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ThreadStateModel {
    /// `tstate->c_tracefunc` is set (`sys.settrace`).
    trace: bool,
    /// `tstate->c_profilefunc` is set (`sys.setprofile`).
    profile: bool,
    /// `tstate->tracing`: nesting of `PyThreadState_EnterTracing`.
    tracing: u32,
    /// 3.13's `tstate->eval_breaker` bits.
    bits: u8,
}

/// Where the eval breaker is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CheckSite {
    /// `RESUME` with oparg < 2: function entry, or generator resume.
    Resume,
    /// `JUMP_BACKWARD` and the backward conditional jumps: a loop iteration.
    BackwardJump,
    /// After a non-inlined `CALL`.
    AfterCall,
}

/// What the thread does after the eval breaker was handled at a check site.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Continuation {
    /// Carry on with the instruction (or the next one).
    Continue,
    /// Dispatch the same traced RESUME again (3.11 `DO_TRACING`).
    Redispatch,
}

/// The outcome of the start of `make_pending_calls`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum MakeBegin {
    /// Not the main thread: returned 0, nothing changed (3.11's up-front
    /// check; in 3.12/3.13 the main-thread queue is likewise left alone).
    NotMain,
    /// A `make_pending_calls` is already running: returned 0. 3.11/3.12
    /// change nothing; 3.13 clears the caller's `CALLS_TO_DO` bit.
    Recursive,
    /// This call now handles the queue: the driver pops and runs calls.
    Started,
}

/// `Py_AddPendingCall`'s push found the ring full (`_push_pending_call`
/// returned -1).
///
/// # Examples
/// ```
/// use greenlet::interp_shim::{PyVersion, RingFull, Interpreter};
///
/// let rt = Interpreter::new(PyVersion::V3_11);
/// for _ in 0..PyVersion::V3_11.spec().ring_capacity {
///     rt.add_pending_call(|_| Ok(())).unwrap();
/// }
/// let full: RingFull = rt.add_pending_call(|_| Ok(())).unwrap_err();
/// assert_eq!(full, RingFull { capacity: 31 });
/// assert_eq!(rt.stats().pending_calls_rejected, 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("the pending-call ring is full ({capacity} calls): Py_AddPendingCall returned -1")]
pub struct RingFull {
    /// The ring's capacity.
    pub capacity: usize,
}

/// The interpreter state the model tracks, generic over what a queued
/// pending call is (the live runtime: an id of a callback; the explorer: a
/// plain value).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct InterpCore<C> {
    spec: VersionSpec,
    threads: Vec<ThreadStateModel>,
    gil_holder: Option<ThreadIdx>,
    /// A thread that dropped the GIL on request and may not take it back
    /// before another thread has (`FORCE_SWITCHING` in `drop_gil`).
    forced_switch_from: Option<ThreadIdx>,
    /// 3.11/3.12 `gil_drop_request` (3.13 keeps it as a per-thread bit).
    drop_request: bool,
    /// 3.11/3.12 `eval_breaker`, as last stored.
    eval_breaker: bool,
    /// 3.11/3.12 `calls_to_do` of the queue `Py_AddPendingCall` targets
    /// (3.13 keeps it as the main thread's bit).
    calls_to_do: bool,
    /// 3.11/3.12 `signals_pending` (3.13: the main thread's bit).
    signals_pending: bool,
    ring: VecDeque<C>,
    /// The thread running `make_pending_calls` (3.11/3.12 `busy`, 3.13
    /// `handling_thread`).
    handler: Option<ThreadIdx>,
    finalizing: bool,
}

impl<C> InterpCore<C> {
    /// A fresh interpreter of `version` with only its main thread, which
    /// holds the GIL (as after `Py_Initialize`).
    pub(crate) fn new(version: PyVersion) -> Self {
        InterpCore {
            spec: version.spec(),
            threads: vec![ThreadStateModel {
                trace: false,
                profile: false,
                tracing: 0,
                bits: 0,
            }],
            gil_holder: Some(MAIN_THREAD),
            forced_switch_from: None,
            drop_request: false,
            eval_breaker: false,
            calls_to_do: false,
            signals_pending: false,
            ring: VecDeque::new(),
            handler: None,
            finalizing: false,
        }
    }

    /// A new thread state (`PyThreadState_New`); it does not hold the GIL.
    pub(crate) fn add_thread(&mut self) -> ThreadIdx {
        self.threads.push(ThreadStateModel {
            trace: false,
            profile: false,
            tracing: 0,
            bits: 0,
        });
        self.threads.len() - 1
    }

    // ---- the eval breaker -------------------------------------------------

    fn set_bit(&mut self, t: ThreadIdx, bit: Bit) {
        self.threads[t].bits |= bit as u8;
    }

    fn clear_bit(&mut self, t: ThreadIdx, bit: Bit) {
        self.threads[t].bits &= !(bit as u8);
    }

    fn has_bit(&self, t: ThreadIdx, bit: Bit) -> bool {
        self.threads[t].bits & bit as u8 != 0
    }

    /// `COMPUTE_EVAL_BREAKER` evaluated as thread `t` (3.11 ceval.c; 3.12
    /// ceval_gil.c): a plain store, so a non-main thread writes the main
    /// thread's `calls_to_do` out of it. No such thing in 3.13.
    fn compute(&mut self, t: ThreadIdx) {
        if self.spec.breaker == BreakerModel::SharedComputed {
            let main = t == MAIN_THREAD;
            self.eval_breaker =
                self.drop_request || (self.signals_pending && main) || (self.calls_to_do && main);
        }
    }

    /// Whether thread `t` finds the eval breaker set at a check site
    /// (`CHECK_EVAL_BREAKER`).
    pub(crate) fn breaker_set(&self, t: ThreadIdx) -> bool {
        match self.spec.breaker {
            BreakerModel::SharedComputed => self.eval_breaker,
            BreakerModel::PerThreadBits => self.threads[t].bits != 0,
        }
    }

    /// The `calls_to_do` flag of the queue `Py_AddPendingCall` targets (3.13:
    /// the main thread's `CALLS_TO_DO` bit).
    pub(crate) fn calls_to_do(&self) -> bool {
        match self.spec.breaker {
            BreakerModel::SharedComputed => self.calls_to_do,
            BreakerModel::PerThreadBits => self.has_bit(MAIN_THREAD, Bit::CallsToDo),
        }
    }

    // ---- Py_AddPendingCall --------------------------------------------------

    /// `Py_AddPendingCall` step 1, from any thread, with or without the GIL:
    /// `_push_pending_call` under `pending->lock`. The ring keeps its order.
    pub(crate) fn add_pending_push(&mut self, call: C) -> Result<(), RingFull> {
        if self.ring.len() >= self.spec.ring_capacity {
            return Err(RingFull {
                capacity: self.spec.ring_capacity,
            });
        }
        self.ring.push_back(call);
        Ok(())
    }

    /// `Py_AddPendingCall` step 2, after the lock is released, whether or not
    /// the push succeeded: `SIGNAL_PENDING_CALLS` as the caller (3.11/3.12:
    /// `calls_to_do = 1` then `COMPUTE_EVAL_BREAKER`, which a non-main caller
    /// computes without the main thread's calls, CPython issue #95820), or
    /// 3.13's `_Py_set_eval_breaker_bit(main_tstate, CALLS_TO_DO)`.
    pub(crate) fn add_pending_signal(&mut self, caller: ThreadIdx) {
        match self.spec.breaker {
            BreakerModel::SharedComputed => {
                self.calls_to_do = true;
                self.compute(caller);
            }
            BreakerModel::PerThreadBits => self.set_bit(MAIN_THREAD, Bit::CallsToDo),
        }
    }

    /// Calls waiting in the ring.
    pub(crate) fn ring_len(&self) -> usize {
        self.ring.len()
    }

    // ---- signals ------------------------------------------------------------

    /// An OS signal's C handler runs on thread `receiver`
    /// (`_PyEval_SignalReceived`): 3.11/3.12 on Linux
    /// `SIGNAL_PENDING_SIGNALS(interp, force=0)` (`force` is 1 on Windows
    /// only): `signals_pending = 1`, then `COMPUTE_EVAL_BREAKER` as
    /// `receiver`, which stores 0 when it is not the main thread, so the main
    /// thread sees the signal at its next `take_gil`; 3.13 sets the main
    /// thread's `SIGNALS_PENDING` bit.
    pub(crate) fn signal_received(&mut self, receiver: ThreadIdx) {
        match self.spec.breaker {
            BreakerModel::SharedComputed => {
                self.signals_pending = true;
                self.compute(receiver);
            }
            BreakerModel::PerThreadBits => self.set_bit(MAIN_THREAD, Bit::SignalsPending),
        }
    }

    /// First step of handling the breaker (`eval_frame_handle_pending` 3.11,
    /// `_Py_HandlePending` 3.12/3.13): if signals are pending and `t` is the
    /// main thread, unsignal them (`UNSIGNAL_PENDING_SIGNALS`) and return
    /// true: the driver then runs the Python-level handlers.
    pub(crate) fn take_signals(&mut self, t: ThreadIdx) -> bool {
        if t != MAIN_THREAD {
            return false;
        }
        match self.spec.breaker {
            BreakerModel::SharedComputed => {
                if !self.signals_pending {
                    return false;
                }
                self.signals_pending = false;
                self.compute(t);
            }
            BreakerModel::PerThreadBits => {
                if !self.has_bit(t, Bit::SignalsPending) {
                    return false;
                }
                self.clear_bit(t, Bit::SignalsPending);
            }
        }
        true
    }

    /// A Python-level signal handler failed: `handle_signals` re-schedules
    /// itself (3.11/3.12 `SIGNAL_PENDING_SIGNALS(interp, force=0)`, i.e.
    /// `signals_pending = 1` then `COMPUTE_EVAL_BREAKER` as `t`; 3.13
    /// `_Py_set_eval_breaker_bit(tstate, _PY_SIGNALS_PENDING_BIT)`), so the
    /// remaining tripped signals are handled at a later check site.
    pub(crate) fn resignal_signals(&mut self, t: ThreadIdx) {
        match self.spec.breaker {
            BreakerModel::SharedComputed => {
                self.signals_pending = true;
                self.compute(t);
            }
            BreakerModel::PerThreadBits => self.set_bit(t, Bit::SignalsPending),
        }
    }

    // ---- make_pending_calls -------------------------------------------------

    /// Second step of handling the breaker: whether `t` calls
    /// `make_pending_calls` (3.11 tests the `calls_to_do` flag on any thread;
    /// 3.12 only on the main thread for the main-thread queue; 3.13 the
    /// thread's own `CALLS_TO_DO` bit).
    pub(crate) fn wants_pending_calls(&self, t: ThreadIdx) -> bool {
        match self.spec.version {
            PyVersion::V3_11 => self.calls_to_do,
            PyVersion::V3_12 => self.calls_to_do && t == MAIN_THREAD,
            PyVersion::V3_13 => self.has_bit(t, Bit::CallsToDo),
        }
    }

    /// Whether `_Py_FinishPendingCalls` (run by the main thread during
    /// `Py_FinalizeEx`) calls `make_pending_calls` (again) in the model:
    /// 3.11/3.12 once, when the main-thread queue has calls to do; 3.13 as
    /// long as calls are queued. Real 3.12 and 3.13 also make one when
    /// nothing is queued; [`VersionSpec::finish_until_empty`] says why
    /// leaving those out changes nothing.
    pub(crate) fn finish_pending_calls_wanted(&self) -> bool {
        if self.spec.finish_until_empty {
            !self.ring.is_empty()
        } else {
            self.wants_pending_calls(MAIN_THREAD)
        }
    }

    /// Whether `_Py_FinishPendingCalls` asks
    /// [`finish_pending_calls_wanted`](Self::finish_pending_calls_wanted)
    /// again after each `make_pending_calls` (3.13), instead of once.
    pub(crate) fn finish_pending_calls_repeats(&self) -> bool {
        self.spec.finish_until_empty
    }

    /// `make_pending_calls` up to its loop: the main-thread check, the
    /// recursion guard, claiming it, and `UNSIGNAL_PENDING_CALLS` before any
    /// callback runs (so a call added meanwhile re-signals).
    pub(crate) fn make_pending_calls_begin(&mut self, t: ThreadIdx) -> MakeBegin {
        if t != MAIN_THREAD {
            return MakeBegin::NotMain;
        }
        if let Some(handler) = self.handler {
            if self.spec.guard == RecursionGuard::HandlingThread {
                // 3.13: hand the bit to the handling thread, clear our own.
                self.set_bit(handler, Bit::CallsToDo);
                self.clear_bit(t, Bit::CallsToDo);
            }
            return MakeBegin::Recursive;
        }
        self.handler = Some(t);
        match self.spec.breaker {
            BreakerModel::SharedComputed => {
                self.calls_to_do = false;
                self.compute(t);
            }
            BreakerModel::PerThreadBits => self.clear_bit(t, Bit::CallsToDo),
        }
        MakeBegin::Started
    }

    /// One iteration of `make_pending_calls`' loop (`_pop_pending_call` under
    /// the lock): the next call, or `None` when the ring is empty or the
    /// loop has run [`MAX_CALLS_PER_MAKE`] times (`iteration` counts from 0).
    pub(crate) fn make_pending_calls_pop(&mut self, iteration: u32) -> Option<C> {
        if iteration >= MAX_CALLS_PER_MAKE {
            return None;
        }
        self.ring.pop_front()
    }

    /// `make_pending_calls` returns: `busy = 0` / `handling_thread = NULL`;
    /// on a callback's error, `SIGNAL_PENDING_CALLS` again so the rest runs
    /// later. On a normal exit 3.11/3.12 do not re-signal, even if the loop
    /// bound left calls behind; 3.13 does (`npending > 0`).
    pub(crate) fn make_pending_calls_end(&mut self, t: ThreadIdx, failed: bool) {
        self.handler = None;
        let bound_hit = self.spec.resignal_after_bound && !self.ring.is_empty();
        if failed || bound_hit {
            match self.spec.breaker {
                BreakerModel::SharedComputed => {
                    self.calls_to_do = true;
                    self.compute(t);
                }
                BreakerModel::PerThreadBits => self.set_bit(t, Bit::CallsToDo),
            }
        }
    }

    /// The version's facts.
    pub(crate) fn spec(&self) -> &VersionSpec {
        &self.spec
    }

    /// Whether a `make_pending_calls` is running (3.11/3.12 `busy`, 3.13
    /// `handling_thread != NULL`).
    pub(crate) fn busy(&self) -> bool {
        self.handler.is_some()
    }

    // ---- the GIL ------------------------------------------------------------

    /// Who holds the GIL.
    pub(crate) fn gil_holder(&self) -> Option<ThreadIdx> {
        self.gil_holder
    }

    /// Third step of handling the breaker: whether a drop request is pending
    /// for `t` (3.11/3.12 `gil_drop_request`; 3.13 the thread's bit). The
    /// driver then calls [`drop_gil`](Self::drop_gil) and takes it again.
    pub(crate) fn drop_requested(&self, t: ThreadIdx) -> bool {
        match self.spec.breaker {
            BreakerModel::SharedComputed => self.drop_request,
            BreakerModel::PerThreadBits => self.has_bit(t, Bit::GilDropRequest),
        }
    }

    /// A thread waiting for the GIL timed out after the switch interval
    /// (`take_gil`'s `SET_GIL_DROP_REQUEST`): 3.11/3.12 set the flag and
    /// force the breaker to 1; 3.13 sets the holder's bit. Returns whether a
    /// request was made (someone else holds the GIL).
    pub(crate) fn request_drop(&mut self, waiter: ThreadIdx) -> bool {
        let Some(holder) = self.gil_holder.filter(|&h| h != waiter) else {
            return false;
        };
        match self.spec.breaker {
            BreakerModel::SharedComputed => {
                self.drop_request = true;
                self.eval_breaker = true;
            }
            BreakerModel::PerThreadBits => self.set_bit(holder, Bit::GilDropRequest),
        }
        true
    }

    /// `drop_gil` by the holder `t`. If a drop request is pending, the
    /// dropper may not take the GIL back before another thread has
    /// (`FORCE_SWITCHING`). Returns false (and changes nothing) if `t` does
    /// not hold the GIL.
    pub(crate) fn drop_gil(&mut self, t: ThreadIdx) -> bool {
        if self.gil_holder != Some(t) {
            return false;
        }
        self.gil_holder = None;
        if self.drop_requested(t) {
            self.forced_switch_from = Some(t);
        }
        true
    }

    /// Whether `t` could take the GIL now.
    pub(crate) fn can_take_gil(&self, t: ThreadIdx) -> bool {
        self.gil_holder.is_none() && self.forced_switch_from != Some(t)
    }

    /// `take_gil` succeeding for `t`: it becomes the holder, a pending drop
    /// request is reset, and the breaker is recomputed *as `t`*
    /// (`RESET_GIL_DROP_REQUEST` or `COMPUTE_EVAL_BREAKER`) — how the main
    /// thread picks up a `calls_to_do` that another thread set. 3.13 clears
    /// `t`'s drop bit and (`update_eval_breaker_for_thread`) sets the main
    /// thread's `CALLS_TO_DO` bit when the main-thread queue holds calls.
    /// Returns false (and changes nothing) if it cannot take it now.
    pub(crate) fn take_gil(&mut self, t: ThreadIdx) -> bool {
        if !self.can_take_gil(t) {
            return false;
        }
        self.gil_holder = Some(t);
        self.forced_switch_from = None;
        match self.spec.breaker {
            BreakerModel::SharedComputed => {
                self.drop_request = false;
                self.compute(t);
            }
            BreakerModel::PerThreadBits => {
                self.clear_bit(t, Bit::GilDropRequest);
                // update_eval_breaker_for_thread: the main thread's bit is
                // derived from the main-thread queue's count again.
                if t == MAIN_THREAD && !self.ring.is_empty() {
                    self.set_bit(t, Bit::CallsToDo);
                }
            }
        }
        true
    }

    /// Last step of `_Py_HandlePending` in 3.12: an unconditional
    /// `COMPUTE_EVAL_BREAKER` (so while `busy` with calls signalled, the main
    /// thread trips at every check site). Nothing in 3.11/3.13.
    pub(crate) fn handle_pending_end(&mut self, t: ThreadIdx) {
        if self.spec.final_recompute {
            self.compute(t);
        }
    }

    // ---- tracing ------------------------------------------------------------

    /// `sys.settrace` on thread `t` (`_PyEval_SetTrace`).
    pub(crate) fn set_trace(&mut self, t: ThreadIdx, on: bool) {
        self.threads[t].trace = on;
    }

    /// `sys.setprofile` on thread `t` (`_PyEval_SetProfile`).
    pub(crate) fn set_profile(&mut self, t: ThreadIdx, on: bool) {
        self.threads[t].profile = on;
    }

    /// `PyThreadState_EnterTracing`: code run until the matching leave is
    /// neither traced nor profiled.
    pub(crate) fn enter_tracing(&mut self, t: ThreadIdx) {
        self.threads[t].tracing += 1;
    }

    /// `PyThreadState_LeaveTracing`. Returns false (and changes nothing)
    /// without a matching enter.
    pub(crate) fn leave_tracing(&mut self, t: ThreadIdx) -> bool {
        let depth = &mut self.threads[t].tracing;
        if *depth == 0 {
            return false;
        }
        *depth -= 1;
        true
    }

    /// Whether `t`'s bytecode goes through the tracing path: a trace or
    /// profile function is set and `t` is not inside one (3.11
    /// `use_tracing == 255`; 3.12/3.13 instrumented code).
    pub(crate) fn is_traced(&self, t: ThreadIdx) -> bool {
        let th = &self.threads[t];
        (th.trace || th.profile) && th.tracing == 0
    }

    /// What `t` does at `site` after handling the breaker: a traced RESUME
    /// in 3.11 dispatches itself again (`DO_TRACING` checks before advancing
    /// `next_instr`); everything else continues.
    pub(crate) fn continuation(&self, t: ThreadIdx, site: CheckSite) -> Continuation {
        if site == CheckSite::Resume
            && self.is_traced(t)
            && self.spec.traced_resume == TracedResume::Redispatch
        {
            Continuation::Redispatch
        } else {
            Continuation::Continue
        }
    }

    /// Whether a function entry fires the trace/profile `call` event before
    /// its RESUME checks the breaker: 3.12/3.13 `INSTRUMENTED_RESUME` calls
    /// `_Py_call_instrumentation` first, then tests the breaker; 3.11
    /// `DO_TRACING` runs `CHECK_EVAL_BREAKER()` before
    /// `TRACE_FUNCTION_ENTRY()`. It decides whether a pending call handled at
    /// a function entry runs inside a Python trace/profile function (tracing
    /// suspended) or in the traced frame.
    pub(crate) fn call_event_before_check(&self) -> bool {
        self.spec.traced_resume == TracedResume::Continue
    }

    /// The livelock of the seed report, as a predicate on the state when the
    /// main thread is at a RESUME: it is traced on 3.11, a
    /// `make_pending_calls` is active below it (`busy`), `calls_to_do` and the
    /// breaker are set. Handling changes none of these, so the re-dispatch
    /// repeats forever: only the outer `make_pending_calls` could clear
    /// `busy`, and it is below the stuck frame.
    pub(crate) fn resume_livelocked(&self) -> bool {
        self.continuation(MAIN_THREAD, CheckSite::Resume) == Continuation::Redispatch
            && self.busy()
            && self.calls_to_do()
            && self.breaker_set(MAIN_THREAD)
    }

    // ---- finalization ---------------------------------------------------------

    /// `Py_FinalizeEx` has begun (`_PyRuntimeState_SetFinalizing`).
    pub(crate) fn finalize(&mut self) {
        self.finalizing = true;
    }

    /// `_Py_IsFinalizing()`.
    pub(crate) fn is_finalizing(&self) -> bool {
        self.finalizing
    }

    /// The pending-call state in one line, for watchdog reports and traces.
    pub(crate) fn summary(&self) -> Summary {
        Summary {
            version: self.spec.version,
            busy: self.busy(),
            calls_to_do: self.calls_to_do(),
            main_breaker: self.breaker_set(MAIN_THREAD),
            ring: self.ring.len(),
            gil_holder: self.gil_holder,
            drop_request: self.drop_requested(self.gil_holder.unwrap_or(MAIN_THREAD)),
            main_traced: self.is_traced(MAIN_THREAD),
        }
    }
}

/// A one-line view of the pending-call state.
///
/// # Examples
/// ```
/// use greenlet::interp_shim::{PyVersion, Interpreter, Summary};
///
/// let s: Summary = Interpreter::new(PyVersion::V3_12).summary();
/// assert_eq!((s.gil_holder, s.ring, s.busy), (Some(0), 0, false));
/// assert_eq!(
///     s.to_string(),
///     "py3.12 busy=0 calls_to_do=0 eval_breaker(main)=0 ring=0 gil=T0 drop_request=0 main_traced=0"
/// );
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Summary {
    /// The version modelled.
    pub version: PyVersion,
    /// `busy` / `handling_thread`.
    pub busy: bool,
    /// `calls_to_do`.
    pub calls_to_do: bool,
    /// The eval breaker as the main thread sees it.
    pub main_breaker: bool,
    /// Calls in the ring.
    pub ring: usize,
    /// The GIL's holder.
    pub gil_holder: Option<ThreadIdx>,
    /// A drop request pending for the holder.
    pub drop_request: bool,
    /// Whether the main thread is traced or profiled.
    pub main_traced: bool,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let holder = match self.gil_holder {
            Some(t) => format!("T{t}"),
            None => "-".into(),
        };
        write!(
            f,
            "py{} busy={} calls_to_do={} eval_breaker(main)={} ring={} gil={} drop_request={} main_traced={}",
            self.version,
            u8::from(self.busy),
            u8::from(self.calls_to_do),
            u8::from(self.main_breaker),
            self.ring,
            holder,
            u8::from(self.drop_request),
            u8::from(self.main_traced),
        )
    }
}

#[cfg(test)]
mod tests;
