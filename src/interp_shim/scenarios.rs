//! The live scenarios of greenlet's thread-exit livelock, shared by the
//! examples and the tests: the seed report's reproducer, the coverage.py-like
//! churn, a full pending-call ring, finalization, a panicking finalizer.
//!
//! Owns: the scenario configurations and reports, and which explorer mode
//! stands for each live mode ([`TraceMode::explored_as`]). Uses the
//! [`Interpreter`], the [`PendingCallScheduler`], [`explore::Mode`],
//! [`crate::cleanup`] and the greenlet API (`getcurrent()`, `Greenlet::on_finalize`): every simulated thread routes
//! its greenlet state to the scenario's queue (`cleanup::set_thread_queue`)
//! first thing, and a finalizer's simulated Python code finds its [`Py`]
//! through [`Py::current`] (the drain runs on the main thread inside
//! `make_pending_calls`).

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::cleanup::{self, CleanupQueue, Metrics, Policy};
use crate::coroutine::{getcurrent, Greenlet, Value};
use crate::diag::diag_warn;

use super::explore;
use super::runtime::{
    ExitOrder, Hook, Interpreter, InterpreterStats, Outcome, Py, PyErr, PyEvent, PyGreenlet,
    PyResult, RunError, ThreadHandle, EARLY_VERDICT_REDISPATCHES,
};
use super::scheduler::PendingCallScheduler;
use super::version::PyVersion;
use super::watchdog::{metrics_kv, HangReport, Watchdog};

/// What the main thread has installed: a trace function, a profile
/// function (written in Python or in C), or neither. See [`Hook`] for why the
/// kind matters on 3.11, and [`TraceMode::explored_as`] for the explorer's
/// mode that stands for each (the explorer has `trace`, `profile`, `none`).
///
/// # Examples
/// ```
/// use greenlet::interp_shim::scenarios::TraceMode;
///
/// let mode: TraceMode = "ctrace".parse().unwrap();
/// assert_eq!(mode, TraceMode::CTrace);
/// assert_eq!(mode.to_string(), "ctrace");
/// assert_eq!(TraceMode::ALL.len(), 5);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceMode {
    /// `sys.settrace(lambda *a: None)`: a Python trace function, as in the
    /// seed report.
    Trace,
    /// A trace function written in C (coverage.py's CTracer).
    CTrace,
    /// A profile function written in C (`cProfile.Profile().enable()`).
    Profile,
    /// `sys.setprofile(lambda *a: None)`: a Python profile function.
    PyProfile,
    /// Neither.
    None,
}

impl TraceMode {
    /// Every mode.
    pub const ALL: [TraceMode; 5] = [
        TraceMode::Trace,
        TraceMode::CTrace,
        TraceMode::Profile,
        TraceMode::PyProfile,
        TraceMode::None,
    ];

    /// The command-line name.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::scenarios::TraceMode;
    ///
    /// let names: Vec<&str> = TraceMode::ALL.iter().map(|m| m.name()).collect();
    /// assert_eq!(names, ["trace", "ctrace", "profile", "pyprofile", "none"]);
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            TraceMode::Trace => "trace",
            TraceMode::CTrace => "ctrace",
            TraceMode::Profile => "profile",
            TraceMode::PyProfile => "pyprofile",
            TraceMode::None => "none",
        }
    }

    /// The explorer's mode that stands for this one, or `None` for
    /// [`TraceMode::PyProfile`], which the explorer does not model (see
    /// [`explore::Mode`] for the mapping and why a Python profile function
    /// differs on 3.11).
    ///
    /// ```
    /// use greenlet::interp_shim::explore::Mode;
    /// use greenlet::interp_shim::scenarios::TraceMode;
    /// assert_eq!(TraceMode::CTrace.explored_as(), Some(Mode::Trace));
    /// assert_eq!(TraceMode::Trace.explored_as(), Some(Mode::Trace));
    /// assert_eq!(TraceMode::PyProfile.explored_as(), None);
    /// ```
    pub fn explored_as(self) -> Option<explore::Mode> {
        match self {
            TraceMode::Trace | TraceMode::CTrace => Some(explore::Mode::Trace),
            TraceMode::Profile => Some(explore::Mode::Profile),
            TraceMode::PyProfile => None,
            TraceMode::None => Some(explore::Mode::None),
        }
    }

    fn install(self, py: &Py) -> PyResult<()> {
        match self {
            TraceMode::Trace => py.settrace(Hook::Python),
            TraceMode::CTrace => py.settrace(Hook::C),
            TraceMode::Profile => py.setprofile(Hook::C),
            TraceMode::PyProfile => py.setprofile(Hook::Python),
            TraceMode::None => Ok(()),
        }
    }
}

impl fmt::Display for TraceMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A mode name that is not one of [`TraceMode::ALL`].
///
/// # Examples
/// ```
/// use greenlet::interp_shim::scenarios::{TraceMode, UnknownTraceMode};
///
/// let err: UnknownTraceMode = "cprofile".parse::<TraceMode>().unwrap_err();
/// assert_eq!(err.given, "cprofile");
/// assert!(err.to_string().contains("expected trace, ctrace, profile, pyprofile or none"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode {given:?}: expected trace, ctrace, profile, pyprofile or none")]
pub struct UnknownTraceMode {
    /// What was given.
    pub given: String,
}

impl FromStr for TraceMode {
    type Err = UnknownTraceMode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TraceMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownTraceMode {
                given: s.to_string(),
            })
    }
}

/// What one scenario run observed.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{seed, ScenarioReport, SeedConfig, TraceMode};
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let watchdog = Watchdog::Report(Duration::from_secs(20));
/// let report: ScenarioReport =
///     seed(SeedConfig { version: PyVersion::V3_12, policy: Policy::Legacy, mode: TraceMode::Trace, watchdog })
///         .unwrap();
/// assert!(report.hang.is_none() && report.error.is_none());
/// assert_eq!(report.b_queued, Some(true));
/// // 3.12 does not hang, but legacy still schedules a second drain.
/// assert_eq!((report.queue.schedules_requested, report.queue.states_destroyed), (2, 2));
/// assert_eq!(report.states_never_destroyed, 0);
/// ```
#[non_exhaustive]
#[derive(Debug)]
pub struct ScenarioReport {
    /// The watchdog's report, if the run hung ([`Watchdog::Report`] mode).
    pub hang: Option<Box<HangReport>>,
    /// The main body's exception, if it raised one.
    pub error: Option<PyErr>,
    /// The seed's `state.get("b_queued")`: whether B was queued while the
    /// drain ran (seed scenario only).
    pub b_queued: Option<bool>,
    /// Thread states handed to the queue (every greenlet state created).
    pub states_created: u64,
    /// The queue's counters after finalization, or when the watchdog fired
    /// if the run hung.
    pub queue: Metrics,
    /// States never destroyed: queued forever, leaked at finalization, or
    /// not destroyed when the watchdog fired.
    pub states_never_destroyed: u64,
    /// Finalizers that panicked (reported, the drain went on).
    pub finalizer_panics: u64,
    /// The runtime's counters after finalization, or when the watchdog
    /// fired if the run hung.
    pub runtime: InterpreterStats,
}

impl ScenarioReport {
    /// Whether the watchdog fired.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::cleanup::Policy;
    /// use greenlet::interp_shim::scenarios::{seed, SeedConfig, TraceMode};
    /// use greenlet::interp_shim::{PyVersion, Watchdog};
    ///
    /// // The seed report's hang: 3.11, traced, the legacy queue.
    /// let watchdog = Watchdog::Report(Duration::from_millis(300));
    /// let report =
    ///     seed(SeedConfig { version: PyVersion::V3_11, policy: Policy::Legacy, mode: TraceMode::Trace, watchdog })
    ///         .unwrap();
    /// assert!(report.hung());
    /// assert_eq!(report.hang.unwrap().thread(0).unwrap().frames[0], "<lambda>");
    /// ```
    pub fn hung(&self) -> bool {
        self.hang.is_some()
    }

    /// The seed's verdict line: `GREEN True`, `GREEN False` or `GREEN None`.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::cleanup::Policy;
    /// use greenlet::interp_shim::scenarios::{seed, SeedConfig, TraceMode};
    /// use greenlet::interp_shim::{PyVersion, Watchdog};
    ///
    /// // Untraced, even the legacy queue does not hang on 3.11.
    /// let watchdog = Watchdog::Report(Duration::from_secs(20));
    /// let report =
    ///     seed(SeedConfig { version: PyVersion::V3_11, policy: Policy::Legacy, mode: TraceMode::None, watchdog })
    ///         .unwrap();
    /// assert_eq!(report.green_line(), "GREEN True");
    /// ```
    pub fn green_line(&self) -> String {
        let value = match self.b_queued {
            Some(true) => "True",
            Some(false) => "False",
            None => "None",
        };
        format!("GREEN {value}")
    }

    /// The metrics as `key=value` pairs on one line.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::cleanup::Policy;
    /// use greenlet::interp_shim::scenarios::{seed, SeedConfig, TraceMode};
    /// use greenlet::interp_shim::{PyVersion, Watchdog};
    ///
    /// let watchdog = Watchdog::Report(Duration::from_secs(20));
    /// let report =
    ///     seed(SeedConfig { version: PyVersion::V3_13, policy: Policy::Robust, mode: TraceMode::Trace, watchdog })
    ///         .unwrap();
    /// let line = report.metrics_line();
    /// assert!(line.starts_with("states_created=2 schedules_requested=1 "), "{line}");
    /// assert!(line.contains(" states_destroyed=2 ") && line.contains(" never_destroyed=0 "), "{line}");
    /// ```
    pub fn metrics_line(&self) -> String {
        format!(
            "states_created={} {} never_destroyed={} finalizer_panics={} \
             pending_calls_added={} pending_calls_rejected={} makes_recursive={} redispatches={}",
            self.states_created,
            metrics_kv(&self.queue),
            self.states_never_destroyed,
            self.finalizer_panics,
            self.runtime.pending_calls_added,
            self.runtime.pending_calls_rejected,
            self.runtime.makes_recursive,
            self.runtime.redispatches,
        )
    }
}

/// How a scenario's runtime runs, beyond its configuration: the exit order
/// of dying threads and the watchdog's early verdict (see
/// [`Interpreter::new`] for why the default order rules out a real
/// interleaving).
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{seed_with, RunOptions, SeedConfig, TraceMode};
/// use greenlet::interp_shim::{ExitOrder, PyVersion, Watchdog};
///
/// let options = RunOptions::default().exit_order(ExitOrder::Racing).early_verdict(None);
/// let config = SeedConfig {
///     version: PyVersion::V3_12,
///     policy: Policy::Robust,
///     mode: TraceMode::Trace,
///     watchdog: Watchdog::Report(Duration::from_secs(20)),
/// };
/// assert!(!seed_with(config, options).unwrap().hung());
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// Where dying threads' thread-local destructors fall
    /// ([`Interpreter::set_exit_order`]).
    pub exit_order: ExitOrder,
    /// The early verdict's bound ([`Interpreter::set_early_verdict`]).
    pub early_verdict: Option<u64>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            exit_order: ExitOrder::default(),
            early_verdict: Some(EARLY_VERDICT_REDISPATCHES),
        }
    }
}

impl RunOptions {
    /// With `order` as the exit order.
    pub fn exit_order(self, order: ExitOrder) -> Self {
        RunOptions {
            exit_order: order,
            ..self
        }
    }

    /// With `bound` as the early verdict's bound (`None`: off).
    pub fn early_verdict(self, bound: Option<u64>) -> Self {
        RunOptions {
            early_verdict: bound,
            ..self
        }
    }

    fn apply(self, runtime: &Interpreter) {
        runtime.set_exit_order(self.exit_order);
        runtime.set_early_verdict(self.early_verdict);
    }
}

/// A runtime with a cleanup queue wired to it: every model thread sends its
/// greenlet state to the queue; the queue is finalized with the interpreter;
/// the watchdog's report carries the queue's metrics.
struct Harness {
    runtime: Interpreter,
    queue: Arc<CleanupQueue>,
    created: Arc<AtomicU64>,
    /// States created when the watchdog fired: what a hung run reports
    /// (the cancelled unwinding that follows still lets drains run, which a
    /// hung interpreter never would). The queue's metrics of that moment
    /// are in the hang report itself ([`HangReport::queue`]).
    created_at_hang: Arc<AtomicU64>,
}

impl Harness {
    fn new(version: PyVersion, policy: Policy, options: RunOptions) -> Harness {
        let runtime = Interpreter::new(version);
        options.apply(&runtime);
        let queue = CleanupQueue::new(policy, Arc::new(PendingCallScheduler::new(&runtime)));
        let q = Arc::clone(&queue);
        runtime.set_thread_init(move || cleanup::set_thread_queue(Some(Arc::clone(&q))));
        let q = Arc::clone(&queue);
        runtime.at_finalize(move || q.finalize());
        runtime.report_queue(&queue);
        let created = Arc::new(AtomicU64::new(0));
        let created_at_hang = Arc::new(AtomicU64::new(0));
        let (c, snapshot) = (Arc::clone(&created), Arc::clone(&created_at_hang));
        runtime.set_report_hook(move || {
            snapshot.store(c.load(Ordering::SeqCst), Ordering::SeqCst);
            String::new()
        });
        Harness {
            runtime,
            queue,
            created,
            created_at_hang,
        }
    }

    /// `greenlet.getcurrent()` in the calling thread, counted.
    fn touch_greenlet(created: &AtomicU64) -> Greenlet {
        created.fetch_add(1, Ordering::SeqCst);
        getcurrent()
    }

    fn finish<T>(
        self,
        outcome: Outcome<T>,
        b_queued: impl FnOnce(Option<T>) -> Option<bool>,
    ) -> ScenarioReport {
        let (hang, error, value) = match outcome {
            Outcome::Hung(report) => (Some(report), None, None),
            Outcome::Finished(Ok(value)) => (None, None, Some(value)),
            Outcome::Finished(Err(err)) => (None, Some(err), None),
        };
        let (queue, created, runtime) = match hang.as_deref() {
            Some(HangReport {
                queue: Some(queue),
                stats,
                ..
            }) => (
                queue.metrics,
                self.created_at_hang.load(Ordering::SeqCst),
                *stats,
            ),
            _ => (
                self.queue.metrics(),
                self.created.load(Ordering::SeqCst),
                self.runtime.stats(),
            ),
        };
        ScenarioReport {
            hang,
            error,
            b_queued: b_queued(value),
            states_created: created,
            queue,
            states_never_destroyed: created.saturating_sub(queue.states_destroyed),
            finalizer_panics: self.queue.finalizer_panics(),
            runtime,
        }
    }
}

/// Run a finalizer's simulated Python code as the function `name` on the
/// thread running the drain; an exception is printed like CPython's
/// "Exception ignored in" and swallowed (weakref callbacks cannot raise).
fn python_finalizer(name: &'static str, code: impl FnOnce(&Py) -> PyResult<()>) {
    let Some(py) = Py::current() else {
        diag_warn!("Exception ignored in {name}: the drain runs outside the simulated interpreter");
        return;
    };
    if let Err(err) = py.call(name, code) {
        // handle_callback: PyErr_WriteUnraisable(callback); a cancel of the
        // harness just unwinds.
        let _ = py.write_unraisable(&format!("<function {name}>"), &err);
    }
}

/// The seed report's cell: one version, policy and trace mode.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{seed, SeedConfig, TraceMode};
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let legacy = SeedConfig {
///     version: PyVersion::V3_13,
///     policy: Policy::Legacy,
///     mode: TraceMode::Profile,
///     watchdog: Watchdog::Report(Duration::from_secs(20)),
/// };
/// for config in [legacy, SeedConfig { policy: Policy::default(), ..legacy }] {
///     assert_eq!(seed(config).unwrap().green_line(), "GREEN True", "{config:?}");
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedConfig {
    /// The modelled CPython version.
    pub version: PyVersion,
    /// The cleanup queue's policy.
    pub policy: Policy,
    /// What the main thread installs.
    pub mode: TraceMode,
    /// The watchdog (the seed uses 20 s with `exit=True`).
    pub watchdog: Watchdog,
}

/// The seed report's reproducer, step by step: B starts and blocks on
/// `release_b`; A registers a finalizer on its main greenlet and exits; the
/// finalizer (run by the drain on the main thread) sets `release_b`, polls
/// until B's state is queued, records `b_queued`, then enters `<lambda>`; the
/// traced (or profiled) main thread polls until the queue is empty.
///
/// # Errors
/// [`RunError`] if the runtime could not start.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{seed, SeedConfig, TraceMode};
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let report = seed(SeedConfig {
///     version: PyVersion::V3_11,
///     policy: Policy::Shielded,
///     mode: TraceMode::Trace,
///     watchdog: Watchdog::Report(Duration::from_secs(20)),
/// })
/// .unwrap();
/// assert_eq!(report.green_line(), "GREEN True");
/// assert_eq!(report.queue.states_destroyed, 2);
/// ```
pub fn seed(config: SeedConfig) -> Result<ScenarioReport, RunError> {
    seed_with(config, RunOptions::default())
}

/// [`seed`] with `options` (exit order, early verdict).
///
/// # Errors
/// [`RunError`] if the runtime could not start.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{seed_with, RunOptions, SeedConfig, TraceMode};
/// use greenlet::interp_shim::{HangCause, PyVersion, Watchdog};
///
/// let config = SeedConfig {
///     version: PyVersion::V3_11,
///     policy: Policy::Legacy,
///     mode: TraceMode::Trace,
///     watchdog: Watchdog::Report(Duration::from_millis(300)),
/// };
/// // Without the early verdict only the timeout ends the spin.
/// let report = seed_with(config, RunOptions::default().early_verdict(None)).unwrap();
/// assert_eq!(report.hang.unwrap().cause, HangCause::Timeout);
/// ```
pub fn seed_with(config: SeedConfig, options: RunOptions) -> Result<ScenarioReport, RunError> {
    seed_entering(config, options, FirstEntry::Lambda)
}

/// The seed's first function entry after B is queued, in the finalizer
/// (`probes/threading_spin.py`'s argument).
///
/// # Examples
/// ```
/// use greenlet::interp_shim::scenarios::FirstEntry;
///
/// assert_eq!("join".parse::<FirstEntry>(), Ok(FirstEntry::Join));
/// assert_eq!(FirstEntry::Start.stuck_frame(), "start");
/// assert!("run".parse::<FirstEntry>().is_err());
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FirstEntry {
    /// `(lambda: None)()`, as in the seed report.
    #[default]
    Lambda,
    /// `c.start()` of a thread `c` made before ([`Py::spawn`]: the
    /// Python-level `Thread.start`).
    Start,
    /// `c.join()` of a thread started and joined before ([`Py::join`]: the
    /// Python-level `Thread.join`).
    Join,
}

impl FirstEntry {
    /// Every first entry.
    pub const ALL: [FirstEntry; 3] = [FirstEntry::Lambda, FirstEntry::Start, FirstEntry::Join];

    /// The command-line name: `lambda`, `start` or `join`.
    pub fn name(self) -> &'static str {
        match self {
            FirstEntry::Lambda => "lambda",
            FirstEntry::Start => "start",
            FirstEntry::Join => "join",
        }
    }

    /// The function whose entry spins in the 3.11 livelock: the top frame
    /// of the main thread's dump (real 3.11.7: `<lambda>`,
    /// `threading.py:945 start`, `threading.py:1087 join`).
    pub fn stuck_frame(self) -> &'static str {
        match self {
            FirstEntry::Lambda => "<lambda>",
            FirstEntry::Start => "start",
            FirstEntry::Join => "join",
        }
    }
}

/// A first-entry name that is not `lambda`, `start` or `join`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown first entry {given:?}: expected lambda, start or join")]
pub struct UnknownFirstEntry {
    /// What was given.
    pub given: String,
}

impl FromStr for FirstEntry {
    type Err = UnknownFirstEntry;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FirstEntry::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| UnknownFirstEntry {
                given: s.to_string(),
            })
    }
}

/// [`seed_with`] whose finalizer's first function entry after B is queued
/// is `first` (`probes/threading_spin.py`). On 3.11, traced, with the legacy
/// queue the main thread spins at that entry: the hang report's top frame
/// is [`FirstEntry::stuck_frame`], over the finalizer `_in_cleanup`, over
/// the frames where the drain ran (`wait <- wait <- start <- <module>`:
/// inside `a.start()`'s `Condition.wait`, one of the two places real 3.11.7
/// ran it).
///
/// # Errors
/// [`RunError`] if the runtime could not start.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{seed_entering, FirstEntry, RunOptions, SeedConfig, TraceMode};
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let config = SeedConfig {
///     version: PyVersion::V3_11,
///     policy: Policy::Legacy,
///     mode: TraceMode::Trace,
///     watchdog: Watchdog::Report(Duration::from_secs(20)),
/// };
/// let report = seed_entering(config, RunOptions::default(), FirstEntry::Join).unwrap();
/// assert_eq!(report.hang.unwrap().thread(0).unwrap().frames[..2], ["join", "_in_cleanup"]);
/// ```
pub fn seed_entering(
    config: SeedConfig,
    options: RunOptions,
    first: FirstEntry,
) -> Result<ScenarioReport, RunError> {
    let harness = Harness::new(config.version, config.policy, options);
    let release_b = PyEvent::new(&harness.runtime);
    let queue = Arc::clone(&harness.queue);
    let created = Arc::clone(&harness.created);
    let b_queued: Arc<Mutex<Option<bool>>> = Arc::new(Mutex::new(None));
    let state = Arc::clone(&b_queued);
    let outcome = harness.runtime.run(config.watchdog, move |py| {
        // c = threading.Thread(target=lambda: None); for join: c.start(),
        // and wait until it is no longer alive
        let c: Arc<Mutex<Option<ThreadHandle>>> = Arc::new(Mutex::new(None));
        if first == FirstEntry::Join {
            let started = py.spawn("<lambda>", |_| Ok(()))?;
            py.join(&started)?;
            *c.lock() = Some(started);
        }
        config.mode.install(py)?;
        // def _b(): greenlet.getcurrent(); release_b.wait()
        let (cr, rb) = (Arc::clone(&created), release_b.clone());
        let b = py.spawn("_b", move |py| {
            py.c_call(|| Harness::touch_greenlet(&cr))?;
            py.wait(&rb)
        })?;
        // def _a(): state["ref"] = weakref.ref(greenlet.getcurrent(), _in_cleanup)
        let (cr, q, st, cc) = (
            Arc::clone(&created),
            Arc::clone(&queue),
            Arc::clone(&state),
            Arc::clone(&c),
        );
        let a = py.spawn("_a", move |py| {
            let current = py.c_call(|| Harness::touch_greenlet(&cr))?;
            current.on_finalize(move || in_cleanup(&release_b, &q, &st, first, &cc));
            Ok(())
        })?;
        py.join(&a)?;
        // for _ in range(5000): time.sleep(0.001); if "b_queued" in state and
        // get_pending_cleanup_count() == 0: break
        for _ in 0..5000 {
            py.sleep(Duration::from_millis(1))?;
            if state.lock().is_some() && py.c_call(|| queue.len())? == 0 {
                break;
            }
            py.loop_iter()?;
        }
        py.join(&b)?;
        let started = c.lock().take();
        if let Some(started) = started {
            py.join(&started)?;
        }
        let value = *state.lock();
        Ok(value)
    })?;
    Ok(harness.finish(outcome, Option::flatten))
}

/// The seed's `_in_cleanup` weakref callback, entering `first` last.
fn in_cleanup(
    release_b: &PyEvent,
    queue: &Arc<CleanupQueue>,
    state: &Mutex<Option<bool>>,
    first: FirstEntry,
    c: &Mutex<Option<ThreadHandle>>,
) {
    python_finalizer("_in_cleanup", |py| {
        // threading.Event.set is Python code (threading.py)
        py.call("set", |py| py.c_call(|| release_b.set()))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while py.c_call(|| queue.len())? == 0 && py.c_call(Instant::now)? < deadline {
            py.sleep(Duration::from_millis(1))?;
            py.loop_iter()?;
        }
        let queued = py.c_call(|| queue.len())? > 0;
        *state.lock() = Some(queued);
        // the first function entry after B was queued
        match first {
            FirstEntry::Lambda => py.call("<lambda>", |_| Ok(())),
            FirstEntry::Start => {
                let started = py.spawn("<lambda>", |_| Ok(()))?;
                *c.lock() = Some(started);
                Ok(())
            }
            FirstEntry::Join => {
                let joined = c.lock().clone();
                joined.map_or(Ok(()), |t| py.join(&t))
            }
        }
    });
}

/// What `probes/greenlet_switch_in_cleanup.py`'s callback signals before
/// it switches into G (its `--kick`).
///
/// # Examples
/// ```
/// use greenlet::interp_shim::scenarios::Kick;
///
/// assert_ne!(Kick::None, Kick::B);
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kick {
    /// Nothing.
    None,
    /// Thread B (which owns a greenlet state) exits and the callback waits
    /// until its state is queued: the legacy queue schedules a second
    /// cleanup call, the others do not.
    B,
}

/// What [`greenlet_switch_in_cleanup`] observed.
#[non_exhaustive]
#[derive(Debug)]
pub struct GreenletSwitchReport {
    /// The run itself.
    pub report: ScenarioReport,
    /// Trace-function runs (Python `call` events) from the callback's
    /// entry to its end: the callback, `cb_probe`, G's `g_in_cleanup`,
    /// `cb_probe_after_g`, H's `h_body` and `h_in_cleanup` (and `set` with
    /// [`Kick::B`]) when traced; `None` if the callback did not end.
    pub traced_in_cleanup: Option<u64>,
    /// Trace-function runs after the cleanup: `main_after_cleanup`, G's
    /// `g_after_cleanup`, H's `h_after_cleanup` when all are traced; `None`
    /// if the run did not get there.
    pub traced_after: Option<u64>,
}

/// `probes/greenlet_switch_in_cleanup.py` on the model: the traced main
/// thread parks greenlet G inside `g_body` (under tracing); thread A's
/// finalizer, run by the drain on the main thread, calls `cb_probe`,
/// switches into G (which calls `g_in_cleanup` and switches back), calls
/// `cb_probe_after_g`, starts H (which calls `h_in_cleanup` and parks);
/// after the cleanup the main thread calls `main_after_cleanup` and
/// resumes G and H, which call `g_after_cleanup` / `h_after_cleanup`.
/// Each greenlet has its own frames; tracing stays with the thread.
///
/// # Errors
/// [`RunError`] if the runtime could not start.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{greenlet_switch_in_cleanup, Kick, SeedConfig, TraceMode};
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let config = SeedConfig {
///     version: PyVersion::V3_11,
///     policy: Policy::Robust,
///     mode: TraceMode::Trace,
///     watchdog: Watchdog::Report(Duration::from_secs(20)),
/// };
/// let seen = greenlet_switch_in_cleanup(config, Kick::B).unwrap();
/// assert_eq!((seen.traced_in_cleanup, seen.traced_after), (Some(0), Some(3)));
/// ```
pub fn greenlet_switch_in_cleanup(
    config: SeedConfig,
    kick: Kick,
) -> Result<GreenletSwitchReport, RunError> {
    let harness = Harness::new(config.version, config.policy, RunOptions::default());
    let release_b = PyEvent::new(&harness.runtime);
    let queue = Arc::clone(&harness.queue);
    let created = Arc::clone(&harness.created);
    let in_cleanup: Arc<Mutex<Option<u64>>> = Arc::new(Mutex::new(None));
    let seen = Arc::clone(&in_cleanup);
    let outcome = harness.runtime.run(config.watchdog, move |py| {
        let main = py.current_greenlet();
        // def g_body(): g_before_park(); back_to = main.switch("parked"); ...
        let g = py.greenlet("g_body", move |py, _| {
            py.call("g_before_park", |_| Ok(()))?;
            let back = py.switch(&main, "parked")?;
            let back = back
                .downcast::<PyGreenlet>()
                .map_err(|e| PyErr::exception("TypeError", e.to_string()))?;
            py.call("g_in_cleanup", |_| Ok(()))?;
            py.switch(&back, "done in cleanup")?;
            py.call("g_after_cleanup", |_| Ok(()))?;
            Ok("finished".into())
        })?;
        config.mode.install(py)?;
        py.switch(&g, ())?;
        let (cr, rb) = (Arc::clone(&created), release_b.clone());
        let b = py.spawn("thread_b", move |py| {
            py.c_call(|| Harness::touch_greenlet(&cr))?;
            py.wait(&rb)
        })?;
        let h_slot: Arc<Mutex<Option<PyGreenlet>>> = Arc::new(Mutex::new(None));
        let (cr, rb, q, gg, hs, st) = (
            Arc::clone(&created),
            release_b.clone(),
            Arc::clone(&queue),
            g.clone(),
            Arc::clone(&h_slot),
            Arc::clone(&seen),
        );
        let a = py.spawn("thread_a", move |py| {
            let current = py.c_call(|| Harness::touch_greenlet(&cr))?;
            current.on_finalize(move || {
                let runs = || Py::current().map(|py| py.runtime().stats().trace_function_runs);
                let before = runs();
                let finished = cleanup_cb(kick, &rb, &q, &gg, &hs);
                if finished {
                    *st.lock() = before.zip(runs()).map(|(b, a)| a - b);
                }
            });
            Ok(())
        })?;
        py.join(&a)?;
        for _ in 0..5000 {
            if seen.lock().is_some() {
                break;
            }
            py.sleep(Duration::from_millis(1))?;
            py.loop_iter()?;
        }
        if kick != Kick::B {
            py.call("set", |py| py.c_call(|| release_b.set()))?;
        }
        py.join(&b)?;
        let before = py.runtime().stats().trace_function_runs;
        py.call("main_after_cleanup", |_| Ok(()))?;
        py.switch(&g, ())?;
        let h = h_slot.lock().clone();
        if let Some(h) = h {
            py.switch(&h, ())?;
        }
        let after = py.runtime().stats().trace_function_runs - before;
        py.settrace(Hook::Off)?;
        Ok(after)
    })?;
    let in_cleanup = *in_cleanup.lock();
    let mut traced_after = None;
    let report = harness.finish(outcome, |after| {
        traced_after = after;
        None
    });
    Ok(GreenletSwitchReport {
        report,
        traced_in_cleanup: in_cleanup,
        traced_after,
    })
}

/// The probe's `cleanup_cb`; whether it ran to its end.
fn cleanup_cb(
    kick: Kick,
    release_b: &PyEvent,
    queue: &Arc<CleanupQueue>,
    g: &PyGreenlet,
    h_slot: &Mutex<Option<PyGreenlet>>,
) -> bool {
    let mut ran = false;
    python_finalizer("cleanup_cb", |py| {
        py.call("cb_probe", |_| Ok(()))?;
        if kick == Kick::B {
            py.call("set", |py| py.c_call(|| release_b.set()))?;
            let deadline = Instant::now() + Duration::from_secs(10);
            while py.c_call(|| queue.len())? == 0 && py.c_call(Instant::now)? < deadline {
                py.sleep(Duration::from_millis(1))?;
                py.loop_iter()?;
            }
        }
        py.switch(g, Value::new(py.current_greenlet()))?;
        py.call("cb_probe_after_g", |_| Ok(()))?;
        // def h_body(back_to): h_in_cleanup(); back_to.switch("H parked"); h_after_cleanup()
        let h = py.greenlet("h_body", |py, back| {
            let back = back
                .downcast::<PyGreenlet>()
                .map_err(|e| PyErr::exception("TypeError", e.to_string()))?;
            py.call("h_in_cleanup", |_| Ok(()))?;
            py.switch(&back, "H parked")?;
            py.call("h_after_cleanup", |_| Ok(()))?;
            Ok("finished".into())
        })?;
        *h_slot.lock() = Some(h.clone());
        py.switch(&h, Value::new(py.current_greenlet()))?;
        ran = true;
        Ok(())
    });
    ran
}

/// The coverage.py-like churn.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{churn, ChurnConfig, TraceMode};
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let config = ChurnConfig {
///     version: PyVersion::V3_12,
///     policy: Policy::Legacy,
///     mode: TraceMode::CTrace,
///     threads: 4,
///     waves: 2,
///     watchdog: Watchdog::Report(Duration::from_secs(30)),
/// };
/// let report = churn(config).unwrap();
/// assert_eq!(report.states_created, 8); // one greenlet state per thread
/// assert_eq!(report.queue.states_destroyed, 8);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChurnConfig {
    /// The modelled CPython version.
    pub version: PyVersion,
    /// The cleanup queue's policy.
    pub policy: Policy,
    /// What the main thread installs.
    pub mode: TraceMode,
    /// Threads started per wave.
    pub threads: usize,
    /// Waves.
    pub waves: usize,
    /// The watchdog.
    pub watchdog: Watchdog,
}

/// Hundreds of short-lived threads in waves, each keying a weak dictionary
/// by its main greenlet (a finalizer that enters functions and releases the
/// GIL); the main thread, traced, keeps entering functions while the waves
/// die, then waits for the queue to empty.
///
/// # Errors
/// [`RunError`] if the runtime could not start.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{churn, ChurnConfig, TraceMode};
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let report = churn(ChurnConfig {
///     version: PyVersion::V3_11,
///     policy: Policy::Shielded,
///     mode: TraceMode::Trace,
///     threads: 8,
///     waves: 2,
///     watchdog: Watchdog::Report(Duration::from_secs(30)),
/// })
/// .unwrap();
/// assert!(!report.hung());
/// assert_eq!(report.states_never_destroyed, 0);
/// ```
pub fn churn(config: ChurnConfig) -> Result<ScenarioReport, RunError> {
    churn_with(config, RunOptions::default())
}

/// [`churn`] with `options` (exit order, early verdict).
///
/// # Errors
/// [`RunError`] if the runtime could not start.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{churn_with, ChurnConfig, RunOptions, TraceMode};
/// use greenlet::interp_shim::{ExitOrder, PyVersion, Watchdog};
///
/// let config = ChurnConfig {
///     version: PyVersion::V3_13,
///     policy: Policy::Robust,
///     mode: TraceMode::Trace,
///     threads: 4,
///     waves: 1,
///     watchdog: Watchdog::Report(Duration::from_secs(30)),
/// };
/// let report = churn_with(config, RunOptions::default().exit_order(ExitOrder::Racing)).unwrap();
/// assert_eq!(report.states_never_destroyed, 0);
/// ```
pub fn churn_with(config: ChurnConfig, options: RunOptions) -> Result<ScenarioReport, RunError> {
    let harness = Harness::new(config.version, config.policy, options);
    let queue = Arc::clone(&harness.queue);
    let created = Arc::clone(&harness.created);
    let outcome = harness.runtime.run(config.watchdog, move |py| {
        config.mode.install(py)?;
        for _ in 0..config.waves {
            let mut wave = Vec::with_capacity(config.threads);
            for _ in 0..config.threads {
                let c = Arc::clone(&created);
                wave.push(py.spawn("worker", move |py| {
                    // coverage's CTracer: data[getcurrent()] in every thread
                    let current = py.c_call(|| Harness::touch_greenlet(&c))?;
                    current.on_finalize(weak_dict_callback);
                    py.call("traced_work", |py| py.call("helper", |_| Ok(())))
                })?);
            }
            // The traced main thread keeps running Python while they die.
            for thread in &wave {
                while py.is_alive(thread)? {
                    py.call("main_work", |py| py.call("helper", |_| Ok(())))?;
                    py.loop_iter()?;
                }
                py.join(thread)?;
            }
        }
        // Let the drains finish: poll like the seed's main loop (a thread's
        // state is queued by its TLS destructors, after Thread.join).
        let total = (config.waves * config.threads) as u64;
        for _ in 0..10_000 {
            let idle = py.c_call(|| queue.metrics().states_destroyed >= total)?;
            if idle {
                break;
            }
            py.sleep(Duration::from_millis(1))?;
            py.loop_iter()?;
        }
        Ok(())
    })?;
    Ok(harness.finish(outcome, |_| None))
}

/// The `WeakKeyDictionary` removal callback of a dying thread's main
/// greenlet: enters functions and releases the GIL once, so other threads
/// may die (and push) while the drain runs Python code.
fn weak_dict_callback() {
    python_finalizer("remove", |py| {
        py.call("_remove_dead_weakref", |_| Ok(()))?;
        py.sleep(Duration::from_micros(200))?;
        py.call("_commit_removals", |_| Ok(()))
    });
}

/// A full pending-call ring at the moment the queue goes non-empty.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{ring_full, RingFullConfig};
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let config = RingFullConfig {
///     version: PyVersion::V3_11,
///     policy: Policy::Shielded,
///     watchdog: Watchdog::Report(Duration::from_secs(20)),
/// };
/// let report = ring_full(config).unwrap();
/// assert!(report.queue.schedules_failed >= 1); // the ring had no room for A's drain
/// assert_eq!((report.queue.states_destroyed, report.queue.states_leaked), (3, 0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingFullConfig {
    /// The modelled CPython version.
    pub version: PyVersion,
    /// The cleanup queue's policy.
    pub policy: Policy,
    /// The watchdog.
    pub watchdog: Watchdog,
}

/// A burst of pending calls fills the ring while the main thread is already
/// inside `make_pending_calls` (so none of them can run yet), and thread A
/// dies meanwhile: its drain cannot be scheduled. The same
/// `make_pending_calls` then runs the burst, so the ring has room again;
/// then threads C and D die one after the other. `Legacy` and `Draining`
/// never schedule again (every later push sees a size above 1): all three
/// states are leaked at finalization. `Scheduled` and `Shielded` retry at
/// C's push and destroy everything.
///
/// # Errors
/// [`RunError`] if the runtime could not start.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{ring_full, RingFullConfig};
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let watchdog = Watchdog::Report(Duration::from_secs(20));
/// let stuck = ring_full(RingFullConfig { version: PyVersion::V3_12, policy: Policy::Draining, watchdog })
///     .unwrap();
/// assert_eq!((stuck.queue.states_destroyed, stuck.queue.states_leaked), (0, 3));
/// let fixed = ring_full(RingFullConfig { version: PyVersion::V3_12, policy: Policy::Scheduled, watchdog })
///     .unwrap();
/// assert_eq!((fixed.queue.states_destroyed, fixed.queue.states_leaked), (3, 0));
/// ```
pub fn ring_full(config: RingFullConfig) -> Result<ScenarioReport, RunError> {
    let harness = Harness::new(config.version, config.policy, RunOptions::default());
    let queue = Arc::clone(&harness.queue);
    let created = Arc::clone(&harness.created);
    let capacity = config.version.spec().ring_capacity;
    let outcome = harness.runtime.run(config.watchdog, move |py| {
        let (q, c) = (Arc::clone(&queue), Arc::clone(&created));
        let burst_done = PyEvent::new(&py.runtime());
        let done = burst_done.clone();
        // A C extension adds the call: the check site after that call runs it.
        let added = py.c_call(|| {
            py.add_pending_call(move |py| {
                py.call("burst", |py| {
                    // The call itself was popped: the ring is empty; fill it.
                    let filled = py.c_call(|| {
                        (0..capacity)
                            .filter(|_| {
                                py.add_pending_call(|py| py.call("noop", |_| Ok(())))
                                    .is_ok()
                            })
                            .count()
                    })?;
                    if filled != capacity {
                        return Err(PyErr::exception("RuntimeError", "the ring did not fill up"));
                    }
                    let a = spawn_dying(py, &c)?;
                    py.join(&a)?;
                    // A's push has tried to schedule and failed (ring full).
                    wait_until(py, || q.metrics().schedules_failed >= 1)?;
                    py.c_call(|| done.set())
                })
            })
        })?;
        if added.is_err() {
            return Err(PyErr::exception(
                "RuntimeError",
                "the ring is not empty at start",
            ));
        }
        // The main thread runs the burst call at its next check site, then
        // the calls it added, in the same make_pending_calls.
        py.wait(&burst_done)?;
        for expected in [2_u64, 3] {
            let t = spawn_dying(py, &created)?;
            py.join(&t)?;
            let q = Arc::clone(&queue);
            wait_until(py, move || {
                let m = q.metrics();
                q.len() as u64 + m.states_destroyed >= expected
            })?;
        }
        // A drain still scheduled runs in _Py_FinishPendingCalls.
        Ok(())
    })?;
    Ok(harness.finish(outcome, |_| None))
}

/// Start a thread that touches its greenlet state and exits.
fn spawn_dying(py: &Py, created: &Arc<AtomicU64>) -> PyResult<ThreadHandle> {
    let c = Arc::clone(created);
    py.spawn("dies", move |py| {
        py.c_call(|| Harness::touch_greenlet(&c)).map(drop)
    })
}

/// Poll `ready` like Python code would: sleep 1 ms (GIL released) between
/// checks, for at most 10 s.
fn wait_until(py: &Py, ready: impl Fn() -> bool) -> PyResult<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !py.c_call(&ready)? {
        if Instant::now() > deadline {
            return Err(PyErr::exception(
                "TimeoutError",
                "condition not reached in 10 s",
            ));
        }
        py.sleep(Duration::from_millis(1))?;
        py.loop_iter()?;
    }
    Ok(())
}

/// Finalization with greenlet state still around: a daemon thread owning a
/// state is still running when the interpreter finalizes; it exits at its
/// next GIL take and its state is leaked on purpose (counted), no finalizer
/// runs, nothing crashes.
///
/// # Errors
/// [`RunError`] if the runtime could not start.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::finalization;
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let r = finalization(PyVersion::V3_11, Policy::Shielded, Watchdog::Report(Duration::from_secs(20)))
///     .unwrap();
/// assert_eq!(r.error, None); // the daemon's finalizer never ran
/// assert_eq!(r.queue.states_leaked, 1);
/// ```
pub fn finalization(
    version: PyVersion,
    policy: Policy,
    watchdog: Watchdog,
) -> Result<ScenarioReport, RunError> {
    let harness = Harness::new(version, policy, RunOptions::default());
    let created = Arc::clone(&harness.created);
    let started = PyEvent::new(&harness.runtime);
    let ran = Arc::new(AtomicU64::new(0));
    let finalizer_runs = Arc::clone(&ran);
    let outcome = harness.runtime.run(watchdog, move |py| {
        let s = started.clone();
        py.spawn_daemon("daemon", move |py| {
            let current = py.c_call(|| Harness::touch_greenlet(&created))?;
            current.on_finalize(move || {
                finalizer_runs.fetch_add(1, Ordering::SeqCst);
            });
            py.c_call(|| s.set())?;
            loop {
                py.sleep(Duration::from_millis(1))?;
                py.loop_iter()?;
            }
        })?;
        py.wait(&started)
    })?;
    let mut report = harness.finish(outcome, |_| None);
    if ran.load(Ordering::SeqCst) != 0 {
        report.error = Some(PyErr::exception(
            "AssertionError",
            "a finalizer ran after finalization",
        ));
    }
    Ok(report)
}

/// Threads whose finalizers panic (every other one): each panic is reported
/// and the drain goes on to destroy every state.
///
/// # Errors
/// [`RunError`] if the runtime could not start.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::panicking_finalizers;
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let r = panicking_finalizers(PyVersion::V3_13, Policy::Shielded, 4, Watchdog::Report(Duration::from_secs(20)))
///     .unwrap();
/// assert_eq!((r.finalizer_panics, r.queue.states_destroyed), (2, 4));
/// ```
pub fn panicking_finalizers(
    version: PyVersion,
    policy: Policy,
    threads: usize,
    watchdog: Watchdog,
) -> Result<ScenarioReport, RunError> {
    let harness = Harness::new(version, policy, RunOptions::default());
    let created = Arc::clone(&harness.created);
    let queue = Arc::clone(&harness.queue);
    let outcome = harness.runtime.run(watchdog, move |py| {
        let mut all = Vec::new();
        for i in 0..threads {
            let c = Arc::clone(&created);
            all.push(py.spawn("worker", move |py| {
                let current = py.c_call(|| Harness::touch_greenlet(&c))?;
                if i % 2 == 0 {
                    current.on_finalize(move || panic!("finalizer {i} fails on purpose"));
                } else {
                    current.on_finalize(weak_dict_callback);
                }
                Ok(())
            })?);
        }
        for t in &all {
            py.join(t)?;
        }
        // Thread.join returns before a thread's TLS destructors queue its
        // state: wait until every state was destroyed.
        let q = Arc::clone(&queue);
        wait_until(py, move || q.metrics().states_destroyed >= threads as u64)
    })?;
    Ok(harness.finish(outcome, |_| None))
}
