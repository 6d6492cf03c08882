//! C calls as a model thread's eval loop meets them: a builtin C function
//! between its `c_call` and `c_return` events, a foreign (`ctypes`) function
//! that fires none, and a C call that releases the GIL and blocks; each ends
//! at the check site after the `CALL`.
//!
//! Uses the GIL and check sites of `gil.rs` and the hook events of
//! `tracing.rs`; used by the operations in `py.rs` and by `threads.rs`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::super::core::{CheckSite, ThreadIdx};
use super::super::MAIN_THREAD;
use super::error::PyResult;
use super::gil::{check, release_gil, take_gil};
use super::hook::HookEvent;
use super::state::{BlockedOn, State};
use super::tracing::fire;
use super::Py;

/// A call of a builtin C function (`C_TRACE`): the `c_call` event, the call,
/// the `c_return` event, then the check site after the `CALL`.
pub(super) fn c_function<R>(py: &Py, f: impl FnOnce() -> PyResult<R>) -> PyResult<R> {
    fire(py, HookEvent::CFunction)?;
    let value = f()?;
    fire(py, HookEvent::CFunction)?;
    check(py, CheckSite::AfterCall)?;
    Ok(value)
}

/// A C function called through `ctypes` (a `PyCFuncPtr`, not a
/// `PyCFunction`): 3.11's `trace_call_function` wraps only `PyCFunction`,
/// `PyCMethod` and method descriptors in `C_TRACE`, and 3.12+'s
/// `sys.monitoring` C events map to `c_call`/`c_return` only for those, so
/// no profile event fires; the only check site is the one after the `CALL`.
pub(super) fn foreign_function<R>(py: &Py, f: impl FnOnce() -> PyResult<R>) -> PyResult<R> {
    let value = f()?;
    check(py, CheckSite::AfterCall)?;
    Ok(value)
}

/// What a C call that releases the GIL blocks until.
pub(super) enum Until {
    /// `time.sleep`: a deadline.
    Deadline(Instant),
    /// `Event.wait()`: the event's flag.
    Event(Arc<AtomicBool>),
    /// `Thread.join()`: the thread's state is deleted.
    Thread(ThreadIdx),
}

impl Until {
    fn ready(&self, st: &State) -> bool {
        match self {
            Until::Deadline(_) => st.cancelled,
            Until::Event(flag) => flag.load(Ordering::SeqCst),
            // Thread.join: 3.11/3.12 return at the tstate lock's release,
            // 3.13 after the OS thread ended (VersionSpec docs).
            Until::Thread(idx) => {
                let t = &st.threads[*idx];
                t.finished && !(st.core.spec().join_waits_for_thread_exit && t.exiting)
            }
        }
    }

    fn blocked_on(&self) -> Option<BlockedOn> {
        match self {
            Until::Deadline(_) => None,
            Until::Event(flag) => Some(BlockedOn::Event(Arc::clone(flag))),
            Until::Thread(idx) => Some(BlockedOn::Thread(*idx)),
        }
    }
}

/// A C call that releases the GIL (`Py_BEGIN_ALLOW_THREADS`) and blocks
/// until `until`, then takes the GIL back (`Py_END_ALLOW_THREADS`) and
/// reaches the check site after the call.
pub(super) fn blocking(py: &Py, until: Until) -> PyResult<()> {
    c_function(py, || block_without_gil(py, &until))
}

fn block_without_gil(py: &Py, until: &Until) -> PyResult<()> {
    release_gil(py);
    {
        let mut st = py.lock();
        st.threads[py.idx].blocked_on = until.blocked_on();
        // A daemon thread stops blocking once finalization began: its
        // take_gil below ends it, as CPython's would when it woke.
        loop {
            let daemon_must_exit = st.core.is_finalizing() && py.idx != MAIN_THREAD;
            if until.ready(&st) || st.cancelled || daemon_must_exit {
                break;
            }
            match until {
                Until::Deadline(deadline) => {
                    if py.shared.cond.wait_until(&mut st, *deadline).timed_out() {
                        break;
                    }
                }
                _ => py.shared.cond.wait(&mut st),
            }
        }
        st.threads[py.idx].blocked_on = None;
    }
    take_gil(py)
}
