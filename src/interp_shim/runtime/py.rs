//! [`Py`], the context of simulated Python code on one model thread, and
//! its operations: calls and frames, loops, C calls, sleeps, waits and
//! joins, trace and profile functions, thread starts, pending calls and
//! signals.
//!
//! Each operation is built from the GIL and check-site functions of
//! `gil.rs`, the trace events of `tracing.rs` and the thread start of
//! `threads.rs`; `Py` holds only which runtime and which model thread.
//!
//! Longer than the crate's usual 800 lines because it is one type's methods,
//! which the crate keeps in one file: each is a short sequence of the
//! functions above, with the rustdoc example of a public operation.

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::coroutine::Value;

use parking_lot::MutexGuard;

use crate::diag::diag_warn;

use super::super::core::{CheckSite, RingFull, ThreadIdx};
use super::c_calls::{blocking, c_function, foreign_function, Until};
use super::error::{PyErr, PyResult};
use super::event::PyEvent;
use super::gil::{add_pending_call_as, check, release_gil, run_pending_calls, take_gil};
use super::greenlets::{current_greenlet, new_greenlet, switch_to, sync_frames, PyGreenlet};
use super::hook::{Hook, HookEvent};
use super::signals::{handle_signals, trip_signal};
use super::state::{Shared, State, MODEL_THREAD, REGISTRY};
use super::threads::{spawn_thread, ThreadHandle};
use super::tracing::{fire, TracingGuard};
use super::Interpreter;

/// The context of simulated Python code: one model thread of one runtime,
/// used on the OS thread that runs it (hence neither `Send` nor `Sync`).
///
/// Every operation is a sequence of core steps; those that reach a check
/// site may run pending calls and signal handlers, drop the GIL, or (3.11,
/// traced) re-dispatch a RESUME forever.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::interp_shim::{Outcome, Py, PyResult, PyVersion, Interpreter, Watchdog};
///
/// fn module(py: &Py) -> PyResult<u32> {
///     let worker = py.spawn("worker", |py| py.call("work", |_| Ok(())))?;
///     let n = py.call("count", |py| {
///         let mut n = 0;
///         while n < 3 {
///             n += 1;
///             py.loop_iter()?; // a check site
///         }
///         Ok(n)
///     })?;
///     py.join(&worker)?;
///     Ok(n)
/// }
/// let rt = Interpreter::new(PyVersion::V3_11);
/// let outcome = rt.run(Watchdog::Report(Duration::from_secs(20)), module).unwrap();
/// assert!(matches!(outcome, Outcome::Finished(Ok(3))));
/// ```
pub struct Py {
    pub(super) shared: Arc<Shared>,
    pub(super) idx: ThreadIdx,
    pub(super) _not_send: PhantomData<*const ()>,
}

impl fmt::Debug for Py {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Py").field("thread", &self.idx).finish()
    }
}

/// Pops a simulated frame when its call ends, also on unwinding.
struct FrameGuard<'a> {
    py: &'a Py,
}

impl Drop for FrameGuard<'_> {
    fn drop(&mut self) {
        let mut st = self.py.lock();
        sync_frames(self.py, &mut st);
        st.threads[self.py.idx].frames.pop();
    }
}

impl Py {
    pub(super) fn new(shared: Arc<Shared>, idx: ThreadIdx) -> Py {
        Py {
            shared,
            idx,
            _not_send: PhantomData,
        }
    }

    /// The context of the calling OS thread's model thread, if it is one and
    /// its runtime is alive: how finalizers run by a drain (inside
    /// `make_pending_calls` on the main thread) reach their runtime.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Py, PyVersion, Interpreter, Watchdog};
    ///
    /// assert!(Py::current().is_none()); // this OS thread is no model thread
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     let here = Py::current().expect("the main thread is a model thread");
    ///     assert_eq!(here.thread_index(), py.thread_index());
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn current() -> Option<Py> {
        let (id, idx) = MODEL_THREAD.try_with(Cell::get).ok()?;
        if id == 0 {
            return None;
        }
        let shared = REGISTRY
            .lock()
            .iter()
            .find(|(rid, _)| *rid == id)
            .and_then(|(_, weak)| weak.upgrade())?;
        Some(Py::new(shared, idx))
    }

    /// The runtime this thread belongs to.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_13);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     assert_eq!(py.runtime().version(), PyVersion::V3_13);
    ///     assert!(!py.runtime().is_finalizing());
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn runtime(&self) -> Interpreter {
        Interpreter {
            shared: Arc::clone(&self.shared),
        }
    }

    /// This model thread's index (0: the main thread).
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyEvent, PyVersion, Interpreter, Watchdog, MAIN_THREAD};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_11);
    /// let done = PyEvent::new(&rt);
    /// let (seen, flag) = (done.clone(), done.clone());
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), move |py| {
    ///     assert_eq!(py.thread_index(), MAIN_THREAD);
    ///     let t = py.spawn("w", move |py| {
    ///         // The worker sets the event only if it is not the main thread.
    ///         py.c_call(|| if py.thread_index() != MAIN_THREAD { flag.set() })
    ///     })?;
    ///     py.join(&t)
    /// })
    /// .unwrap();
    /// assert!(seen.is_set());
    /// ```
    pub fn thread_index(&self) -> ThreadIdx {
        self.idx
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock()
    }

    pub(super) fn cancelled(&self) -> PyResult<()> {
        if self.lock().cancelled {
            Err(PyErr::Cancelled)
        } else {
            Ok(())
        }
    }

    /// Run `f` in a simulated frame named `name` (no check site).
    pub(super) fn frame<R>(
        &self,
        name: &'static str,
        f: impl FnOnce(&Py) -> PyResult<R>,
    ) -> PyResult<R> {
        {
            let mut st = self.lock();
            sync_frames(self, &mut st);
            st.threads[self.idx].frames.push(name);
        }
        let _guard = FrameGuard { py: self };
        f(self)
    }

    /// Call the Python function `name` whose body is `f`: the frame is
    /// pushed, its `RESUME` is a check site (in 3.11 under tracing, a RESUME
    /// re-dispatched while the breaker stays set spins here), then `f` runs;
    /// after it returns, the caller's check site after a `CALL`.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Outcome, PyErr, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// let outcome = rt
    ///     .run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///         let doubled = py.call("double", |_| Ok(21 * 2))?;
    ///         assert_eq!(doubled, 42);
    ///         py.call("fail", |_| Err::<(), _>(PyErr::exception("KeyError", "'b'")))
    ///     })
    ///     .unwrap();
    /// assert!(matches!(outcome, Outcome::Finished(Err(PyErr::Exception { .. }))));
    /// ```
    pub fn call<R>(&self, name: &'static str, f: impl FnOnce(&Py) -> PyResult<R>) -> PyResult<R> {
        let value = self.frame(name, |py| {
            // RESUME: the `call` event and the breaker check, in the
            // version's order (DO_TRACING vs INSTRUMENTED_RESUME)
            if py.lock().core.call_event_before_check() {
                fire(py, HookEvent::Call)?;
                check(py, CheckSite::Resume)?;
            } else {
                check(py, CheckSite::Resume)?;
                fire(py, HookEvent::Call)?;
            }
            let value = f(py)?;
            // TRACE_FUNCTION_EXIT
            fire(py, HookEvent::Return)?;
            Ok(value)
        })?;
        check(self, CheckSite::AfterCall)?;
        Ok(value)
    }

    /// One loop iteration's backward jump (`JUMP_BACKWARD`): a check site.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::atomic::{AtomicBool, Ordering};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// let ran = Arc::new(AtomicBool::new(false));
    /// let (flag, seen) = (Arc::clone(&ran), Arc::clone(&ran));
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), move |py| {
    ///     py.add_pending_call(move |_| Ok(flag.store(true, Ordering::SeqCst))).unwrap();
    ///     assert!(!seen.load(Ordering::SeqCst)); // queued, not run yet
    ///     py.loop_iter()?; // the check site runs it
    ///     assert!(seen.load(Ordering::SeqCst));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn loop_iter(&self) -> PyResult<()> {
        check(self, CheckSite::BackwardJump)
    }

    /// `time.sleep(d)`: release the GIL, sleep, take it back, then the check
    /// site after the call.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::atomic::{AtomicBool, Ordering};
    /// # use std::sync::Arc;
    /// use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog, MAIN_THREAD};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_13);
    /// let ran = Arc::new(AtomicBool::new(false));
    /// let (flag, seen) = (Arc::clone(&ran), Arc::clone(&ran));
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), move |py| {
    ///     py.add_pending_call(move |_| Ok(flag.store(true, Ordering::SeqCst))).unwrap();
    ///     py.sleep(Duration::from_millis(1))?;
    ///     // The GIL is back, and the check site after the call ran the call.
    ///     assert_eq!(py.runtime().summary().gil_holder, Some(MAIN_THREAD));
    ///     assert!(seen.load(Ordering::SeqCst));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn sleep(&self, d: Duration) -> PyResult<()> {
        let deadline = Instant::now() + d;
        blocking(self, Until::Deadline(deadline))
    }

    /// `Event.wait()`: release the GIL until `event` is set.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyEvent, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_11);
    /// let go = PyEvent::new(&rt);
    /// let waited = go.clone();
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), move |py| {
    ///     let waiter = py.spawn("waiter", move |py| py.wait(&waited))?;
    ///     assert!(py.is_alive(&waiter)?); // blocked in wait, GIL released
    ///     go.set();
    ///     py.join(&waiter)
    /// })
    /// .unwrap();
    /// ```
    pub fn wait(&self, event: &PyEvent) -> PyResult<()> {
        blocking(self, Until::Event(Arc::clone(&event.flag)))
    }

    /// `Thread.join()` (threading.py) as Python code: the function `join`
    /// (its `RESUME` a check site: on 3.11 under tracing a livelock can spin
    /// there, `probes/threading_spin.py`), then on 3.11/3.12 the function
    /// `_wait_for_tstate_lock` whose `lock.acquire()` releases the GIL until
    /// `thread`'s state is deleted (its `_tstate_lock` released), on 3.13
    /// `self._handle.join()`, a C call that waits for the OS thread
    /// ([`VersionSpec::join_waits_for_thread_exit`](super::super::VersionSpec::join_waits_for_thread_exit)).
    /// The checks before the wait (`self._started.is_set()`,
    /// `current_thread()`) are left out.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     let t = py.spawn("worker", |py| py.call("work", |_| Ok(())))?;
    ///     py.join(&t)?;
    ///     assert!(!py.is_alive(&t)?); // its thread state is gone
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn join(&self, thread: &ThreadHandle) -> PyResult<()> {
        let through_handle = self.lock().core.spec().join_waits_for_thread_exit;
        self.call("join", |py| {
            if through_handle {
                // 3.13: self._handle.join(), C
                blocking(py, Until::Thread(thread.index))
            } else {
                // 3.11/3.12: self._wait_for_tstate_lock() → lock.acquire()
                py.call("_wait_for_tstate_lock", |py| {
                    blocking(py, Until::Thread(thread.index))
                })
            }
        })
    }

    /// A C function that keeps the GIL (`len(queue)`, `Event.set()`, ...):
    /// `f` runs, then the check site after the call.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::atomic::{AtomicBool, Ordering};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_13);
    /// let ran = Arc::new(AtomicBool::new(false));
    /// let (flag, seen) = (Arc::clone(&ran), Arc::clone(&ran));
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), move |py| {
    ///     let queue = vec![1, 2, 3];
    ///     assert_eq!(py.c_call(|| queue.len())?, 3); // `len(queue)`, GIL kept
    ///     py.c_call(|| py.add_pending_call(move |_| Ok(flag.store(true, Ordering::SeqCst))))?
    ///         .unwrap();
    ///     assert!(seen.load(Ordering::SeqCst)); // run at the check site after that call
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn c_call<R>(&self, f: impl FnOnce() -> R) -> PyResult<R> {
        c_function(self, || Ok(f()))
    }

    /// A C function called through `ctypes` (e.g.
    /// `ctypes.pythonapi.Py_AddPendingCall`): unlike a builtin
    /// ([`c_call`](Self::c_call)) it fires no `c_call`/`c_return` profile
    /// events, so a Python profile function does not run around it; `f`
    /// runs, then the check site after the call, where a pending call it
    /// added runs in the caller's frame, profiled. Checked on 3.11.7, 3.12.1
    /// and 3.13.0 (`probes/ctypes_pending_call.py`): a ctypes add under a
    /// Python profile function livelocks 3.11 where a builtin add does not.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Hook, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     py.setprofile(Hook::Python)?;
    ///     py.ctypes_call(|| ())?; // no profile event
    ///     py.c_call(|| ())?; // c_call and c_return
    ///     Ok(())
    /// })
    /// .unwrap();
    /// assert_eq!(rt.stats().profile_function_runs, 2);
    /// ```
    pub fn ctypes_call<R>(&self, f: impl FnOnce() -> R) -> PyResult<R> {
        foreign_function(self, || Ok(f()))
    }

    /// `Thread.is_alive()`: whether `thread`'s state still exists.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyEvent, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// let release = PyEvent::new(&rt);
    /// let waited = release.clone();
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), move |py| {
    ///     let t = py.spawn("blocked", move |py| py.wait(&waited))?;
    ///     assert!(py.is_alive(&t)?);
    ///     release.set();
    ///     py.join(&t)?;
    ///     assert!(!py.is_alive(&t)?);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn is_alive(&self, thread: &ThreadHandle) -> PyResult<bool> {
        c_function(self, || Ok(!self.lock().threads[thread.index].finished))
    }

    /// `sys.settrace(f)` for this thread (`_PyEval_SetTrace`), where `hook`
    /// says whether `f` is a C or a Python function.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Hook, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_11);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     py.settrace(Hook::Python)?;
    ///     assert!(py.runtime().summary().main_traced);
    ///     py.settrace(Hook::Off)?; // sys.settrace(None)
    ///     assert!(!py.runtime().summary().main_traced);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn settrace(&self, hook: Hook) -> PyResult<()> {
        {
            let mut st = self.lock();
            st.core.set_trace(self.idx, hook != Hook::Off);
            st.threads[self.idx].trace = hook;
        }
        check(self, CheckSite::AfterCall)
    }

    /// `sys.setprofile(f)` for this thread (`_PyEval_SetProfile`).
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Hook, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     py.setprofile(Hook::C)?; // cProfile
    ///     assert!(py.runtime().summary().main_traced);
    ///     py.setprofile(Hook::Off)?;
    ///     assert!(!py.runtime().summary().main_traced);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn setprofile(&self, hook: Hook) -> PyResult<()> {
        {
            let mut st = self.lock();
            st.core.set_profile(self.idx, hook != Hook::Off);
            st.threads[self.idx].profile = hook;
        }
        check(self, CheckSite::AfterCall)
    }

    /// Run `f` between `PyThreadState_EnterTracing` and
    /// `PyThreadState_LeaveTracing`: its code is neither traced nor profiled.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Hook, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_11);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     py.settrace(Hook::C)?;
    ///     let traced_inside = py.with_tracing_suspended(|| py.runtime().summary().main_traced);
    ///     assert!(!traced_inside);
    ///     assert!(py.runtime().summary().main_traced); // traced again after
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn with_tracing_suspended<R>(&self, f: impl FnOnce() -> R) -> R {
        // PyThreadState_EnterTracing
        self.lock().core.enter_tracing(self.idx);
        let _guard = TracingGuard { py: self };
        f()
    }

    /// `threading.Thread(target=body).start()`: `Thread.start` as Python
    /// code (the frames `start`, then `wait` (`Event.wait`) over `wait`
    /// (`Condition.wait`) while it waits, GIL released, until the thread has
    /// started; each entry a check site), a new thread state
    /// (`PyThreadState_New`) and an OS thread that takes the GIL and runs
    /// `body` as the function `target`.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyEvent, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_13);
    /// let done = PyEvent::new(&rt);
    /// let (flag, seen) = (done.clone(), done.clone());
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), move |py| {
    ///     let t = py.spawn("target", move |py| py.c_call(|| flag.set()))?;
    ///     py.join(&t)
    /// })
    /// .unwrap();
    /// assert!(seen.is_set()); // the body ran on the new thread
    /// ```
    pub fn spawn(
        &self,
        target: &'static str,
        body: impl FnOnce(&Py) -> PyResult<()> + Send + 'static,
    ) -> PyResult<ThreadHandle> {
        spawn_thread(self, target, false, body)
    }

    /// Like [`spawn`](Self::spawn) with `daemon=True`: shutdown does not
    /// wait for it; once finalization has begun, its next GIL take ends it
    /// ([`PyErr::ThreadExit`]) and its thread-local destructors run then.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyEvent, Outcome, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// let never = PyEvent::new(&rt);
    /// let outcome = rt
    ///     .run(Watchdog::Report(Duration::from_secs(20)), move |py| {
    ///         py.spawn_daemon("forever", move |py| py.wait(&never))?;
    ///         Ok(()) // shutdown does not wait for the daemon
    ///     })
    ///     .unwrap();
    /// assert!(matches!(outcome, Outcome::Finished(Ok(()))));
    /// ```
    pub fn spawn_daemon(
        &self,
        target: &'static str,
        body: impl FnOnce(&Py) -> PyResult<()> + Send + 'static,
    ) -> PyResult<ThreadHandle> {
        spawn_thread(self, target, true, body)
    }

    /// The names of this thread's simulated frames, innermost first, as a
    /// `sys._getframe()` walk sees them: the running greenlet's only (a
    /// suspended greenlet's frames are saved apart, see [`PyGreenlet`]).
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     let inside = py.call("f", |py| Ok(py.frames()))?;
    ///     assert_eq!(inside, ["f", "<module>"]);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn frames(&self) -> Vec<&'static str> {
        let mut st = self.lock();
        sync_frames(self, &mut st);
        st.threads[self.idx].frames.iter().rev().copied().collect()
    }

    /// `greenlet.greenlet(run)`: a greenlet of this thread whose body runs
    /// as the function `name` (its entry a check site) on its own simulated
    /// frame stack, empty at the start (`PythonState::set_initial_state`),
    /// when it is first switched into; what it returns goes to its parent's
    /// pending switch, an error is raised there.
    ///
    /// # Errors
    /// A `greenlet.error` exception if its stack cannot be made.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     let main = py.current_greenlet();
    ///     let g = py.greenlet("g_body", move |py, _| {
    ///         py.call("g_before_park", |_| Ok(()))?;
    ///         py.switch(&main, "parked") // parked inside g_body
    ///     })?;
    ///     assert_eq!(py.switch(&g, ())?.downcast::<&str>().unwrap(), "parked");
    ///     assert!(!g.is_dead());
    ///     py.switch(&g, ())?; // resumes it; it ends
    ///     assert!(g.is_dead());
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn greenlet(
        &self,
        name: &'static str,
        body: impl FnOnce(&Py, Value) -> PyResult<Value> + 'static,
    ) -> PyResult<PyGreenlet> {
        new_greenlet(self, name, body)
    }

    /// `greenlet.getcurrent()` as a model greenlet (named `main` for the
    /// thread's main greenlet).
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_11);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     assert_eq!(py.current_greenlet().name(), "main");
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn current_greenlet(&self) -> PyGreenlet {
        current_greenlet(self)
    }

    /// `target.switch(value)`: greenlet's `g_switchstack`. This greenlet's
    /// simulated frames are saved (`PythonState::operator<<`), the
    /// target's restored (`operator>>`); the trace and profile functions
    /// and the tracing counter stay with the thread (see [`PyGreenlet`]).
    /// Returns what the next switch back into this greenlet carries.
    ///
    /// # Errors
    /// What the target raises into this greenlet (an error its body ends
    /// with, passed up to its parent), or a `greenlet.error` exception (a
    /// greenlet of another thread).
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_13);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     let g = py.greenlet("doubler", |_, v| Ok((v.downcast::<i32>().unwrap() * 2).into()))?;
    ///     assert_eq!(py.switch(&g, 21)?.downcast::<i32>().unwrap(), 42);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn switch(&self, target: &PyGreenlet, value: impl Into<Value>) -> PyResult<Value> {
        switch_to(self, target, value.into())
    }

    /// `Py_AddPendingCall` from this thread (see
    /// [`Interpreter::add_pending_call`]).
    ///
    /// # Errors
    /// [`RingFull`] when the ring has no room.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::atomic::{AtomicUsize, Ordering};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyErr, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// let ran_on = Arc::new(AtomicUsize::new(usize::MAX));
    /// let record = Arc::clone(&ran_on);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), move |py| {
    ///     let t = py.spawn("adder", move |py| {
    ///         py.add_pending_call(move |py| Ok(record.store(py.thread_index(), Ordering::SeqCst)))
    ///             .map_err(|full| PyErr::exception("RuntimeError", full.to_string()))
    ///     })?;
    ///     py.join(&t)
    /// })
    /// .unwrap();
    /// assert_eq!(ran_on.load(Ordering::SeqCst), 0); // run by the main thread
    /// ```
    pub fn add_pending_call(
        &self,
        call: impl FnOnce(&Py) -> PyResult<()> + Send + 'static,
    ) -> Result<(), RingFull> {
        add_pending_call_as(&self.shared, self.idx, Box::new(call))
    }

    /// `Py_MakePendingCalls()` (GIL held): signals, then
    /// `make_pending_calls` (a no-op off the main thread and while busy).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::atomic::{AtomicBool, Ordering};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_11);
    /// let ran = Arc::new(AtomicBool::new(false));
    /// let (flag, seen) = (Arc::clone(&ran), Arc::clone(&ran));
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), move |py| {
    ///     py.add_pending_call(move |_| Ok(flag.store(true, Ordering::SeqCst))).unwrap();
    ///     py.make_pending_calls()?; // no check site needed
    ///     assert!(seen.load(Ordering::SeqCst));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn make_pending_calls(&self) -> PyResult<()> {
        self.cancelled()?;
        handle_signals(self)?;
        run_pending_calls(self)
    }

    /// `PyErr_WriteUnraisable(obj)` for `err`, as a weakref callback's
    /// failure is reported (`handle_callback` in `weakrefobject.c`): the
    /// exception is swallowed, and the default `sys.unraisablehook` prints
    /// it with its traceback. Printing a traceback reads each frame's source
    /// line (`_Py_DisplaySourceLine` → `io.open` → a text decoder), which
    /// enters Python code, `codecs.BufferedIncrementalDecoder.__init__`: a
    /// frame named `__init__` with its `RESUME` check site (on real 3.11.7
    /// the seed's livelock moves there after a `KeyboardInterrupt`,
    /// `probes/sigint_in_livelock.py`). Without a source file
    /// ([`Interpreter::set_unraisable_reads_source`]) no Python code runs.
    ///
    /// # Errors
    /// Only the harness's [`PyErr::Cancelled`] (the report itself cannot
    /// fail).
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Outcome, PyErr, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// let outcome = rt
    ///     .run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///         let err = PyErr::exception("KeyError", "'b'");
    ///         py.write_unraisable("<function after_a_destroyed>", &err)?;
    ///         Ok("swallowed")
    ///     })
    ///     .unwrap();
    /// assert!(matches!(outcome, Outcome::Finished(Ok("swallowed"))));
    /// ```
    pub fn write_unraisable(&self, obj: &str, err: &PyErr) -> PyResult<()> {
        if *err == PyErr::Cancelled {
            return Err(PyErr::Cancelled);
        }
        diag_warn!("Exception ignored in: {obj}\n{err}");
        if self.lock().unraisable_reads_source {
            // _Py_DisplaySourceLine → io.open → BufferedIncrementalDecoder()
            self.call("__init__", |_| Ok(()))?;
        }
        Ok(())
    }

    /// `signal.raise_signal` from this thread (`signal_raise_signal_impl`):
    /// C `raise()` between `Py_BEGIN_ALLOW_THREADS` and
    /// `Py_END_ALLOW_THREADS`, so the C handler runs on this thread with the
    /// GIL released, and `take_gil` follows. On 3.11/3.12 a non-main raiser
    /// therefore leaves the main thread's breaker clear until the main
    /// thread next takes the GIL (see [`Interpreter::raise_signal`] for a signal
    /// sent to the process).
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_13);
    /// rt.set_signal_handler("on_signal", |py| {
    ///     assert_eq!(py.thread_index(), 0);
    ///     Ok(())
    /// });
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| py.raise_signal())
    ///     .unwrap();
    /// assert_eq!(rt.stats().signal_handlers_run, 1);
    /// ```
    pub fn raise_signal(&self) -> PyResult<()> {
        c_function(self, || {
            // Py_BEGIN_ALLOW_THREADS; raise(); Py_END_ALLOW_THREADS
            release_gil(self);
            trip_signal(&self.shared, self.idx);
            take_gil(self)
        })
    }
}
