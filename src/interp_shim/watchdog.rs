//! The watchdog of the live runtime, modelled on
//! `faulthandler.dump_traceback_later(timeout, exit=True)`: its modes and
//! the report it prints (each live thread's simulated stack, most recent
//! call first, and the pending-call state).
//!
//! Owns: [`Watchdog`], [`HangReport`], [`HangCause`], [`ThreadDump`],
//! [`QueueAtHang`]. Uses the core's [`Summary`], the runtime's counters and
//! the cleanup queue's metrics; the [`Interpreter`](super::runtime::Interpreter)
//! builds the report in the watchdog's firing step.

use std::fmt;
use std::time::Duration;

use crate::cleanup::{CleanupQueue, Metrics, Policy};

use super::core::{Summary, ThreadIdx};
use super::runtime::InterpreterStats;

/// Why the watchdog ended a run.
///
/// # Examples
/// ```
/// use greenlet::interp_shim::HangCause;
///
/// assert_ne!(HangCause::Timeout, HangCause::Livelock { redispatches: 1000 });
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HangCause {
    /// The timeout passed (`faulthandler.dump_traceback_later`).
    Timeout,
    /// The early verdict
    /// ([`Interpreter::set_early_verdict`](super::runtime::Interpreter::set_early_verdict)):
    /// the livelock predicate held over this many re-dispatches in a row
    /// while nothing else could change the state.
    Livelock {
        /// The re-dispatches counted.
        redispatches: u64,
    },
}

/// A cleanup queue as the watchdog found it
/// ([`Interpreter::report_queue`](super::runtime::Interpreter::report_queue)).
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use greenlet::cleanup::{CleanupQueue, Policy};
/// use greenlet::interp_shim::{PendingCallScheduler, PyVersion, QueueAtHang, Interpreter};
///
/// let rt = Interpreter::new(PyVersion::V3_12);
/// let queue = CleanupQueue::new(Policy::Robust, Arc::new(PendingCallScheduler::new(&rt)));
/// let seen = QueueAtHang::of(&queue);
/// assert_eq!((seen.policy, seen.len, seen.outstanding), (Policy::Robust, 0, 0));
/// assert!(seen.to_string().starts_with("cleanup queue: policy=robust len=0 outstanding=0 schedules_requested=0 "));
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueAtHang {
    /// The queue's policy.
    pub policy: Policy,
    /// States queued.
    pub len: usize,
    /// Drains scheduled and not yet finished.
    pub outstanding: u64,
    /// Its counters.
    pub metrics: Metrics,
}

impl QueueAtHang {
    /// `queue` now.
    pub fn of(queue: &CleanupQueue) -> QueueAtHang {
        QueueAtHang {
            policy: queue.policy(),
            len: queue.len(),
            outstanding: queue.outstanding(),
            metrics: queue.metrics(),
        }
    }
}

impl fmt::Display for QueueAtHang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cleanup queue: policy={} len={} outstanding={} {}",
            self.policy,
            self.len,
            self.outstanding,
            metrics_kv(&self.metrics)
        )
    }
}

/// A queue's counters as `key=value` pairs (the format the `matrix`
/// example parses).
pub(crate) fn metrics_kv(m: &Metrics) -> String {
    format!(
        "schedules_requested={} schedules_failed={} drains_run={} states_destroyed={} \
         states_leaked={} max_outstanding={}",
        m.schedules_requested,
        m.schedules_failed,
        m.drains_run,
        m.states_destroyed,
        m.states_leaked,
        m.max_outstanding
    )
}

/// The watchdog of [`Interpreter::run`](super::runtime::Interpreter::run), modelled on
/// `faulthandler.dump_traceback_later(timeout, exit=True)`.
///
/// # Example
/// The 3.11 livelock without greenlet: a traced main thread runs a pending
/// call that adds another one, then enters a function.
/// ```
/// use std::time::Duration;
/// use greenlet::interp_shim::{
///     HangCause, Hook, Outcome, PyVersion, Interpreter, Watchdog, EARLY_VERDICT_REDISPATCHES,
/// };
///
/// let rt = Interpreter::new(PyVersion::V3_11);
/// let outcome = rt
///     .run(Watchdog::Report(Duration::from_millis(300)), |py| {
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
/// assert_eq!(report.thread(0).unwrap().frames[0], "stuck");
/// assert!(report.livelock_predicate && report.redispatches > 0);
/// // Ended by the early verdict, long before the timeout.
/// assert_eq!(report.cause, HangCause::Livelock { redispatches: EARLY_VERDICT_REDISPATCHES });
/// assert!(report.to_string().starts_with("Timeout (0:00:00.300000)!\nEarly verdict: livelock"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watchdog {
    /// No watchdog: `run` waits for the scenario however long it takes.
    Off,
    /// After the timeout, print the [`HangReport`] to stderr and exit the
    /// process with status 1, like faulthandler with `exit=True`.
    Exit(Duration),
    /// After the timeout, cancel the scenario (see the module documentation)
    /// and return the report from `run`: for tests.
    Report(Duration),
}

/// One thread's simulated stack in a [`HangReport`].
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use greenlet::interp_shim::{Hook, Outcome, PyVersion, Interpreter, Watchdog};
///
/// // The 3.11 spin of the `HangReport` example, in a function `f`.
/// let rt = Interpreter::new(PyVersion::V3_11);
/// let outcome = rt
///     .run(Watchdog::Report(Duration::from_millis(200)), |py| {
///         py.settrace(Hook::C)?;
///         let _ = py.add_pending_call(|py| {
///             let _ = py.c_call(|| py.add_pending_call(|_| Ok(())))?;
///             py.call("f", |_| Ok(()))
///         });
///         py.loop_iter()
///     })
///     .unwrap();
/// let Outcome::Hung(report) = outcome else { panic!("3.11 spins") };
/// let dump = &report.threads[0];
/// assert_eq!((dump.index, dump.name.as_str()), (0, "MainThread"));
/// // Most recent call first, as faulthandler prints it.
/// assert!(report.to_string().contains(
///     "Thread T0 \"MainThread\" (most recent call first):\n  File \"<simulated>\", in f\n  File \"<simulated>\", in <module>\n"
/// ));
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadDump {
    /// The model thread index (0 is the main thread).
    pub index: ThreadIdx,
    /// The thread's name.
    pub name: String,
    /// Frame names, most recent call first.
    pub frames: Vec<&'static str>,
    /// Traced RESUME re-dispatches this thread has made.
    pub redispatches: u64,
}

/// What the watchdog saw when it fired.
///
/// # Examples
/// A real hang: the traced main thread spins in a pending call that added
/// another one, while a daemon thread waits on an event.
/// ```
/// use std::time::Duration;
/// use greenlet::interp_shim::{PyEvent, Hook, Outcome, PyVersion, Interpreter, Watchdog};
///
/// let rt = Interpreter::new(PyVersion::V3_11);
/// rt.set_report_hook(|| "queue: 1 state".into());
/// let never = PyEvent::new(&rt);
/// let outcome = rt
///     .run(Watchdog::Report(Duration::from_millis(300)), move |py| {
///         py.spawn_daemon("idle", move |py| py.wait(&never))?;
///         py.settrace(Hook::C)?;
///         let _ = py.add_pending_call(|py| {
///             let _ = py.c_call(|| py.add_pending_call(|_| Ok(())))?;
///             py.call("<lambda>", |_| Ok(()))
///         });
///         py.loop_iter()
///     })
///     .unwrap();
/// let Outcome::Hung(report) = outcome else { panic!("3.11 spins") };
/// let main = report.thread(0).unwrap();
/// assert_eq!(main.frames, ["<lambda>", "<module>"]);
/// assert!(main.redispatches > 0 && report.redispatches == main.redispatches);
/// assert!(report.livelock_predicate && report.summary.busy && report.summary.calls_to_do);
/// assert_eq!(report.thread(1).unwrap().frames, ["idle", "run"]);
/// let text = report.to_string();
/// assert!(text.starts_with("Timeout (0:00:00.300000)!\nEarly verdict"));
/// assert!(text.contains(")\nThread T0 \"MainThread\""));
/// assert!(text.ends_with("\nqueue: 1 state\n"));
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HangReport {
    /// The watchdog's timeout.
    pub timeout: Duration,
    /// Why it fired: the timeout, or the early verdict.
    pub cause: HangCause,
    /// The runtime's counters in the firing step.
    pub stats: InterpreterStats,
    /// The cleanup queue in the firing step, if one was registered with
    /// [`Interpreter::report_queue`](super::runtime::Interpreter::report_queue).
    pub queue: Option<QueueAtHang>,
    /// Every live thread's stack, main thread first.
    pub threads: Vec<ThreadDump>,
    /// The pending-call state.
    pub summary: Summary,
    /// Whether the core's livelock predicate held (3.11 traced RESUME with
    /// `busy`, `calls_to_do` and the breaker set).
    pub livelock_predicate: bool,
    /// Traced RESUME re-dispatches in the whole interpreter.
    pub redispatches: u64,
    /// Lines added by [`Interpreter::set_report_hook`](super::runtime::Interpreter::set_report_hook)
    /// (e.g. queue metrics).
    pub extra: String,
}

impl HangReport {
    /// The dump of model thread `index`, if it was alive.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use greenlet::interp_shim::{PyEvent, Hook, Outcome, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_11);
    /// let never = PyEvent::new(&rt);
    /// let outcome = rt
    ///     .run(Watchdog::Report(Duration::from_millis(200)), move |py| {
    ///         let done = py.spawn("a", |_| Ok(()))?;
    ///         py.join(&done)?;
    ///         py.spawn_daemon("_b", move |py| py.wait(&never))?;
    ///         py.settrace(Hook::C)?;
    ///         let _ = py.add_pending_call(|py| {
    ///             let _ = py.c_call(|| py.add_pending_call(|_| Ok(())))?;
    ///             py.call("stuck", |_| Ok(()))
    ///         });
    ///         py.loop_iter()
    ///     })
    ///     .unwrap();
    /// let Outcome::Hung(report) = outcome else { panic!("3.11 spins") };
    /// assert_eq!(report.thread(2).unwrap().name, "Thread-2 (_b)");
    /// assert!(report.thread(1).is_none()); // thread 1 had finished
    /// ```
    pub fn thread(&self, index: ThreadIdx) -> Option<&ThreadDump> {
        self.threads.iter().find(|t| t.index == index)
    }
}

impl fmt::Display for HangReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // faulthandler's header: H:MM:SS, microseconds only when non-zero
        let secs = self.timeout.as_secs();
        write!(
            f,
            "Timeout ({}:{:02}:{:02}",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        )?;
        let micros = self.timeout.subsec_micros();
        if micros != 0 {
            write!(f, ".{micros:06}")?;
        }
        writeln!(f, ")!")?;
        if let HangCause::Livelock { redispatches } = self.cause {
            writeln!(
                f,
                "Early verdict: livelock (the predicate held over {redispatches} re-dispatches \
                 in a row; nothing else can change the state)"
            )?;
        }
        for t in &self.threads {
            writeln!(
                f,
                "Thread T{} {:?} (most recent call first):",
                t.index, t.name
            )?;
            for frame in &t.frames {
                writeln!(f, "  File \"<simulated>\", in {frame}")?;
            }
            writeln!(f)?;
        }
        writeln!(f, "pending calls: {}", self.summary)?;
        writeln!(
            f,
            "livelock predicate (3.11 traced RESUME): {}",
            self.livelock_predicate
        )?;
        let per_thread: Vec<String> = self
            .threads
            .iter()
            .filter(|t| t.redispatches > 0)
            .map(|t| format!("T{}={}", t.index, t.redispatches))
            .collect();
        writeln!(
            f,
            "re-dispatches: {} ({})",
            self.redispatches,
            per_thread.join(" ")
        )?;
        if let Some(queue) = &self.queue {
            writeln!(f, "{queue}")?;
        }
        if !self.extra.is_empty() {
            writeln!(f, "{}", self.extra.trim_end())?;
        }
        Ok(())
    }
}
