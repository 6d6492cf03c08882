//! A deterministic explorer of the cleanup protocol over the CPython model:
//! every interleaving of a scenario's threads, each atomic step of each
//! thread one transition, decides whether a livelock or a leak is reachable
//! and prints the shortest schedule that reaches it.
//!
//! Owns: the scenarios ([`scenario`]), the explored state and its
//! transitions (`model`, internal), the frame machine that the CPython model
//! and the hub's host share (`frames`, internal: programs, conditions, the
//! cleanup queue's drain), the breadth-first search ([`search`]) and the
//! table over scenarios × versions × policies × modes; and, with the `hub`
//! feature, the hub's pending-call slot as a further host (`hub`: its
//! cells, `HubCell`, are scenarios × policies, and [`ExploreCell`] is what
//! both kinds of cell share).
//!
//! Uses the same semantic core as the live runtime — `InterpCore` for the
//! interpreter and `QueueCore` for the cleanup policy — and nothing else of
//! the crate. Every step that touches shared state is one call of a core
//! method; this module only moves program counters, pushes and pops the main
//! thread's frames (check site → handling → `make_pending_calls` → drain →
//! finalizer code) and chooses which thread moves next.
//!
//! The state explored is `InterpCore<CallToken>` + `QueueCore<StateToken>` +
//! the main thread's frame stack + each dying thread's program counter +
//! events; it is hashed exactly (no compaction), so a "no" is a proof over
//! every schedule of the scenario. Scenarios are closed and finite (their
//! loops revisit states), so the bound is the scenario itself; a state
//! count bound guards against a scenario that grows past it.
//!
//! # Steps and what is merged
//! Every core call is its own step, except three pairs whose merging loses
//! no behaviour: (1) the breaker test at a check site and `take_signals`
//! (no thread of these scenarios raises a signal, so nothing can come
//! between them); (2) `wants_pending_calls` and `make_pending_calls_begin`
//! (a `Py_AddPendingCall` landing between them only sets `calls_to_do`,
//! which `begin` then clears exactly as if it had landed before the test);
//! (3) `make_pending_calls_pop` finding nothing and `make_pending_calls_end`
//! (a call added between them stays queued and signalled, as if added just
//! after). A dying thread's Python code before it exits is one GIL tenure
//! (take, run, drop) without check sites: it releases the GIL by itself.
//!
//! # Verdicts
//! - **livelock**: the main thread is ready at a `RESUME` where
//!   `InterpCore::resume_livelocked` holds, the main thread's own steps
//!   from there lead back to exactly the same state (the re-dispatch is a
//!   self-loop), and no interleaving of any thread lets it past that
//!   `RESUME`. Cross-checked by backward reachability: every cell reports
//!   the states from which quiescence is unreachable (traps), and the tests
//!   assert traps exist exactly when a livelock does.
//! - **violation** (the hub host only): a state that breaks a safety rule of
//!   the hub's slot (see `hub`).
//! - **leak**: a quiescent state (every dying thread finished, the main
//!   thread in its idle loop with nothing below, the ring empty, not busy)
//!   whose queue is non-empty with no drain outstanding
//!   (`QueueCore::is_stranded`). States leaked on purpose at finalization
//!   are counted apart ([`Verdict::leaked_on_purpose`]).
//!
//! # Example
//! ```
//! use greenlet::cleanup::Policy;
//! use greenlet::interp_shim::explore::{explore, TableCell, Mode, ScenarioName};
//! use greenlet::interp_shim::PyVersion;
//!
//! let cell = TableCell {
//!     scenario: ScenarioName::Seed,
//!     version: PyVersion::V3_11,
//!     policy: Policy::Legacy,
//!     mode: Mode::Trace,
//! };
//! let verdict = explore(cell, 1_000_000).unwrap();
//! assert!(verdict.livelock_reachable());
//! let schedule = verdict.livelock.unwrap();
//! assert!(schedule.to_string().contains("LIVELOCK"));
//! ```

// Public but hidden: the `explore` example's `--python hub` and the hub
// slot's model tests drive it from outside the crate; it is a model check
// of the hub's internals, not an API (so its docs may name crate-private
// items).
#[cfg(feature = "hub")]
#[doc(hidden)]
#[allow(rustdoc::private_intra_doc_links)]
pub mod hub;
pub(crate) mod model;
pub mod scenario;
pub mod search;

mod frames;

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::cleanup::Policy;
use crate::interp_shim::PyVersion;

#[cfg(feature = "hub")]
#[doc(hidden)]
pub use self::hub::{
    explore_hub, HubCell, HubScenario, SlotRules, UnknownHubScenario, UnknownSlotRules,
    HUB_CAPACITY,
};
pub use self::scenario::{Scenario, ScenarioName, UnknownScenario};
pub use self::search::{explore, explore_scenario, BoundExceeded, Counterexample, Verdict};

/// The default bound on distinct states per cell.
pub const DEFAULT_BOUND: usize = 4_000_000;

/// How the main thread is instrumented.
///
/// # Which live modes each explorer mode stands for
/// The explorer's hooks run no bytecode: at a `call`/`return` (and, for a
/// profiler, `c_call`/`c_return`) event the core's tracing state is all that
/// matters, exactly as for a hook written in C. Against the live shim's five
/// modes ([`TraceMode`](crate::interp_shim::scenarios::TraceMode), mapped in
/// code by `TraceMode::explored_as`):
///
/// | explorer | live modes it stands for | how faithfully |
/// |----------|--------------------------|----------------|
/// | `trace`  | `ctrace`, `trace`        | exact for a C tracer (coverage's CTracer); for a Python trace function the trace function's own frames (a `RESUME` check site reached with tracing suspended, at each `call`/`return` event) are left out |
/// | `profile`| `profile`                | exact for a C profiler (cProfile) |
/// | `none`   | `none`                   | exact |
///
/// Live `pyprofile` (a Python profile function) is not modelled. On real
/// CPython 3.11.7 it differs from every other traced mode: its `c_return`
/// event after `time.sleep` returns runs the profile function's frame with
/// tracing suspended, and that frame's `RESUME` check site runs the first
/// pending call, so the drain and the finalizer's `<lambda>` run untraced
/// and the seed does not hang (`probes/nested_pending_call.py` and
/// `probes/seed_shape.py`; replayed by `tests/model/seed.rs`). The
/// explorer's `profile` verdicts over-approximate it: a livelock they report
/// may be unreachable under a Python profile function.
///
/// The names stay `trace`/`profile`/`none` rather than the live `ctrace`:
/// `port/verify.py` looks up the explorer's `--table --format tsv` rows by
/// them.
///
/// # Examples
/// ```
/// use greenlet::interp_shim::explore::Mode;
///
/// let mode: Mode = "profile".parse().unwrap();
/// assert_eq!(mode, Mode::Profile);
/// assert_eq!(mode.to_string(), "profile");
/// assert_eq!(Mode::ALL, [Mode::Trace, Mode::Profile, Mode::None]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// A trace function on the main thread (`sys.settrace`); stands for the
    /// live `ctrace` (exactly) and `trace` (see above).
    Trace,
    /// A profile function written in C on the main thread
    /// (`PyEval_SetProfile`, cProfile); stands for the live `profile`.
    Profile,
    /// Neither; the live `none`.
    None,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 3] = [Mode::Trace, Mode::Profile, Mode::None];

    /// The command-line name.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::explore::Mode;
    ///
    /// let names: Vec<&str> = Mode::ALL.iter().map(|m| m.name()).collect();
    /// assert_eq!(names, ["trace", "profile", "none"]);
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Mode::Trace => "trace",
            Mode::Profile => "profile",
            Mode::None => "none",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A mode name that is not one of [`Mode::ALL`].
///
/// # Examples
/// ```
/// use greenlet::interp_shim::explore::{Mode, UnknownExploreMode};
///
/// let err: UnknownExploreMode = "pyprofile".parse::<Mode>().unwrap_err();
/// assert_eq!(err.given, "pyprofile");
/// assert!(err.to_string().contains("pyprofile is not modelled"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown mode {given:?}: expected one of trace, profile, none (the explorer's trace stands for \
     the live trace and ctrace, its profile for the live profile; pyprofile is not modelled)"
)]
pub struct UnknownExploreMode {
    /// What was given.
    pub given: String,
}

impl FromStr for Mode {
    type Err = UnknownExploreMode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownExploreMode {
                given: s.to_string(),
            })
    }
}

/// One cell of the table.
///
/// # Examples
/// ```
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::explore::{TableCell, Mode, ScenarioName};
/// use greenlet::interp_shim::PyVersion;
///
/// let cell = TableCell {
///     scenario: ScenarioName::FullRing,
///     version: PyVersion::V3_13,
///     policy: Policy::Shielded,
///     mode: Mode::None,
/// };
/// assert_eq!(cell.to_string(), "full-ring python 3.13 policy shielded mode none");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TableCell {
    /// The scenario.
    pub scenario: ScenarioName,
    /// The CPython version.
    pub version: PyVersion,
    /// The cleanup policy.
    pub policy: Policy,
    /// Tracing on the main thread.
    pub mode: Mode,
}

impl fmt::Display for TableCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} python {} policy {} mode {}",
            self.scenario, self.version, self.policy, self.mode
        )
    }
}

/// A cell of a host's table: what names a verdict and how it is explored.
///
/// Implemented by [`TableCell`] (the CPython hosts) and, with the `hub`
/// feature, `HubCell` (the hub's pending-call slot); [`explore_cells`]
/// takes either.
///
/// ```
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::explore::{ExploreCell, Mode, ScenarioName, TableCell};
/// use greenlet::interp_shim::PyVersion;
///
/// let cell = TableCell {
///     scenario: ScenarioName::Seed,
///     version: PyVersion::V3_11,
///     policy: Policy::Robust,
///     mode: Mode::Trace,
/// };
/// assert_eq!(cell.columns(), "seed\t3.11\trobust\ttrace");
/// ```
pub trait ExploreCell: Copy + fmt::Display + fmt::Debug + Send + Sync {
    /// The cell's four leading columns of [`TSV_HEADER`]: scenario,
    /// python (`hub` for the hub), policy, mode (`-` where there is none).
    fn columns(&self) -> String;
    /// Explore the cell, up to `bound` distinct states.
    ///
    /// # Errors
    /// [`BoundExceeded`] when it has more.
    fn explore(self, bound: usize) -> Result<Verdict<Self>, BoundExceeded<Self>>;
}

impl ExploreCell for TableCell {
    fn columns(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}",
            self.scenario, self.version, self.policy, self.mode
        )
    }
    fn explore(self, bound: usize) -> Result<Verdict, BoundExceeded> {
        explore(self, bound)
    }
}

impl TableCell {
    /// Every cell: scenarios × versions × policies × modes.
    ///
    /// ```
    /// use greenlet::cleanup::Policy;
    /// use greenlet::interp_shim::explore::TableCell;
    /// assert_eq!(TableCell::all().len(), 6 * 3 * Policy::ALL.len() * 3);
    /// ```
    pub fn all() -> Vec<TableCell> {
        let mut cells = Vec::new();
        for scenario in ScenarioName::ALL {
            for version in PyVersion::ALL {
                for policy in Policy::ALL {
                    for mode in Mode::ALL {
                        cells.push(TableCell {
                            scenario,
                            version,
                            policy,
                            mode,
                        });
                    }
                }
            }
        }
        cells
    }
}

/// A cell's verdict, or why there is none.
type Outcome<C> = Result<Verdict<C>, BoundExceeded<C>>;

/// Explore each of `cells` (in parallel on up to `workers` threads) and
/// return the verdicts in the order of `cells`.
///
/// ```
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::explore::{explore_cells, TableCell, Mode, ScenarioName, DEFAULT_BOUND};
/// use greenlet::interp_shim::PyVersion;
///
/// let cells: Vec<TableCell> = Policy::ALL
///     .into_iter()
///     .map(|policy| TableCell { scenario: ScenarioName::Seed, version: PyVersion::V3_11,
///                          policy, mode: Mode::Trace })
///     .collect();
/// let verdicts = explore_cells(&cells, DEFAULT_BOUND, 2);
/// let livelocks: Vec<bool> =
///     verdicts.iter().map(|v| v.as_ref().unwrap().livelock_reachable()).collect();
/// assert_eq!(livelocks, [true, false, false, false, false]);
/// ```
pub fn explore_cells<C: ExploreCell>(cells: &[C], bound: usize, workers: usize) -> Vec<Outcome<C>> {
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Outcome<C>>>> = cells.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..workers.clamp(1, cells.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&cell) = cells.get(i) else { break };
                *results[i].lock() = Some(cell.explore(bound));
            });
        }
    });
    results
        .into_iter()
        .zip(cells)
        .map(|(r, &cell)| {
            // Every index below cells.len() was claimed by exactly one
            // worker; should one be missing, explore it here.
            r.into_inner().unwrap_or_else(|| cell.explore(bound))
        })
        .collect()
}

/// The header of the tab-separated table.
pub const TSV_HEADER: &str = "scenario\tpython\tpolicy\tmode\tlivelock\tleak";

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

impl<C: ExploreCell> Verdict<C> {
    /// The cell as one tab-separated row under [`TSV_HEADER`].
    ///
    /// ```
    /// use greenlet::cleanup::Policy;
    /// use greenlet::interp_shim::explore::{explore, TableCell, Mode, ScenarioName, DEFAULT_BOUND};
    /// use greenlet::interp_shim::PyVersion;
    ///
    /// let cell = TableCell { scenario: ScenarioName::Seed, version: PyVersion::V3_12,
    ///                   policy: Policy::Legacy, mode: Mode::Trace };
    /// let row = explore(cell, DEFAULT_BOUND).unwrap().tsv_row();
    /// assert_eq!(row, "seed\t3.12\tlegacy\ttrace\tno\tno");
    /// ```
    pub fn tsv_row(&self) -> String {
        format!(
            "{}\t{}\t{}",
            self.cell.columns(),
            yes_no(self.livelock_reachable()),
            yes_no(self.leak_reachable()),
        )
    }

    /// The summary lines of the cell (without the counterexamples).
    ///
    /// # Examples
    /// ```
    /// use greenlet::cleanup::Policy;
    /// use greenlet::interp_shim::explore::{explore, TableCell, Mode, ScenarioName, DEFAULT_BOUND};
    /// use greenlet::interp_shim::PyVersion;
    ///
    /// let cell = TableCell { scenario: ScenarioName::Seed, version: PyVersion::V3_11,
    ///                   policy: Policy::Legacy, mode: Mode::Trace };
    /// let summary = explore(cell, DEFAULT_BOUND).unwrap().summary();
    /// assert!(summary.starts_with("seed python 3.11 policy legacy mode trace\n"));
    /// assert!(summary.contains("livelock reachable: yes"));
    /// assert!(summary.contains("every state can still reach quiescence: no"));
    /// ```
    pub fn summary(&self) -> String {
        let len = |c: &Option<Counterexample>| match c {
            Some(c) => c.len().to_string(),
            None => "-".into(),
        };
        let mut s = format!(
            "{}\n  transitions explored: {}\n  states visited: {}\n  livelock reachable: {} \
             (counterexample length {})\n  leak reachable: {} (counterexample length {})\n  \
             leaked on purpose at finalization (most): {}\n  time: {:.3} s ({:.0} states/s)",
            self.cell,
            self.transitions,
            self.states,
            yes_no(self.livelock_reachable()),
            len(&self.livelock),
            yes_no(self.leak_reachable()),
            len(&self.leak),
            self.leaked_on_purpose,
            self.elapsed.as_secs_f64(),
            self.states_per_second(),
        );
        s.push_str(&format!(
            "\n  every state can still reach quiescence: {}",
            if self.traps == 0 {
                "yes".to_string()
            } else {
                format!("no ({} trap states)", self.traps)
            }
        ));
        if let Some(v) = &self.violation {
            s.push_str(&format!(
                "\n  slot rule broken: yes (counterexample length {})",
                v.len()
            ));
        }
        if let Some(stuck) = &self.stuck {
            s.push_str(&format!(
                "\n  MODEL ERROR: a state where no thread can move ({} steps)",
                stuck.len()
            ));
        }
        if self.inconsistent > 0 {
            s.push_str(&format!(
                "\n  MODEL ERROR: {} quiescent states with queued states and a drain counted outstanding",
                self.inconsistent
            ));
        }
        s
    }
}
