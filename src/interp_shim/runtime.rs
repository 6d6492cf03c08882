//! The live driver of the CPython model: real OS threads, a real GIL with a
//! switch interval, `Py_AddPendingCall` from any thread, and simulated Python
//! code as Rust closures on a [`Py`] context handle.
//!
//! Owns: the [`Runtime`] (one interpreter of one [`PyVersion`]), the [`Py`]
//! handle of a model thread, [`Event`] (`threading.Event`), running the
//! [`Watchdog`] and building its [`HangReport`], and the thread-local that
//! records which model thread the calling OS thread is. State that CPython
//! keeps outside ceval also lives here, not in the core: the signal module's
//! tripped flag, and whether a trace or profile function is written in C or
//! in Python ([`Hook`]; a Python one runs as a simulated frame at each event,
//! with tracing suspended).
//!
//! Uses: the semantic core (`core::InterpCore`), the one copy of the rules.
//! The runtime keeps the core behind one `parking_lot::Mutex` with one
//! `Condvar`; every core method call is one atomic step under that lock, and
//! the runtime never decides a rule itself: it only blocks, sleeps, runs
//! callbacks and handlers where the core's answers say CPython would.
//!
//! # Harness escapes (not interpreter state)
//! - A watchdog in [`Watchdog::Report`] mode sets a harness-level *cancel*
//!   flag when it fires. From then on every operation of simulated Python
//!   code (check sites, GIL takes, sleeps, waits, joins) returns
//!   [`PyErr::Cancelled`], so the spinning thread's simulated frames unwind
//!   with an `Err` and [`Runtime::run`] can return the report as a value. No
//!   CPython thread could do this; it exists so tests can observe a livelock
//!   without killing the test process. Rust code of a scenario that never
//!   calls into its [`Py`] (a plain `loop {}`) cannot be cancelled.
//! - At shutdown, [`Runtime::run`] joins every OS thread it started (so their
//!   thread-local destructors, where greenlet queues a dying thread's state,
//!   have run) before `_Py_FinishPendingCalls`. CPython's
//!   `threading._shutdown` waits only for the thread states, so a real
//!   interpreter may race here and leak such a state at exit.
//! - Once finalization has begun, a daemon thread blocked in a sleep, wait
//!   or join stops blocking and ends at its GIL take, as it would in CPython
//!   when it next woke; the harness then joins its OS thread.
//!
//! # One schedule rule (a choice among CPython's schedules)
//! A thread whose thread state is deleted still runs its OS thread's
//! thread-local destructors, without the GIL; greenlet queues the dying
//! thread's state there and may call `Py_AddPendingCall`. In CPython another
//! thread can take the GIL and run Python code meanwhile, so whether that code
//! sees the queued state before or after the pending call was added depends
//! on the OS scheduler: on an idle machine the destructors take microseconds
//! and a `time.sleep(0.001)` outlasts them, on a loaded one they may not. The
//! live runtime fixes that order by default ([`ExitOrder::Settled`]): a GIL
//! take waits while another thread is still in its thread-local destructors.
//! Every live run therefore follows the idle machine's order, and the seed's
//! livelock reproduces on every run, not only on most; the
//! [explorer](super::explore) covers the other orders. The end of the
//! destructors is seen by a thread-local set first on each model thread,
//! whose destructor runs last. A destructor that waits for another model
//! thread to take the GIL would hang under this rule (the watchdog fires);
//! greenlet's never does, but a test that replays one of the explorer's
//! other orders with gates in the destructors does, and runs with
//! [`ExitOrder::Racing`].

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use super::core::{CheckSite, Continuation, InterpCore, MakeBegin, RingFull, Summary, ThreadIdx};
use super::version::PyVersion;
use super::watchdog::{HangReport, ThreadDump, Watchdog};
use super::MAIN_THREAD;

/// CPython's default switch interval (`sys.getswitchinterval()`): a thread
/// waiting this long for the GIL asks the holder to drop it.
pub const SWITCH_INTERVAL: Duration = Duration::from_millis(5);

/// Where a dying thread's thread-local destructors fall relative to the
/// other threads' GIL takes (see the module documentation).
///
/// # Examples
/// ```
/// use greenlet::interp_shim::{ExitOrder, PyVersion, Runtime};
///
/// let rt = Runtime::new(PyVersion::V3_11);
/// assert_eq!(rt.exit_order(), ExitOrder::Settled); // the default
/// rt.set_exit_order(ExitOrder::Racing); // a test that orders them itself
/// assert_eq!(rt.exit_order(), ExitOrder::Racing);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExitOrder {
    /// No thread takes the GIL while another runs its thread-local
    /// destructors: an idle machine's order, the same on every run.
    #[default]
    Settled,
    /// The destructors run alongside the other threads, as in CPython, and
    /// the OS decides: for tests that force an order themselves (gates in
    /// the destructors that wait for another thread's Python code).
    Racing,
}

/// The id of a queued pending call (what the core's ring holds).
pub type CallId = u64;

/// A Python exception, or the harness's cancellation.
///
/// # Examples
/// ```
/// use greenlet::interp_shim::PyErr;
///
/// let err = PyErr::exception("RuntimeError", "boom");
/// assert_eq!(err.to_string(), "RuntimeError: boom");
/// assert!(PyErr::Cancelled.to_string().contains("not a Python exception"));
/// assert!(PyErr::ThreadExit.to_string().contains("finalizing"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PyErr {
    /// A Python exception raised by simulated code (`kind` is its type name).
    #[error("{kind}: {message}")]
    Exception {
        /// The exception type, e.g. `RuntimeError`.
        kind: String,
        /// Its message.
        message: String,
    },
    /// The watchdog fired in [`Watchdog::Report`] mode and the harness is
    /// unwinding the simulated frames. Not a Python exception: see the module
    /// documentation.
    #[error(
        "cancelled by the watchdog after a timeout (a test-harness escape, not a Python exception)"
    )]
    Cancelled,
    /// A daemon thread tried to take the GIL after finalization began: in
    /// CPython `take_gil` calls `PyThread_exit_thread` and the thread ends
    /// without running more Python code.
    #[error("the interpreter is finalizing: a daemon thread exits when it tries to take the GIL")]
    ThreadExit,
}

impl PyErr {
    /// A Python exception of type `kind` with `message`.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Outcome, PyErr, PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
    /// let outcome = rt
    ///     .run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///         py.call("f", |_| Err::<(), _>(PyErr::exception("ValueError", "bad input")))
    ///     })
    ///     .unwrap();
    /// let Outcome::Finished(Err(err)) = outcome else { panic!("f raises") };
    /// assert_eq!(err, PyErr::exception("ValueError", "bad input"));
    /// ```
    pub fn exception(kind: &str, message: impl Into<String>) -> Self {
        PyErr::Exception {
            kind: kind.to_string(),
            message: message.into(),
        }
    }
}

/// The result of simulated Python code.
pub type PyResult<T> = Result<T, PyErr>;

/// A pending call: simulated Python code run by `make_pending_calls` on the
/// main thread with the GIL held. An `Err` is the callback's `-1`.
pub type PendingCall = Box<dyn FnOnce(&Py) -> PyResult<()> + Send>;

/// A Python-level signal handler (`signal.signal(signum, handler)`): runs on
/// the main thread as an ordinary Python call.
pub type SignalHandler = Arc<dyn Fn(&Py) -> PyResult<()> + Send + Sync>;

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
/// Modelled events: `call` and `return` of Python frames (trace and profile
/// functions), `c_call` and `c_return` (profile functions). Not modelled:
/// `line`/`exception` events of a *local* trace function; the seed's trace
/// function (`lambda *a: None`) returns `None`, so CPython sends it none.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::interp_shim::{Hook, Outcome, PyErr, PyVersion, Runtime, Watchdog};
///
/// // 3.11: a pending call adds another, then enters a function. Under a
/// // profile function written in Python both calls run (a C one would spin).
/// let rt = Runtime::new(PyVersion::V3_11);
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
    /// A Python function: each event runs its simulated frame
    /// (`trace_callback` / `profile_callback`).
    Python,
}

/// An event a trace or profile function receives (`PyTrace_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TraceEvent {
    /// A Python frame starts (`PyTrace_CALL`): trace and profile functions.
    Call,
    /// A Python frame returns (`PyTrace_RETURN`): trace and profile functions.
    Return,
    /// A C function is called / returns (`PyTrace_C_CALL`/`PyTrace_C_RETURN`):
    /// profile functions only.
    CFunction,
}

/// How a [`Runtime::run`] ended.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::interp_shim::{Outcome, PyVersion, Runtime, Watchdog};
///
/// let rt = Runtime::new(PyVersion::V3_13);
/// match rt.run(Watchdog::Report(Duration::from_secs(20)), |_| Ok("done")).unwrap() {
///     Outcome::Finished(value) => assert_eq!(value, Ok("done")),
///     Outcome::Hung(report) => panic!("{report}"),
/// }
/// ```
#[derive(Debug)]
pub enum Outcome<T> {
    /// The main body returned (its value or its exception), and the
    /// interpreter was finalized.
    Finished(PyResult<T>),
    /// The watchdog fired ([`Watchdog::Report`] mode); the scenario was
    /// cancelled and unwound.
    Hung(Box<HangReport>),
}

/// Why [`Runtime::run`] could not run.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::interp_shim::{PyVersion, RunError, Runtime, Watchdog};
///
/// let rt = Runtime::new(PyVersion::V3_13);
/// let dog = Watchdog::Report(Duration::from_secs(20));
/// rt.run(dog, |_| Ok(())).unwrap();
/// let err = rt.run(dog, |_| Ok(())).unwrap_err();
/// assert!(matches!(err, RunError::AlreadyRan));
/// assert!(err.to_string().contains("create a new Runtime"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// `run` was called a second time on the same runtime.
    #[error("this Runtime already ran its main thread; create a new Runtime for another run")]
    AlreadyRan,
    /// The OS refused to start the main thread.
    #[error("could not start the simulated main thread: {0}")]
    Spawn(#[from] std::io::Error),
}

/// Counters of the live runtime.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::interp_shim::{PyVersion, Runtime, RuntimeStats, Watchdog};
///
/// let rt = Runtime::new(PyVersion::V3_12);
/// assert_eq!(rt.stats(), RuntimeStats::default());
/// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
///     py.add_pending_call(|_| Ok(())).expect("the ring has room");
///     py.loop_iter()
/// })
/// .unwrap();
/// let stats = rt.stats();
/// assert_eq!((stats.pending_calls_added, stats.pending_calls_run), (1, 1));
/// assert_eq!((stats.pending_calls_rejected, stats.redispatches), (0, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuntimeStats {
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
}

struct ThreadSlot {
    name: String,
    daemon: bool,
    trace: Hook,
    profile: Hook,
    frames: Vec<&'static str>,
    /// The thread state was deleted (`Thread.join` returns).
    finished: bool,
    /// Its thread state is deleted and its OS thread is running its
    /// thread-local destructors (where greenlet queues a dying thread's
    /// state); under [`ExitOrder::Settled`] other threads' GIL takes wait for
    /// it to end.
    exiting: bool,
    redispatches: u64,
}

impl ThreadSlot {
    fn new(name: String, daemon: bool, finished: bool) -> ThreadSlot {
        ThreadSlot {
            name,
            daemon,
            trace: Hook::Off,
            profile: Hook::Off,
            frames: Vec::new(),
            finished,
            exiting: false,
            redispatches: 0,
        }
    }
}

type FinalizeHook = Box<dyn FnOnce() + Send>;
type ReportHook = Arc<dyn Fn() -> String + Send + Sync>;
type ThreadInit = Arc<dyn Fn() + Send + Sync>;

struct State {
    core: InterpCore<CallId>,
    callbacks: HashMap<CallId, PendingCall>,
    next_call: CallId,
    threads: Vec<ThreadSlot>,
    /// Model thread used by OS threads that are no model thread.
    foreign: Option<ThreadIdx>,
    signal_handler: Option<(&'static str, SignalHandler)>,
    /// The signal module's `Handlers[signum].tripped` (not ceval state):
    /// set by the C-level handler, cleared before the Python handler runs.
    tripped: bool,
    stats: RuntimeStats,
    os_threads: Vec<(JoinHandle<()>, bool)>,
    thread_init: Option<ThreadInit>,
    finalize_hooks: Vec<FinalizeHook>,
    report_hook: Option<ReportHook>,
    /// The scenario (main body and shutdown) is over.
    done: bool,
    /// The harness's cancel flag (see the module documentation).
    cancelled: bool,
    exit_order: ExitOrder,
}

impl State {
    /// Under [`ExitOrder::Settled`], whether thread `idx`'s GIL take waits:
    /// another thread is in its thread-local destructors.
    fn gil_waits_for_an_exit(&self, idx: ThreadIdx) -> bool {
        self.exit_order == ExitOrder::Settled
            && self
                .threads
                .iter()
                .enumerate()
                .any(|(i, t)| t.exiting && i != idx)
    }
}

/// The runtime's state shared by its threads (held weakly by schedulers and
/// events).
pub(crate) struct Shared {
    id: u64,
    version: PyVersion,
    state: Mutex<State>,
    cond: Condvar,
    ran: AtomicBool,
}

/// Live runtimes, so that code finding its model thread through the
/// thread-local can reach its runtime. Holds weak references only.
static REGISTRY: Mutex<Vec<(u64, Weak<Shared>)>> = Mutex::new(Vec::new());
static NEXT_RUNTIME_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The calling OS thread's (runtime id, model thread index); runtime id 0
    /// means none. A `Cell` of plain integers: const-initialized and without a
    /// destructor, so it stays readable from other thread-local destructors
    /// during thread teardown (where a dying thread queues its greenlet state).
    static MODEL_THREAD: Cell<(u64, ThreadIdx)> = const { Cell::new((0, 0)) };

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

impl Drop for Shared {
    fn drop(&mut self) {
        REGISTRY.lock().retain(|(id, _)| *id != self.id);
    }
}

/// One simulated CPython interpreter of one version. Cheap to clone (an
/// `Arc`).
///
/// # Example
/// ```
/// use std::time::Duration;
/// use greenlet::interp_shim::{Outcome, PyVersion, Runtime, Watchdog};
///
/// let rt = Runtime::new(PyVersion::V3_12);
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
pub struct Runtime {
    shared: Arc<Shared>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("version", &self.shared.version)
            .field("summary", &self.summary())
            .finish()
    }
}

impl Runtime {
    /// A fresh interpreter whose main thread (index 0) holds the GIL.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::{PyVersion, Runtime, MAIN_THREAD};
    ///
    /// let rt = Runtime::new(PyVersion::V3_11);
    /// assert_eq!(rt.version(), PyVersion::V3_11);
    /// assert_eq!(rt.summary().gil_holder, Some(MAIN_THREAD));
    /// assert!(!rt.is_finalizing());
    /// ```
    pub fn new(version: PyVersion) -> Runtime {
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
                signal_handler: None,
                tripped: false,
                stats: RuntimeStats::default(),
                os_threads: Vec::new(),
                thread_init: None,
                finalize_hooks: Vec::new(),
                report_hook: None,
                done: false,
                cancelled: false,
                exit_order: ExitOrder::default(),
            }),
            cond: Condvar::new(),
            ran: AtomicBool::new(false),
        });
        REGISTRY.lock().push((id, Arc::downgrade(&shared)));
        Runtime { shared }
    }

    pub(crate) fn downgrade(&self) -> Weak<Shared> {
        Arc::downgrade(&self.shared)
    }

    pub(crate) fn from_shared(shared: Arc<Shared>) -> Runtime {
        Runtime { shared }
    }

    /// Whether `py` is a thread of this runtime.
    pub(crate) fn owns(&self, py: &Py) -> bool {
        Arc::ptr_eq(&self.shared, &py.shared)
    }

    /// The modelled version.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::{PyVersion, Runtime};
    ///
    /// let rt = Runtime::new(PyVersion::V3_13);
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
    /// use greenlet::interp_shim::{PyVersion, Runtime};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
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
    /// use greenlet::interp_shim::{PyVersion, Runtime};
    ///
    /// let rt = Runtime::new(PyVersion::V3_11);
    /// rt.add_pending_call(|_| Ok(())).unwrap();
    /// assert_eq!(rt.stats().pending_calls_added, 1);
    /// assert_eq!(rt.stats().pending_calls_run, 0); // nothing ran the interpreter yet
    /// ```
    pub fn stats(&self) -> RuntimeStats {
        self.shared.state.lock().stats
    }

    /// Whether `Py_FinalizeEx` has begun (`_Py_IsFinalizing`).
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
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
    /// use greenlet::interp_shim::{ExitOrder, PyVersion, Runtime};
    ///
    /// assert_eq!(Runtime::new(PyVersion::V3_13).exit_order(), ExitOrder::Settled);
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
    /// use greenlet::interp_shim::{ExitOrder, PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
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
    /// use greenlet::interp_shim::{PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
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
    /// use greenlet::interp_shim::{PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_13);
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
    /// use greenlet::interp_shim::{Hook, Outcome, PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_11);
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
    /// use greenlet::interp_shim::{Outcome, PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_13);
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
        self.shared.state.lock().signal_handler = Some((name, Arc::new(handler)));
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
    /// use greenlet::interp_shim::{PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
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
    /// use greenlet::interp_shim::{PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_11);
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
    /// use greenlet::interp_shim::{Outcome, PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
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
                if self.shared.cond.wait_until(&mut st, deadline).timed_out() && !st.done {
                    let report = build_report(&st, timeout);
                    if matches!(watchdog, Watchdog::Exit(_)) {
                        eprint!("{report}");
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

fn add_pending_call_as(
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

/// The C-level signal handler's `trip_signal`, run on thread `receiver`:
/// mark the signal tripped, then `_PyEval_SignalReceived`.
fn trip_signal(shared: &Shared, receiver: ThreadIdx) {
    let mut st = shared.state.lock();
    st.tripped = true;
    st.core.signal_received(receiver);
}

fn build_report(st: &State, timeout: Duration) -> HangReport {
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
    HangReport {
        timeout,
        threads,
        summary: st.core.summary(),
        livelock_predicate: st.core.resume_livelocked(),
        redispatches: st.stats.redispatches,
        extra: st.report_hook.as_ref().map(|h| h()).unwrap_or_default(),
    }
}

fn main_thread<T, F>(shared: Arc<Shared>, main: F) -> PyResult<T>
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
        py.check(CheckSite::Resume)?;
        main(py)
    });
    py.shutdown();
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
    started: Event,
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
    let result = py.take_gil().and_then(|()| {
        started.set();
        py.frame("run", |py| py.call(target, body))
    });
    if let Err(PyErr::Exception { kind, message }) = &result {
        let name = shared.state.lock().threads[idx].name.clone();
        eprintln!("Exception in thread {name}:\n{kind}: {message}");
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
/// use greenlet::interp_shim::{Outcome, PyVersion, Runtime, Watchdog};
///
/// let rt = Runtime::new(PyVersion::V3_12);
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
pub struct PyThread {
    index: ThreadIdx,
    name: String,
}

impl PyThread {
    /// The model thread index.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_13);
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
    /// use greenlet::interp_shim::{PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_11);
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

/// `threading.Event`: set from any thread; [`Py::wait`] blocks with the GIL
/// released.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use greenlet::interp_shim::{Event, Outcome, PyVersion, Runtime, Watchdog};
///
/// let rt = Runtime::new(PyVersion::V3_11);
/// let release = Event::new(&rt);
/// let seen = release.clone();
/// let outcome = rt
///     .run(Watchdog::Report(Duration::from_secs(20)), move |py| {
///         let t = py.spawn("waiter", move |py| py.wait(&seen))?;
///         release.set();
///         py.join(&t)
///     })
///     .unwrap();
/// assert!(matches!(outcome, Outcome::Finished(Ok(()))));
/// ```
#[derive(Clone)]
pub struct Event {
    flag: Arc<AtomicBool>,
    shared: Weak<Shared>,
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("set", &self.is_set())
            .finish()
    }
}

impl Event {
    /// A new, clear event of `runtime`.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::{Event, PyVersion, Runtime};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
    /// let event = Event::new(&rt);
    /// assert!(!event.is_set());
    /// assert_eq!(format!("{event:?}"), "Event { set: false }");
    /// ```
    pub fn new(runtime: &Runtime) -> Event {
        Event {
            flag: Arc::new(AtomicBool::new(false)),
            shared: Arc::downgrade(&runtime.shared),
        }
    }

    /// `Event.set()`: wakes every waiter.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Event, Outcome, PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
    /// let ready = Event::new(&rt);
    /// let setter = ready.clone();
    /// let outcome = rt
    ///     .run(Watchdog::Report(Duration::from_secs(20)), move |py| {
    ///         let t = py.spawn("setter", move |py| py.c_call(|| setter.set()))?;
    ///         py.wait(&ready)?; // returns once the other thread has set it
    ///         py.join(&t)
    ///     })
    ///     .unwrap();
    /// assert!(matches!(outcome, Outcome::Finished(Ok(()))));
    /// ```
    pub fn set(&self) {
        self.flag.store(true, Ordering::SeqCst);
        if let Some(shared) = self.shared.upgrade() {
            // Taking the lock orders this store before a waiter's re-check.
            let _st = shared.state.lock();
            shared.cond.notify_all();
        }
    }

    /// `Event.is_set()`.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::{Event, PyVersion, Runtime};
    ///
    /// let rt = Runtime::new(PyVersion::V3_13);
    /// let event = Event::new(&rt);
    /// let same = event.clone(); // clones share one flag
    /// event.set();
    /// assert!(same.is_set());
    /// ```
    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
}

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
/// use greenlet::interp_shim::{Outcome, Py, PyResult, PyVersion, Runtime, Watchdog};
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
/// let rt = Runtime::new(PyVersion::V3_11);
/// let outcome = rt.run(Watchdog::Report(Duration::from_secs(20)), module).unwrap();
/// assert!(matches!(outcome, Outcome::Finished(Ok(3))));
/// ```
pub struct Py {
    shared: Arc<Shared>,
    idx: ThreadIdx,
    _not_send: PhantomData<*const ()>,
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
        self.py.lock().threads[self.py.idx].frames.pop();
    }
}

/// Leaves `PyThreadState_EnterTracing` when the shielded code ends.
struct TracingGuard<'a> {
    py: &'a Py,
}

impl Drop for TracingGuard<'_> {
    fn drop(&mut self) {
        // PyThreadState_LeaveTracing
        self.py.lock().core.leave_tracing(self.py.idx);
    }
}

impl Py {
    fn new(shared: Arc<Shared>, idx: ThreadIdx) -> Py {
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
    /// use greenlet::interp_shim::{Py, PyVersion, Runtime, Watchdog};
    ///
    /// assert!(Py::current().is_none()); // this OS thread is no model thread
    /// let rt = Runtime::new(PyVersion::V3_12);
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
    /// use greenlet::interp_shim::{PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_13);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     assert_eq!(py.runtime().version(), PyVersion::V3_13);
    ///     assert!(!py.runtime().is_finalizing());
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn runtime(&self) -> Runtime {
        Runtime {
            shared: Arc::clone(&self.shared),
        }
    }

    /// This model thread's index (0: the main thread).
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Event, PyVersion, Runtime, Watchdog, MAIN_THREAD};
    ///
    /// let rt = Runtime::new(PyVersion::V3_11);
    /// let done = Event::new(&rt);
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

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock()
    }

    fn cancelled(&self) -> PyResult<()> {
        if self.lock().cancelled {
            Err(PyErr::Cancelled)
        } else {
            Ok(())
        }
    }

    /// Run `f` in a simulated frame named `name` (no check site).
    fn frame<R>(&self, name: &'static str, f: impl FnOnce(&Py) -> PyResult<R>) -> PyResult<R> {
        self.lock().threads[self.idx].frames.push(name);
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
    /// use greenlet::interp_shim::{Outcome, PyErr, PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
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
                py.fire(TraceEvent::Call)?;
                py.check(CheckSite::Resume)?;
            } else {
                py.check(CheckSite::Resume)?;
                py.fire(TraceEvent::Call)?;
            }
            let value = f(py)?;
            // TRACE_FUNCTION_EXIT
            py.fire(TraceEvent::Return)?;
            Ok(value)
        })?;
        self.check(CheckSite::AfterCall)?;
        Ok(value)
    }

    /// `call_trace` for `event`: each installed Python-level function runs
    /// as a simulated frame between `PyThreadState_EnterTracing` and
    /// `PyThreadState_LeaveTracing` (not at all while tracing is suspended).
    fn fire(&self, event: TraceEvent) -> PyResult<()> {
        let (trace, profile) = {
            let st = self.lock();
            if !st.core.is_traced(self.idx) {
                return Ok(());
            }
            let slot = &st.threads[self.idx];
            (slot.trace, slot.profile)
        };
        if trace == Hook::Python && event != TraceEvent::CFunction {
            self.with_tracing_suspended(|| {
                self.frame("trace_callback", |py| py.check(CheckSite::Resume))
            })?;
        }
        if profile == Hook::Python {
            self.with_tracing_suspended(|| {
                self.frame("profile_callback", |py| py.check(CheckSite::Resume))
            })?;
        }
        Ok(())
    }

    /// A call of a C function (`C_TRACE`): the `c_call` event, the call,
    /// the `c_return` event, then the check site after the `CALL`.
    fn c_function<R>(&self, f: impl FnOnce() -> PyResult<R>) -> PyResult<R> {
        self.fire(TraceEvent::CFunction)?;
        let value = f()?;
        self.fire(TraceEvent::CFunction)?;
        self.check(CheckSite::AfterCall)?;
        Ok(value)
    }

    /// One loop iteration's backward jump (`JUMP_BACKWARD`): a check site.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::atomic::{AtomicBool, Ordering};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
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
        self.check(CheckSite::BackwardJump)
    }

    /// `time.sleep(d)`: release the GIL, sleep, take it back, then the check
    /// site after the call.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::atomic::{AtomicBool, Ordering};
    /// # use std::sync::Arc;
    /// use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Runtime, Watchdog, MAIN_THREAD};
    ///
    /// let rt = Runtime::new(PyVersion::V3_13);
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
        self.blocking(|st| st.cancelled, Some(deadline))
    }

    /// `Event.wait()`: release the GIL until `event` is set.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Event, PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_11);
    /// let go = Event::new(&rt);
    /// let waited = go.clone();
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), move |py| {
    ///     let waiter = py.spawn("waiter", move |py| py.wait(&waited))?;
    ///     assert!(py.is_alive(&waiter)?); // blocked in wait, GIL released
    ///     go.set();
    ///     py.join(&waiter)
    /// })
    /// .unwrap();
    /// ```
    pub fn wait(&self, event: &Event) -> PyResult<()> {
        self.blocking(|_| event.is_set(), None)
    }

    /// `Thread.join()`: release the GIL until `thread`'s state is deleted.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     let t = py.spawn("worker", |py| py.call("work", |_| Ok(())))?;
    ///     py.join(&t)?;
    ///     assert!(!py.is_alive(&t)?); // its thread state is gone
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn join(&self, thread: &PyThread) -> PyResult<()> {
        let idx = thread.index;
        self.blocking(move |st| st.threads[idx].finished, None)
    }

    /// A C call that releases the GIL (`Py_BEGIN_ALLOW_THREADS`) and blocks
    /// until `ready` or `deadline`, then takes the GIL back
    /// (`Py_END_ALLOW_THREADS`) and reaches the check site after the call.
    fn blocking(&self, ready: impl Fn(&State) -> bool, deadline: Option<Instant>) -> PyResult<()> {
        self.c_function(|| self.block_without_gil(&ready, deadline))
    }

    fn block_without_gil(
        &self,
        ready: &impl Fn(&State) -> bool,
        deadline: Option<Instant>,
    ) -> PyResult<()> {
        self.release_gil();
        {
            let mut st = self.lock();
            // A daemon thread stops blocking once finalization began: its
            // take_gil below ends it, as CPython's would when it woke.
            loop {
                let daemon_must_exit = st.core.is_finalizing() && self.idx != MAIN_THREAD;
                if ready(&st) || st.cancelled || daemon_must_exit {
                    break;
                }
                match deadline {
                    Some(deadline) => {
                        if self.shared.cond.wait_until(&mut st, deadline).timed_out() {
                            break;
                        }
                    }
                    None => self.shared.cond.wait(&mut st),
                }
            }
        }
        self.take_gil()
    }

    /// A C function that keeps the GIL (`len(queue)`, `Event.set()`, ...):
    /// `f` runs, then the check site after the call.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::atomic::{AtomicBool, Ordering};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_13);
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
        self.c_function(|| Ok(f()))
    }

    /// `Thread.is_alive()`: whether `thread`'s state still exists.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Event, PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
    /// let release = Event::new(&rt);
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
    pub fn is_alive(&self, thread: &PyThread) -> PyResult<bool> {
        self.c_function(|| Ok(!self.lock().threads[thread.index].finished))
    }

    /// `sys.settrace(f)` for this thread (`_PyEval_SetTrace`), where `hook`
    /// says whether `f` is a C or a Python function.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Hook, PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_11);
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
        self.check(CheckSite::AfterCall)
    }

    /// `sys.setprofile(f)` for this thread (`_PyEval_SetProfile`).
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Hook, PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
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
        self.check(CheckSite::AfterCall)
    }

    /// Run `f` between `PyThreadState_EnterTracing` and
    /// `PyThreadState_LeaveTracing`: its code is neither traced nor profiled.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Hook, PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_11);
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

    /// `threading.Thread(target=body).start()`: a new thread state
    /// (`PyThreadState_New`), an OS thread that takes the GIL and runs
    /// `body` as the function `target`; like `Thread.start`, waits (GIL
    /// released) until the thread has started.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Event, PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_13);
    /// let done = Event::new(&rt);
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
    ) -> PyResult<PyThread> {
        self.spawn_thread(target, false, body)
    }

    /// Like [`spawn`](Self::spawn) with `daemon=True`: shutdown does not
    /// wait for it; once finalization has begun, its next GIL take ends it
    /// ([`PyErr::ThreadExit`]) and its thread-local destructors run then.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Event, Outcome, PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
    /// let never = Event::new(&rt);
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
    ) -> PyResult<PyThread> {
        self.spawn_thread(target, true, body)
    }

    fn spawn_thread(
        &self,
        target: &'static str,
        daemon: bool,
        body: impl FnOnce(&Py) -> PyResult<()> + Send + 'static,
    ) -> PyResult<PyThread> {
        self.cancelled()?;
        let (idx, name) = {
            let mut st = self.lock();
            // PyThreadState_New
            let idx = st.core.add_thread();
            let name = format!("Thread-{idx} ({target})");
            st.threads
                .push(ThreadSlot::new(name.clone(), daemon, false));
            (idx, name)
        };
        let started = Event {
            flag: Arc::new(AtomicBool::new(false)),
            shared: Arc::downgrade(&self.shared),
        };
        let shared = Arc::clone(&self.shared);
        let signal = started.clone();
        let spawned = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || thread_main(shared, idx, target, signal, body));
        match spawned {
            Ok(handle) => self.lock().os_threads.push((handle, daemon)),
            Err(err) => {
                self.lock().threads[idx].finished = true;
                return Err(PyErr::exception(
                    "RuntimeError",
                    format!("can't start new thread {name}: {err}"),
                ));
            }
        }
        self.wait(&started)?;
        Ok(PyThread { index: idx, name })
    }

    /// `Py_AddPendingCall` from this thread (see
    /// [`Runtime::add_pending_call`]).
    ///
    /// # Errors
    /// [`RingFull`] when the ring has no room.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::atomic::{AtomicUsize, Ordering};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyErr, PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
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
    /// use greenlet::interp_shim::{PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_11);
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
        self.handle_signals()?;
        self.run_pending_calls()
    }

    /// `signal.raise_signal` from this thread (`signal_raise_signal_impl`):
    /// C `raise()` between `Py_BEGIN_ALLOW_THREADS` and
    /// `Py_END_ALLOW_THREADS`, so the C handler runs on this thread with the
    /// GIL released, and `take_gil` follows. On 3.11/3.12 a non-main raiser
    /// therefore leaves the main thread's breaker clear until the main
    /// thread next takes the GIL (see [`Runtime::raise_signal`] for a signal
    /// sent to the process).
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_13);
    /// rt.set_signal_handler("on_signal", |py| {
    ///     assert_eq!(py.thread_index(), 0);
    ///     Ok(())
    /// });
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| py.raise_signal())
    ///     .unwrap();
    /// assert_eq!(rt.stats().signal_handlers_run, 1);
    /// ```
    pub fn raise_signal(&self) -> PyResult<()> {
        self.c_function(|| {
            // Py_BEGIN_ALLOW_THREADS; raise(); Py_END_ALLOW_THREADS
            self.release_gil();
            trip_signal(&self.shared, self.idx);
            self.take_gil()
        })
    }

    // ---- the GIL --------------------------------------------------------------

    /// `drop_gil` (a no-op if this thread does not hold it).
    fn release_gil(&self) {
        let mut st = self.lock();
        if st.core.drop_gil(self.idx) {
            self.shared.cond.notify_all();
        }
    }

    /// `take_gil`: wait on the GIL; a wait that times out after the switch
    /// interval with no switch meanwhile sets the drop request.
    fn take_gil(&self) -> PyResult<()> {
        let mut st = self.lock();
        let mut switches = st.stats.gil_switches;
        let mut deadline = Instant::now() + SWITCH_INTERVAL;
        loop {
            if st.cancelled {
                return Err(PyErr::Cancelled);
            }
            // take_gil: tstate_must_exit → PyThread_exit_thread
            if st.core.is_finalizing() && self.idx != MAIN_THREAD {
                return Err(PyErr::ThreadExit);
            }
            // The harness's schedule (module docs): no GIL take while another
            // thread is in its thread-local destructors.
            if st.gil_waits_for_an_exit(self.idx) {
                self.shared.cond.wait(&mut st);
                deadline = Instant::now() + SWITCH_INTERVAL;
                continue;
            }
            // take_gil: success resets the drop request and recomputes the
            // breaker as this thread.
            if st.core.take_gil(self.idx) {
                st.stats.gil_switches += 1;
                self.shared.cond.notify_all();
                return Ok(());
            }
            let timed_out = self.shared.cond.wait_until(&mut st, deadline).timed_out();
            if st.stats.gil_switches != switches {
                switches = st.stats.gil_switches;
                deadline = Instant::now() + SWITCH_INTERVAL;
            } else if timed_out {
                // take_gil: SET_GIL_DROP_REQUEST after a timed-out wait
                if st.core.request_drop(self.idx) {
                    st.stats.drop_requests += 1;
                }
                deadline = Instant::now() + SWITCH_INTERVAL;
            }
        }
    }

    // ---- the eval breaker ---------------------------------------------------

    /// A check site (`CHECK_EVAL_BREAKER`): if the breaker is set, handle it;
    /// then continue, or (3.11 `DO_TRACING` at a traced RESUME) dispatch the
    /// same instruction again, which checks again.
    fn check(&self, site: CheckSite) -> PyResult<()> {
        loop {
            {
                let st = self.lock();
                if st.cancelled {
                    return Err(PyErr::Cancelled);
                }
                if !st.core.breaker_set(self.idx) {
                    return Ok(());
                }
            }
            self.handle_pending()?;
            let mut st = self.lock();
            match st.core.continuation(self.idx, site) {
                Continuation::Continue => return Ok(()),
                Continuation::Redispatch => {
                    st.threads[self.idx].redispatches += 1;
                    st.stats.redispatches += 1;
                }
            }
        }
    }

    /// `eval_frame_handle_pending` (3.11) / `_Py_HandlePending` (3.12/3.13),
    /// in CPython's order.
    fn handle_pending(&self) -> PyResult<()> {
        let t = self.idx;
        // 1. signals (main thread of the main interpreter only)
        self.handle_signals()?;
        // 2. pending calls: the calls_to_do flag, not the breaker
        let wants = self.lock().core.wants_pending_calls(t);
        if wants {
            self.run_pending_calls()?;
        }
        // 3. GIL drop request: drop_gil, then take_gil (which recomputes the
        // breaker for this thread); runs even if step 2 returned early.
        let drop = self.lock().core.drop_requested(t);
        if drop {
            self.release_gil();
            self.take_gil()?;
        }
        // 4. (async exceptions are not modelled); 3.12's final recompute
        self.lock().core.handle_pending_end(t);
        Ok(())
    }

    /// `handle_signals`: unsignal, then run the Python-level handler; a
    /// failing handler re-signals and its exception propagates.
    fn handle_signals(&self) -> PyResult<()> {
        let handler = {
            let mut st = self.lock();
            // UNSIGNAL_PENDING_SIGNALS (main thread only)
            if !st.core.take_signals(self.idx) {
                return Ok(());
            }
            // _PyErr_CheckSignalsTstate: only a tripped signal's handler runs,
            // and its flag is cleared first.
            if !std::mem::take(&mut st.tripped) {
                return Ok(());
            }
            st.stats.signal_handlers_run += u64::from(st.signal_handler.is_some());
            st.signal_handler.clone()
        };
        let Some((name, handler)) = handler else {
            return Ok(());
        };
        // _PyErr_CheckSignalsTstate: the handler is an ordinary Python call.
        let result = self.call(name, |py| handler(py));
        if result.is_err() {
            // handle_signals: "re-schedule a call to handle_signals()"
            self.lock().core.resignal_signals(self.idx);
        }
        result
    }

    /// `make_pending_calls`: the guard, then at most `MAX_CALLS_PER_MAKE`
    /// pops, each callback run with the lock released and the GIL held.
    fn run_pending_calls(&self) -> PyResult<()> {
        let t = self.idx;
        let begin = {
            let mut st = self.lock();
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
                let mut st = self.lock();
                // _pop_pending_call under pending->lock
                match st.core.make_pending_calls_pop(iteration) {
                    Some(id) => st.callbacks.remove(&id),
                    None => break,
                }
            };
            let Some(call) = call else { continue };
            self.lock().stats.pending_calls_run += 1;
            let result = catch_unwind(AssertUnwindSafe(|| call(self))).unwrap_or_else(|_| {
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
        self.lock()
            .core
            .make_pending_calls_end(t, failure.is_some());
        failure.map_or(Ok(()), Err)
    }

    // ---- shutdown -------------------------------------------------------------

    /// `Py_FinalizeEx` as run by the main thread after `<module>`.
    fn shutdown(&self) {
        // threading._shutdown: wait for every non-daemon thread state (GIL
        // released); then the harness joins their OS threads (module docs).
        self.release_gil();
        let handles = {
            let mut st = self.lock();
            while !st.cancelled && st.threads.iter().skip(1).any(|t| !t.finished && !t.daemon) {
                self.shared.cond.wait(&mut st);
            }
            std::mem::take(&mut st.os_threads)
        };
        let (daemons, others): (Vec<_>, Vec<_>) = handles.into_iter().partition(|(_, d)| *d);
        others.into_iter().for_each(|(h, _)| join_reporting(h));
        if self.take_gil().is_ok() {
            // _Py_FinishPendingCalls: one make_pending_calls if calls_to_do
            // (3.11/3.12), or makes until the ring is empty (3.13); the
            // makes with nothing to run are left out (VersionSpec docs)
            loop {
                let (wanted, repeats) = {
                    let st = self.lock();
                    (
                        st.core.finish_pending_calls_wanted(),
                        st.core.finish_pending_calls_repeats(),
                    )
                };
                if !wanted {
                    break;
                }
                if let Err(err) = self.run_pending_calls() {
                    eprintln!("Exception ignored while finishing pending calls: {err}");
                }
                if !repeats {
                    break;
                }
            }
        }
        let hooks = {
            let mut st = self.lock();
            // _PyRuntimeState_SetFinalizing
            st.core.finalize();
            self.shared.cond.notify_all();
            std::mem::take(&mut st.finalize_hooks)
        };
        for hook in hooks {
            hook();
        }
        self.release_gil();
        // Daemon threads end at their next GIL take; the harness waits for
        // their OS threads so that what they leave behind is accounted for.
        daemons.into_iter().for_each(|(h, _)| join_reporting(h));
    }
}

fn join_reporting(handle: JoinHandle<()>) {
    if let Err(panic) = handle.join() {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        eprintln!("a simulated thread panicked: {what}");
    }
}
