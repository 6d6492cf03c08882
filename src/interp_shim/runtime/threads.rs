//! Model threads and the order in which they end: the main thread's body,
//! a started thread's body ([`ThreadHandle`]), the end of a dying thread's
//! thread-local destructors ([`ExitOrder`](super::ExitOrder)), and the interpreter's shutdown
//! (`threading._shutdown`, `_Py_FinishPendingCalls`, `Py_FinalizeEx`).
//!
//! Uses the shared state (`state.rs`) and the GIL and check sites
//! (`gil.rs`).

use std::cell::RefCell;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::diag::{diag_error, diag_warn};

use super::super::core::{CheckSite, ThreadIdx};
use super::super::MAIN_THREAD;
use super::c_calls::c_function;
use super::error::{PyErr, PyResult};
use super::event::PyEvent;
use super::gil::{check, release_gil, run_pending_calls, take_gil};
use super::state::{Shared, ThreadSlot, MODEL_THREAD};
use super::Py;

thread_local! {
    /// Set first thing on a spawned model thread, so that its destructor is
    /// registered before any other thread-local's and runs after them all
    /// (the standard library and glibc run thread-local destructors in the
    /// reverse order of their registration): it ends the thread's exit.
    static EXIT_GUARD: RefCell<Option<ExitGuard>> = const { RefCell::new(None) };
}

/// Ends a model thread's [`ThreadSlot::exiting`] when its OS thread's last
/// thread-local destructor runs.
struct ExitGuard {
    shared: Arc<Shared>,
    idx: ThreadIdx,
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        self.shared.state.lock().threads[self.idx].exiting = false;
        self.shared.cond.notify_all();
    }
}

pub(super) fn main_thread<T, F>(shared: Arc<Shared>, main: F) -> PyResult<T>
where
    F: FnOnce(&Py) -> PyResult<T>,
{
    MODEL_THREAD.with(|m| m.set((shared.id, MAIN_THREAD)));
    let init = shared.state.lock().thread_init.clone();
    if let Some(init) = init {
        init();
    }
    let py = Py::new(Arc::clone(&shared), MAIN_THREAD);
    // The main thread holds the GIL from InterpCore::new (Py_Initialize).
    let result = py.frame("<module>", |py| {
        check(py, CheckSite::Resume)?;
        main(py)
    });
    shutdown(&py);
    let mut st = shared.state.lock();
    st.threads[MAIN_THREAD].finished = true;
    st.done = true;
    shared.cond.notify_all();
    drop(st);
    result
}

fn thread_main(
    shared: Arc<Shared>,
    idx: ThreadIdx,
    target: &'static str,
    started: PyEvent,
    body: impl FnOnce(&Py) -> PyResult<()>,
) {
    MODEL_THREAD.with(|m| m.set((shared.id, idx)));
    EXIT_GUARD.with(|g| {
        *g.borrow_mut() = Some(ExitGuard {
            shared: Arc::clone(&shared),
            idx,
        });
    });
    let init = shared.state.lock().thread_init.clone();
    if let Some(init) = init {
        init();
    }
    let py = Py::new(Arc::clone(&shared), idx);
    // t_bootstrap: take the GIL, then Thread._bootstrap_inner sets _started.
    let result = take_gil(&py).and_then(|()| {
        started.set();
        py.frame("run", |py| py.call(target, body))
    });
    if let Err(PyErr::Exception { kind, message }) = &result {
        let name = shared.state.lock().threads[idx].name.clone();
        // threading.excepthook: the traceback goes to sys.stderr
        diag_error!("Exception in thread {name}:\n{kind}: {message}");
    }
    // PyThreadState_Clear + _PyThreadState_DeleteCurrent: the tstate lock is
    // released (Thread.join returns) and the GIL dropped. The OS thread's
    // thread-local destructors run after this, without the GIL; the
    // ExitGuard's, last of them, ends `exiting`.
    let mut st = shared.state.lock();
    st.threads[idx].finished = true;
    st.threads[idx].exiting = true;
    st.core.drop_gil(idx);
    shared.cond.notify_all();
}

/// A started Python thread (`threading.Thread`), for [`Py::join`].
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::interp_shim::{Outcome, PyVersion, Interpreter, Watchdog};
///
/// let rt = Interpreter::new(PyVersion::V3_12);
/// let outcome = rt
///     .run(Watchdog::Report(Duration::from_secs(20)), |py| {
///         let thread = py.spawn("_b", |py| py.call("work", |_| Ok(())))?;
///         py.join(&thread)?;
///         Ok(thread)
///     })
///     .unwrap();
/// let Outcome::Finished(Ok(thread)) = outcome else { panic!("finishes") };
/// assert_eq!((thread.index(), thread.name()), (1, "Thread-1 (_b)"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadHandle {
    pub(super) index: ThreadIdx,
    pub(super) name: String,
}

impl ThreadHandle {
    /// The model thread index.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_13);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     let first = py.spawn("a", |_| Ok(()))?;
    ///     let second = py.spawn("b", |_| Ok(()))?;
    ///     assert_eq!((first.index(), second.index()), (1, 2)); // 0 is the main thread
    ///     py.join(&first)?;
    ///     py.join(&second)
    /// })
    /// .unwrap();
    /// ```
    pub fn index(&self) -> ThreadIdx {
        self.index
    }

    /// The thread's name, e.g. `Thread-1 (_b)`.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_11);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     let t = py.spawn("worker", |_| Ok(()))?;
    ///     assert_eq!(t.name(), "Thread-1 (worker)");
    ///     py.join(&t)
    /// })
    /// .unwrap();
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// `Thread.start()` (threading.py) as Python code: the function `start`
/// (its `RESUME` a check site: on 3.11 under tracing a livelock can spin
/// there, `probes/threading_spin.py`), the builtin `_start_new_thread`
/// (`thread_PyThread_start_new_thread`: a new thread state,
/// `PyThreadState_New`, and an OS thread that takes the GIL and runs
/// `body` as the function `target`), then `self._started.wait()`: the
/// function `wait` (`Event.wait`) calling the function `wait`
/// (`Condition.wait`), whose `waiter.acquire()` blocks with the GIL
/// released until the new thread has set `_started`. A pending call handled
/// at the check after that acquire runs below `wait <- wait <- start`, as in
/// the real 3.11.7/3.12.1 dumps. `Event.wait` always reaches
/// `Condition.wait` here: the new thread sets `_started` only once it holds
/// the GIL, which the starter keeps until the acquire releases it. The
/// smaller calls on the way (`Event.is_set`, `Condition._is_owned`,
/// `_release_save`, `_acquire_restore`) are left out.
pub(super) fn spawn_thread(
    py: &Py,
    target: &'static str,
    daemon: bool,
    body: impl FnOnce(&Py) -> PyResult<()> + Send + 'static,
) -> PyResult<ThreadHandle> {
    py.cancelled()?;
    py.call("start", |py| {
        let started = PyEvent {
            flag: Arc::new(AtomicBool::new(false)),
            shared: Arc::downgrade(&py.shared),
        };
        let signal = started.clone();
        // _start_new_thread(self._bootstrap, ())
        let handle = c_function(py, || start_new_thread(py, target, daemon, signal, body))?;
        // self._started.wait(): Event.wait → Condition.wait → waiter.acquire()
        py.call("wait", |py| py.call("wait", |py| py.wait(&started)))?;
        Ok(handle)
    })
}

/// `thread_PyThread_start_new_thread`: the thread state and the OS thread.
fn start_new_thread(
    py: &Py,
    target: &'static str,
    daemon: bool,
    started: PyEvent,
    body: impl FnOnce(&Py) -> PyResult<()> + Send + 'static,
) -> PyResult<ThreadHandle> {
    let (idx, name) = {
        let mut st = py.lock();
        // PyThreadState_New
        let idx = st.core.add_thread();
        let name = format!("Thread-{idx} ({target})");
        st.threads
            .push(ThreadSlot::new(name.clone(), daemon, false));
        (idx, name)
    };
    let shared = Arc::clone(&py.shared);
    let spawned = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || thread_main(shared, idx, target, started, body));
    match spawned {
        Ok(handle) => py.lock().os_threads.push((handle, daemon)),
        Err(err) => {
            py.lock().threads[idx].finished = true;
            return Err(PyErr::exception(
                "RuntimeError",
                format!("can't start new thread {name}: {err}"),
            ));
        }
    }
    Ok(ThreadHandle { index: idx, name })
}

/// `Py_FinalizeEx` as run by the main thread after `<module>`.
pub(super) fn shutdown(py: &Py) {
    // threading._shutdown: wait for every non-daemon thread state (GIL
    // released); then the harness joins their OS threads (module docs).
    release_gil(py);
    let handles = {
        let mut st = py.lock();
        while !st.cancelled && st.threads.iter().skip(1).any(|t| !t.finished && !t.daemon) {
            py.shared.cond.wait(&mut st);
        }
        std::mem::take(&mut st.os_threads)
    };
    let (daemons, others): (Vec<_>, Vec<_>) = handles.into_iter().partition(|(_, d)| *d);
    others.into_iter().for_each(|(h, _)| join_reporting(h));
    if take_gil(py).is_ok() {
        // _Py_FinishPendingCalls: one make_pending_calls if calls_to_do
        // (3.11/3.12), or makes until the ring is empty (3.13); the
        // makes with nothing to run are left out (VersionSpec docs)
        loop {
            let (wanted, repeats) = {
                let st = py.lock();
                (
                    st.core.finish_pending_calls_wanted(),
                    st.core.finish_pending_calls_repeats(),
                )
            };
            if !wanted {
                break;
            }
            if let Err(err) = run_pending_calls(py) {
                diag_warn!("Exception ignored while finishing pending calls: {err}");
            }
            if !repeats {
                break;
            }
        }
    }
    let hooks = {
        let mut st = py.lock();
        // _PyRuntimeState_SetFinalizing
        st.core.finalize();
        py.shared.cond.notify_all();
        std::mem::take(&mut st.finalize_hooks)
    };
    for hook in hooks {
        hook();
    }
    release_gil(py);
    // Daemon threads end at their next GIL take; the harness waits for
    // their OS threads so that what they leave behind is accounted for.
    daemons.into_iter().for_each(|(h, _)| join_reporting(h));
}

fn join_reporting(handle: JoinHandle<()>) {
    if let Err(panic) = handle.join() {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        diag_error!("a simulated thread panicked: {what}");
    }
}
