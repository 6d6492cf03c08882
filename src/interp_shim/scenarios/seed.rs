//! The seed report's reproducer ([`seed`]) and its variant that enters a
//! chosen function first in the cleanup ([`seed_entering`]).

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::cleanup::{CleanupQueue, Policy};

use super::super::runtime::{PyEvent, RunError, ThreadHandle};
use super::super::version::PyVersion;
use super::super::watchdog::Watchdog;
use super::harness::{python_finalizer, Harness};
use super::options::{RunOptions, ScenarioReport, TraceMode};

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
    /// `c.start()` of a thread `c` made before ([`Py::spawn`](super::super::Py::spawn): the
    /// Python-level `Thread.start`).
    Start,
    /// `c.join()` of a thread started and joined before ([`Py::join`](super::super::Py::join): the
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
