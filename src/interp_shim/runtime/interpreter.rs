//! The [`Interpreter`] and its lifetime: creating an interpreter, its settings
//! and hooks, its counters ([`InterpreterStats`]), and [`Interpreter::run`], which
//! starts the main thread, acts as the [`Watchdog`] and builds the
//! [`HangReport`] when it fires.
//!
//! Uses the shared state (`state.rs`), the main thread's body
//! (`threads.rs`) and `Py_AddPendingCall` (`gil.rs`).

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::cleanup::CleanupQueue;
use crate::diag::diag_error;

use super::super::core::{InterpCore, RingFull, Summary, ThreadIdx};
use super::super::version::PyVersion;
use super::super::watchdog::{HangCause, HangReport, QueueAtHang, ThreadDump, Watchdog};
use super::super::MAIN_THREAD;
use super::callbacks::SignalDisposition;
use super::error::{Outcome, PyResult, RunError};
use super::exit_order::ExitOrder;
use super::gil::add_pending_call_as;
use super::signals::trip_signal;
use super::state::{Shared, State, ThreadSlot, MODEL_THREAD, NEXT_RUNTIME_ID, REGISTRY};
use super::stats::InterpreterStats;
use super::threads::main_thread;
use super::Py;

/// One simulated CPython interpreter of one version. Cheap to clone (an
/// `Arc`).
///
/// # Example
/// ```
/// use std::time::Duration;
/// use greenlet::interp_shim::{Outcome, PyVersion, Interpreter, Watchdog};
///
/// let rt = Interpreter::new(PyVersion::V3_12);
/// let outcome = rt
///     .run(Watchdog::Report(Duration::from_secs(20)), |py| {
///         let worker = py.spawn("work", |py| py.call("f", |_| Ok(())))?;
///         py.add_pending_call(|py| py.call("callback", |_| Ok(())))
///             .expect("ring has room");
///         py.sleep(Duration::from_millis(1))?; // the main thread runs the call
///         py.join(&worker)?;
///         Ok(7)
///     })
///     .unwrap();
/// assert!(matches!(outcome, Outcome::Finished(Ok(7))));
/// assert_eq!(rt.stats().pending_calls_run, 1);
/// ```
#[derive(Clone)]
pub struct Interpreter {
    pub(super) shared: Arc<Shared>,
}

impl fmt::Debug for Interpreter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interpreter")
            .field("version", &self.shared.version)
            .field("summary", &self.summary())
            .finish()
    }
}

impl Interpreter {
    /// A fresh interpreter whose main thread (index 0) holds the GIL.
    ///
    /// Its exit order is [`ExitOrder::Settled`]: a GIL take waits while a
    /// dying thread runs its thread-local destructors, which rules out a
    /// real interleaving (on real 3.11/3.12 code right after
    /// `Thread.join()` usually runs before the joined thread's greenlet
    /// push); [`set_exit_order`](Self::set_exit_order)`(ExitOrder::Racing)`
    /// allows it. Its early verdict is on
    /// ([`set_early_verdict`](Self::set_early_verdict)).
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::{PyVersion, Interpreter, MAIN_THREAD};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_11);
    /// assert_eq!(rt.version(), PyVersion::V3_11);
    /// assert_eq!(rt.summary().gil_holder, Some(MAIN_THREAD));
    /// assert!(!rt.is_finalizing());
    /// ```
    pub fn new(version: PyVersion) -> Interpreter {
        let id = NEXT_RUNTIME_ID.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(Shared {
            id,
            version,
            state: Mutex::new(State {
                core: InterpCore::new(version),
                callbacks: HashMap::new(),
                next_call: 0,
                threads: vec![ThreadSlot::new("MainThread".into(), false, false)],
                foreign: None,
                signal: None,
                tripped: false,
                stats: InterpreterStats::default(),
                os_threads: Vec::new(),
                thread_init: None,
                finalize_hooks: Vec::new(),
                report_hook: None,
                done: false,
                cancelled: false,
                exit_order: ExitOrder::default(),
                early_verdict: Some(EARLY_VERDICT_REDISPATCHES),
                livelock_held: 0,
                livelocked: None,
                report_queue: None,
                unraisable_reads_source: true,
            }),
            cond: Condvar::new(),
            ran: AtomicBool::new(false),
        });
        REGISTRY.lock().push((id, Arc::downgrade(&shared)));
        Interpreter { shared }
    }

    pub(crate) fn downgrade(&self) -> Weak<Shared> {
        Arc::downgrade(&self.shared)
    }

    pub(crate) fn from_shared(shared: Arc<Shared>) -> Interpreter {
        Interpreter { shared }
    }

    /// Whether `py` is a thread of this runtime.
    pub(crate) fn owns(&self, py: &Py) -> bool {
        Arc::ptr_eq(&self.shared, &py.shared)
    }

    /// The modelled version.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::{PyVersion, Interpreter};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_13);
    /// assert_eq!(rt.version().name(), "3.13");
    /// assert_eq!(rt.clone().version(), rt.version());
    /// ```
    pub fn version(&self) -> PyVersion {
        self.shared.version
    }

    /// The pending-call state now.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::{PyVersion, Interpreter};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// assert_eq!((rt.summary().ring, rt.summary().calls_to_do), (0, false));
    /// // Added from this OS thread (no model thread: a non-main thread state).
    /// rt.add_pending_call(|_| Ok(())).unwrap();
    /// let s = rt.summary();
    /// assert_eq!((s.ring, s.calls_to_do, s.busy), (1, true, false));
    /// ```
    pub fn summary(&self) -> Summary {
        self.shared.state.lock().core.summary()
    }

    /// The runtime's counters now.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::{PyVersion, Interpreter};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_11);
    /// rt.add_pending_call(|_| Ok(())).unwrap();
    /// assert_eq!(rt.stats().pending_calls_added, 1);
    /// assert_eq!(rt.stats().pending_calls_run, 0); // nothing ran the interpreter yet
    /// ```
    pub fn stats(&self) -> InterpreterStats {
        self.shared.state.lock().stats
    }

    /// Whether `Py_FinalizeEx` has begun (`_Py_IsFinalizing`).
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// let seen = rt.clone();
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), move |_| {
    ///     assert!(!seen.is_finalizing()); // still running the main body
    ///     Ok(())
    /// })
    /// .unwrap();
    /// assert!(rt.is_finalizing()); // run() ends with Py_FinalizeEx
    /// ```
    pub fn is_finalizing(&self) -> bool {
        self.shared.state.lock().core.is_finalizing()
    }

    /// Where dying threads' thread-local destructors fall relative to the
    /// other threads' GIL takes ([`ExitOrder::Settled`] unless set).
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::{ExitOrder, PyVersion, Interpreter};
    ///
    /// assert_eq!(Interpreter::new(PyVersion::V3_13).exit_order(), ExitOrder::Settled);
    /// ```
    pub fn exit_order(&self) -> ExitOrder {
        self.shared.state.lock().exit_order
    }

    /// Set where dying threads' thread-local destructors fall relative to
    /// the other threads' GIL takes; from the next GIL take on.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{ExitOrder, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// rt.set_exit_order(ExitOrder::Racing);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     let worker = py.spawn("worker", |_| Ok(()))?;
    ///     py.join(&worker) // may return while the worker's destructors run
    /// })
    /// .unwrap();
    /// ```
    pub fn set_exit_order(&self, order: ExitOrder) {
        self.shared.state.lock().exit_order = order;
        self.shared.cond.notify_all();
    }

    /// Code run on every model thread (the main one included) as it starts,
    /// before it takes the GIL; e.g. `cleanup::set_thread_queue`.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::atomic::{AtomicUsize, Ordering};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// let started = Arc::new(AtomicUsize::new(0));
    /// let count = Arc::clone(&started);
    /// rt.set_thread_init(move || {
    ///     count.fetch_add(1, Ordering::SeqCst);
    /// });
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     let worker = py.spawn("worker", |_| Ok(()))?;
    ///     py.join(&worker)
    /// })
    /// .unwrap();
    /// assert_eq!(started.load(Ordering::SeqCst), 2); // MainThread and the worker
    /// ```
    pub fn set_thread_init(&self, init: impl Fn() + Send + Sync + 'static) {
        self.shared.state.lock().thread_init = Some(Arc::new(init));
    }

    /// Code run once when the interpreter is finalized (after the last
    /// pending calls, like an `atexit` hook registered before finalization).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::atomic::{AtomicBool, Ordering};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_13);
    /// let finalized = Arc::new(AtomicBool::new(false));
    /// let (flag, runtime) = (Arc::clone(&finalized), rt.clone());
    /// rt.at_finalize(move || flag.store(runtime.is_finalizing(), Ordering::SeqCst));
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |_| Ok(())).unwrap();
    /// assert!(finalized.load(Ordering::SeqCst));
    /// ```
    pub fn at_finalize(&self, hook: impl FnOnce() + Send + 'static) {
        self.shared.state.lock().finalize_hooks.push(Box::new(hook));
    }

    /// Extra lines for the watchdog's report (called while the scenario
    /// hangs, so it must not wait for the GIL).
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Hook, Outcome, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_11);
    /// rt.set_report_hook(|| "queue: 2 states waiting".to_string());
    /// // The 3.11 spin of the `Watchdog` example, cut short.
    /// let outcome = rt
    ///     .run(Watchdog::Report(Duration::from_millis(200)), |py| {
    ///         py.settrace(Hook::C)?;
    ///         let _ = py.c_call(|| {
    ///             py.add_pending_call(|py| {
    ///                 let _ = py.c_call(|| py.add_pending_call(|_| Ok(())))?;
    ///                 py.call("stuck", |_| Ok(()))
    ///             })
    ///         })?;
    ///         Ok(())
    ///     })
    ///     .unwrap();
    /// let Outcome::Hung(report) = outcome else { panic!("3.11 spins") };
    /// assert_eq!(report.extra, "queue: 2 states waiting");
    /// assert!(report.to_string().ends_with("queue: 2 states waiting\n"));
    /// ```
    pub fn set_report_hook(&self, hook: impl Fn() -> String + Send + Sync + 'static) {
        self.shared.state.lock().report_hook = Some(Arc::new(hook));
    }

    /// `signal.signal(signum, handler)`: install the Python-level handler,
    /// a function named `name`, that the main thread runs when the signal is
    /// pending.
    ///
    /// # Example
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use greenlet::interp_shim::{Outcome, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_13);
    /// let handled = Arc::new(AtomicBool::new(false));
    /// let flag = Arc::clone(&handled);
    /// rt.set_signal_handler("on_sigusr1", move |py| {
    ///     assert_eq!(py.thread_index(), 0); // always the main thread
    ///     flag.store(true, Ordering::SeqCst);
    ///     Ok(())
    /// });
    /// let seen = Arc::clone(&handled);
    /// let outcome = rt
    ///     .run(Watchdog::Report(Duration::from_secs(20)), move |py| {
    ///         let t = py.spawn("kill", |py| py.raise_signal())?;
    ///         py.join(&t)?;
    ///         while !seen.load(Ordering::SeqCst) {
    ///             py.loop_iter()?;
    ///         }
    ///         Ok(())
    ///     })
    ///     .unwrap();
    /// assert!(matches!(outcome, Outcome::Finished(Ok(()))));
    /// assert!(handled.load(Ordering::SeqCst));
    /// ```
    pub fn set_signal_handler(
        &self,
        name: &'static str,
        handler: impl Fn(&Py) -> PyResult<()> + Send + Sync + 'static,
    ) {
        self.set_signal_disposition(SignalDisposition::python(name, handler));
    }

    /// `signal.signal(signum, disposition)`: a Python handler, the default
    /// SIGINT handler (C, raises `KeyboardInterrupt`) or `SIG_IGN`; see
    /// [`SignalDisposition`].
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Outcome, PyVersion, Interpreter, SignalDisposition, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// rt.set_signal_disposition(SignalDisposition::Ignore);
    /// rt.raise_signal(); // the OS drops it: nothing trips
    /// assert!(!rt.summary().main_breaker);
    /// let outcome = rt.run(Watchdog::Report(Duration::from_secs(20)), |py| py.loop_iter()).unwrap();
    /// assert!(matches!(outcome, Outcome::Finished(Ok(()))));
    /// ```
    pub fn set_signal_disposition(&self, disposition: SignalDisposition) {
        self.shared.state.lock().signal = Some(disposition);
    }

    /// The early verdict: end a run as hung once the main thread has
    /// re-dispatched a traced RESUME `redispatches` times in a row with the
    /// core's livelock predicate holding (3.11, `busy`, `calls_to_do` and
    /// the breaker set) and nothing else able to change the state; `None`
    /// leaves only the watchdog's timeout. The default is
    /// [`EARLY_VERDICT_REDISPATCHES`].
    ///
    /// "Nothing else": every other model thread has finished (and run its
    /// thread-local destructors) or is blocked in `Event.wait()` or
    /// `Thread.join()` on something that has not happened; no OS thread
    /// outside the model has added a pending call to this runtime (on 3.11
    /// a non-main thread's `SIGNAL_PENDING_CALLS` recomputes the breaker
    /// without the main thread's calls and can end the spin); and the
    /// signal disposition is not the default SIGINT handler, whose
    /// `KeyboardInterrupt` can end or move a livelock
    /// (`probes/sigint_in_livelock.py`). A Python signal handler or
    /// `SIG_IGN` cannot: the first spins at its own entry, the second
    /// trips nothing. Code outside the model that calls
    /// [`Interpreter::raise_signal`] to end a spin must turn this off.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{HangCause, Hook, Outcome, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_11);
    /// rt.set_early_verdict(Some(100));
    /// let outcome = rt
    ///     .run(Watchdog::Report(Duration::from_secs(600)), |py| {
    ///         py.settrace(Hook::C)?;
    ///         let _ = py.add_pending_call(|py| {
    ///             let _ = py.c_call(|| py.add_pending_call(|_| Ok(())))?;
    ///             py.call("stuck", |_| Ok(()))
    ///         });
    ///         py.loop_iter()
    ///     })
    ///     .unwrap();
    /// let Outcome::Hung(report) = outcome else { panic!("3.11 spins") };
    /// // Long before the ten-minute backstop.
    /// assert_eq!(report.cause, HangCause::Livelock { redispatches: 100 });
    /// ```
    pub fn set_early_verdict(&self, redispatches: Option<u64>) {
        self.shared.state.lock().early_verdict = redispatches.map(|n| n.max(1));
    }

    /// Whether [`Py::write_unraisable`]'s default hook finds a source file
    /// for the traceback it prints (the default), so that printing it runs
    /// Python code, or not (`python -X frozen_modules` and a deleted
    /// script, or `probes/sigint_in_livelock.py --no-source`).
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Hook, Outcome, PyErr, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_11);
    /// rt.set_unraisable_reads_source(false);
    /// let outcome = rt
    ///     .run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///         let err = PyErr::exception("ValueError", "in a callback");
    ///         py.write_unraisable("<function cb>", &err) // no Python code runs
    ///     })
    ///     .unwrap();
    /// assert!(matches!(outcome, Outcome::Finished(Ok(()))));
    /// ```
    pub fn set_unraisable_reads_source(&self, reads: bool) {
        self.shared.state.lock().unraisable_reads_source = reads;
    }

    /// The cleanup queue whose metrics a [`HangReport`] carries as they were
    /// when the watchdog fired ([`HangReport::queue`]), before the cancel
    /// lets the unwinding run drains that a hung interpreter never would.
    /// Held weakly.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// use greenlet::cleanup::{CleanupQueue, Policy};
    /// use greenlet::interp_shim::{Hook, Outcome, PendingCallScheduler, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_11);
    /// let queue = CleanupQueue::new(Policy::Legacy, Arc::new(PendingCallScheduler::new(&rt)));
    /// rt.report_queue(&queue);
    /// let outcome = rt
    ///     .run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///         py.settrace(Hook::C)?;
    ///         let _ = py.add_pending_call(|py| {
    ///             let _ = py.c_call(|| py.add_pending_call(|_| Ok(())))?;
    ///             py.call("stuck", |_| Ok(()))
    ///         });
    ///         py.loop_iter()
    ///     })
    ///     .unwrap();
    /// let Outcome::Hung(report) = outcome else { panic!("3.11 spins") };
    /// assert_eq!(report.queue.unwrap().policy, Policy::Legacy);
    /// ```
    pub fn report_queue(&self, queue: &Arc<CleanupQueue>) {
        self.shared.state.lock().report_queue = Some(Arc::downgrade(queue));
    }

    /// An OS signal sent to the process (`os.kill(os.getpid(), sig)`, or
    /// `signal.pthread_kill` to the main thread), from any OS thread: its C
    /// handler (`trip_signal` → `_PyEval_SignalReceived`) runs on the main
    /// thread, as Linux hands a process-directed signal to the main thread
    /// first when it does not block it. For `signal.raise_signal`, whose C
    /// handler runs on the raising thread, see [`Py::raise_signal`].
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// rt.set_signal_handler("on_signal", |_| Ok(()));
    /// rt.raise_signal(); // from this OS thread, before the interpreter runs
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| py.loop_iter())
    ///     .unwrap();
    /// assert_eq!(rt.stats().signal_handlers_run, 1);
    /// ```
    pub fn raise_signal(&self) {
        trip_signal(&self.shared, MAIN_THREAD);
    }

    /// `Py_AddPendingCall` as the calling OS thread, with or without the GIL:
    /// the push under the pending lock, then `SIGNAL_PENDING_CALLS` as the
    /// caller in a second step (even if the push failed). An OS thread that is
    /// no model thread of this runtime counts as a non-main thread.
    ///
    /// # Errors
    /// [`RingFull`] when the ring has no room (`Py_AddPendingCall` returned
    /// -1); the callback is dropped without running.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::atomic::{AtomicUsize, Ordering};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_11);
    /// let ran_on = Arc::new(AtomicUsize::new(usize::MAX));
    /// let record = Arc::clone(&ran_on);
    /// rt.add_pending_call(move |py| {
    ///     record.store(py.thread_index(), Ordering::SeqCst);
    ///     Ok(())
    /// })
    /// .expect("an empty ring has room");
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| py.loop_iter())
    ///     .unwrap();
    /// assert_eq!(ran_on.load(Ordering::SeqCst), 0); // on the main thread
    /// ```
    pub fn add_pending_call(
        &self,
        call: impl FnOnce(&Py) -> PyResult<()> + Send + 'static,
    ) -> Result<(), RingFull> {
        let caller = self.calling_thread();
        add_pending_call_as(&self.shared, caller, Box::new(call))
    }

    /// The model thread of the calling OS thread in this runtime (a
    /// dedicated non-main thread state for foreign OS threads).
    fn calling_thread(&self) -> ThreadIdx {
        let (id, idx) = MODEL_THREAD.with(Cell::get);
        if id == self.shared.id {
            return idx;
        }
        let mut st = self.shared.state.lock();
        if let Some(foreign) = st.foreign {
            return foreign;
        }
        let idx = st.core.add_thread();
        st.threads
            .push(ThreadSlot::new("<foreign OS thread>".into(), false, true));
        st.foreign = Some(idx);
        idx
    }

    /// Run `main` as the body of the main thread (`<module>`) on a new OS
    /// thread named `MainThread`, then shut the interpreter down: wait for
    /// every thread, run the last pending calls (`_Py_FinishPendingCalls`),
    /// finalize (`Py_FinalizeEx`), run the [`at_finalize`](Self::at_finalize)
    /// hooks. Blocks the caller, which acts as the watchdog.
    ///
    /// # Errors
    /// [`RunError`] if this runtime already ran or the OS refused a thread.
    ///
    /// # Panics
    /// Re-raises a panic of the main body.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Outcome, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// let outcome = rt
    ///     .run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///         py.call("answer", |_| Ok(40 + 2))
    ///     })
    ///     .unwrap();
    /// assert!(matches!(outcome, Outcome::Finished(Ok(42))));
    /// ```
    pub fn run<T, F>(&self, watchdog: Watchdog, main: F) -> Result<Outcome<T>, RunError>
    where
        T: Send + 'static,
        F: FnOnce(&Py) -> PyResult<T> + Send + 'static,
    {
        if self.shared.ran.swap(true, Ordering::SeqCst) {
            return Err(RunError::AlreadyRan);
        }
        let shared = Arc::clone(&self.shared);
        let handle = std::thread::Builder::new()
            .name("MainThread".into())
            .spawn(move || main_thread(shared, main))?;
        let timeout = match watchdog {
            Watchdog::Off => None,
            Watchdog::Exit(t) | Watchdog::Report(t) => Some(t),
        };
        let mut hung = None;
        if let Some(timeout) = timeout {
            let deadline = Instant::now() + timeout;
            let mut st = self.shared.state.lock();
            while !st.done {
                // The early verdict may have been reached before this
                // thread first took the lock: its notification is then
                // gone, so the flag is read before any wait.
                let timed_out = st.livelocked.is_none()
                    && self.shared.cond.wait_until(&mut st, deadline).timed_out();
                if (timed_out || st.livelocked.is_some()) && !st.done {
                    let cause = match st.livelocked {
                        Some(redispatches) => HangCause::Livelock { redispatches },
                        None => HangCause::Timeout,
                    };
                    let report = build_report(&st, timeout, cause);
                    if matches!(watchdog, Watchdog::Exit(_)) {
                        // faulthandler's dump goes to stderr, then _exit(1)
                        diag_error!("{}", report.to_string().trim_end_matches('\n'));
                        log::logger().flush();
                        std::process::exit(1);
                    }
                    st.cancelled = true;
                    self.shared.cond.notify_all();
                    hung = Some(Box::new(report));
                    break;
                }
            }
        }
        let result = match handle.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        Ok(match hung {
            Some(report) => Outcome::Hung(report),
            None => Outcome::Finished(result),
        })
    }
}

/// The early verdict's default bound (see [`Interpreter::set_early_verdict`]):
/// re-dispatches in a row with the livelock predicate holding and nothing
/// else able to move.
pub const EARLY_VERDICT_REDISPATCHES: u64 = 1000;

/// The report of the watchdog's firing step: everything read under the
/// lock in that step, the queue's metrics included, before the cancel.
fn build_report(st: &State, timeout: Duration, cause: HangCause) -> HangReport {
    let threads = st
        .threads
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.finished)
        .map(|(index, t)| ThreadDump {
            index,
            name: t.name.clone(),
            frames: t.frames.iter().rev().copied().collect(),
            redispatches: t.redispatches,
        })
        .collect();
    let queue = st
        .report_queue
        .as_ref()
        .and_then(Weak::upgrade)
        .map(|q| QueueAtHang::of(&q));
    HangReport {
        timeout,
        cause,
        threads,
        stats: st.stats,
        queue,
        summary: st.core.summary(),
        livelock_predicate: st.core.resume_livelocked(),
        redispatches: st.stats.redispatches,
        extra: st.report_hook.as_ref().map(|h| h()).unwrap_or_default(),
    }
}
