//! The GIL and the eval breaker's check sites of a model thread: `drop_gil`
//! / `take_gil` with the switch interval and drop requests,
//! `CHECK_EVAL_BREAKER` and the handling sequence (signals,
//! `make_pending_calls`, the drop request), and `Py_AddPendingCall`.
//!
//! Functions of a model thread's [`Py`], used by its operations in `py.rs`,
//! by `c_calls.rs` and by `threads.rs`; each is a sequence of the core's steps
//! (`core::InterpCore`) under the runtime's lock, and decides no rule itself.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use super::super::core::{CheckSite, Continuation, MakeBegin, RingFull, ThreadIdx};
use super::super::MAIN_THREAD;
use super::callbacks::PendingCall;
use super::error::{PyErr, PyResult};
use super::signals::handle_signals;
use super::state::{Shared, State};
use super::Py;

/// CPython's default switch interval (`sys.getswitchinterval()`): a thread
/// waiting this long for the GIL asks the holder to drop it.
pub const SWITCH_INTERVAL: Duration = Duration::from_millis(5);

pub(super) fn add_pending_call_as(
    shared: &Shared,
    caller: ThreadIdx,
    call: PendingCall,
) -> Result<(), RingFull> {
    let pushed = {
        let mut st = shared.state.lock();
        let id = st.next_call;
        // Py_AddPendingCall → _push_pending_call, under pending->lock
        match st.core.add_pending_push(id) {
            Ok(()) => {
                st.next_call += 1;
                st.callbacks.insert(id, call);
                st.stats.pending_calls_added += 1;
                Ok(())
            }
            Err(full) => {
                st.stats.pending_calls_rejected += 1;
                Err((full, call))
            }
        }
    };
    // Py_AddPendingCall → SIGNAL_PENDING_CALLS, lock released, unconditional
    shared.state.lock().core.add_pending_signal(caller);
    pushed.map_err(|(full, call)| {
        drop(call); // outside the lock: it may own user state
        full
    })
}

/// `drop_gil` (a no-op if this thread does not hold it).
pub(super) fn release_gil(py: &Py) {
    let mut st = py.lock();
    if st.core.drop_gil(py.idx) {
        py.shared.cond.notify_all();
    }
}

/// `take_gil`: wait on the GIL; a wait that times out after the switch
/// interval with no switch meanwhile sets the drop request.
pub(super) fn take_gil(py: &Py) -> PyResult<()> {
    let mut st = py.lock();
    let mut switches = st.stats.gil_switches;
    let mut deadline = Instant::now() + SWITCH_INTERVAL;
    loop {
        if st.cancelled {
            return Err(PyErr::Cancelled);
        }
        // take_gil: tstate_must_exit → ThreadHandle_exit_thread
        if st.core.is_finalizing() && py.idx != MAIN_THREAD {
            return Err(PyErr::ThreadExit);
        }
        // The harness's schedule (module docs): no GIL take while another
        // thread is in its thread-local destructors.
        if st.gil_waits_for_an_exit(py.idx) {
            py.shared.cond.wait(&mut st);
            deadline = Instant::now() + SWITCH_INTERVAL;
            continue;
        }
        // take_gil: success resets the drop request and recomputes the
        // breaker as this thread.
        if st.core.take_gil(py.idx) {
            st.stats.gil_switches += 1;
            py.shared.cond.notify_all();
            return Ok(());
        }
        let timed_out = py.shared.cond.wait_until(&mut st, deadline).timed_out();
        if st.stats.gil_switches != switches {
            switches = st.stats.gil_switches;
            deadline = Instant::now() + SWITCH_INTERVAL;
        } else if timed_out {
            // take_gil: SET_GIL_DROP_REQUEST after a timed-out wait
            if st.core.request_drop(py.idx) {
                st.stats.drop_requests += 1;
            }
            deadline = Instant::now() + SWITCH_INTERVAL;
        }
    }
}

/// A check site (`CHECK_EVAL_BREAKER`): if the breaker is set, handle it;
/// then continue, or (3.11 `DO_TRACING` at a traced RESUME) dispatch the
/// same instruction again, which checks again.
pub(super) fn check(py: &Py, site: CheckSite) -> PyResult<()> {
    loop {
        {
            let st = py.lock();
            if st.cancelled {
                return Err(PyErr::Cancelled);
            }
            if !st.core.breaker_set(py.idx) {
                return Ok(());
            }
        }
        handle_pending(py)?;
        let mut st = py.lock();
        match st.core.continuation(py.idx, site) {
            Continuation::Continue => {
                st.livelock_held = 0;
                return Ok(());
            }
            Continuation::Redispatch => {
                st.threads[py.idx].redispatches += 1;
                st.stats.redispatches += 1;
                note_redispatch(py, &mut st);
            }
        }
    }
}

/// The early verdict's count: a re-dispatch of the main thread with the
/// core's livelock predicate holding (`InterpCore::resume_livelocked`:
/// traced RESUME, `busy`, `calls_to_do`, the breaker) while nothing else
/// can move (`State::nothing_else_can_move`) extends the run of such
/// re-dispatches; anything else resets it. At the runtime's bound the
/// watchdog is woken to report the livelock.
fn note_redispatch(py: &Py, st: &mut State) {
    let Some(bound) = st.early_verdict else {
        return;
    };
    if py.idx == MAIN_THREAD && st.core.resume_livelocked() && st.nothing_else_can_move() {
        st.livelock_held += 1;
        if st.livelock_held >= bound && st.livelocked.is_none() {
            st.livelocked = Some(st.livelock_held);
            py.shared.cond.notify_all();
        }
    } else {
        st.livelock_held = 0;
    }
}

/// `eval_frame_handle_pending` (3.11) / `_Py_HandlePending` (3.12/3.13),
/// in CPython's order.
pub(super) fn handle_pending(py: &Py) -> PyResult<()> {
    let t = py.idx;
    // 1. signals (main thread of the main interpreter only)
    handle_signals(py)?;
    // 2. pending calls: the calls_to_do flag, not the breaker
    let wants = py.lock().core.wants_pending_calls(t);
    if wants {
        run_pending_calls(py)?;
    }
    // 3. GIL drop request: drop_gil, then take_gil (which recomputes the
    // breaker for this thread); runs even if step 2 returned early.
    let drop = py.lock().core.drop_requested(t);
    if drop {
        release_gil(py);
        take_gil(py)?;
    }
    // 4. (async exceptions are not modelled); 3.12's final recompute
    py.lock().core.handle_pending_end(t);
    Ok(())
}

/// `make_pending_calls`: the guard, then at most `MAX_CALLS_PER_MAKE`
/// pops, each callback run with the lock released and the GIL held.
pub(super) fn run_pending_calls(py: &Py) -> PyResult<()> {
    let t = py.idx;
    let begin = {
        let mut st = py.lock();
        let begin = st.core.make_pending_calls_begin(t);
        match begin {
            MakeBegin::Started => st.stats.makes_started += 1,
            MakeBegin::Recursive => st.stats.makes_recursive += 1,
            MakeBegin::NotMain => {}
        }
        begin
    };
    if begin != MakeBegin::Started {
        return Ok(());
    }
    let mut failure = None;
    for iteration in 0.. {
        let call = {
            let mut st = py.lock();
            // _pop_pending_call under pending->lock
            match st.core.make_pending_calls_pop(iteration) {
                Some(id) => st.callbacks.remove(&id),
                None => break,
            }
        };
        let Some(call) = call else { continue };
        py.lock().stats.pending_calls_run += 1;
        let result = catch_unwind(AssertUnwindSafe(|| call(py))).unwrap_or_else(|_| {
            Err(PyErr::exception(
                "SystemError",
                "a pending call panicked (treated as returning -1)",
            ))
        });
        if let Err(err) = result {
            failure = Some(err);
            break;
        }
    }
    // make_pending_calls: busy = 0 (re-signal on error)
    py.lock().core.make_pending_calls_end(t, failure.is_some());
    failure.map_or(Ok(()), Err)
}
