//! What a scenario runs with and what it reports: the main thread's
//! [`TraceMode`] (and the explorer's mode that stands for it), the
//! [`RunOptions`] of a run and the [`ScenarioReport`].

use std::fmt;
use std::str::FromStr;

use crate::cleanup::Metrics;

use super::super::explore;
use super::super::runtime::{
    ExitOrder, Hook, Interpreter, InterpreterStats, Py, PyErr, PyResult, EARLY_VERDICT_REDISPATCHES,
};
use super::super::watchdog::{metrics_kv, HangReport};

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

    pub(super) fn install(self, py: &Py) -> PyResult<()> {
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
    /// The watchdog's report, if the run hung ([`Watchdog::Report`](super::super::Watchdog::Report) mode).
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

    pub(super) fn apply(self, runtime: &Interpreter) {
        runtime.set_exit_order(self.exit_order);
        runtime.set_early_verdict(self.early_verdict);
    }
}
