//! The hub's pending-call slot as an explorer host, beside CPython
//! 3.11/3.12/3.13: the same scenarios (and one of its own, `drain-parks`)
//! run on green threads over hub workers, with every cleanup policy, over
//! every interleaving.
//!
//! Owns: [`HubScenario`], [`HubCell`], [`SlotRules`] and [`explore_hub`];
//! inside, the host's state (`state`), its transitions (`steps`) and its
//! verdicts and text for the search (`host`). Uses the slot's own rules as
//! pure steps from `crate::hub::pending` (`Ring`'s `add`, `pop` and
//! `pop_at_shutdown`, `wants_drain`, `claim_busy`, `drain_goes_on`,
//! `end_drain`): the explorer checks the code the live slot runs, not a
//! copy. Uses the frame machine it shares with the CPython model
//! (`explore::frames`: programs, conditions, the cleanup queue's drain, a
//! dying thread's push, over `QueueCore` for the policy), the scenarios'
//! programs, and the breadth-first search of [`super::search`].
//!
//! # What is modelled
//! - **Workers** (1, or 2 in `drain-parks`): each round is the scheduling
//!   point (rule 2: read `has_calls`, then the CAS on `busy`, two steps),
//!   then one ready task (the drain ahead of the main task) runs until it
//!   parks or ends; with none ready, the worker re-reads `has_calls` and
//!   sleeps only while it is clear (one step: the live worker sets its
//!   `sleeping` flag before that read and a wake writes a mio waker whose
//!   token the poll still sees, so no wake falls between the read and the
//!   sleep).
//! - **The main program** of a scenario is a green thread on worker 0;
//!   `time.sleep` and a wait park it (a timer fires at any later moment; a
//!   condition wakes it once it holds); `Py_FinalizeEx` is the runtime's
//!   shutdown. Function entries, check sites and greenlet switches inside
//!   one green thread have no part in the slot's rules (the hub has no
//!   eval breaker and no tracing): they take no step.
//! - **The drain** (rule 3) is a green thread of its own: pops under the
//!   lock, at most `capacity` calls, each run on it; a cleanup drain runs
//!   the finalizers of the states it pops, which may park (rule 4). A start
//!   may fail for want of a stack (rule 5): `busy` is released at once.
//!   The hub's `shield` is the default (none), so `shielded` and `robust`
//!   destroy states unshielded here.
//! - **Dying threads** push their state; a schedule is
//!   `HubScheduler::schedule`: the shutting-down check, then rule 7's add
//!   under the lock, then the wake of one sleeping worker after it (three
//!   steps; under [`SlotRules::CleanupCounted`] rule 1's add, and a full
//!   slot is a failed schedule, reported to the policy). Once
//!   the runtime shuts down, or the add finds the slot closed, the thread
//!   drains on itself, as `Inline` does.
//! - **Shutdown** (rule 6): parks return at once (the kill), workers exit
//!   when their green threads have ended, then the shutting-down thread
//!   runs what the slot still holds, closing it, and drains the queue.
//!
//! # Verdicts
//! A **leak** is as for CPython: a quiescent state (dying threads done, no
//! drain, the ring empty, `busy` clear, the main program idle or the
//! runtime shut down) whose queue is stranded. A **livelock** is a state
//! from which no schedule reaches quiescence (the hub has no re-dispatch
//! loop to name). A **violation** breaks the slot's own safety: a call in
//! the ring with `has_calls` clear (no scheduling point starts a drain for
//! it), two drains at once (calls nest), or a call accepted and never run.
//!
//! ```
//! use greenlet::cleanup::Policy;
//! use greenlet::interp_shim::explore::{explore_hub, HubCell, HubScenario, SlotRules, DEFAULT_BOUND};
//!
//! let cell = HubCell { scenario: HubScenario::DrainParks, policy: Policy::Robust };
//! let real = explore_hub(cell, SlotRules::Real, DEFAULT_BOUND).unwrap();
//! assert!(!real.livelock_reachable() && !real.leak_reachable() && real.violation.is_none());
//! let broken = explore_hub(cell, SlotRules::NoBusyFlag, DEFAULT_BOUND).unwrap();
//! assert!(broken.violation.unwrap().conclusion.contains("two drains"));
//! ```

mod host;
mod state;
mod steps;

use std::fmt;
use std::str::FromStr;

use crate::cleanup::Policy;

use super::frames::Programs;
use super::scenario::{hub_drain_parks, Scenario, ScenarioName};
use super::search::{search, BoundExceeded, Verdict};
use super::ExploreCell;
use host::HubHost;
use steps::HubModel;

/// The slot's capacity in the model (the live default is 32): small, so
/// that `full-ring` fills it and rule 3's bound is reached.
pub const HUB_CAPACITY: usize = 2;

/// A scenario on the hub: one of the CPython scenarios, or the hub's own.
///
/// ```
/// use greenlet::interp_shim::explore::{HubScenario, ScenarioName};
///
/// assert_eq!(HubScenario::ALL.len(), ScenarioName::ALL.len() + 1);
/// assert_eq!("drain-parks".parse::<HubScenario>().unwrap(), HubScenario::DrainParks);
/// assert_eq!("seed".parse::<HubScenario>().unwrap(), HubScenario::Shared(ScenarioName::Seed));
/// assert!("spin".parse::<HubScenario>().unwrap_err().to_string().contains("drain-parks"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HubScenario {
    /// A scenario of the CPython table, run on one worker.
    Shared(ScenarioName),
    /// Two workers, the slot full at the start; three threads die with
    /// greenlet state, two of them while the drain parks in a finalizer.
    DrainParks,
}

impl HubScenario {
    /// Every scenario the hub runs: the CPython ones, then its own.
    pub const ALL: [HubScenario; 7] = [
        HubScenario::Shared(ScenarioName::Seed),
        HubScenario::Shared(ScenarioName::Churn),
        HubScenario::Shared(ScenarioName::FullRing),
        HubScenario::Shared(ScenarioName::Finalization),
        HubScenario::Shared(ScenarioName::ForeignCall),
        HubScenario::Shared(ScenarioName::GreenletSwitch),
        HubScenario::DrainParks,
    ];

    /// The command-line name.
    ///
    /// ```
    /// use greenlet::interp_shim::explore::HubScenario;
    /// assert_eq!(HubScenario::DrainParks.name(), "drain-parks");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            HubScenario::Shared(name) => name.name(),
            HubScenario::DrainParks => "drain-parks",
        }
    }

    /// The scenario's programs.
    ///
    /// ```
    /// use greenlet::interp_shim::explore::HubScenario;
    /// assert_eq!(HubScenario::DrainParks.build().dying_threads(), 3);
    /// ```
    pub fn build(self) -> Scenario {
        match self {
            HubScenario::Shared(name) => name.build(),
            HubScenario::DrainParks => hub_drain_parks(),
        }
    }

    /// How many workers the runtime has.
    ///
    /// ```
    /// use greenlet::interp_shim::explore::{HubScenario, ScenarioName};
    /// assert_eq!(HubScenario::DrainParks.workers(), 2);
    /// assert_eq!(HubScenario::Shared(ScenarioName::Seed).workers(), 1);
    /// ```
    pub fn workers(self) -> usize {
        match self {
            HubScenario::Shared(_) => 1,
            HubScenario::DrainParks => 2,
        }
    }
}

impl fmt::Display for HubScenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scenario name the hub does not run.
///
/// ```
/// use greenlet::interp_shim::explore::{HubScenario, UnknownHubScenario};
/// let err: UnknownHubScenario = "ring".parse::<HubScenario>().unwrap_err();
/// assert_eq!(err.given, "ring");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown hub scenario {given:?}: expected one of seed, churn, full-ring, finalization, foreign-call, greenlet-switch, drain-parks")]
pub struct UnknownHubScenario {
    /// What was given.
    pub given: String,
}

impl FromStr for HubScenario {
    type Err = UnknownHubScenario;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HubScenario::ALL
            .into_iter()
            .find(|n| n.name() == s)
            .ok_or_else(|| UnknownHubScenario {
                given: s.to_string(),
            })
    }
}

/// The slot's rules as the live slot has them, or with one rule broken on
/// purpose, to show that the explorer catches it.
///
/// ```
/// use greenlet::interp_shim::explore::SlotRules;
/// assert_eq!("no-busy".parse::<SlotRules>().unwrap(), SlotRules::NoBusyFlag);
/// assert_eq!(SlotRules::Real.to_string(), "real");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SlotRules {
    /// `src/hub/pending.rs` as it is.
    Real,
    /// Rule 2 without the CAS on `busy`: every scheduling point that sees
    /// `has_calls` starts a drain.
    NoBusyFlag,
    /// Rule 3's pop finds the ring empty under the lock but clears
    /// `has_calls` only after releasing it.
    ClearOutsideLock,
    /// Rule 6 without the close: the shutdown drain's last pop leaves the
    /// slot open.
    NoCloseAtShutdown,
    /// Rule 7 undone: the cleanup queue's call counts against the capacity
    /// (a full slot is a failed schedule, left to the policy).
    CleanupCounted,
    /// Rule 2's sleep test without `busy`: a worker with nothing to run
    /// does not sleep while `has_calls` is set, even with a drain parked.
    SpinWhileBusy,
    /// Rule 2 still starting drains once the runtime is shutting down
    /// (each is dropped unrun by the worker's start).
    DrainAtShutdown,
}

impl SlotRules {
    /// Every variant, the real one first.
    pub const ALL: [SlotRules; 7] = [
        SlotRules::Real,
        SlotRules::NoBusyFlag,
        SlotRules::ClearOutsideLock,
        SlotRules::NoCloseAtShutdown,
        SlotRules::CleanupCounted,
        SlotRules::SpinWhileBusy,
        SlotRules::DrainAtShutdown,
    ];

    /// The command-line name.
    ///
    /// ```
    /// use greenlet::interp_shim::explore::SlotRules;
    /// let names: Vec<&str> = SlotRules::ALL.iter().map(|r| r.name()).collect();
    /// assert_eq!(names[0], "real");
    /// assert!(names.iter().all(|n| n.parse::<SlotRules>().unwrap().name() == *n));
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            SlotRules::Real => "real",
            SlotRules::NoBusyFlag => "no-busy",
            SlotRules::ClearOutsideLock => "clear-outside-lock",
            SlotRules::NoCloseAtShutdown => "no-close",
            SlotRules::CleanupCounted => "cleanup-counted",
            SlotRules::SpinWhileBusy => "spin-while-busy",
            SlotRules::DrainAtShutdown => "drain-at-shutdown",
        }
    }
}

impl fmt::Display for SlotRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A slot-rules name that is not one of [`SlotRules::ALL`].
///
/// ```
/// use greenlet::interp_shim::explore::{SlotRules, UnknownSlotRules};
/// let err: UnknownSlotRules = "loose".parse::<SlotRules>().unwrap_err();
/// assert!(err.to_string().contains("spin-while-busy"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown slot rules {given:?}: expected one of real, no-busy, clear-outside-lock, no-close, cleanup-counted, spin-while-busy, drain-at-shutdown")]
pub struct UnknownSlotRules {
    /// What was given.
    pub given: String,
}

impl FromStr for SlotRules {
    type Err = UnknownSlotRules;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SlotRules::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| UnknownSlotRules {
                given: s.to_string(),
            })
    }
}

/// One cell of the hub's table: a scenario and a policy.
///
/// ```
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::explore::{HubCell, HubScenario};
///
/// let cell = HubCell { scenario: HubScenario::DrainParks, policy: Policy::Legacy };
/// assert_eq!(cell.to_string(), "drain-parks on the hub policy legacy");
/// assert_eq!(HubCell::all().len(), 7 * 5);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HubCell {
    /// The scenario.
    pub scenario: HubScenario,
    /// The cleanup policy.
    pub policy: Policy,
}

impl HubCell {
    /// Every cell: scenarios × policies.
    ///
    /// ```
    /// use greenlet::interp_shim::explore::HubCell;
    /// assert!(HubCell::all().iter().all(|c| c.scenario.workers() >= 1));
    /// ```
    pub fn all() -> Vec<HubCell> {
        let mut cells = Vec::new();
        for scenario in HubScenario::ALL {
            for policy in Policy::ALL {
                cells.push(HubCell { scenario, policy });
            }
        }
        cells
    }
}

impl fmt::Display for HubCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on the hub policy {}", self.scenario, self.policy)
    }
}

impl ExploreCell for HubCell {
    fn columns(&self) -> String {
        format!("{}\thub\t{}\t-", self.scenario, self.policy)
    }
    fn explore(self, bound: usize) -> Result<Verdict<HubCell>, BoundExceeded<HubCell>> {
        explore_hub(self, SlotRules::Real, bound)
    }
}

/// Explore every interleaving of `cell` on the hub under `rules`, up to
/// `bound` distinct states.
///
/// # Errors
/// [`BoundExceeded`] if the cell has more than `bound` states.
///
/// ```
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::explore::{explore_hub, HubCell, HubScenario, ScenarioName, SlotRules, DEFAULT_BOUND};
///
/// let full_ring = |policy| HubCell { scenario: HubScenario::Shared(ScenarioName::FullRing), policy };
/// // The slot never refuses the cleanup queue's call (rule 7): no leak.
/// let legacy = explore_hub(full_ring(Policy::Legacy), SlotRules::Real, DEFAULT_BOUND).unwrap();
/// assert!(!legacy.leak_reachable() && !legacy.livelock_reachable());
/// // Counted against the capacity, a full slot strands legacy's state.
/// let counted = explore_hub(full_ring(Policy::Legacy), SlotRules::CleanupCounted, DEFAULT_BOUND);
/// assert!(counted.unwrap().leak_reachable());
/// assert!(explore_hub(full_ring(Policy::Robust), SlotRules::Real, 10).is_err());
/// ```
pub fn explore_hub(
    cell: HubCell,
    rules: SlotRules,
    bound: usize,
) -> Result<Verdict<HubCell>, BoundExceeded<HubCell>> {
    let scenario = cell.scenario.build();
    let host = HubHost {
        model: HubModel {
            progs: Programs {
                scenario: &scenario,
            },
            policy: cell.policy,
            rules,
            workers: cell.scenario.workers(),
        },
    };
    search(&host, cell, bound)
}
