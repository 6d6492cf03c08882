//! The hub's pending-call slot as an explorer host, beside CPython
//! 3.11/3.12/3.13: the same scenarios (and one of its own, `drain-parks`)
//! run on green threads over hub workers, with every cleanup policy, over
//! every interleaving.
//!
//! Owns: [`HubScenario`], [`HubCell`], [`SlotRules`], [`explore_hub`] and
//! the host's state and transitions (internal). Uses the slot's own rules
//! as pure steps from `crate::hub::pending` ([`Ring`]'s `add`, `pop` and
//! `pop_at_shutdown`, `wants_drain`, `claim_busy`, `drain_goes_on`,
//! `end_drain`): the explorer checks the code the live slot runs, not a
//! copy. Uses [`QueueCore`] for the policy, the scenarios' programs, and
//! the breadth-first search of [`super::search`].
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

use std::fmt;
use std::str::FromStr;

use crate::cleanup::{Policy, PushAction, QueueCore, Retry};
use crate::hub::pending::{drain_goes_on, end_drain, may_sleep, wants_drain, Flags, Refused, Ring};

use super::model::{Model, ProgRef, StateToken};
use super::scenario::{hub_drain_parks, Cond, Op, Scenario, ScenarioName, ThreadOp};
use super::search::{search, BoundExceeded, Host, Verdict};
use super::ExploreCell;

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
    let host = HubModel {
        model: Model {
            scenario: &scenario,
        },
        policy: cell.policy,
        rules,
        workers: cell.scenario.workers(),
    };
    search(&host, cell, bound)
}

/// A call in the slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Call {
    /// `HubScheduler`'s call: `queue.drain()`.
    Drain,
    /// Another call, returning at once.
    Other,
    /// Another extension's call that runs the scenario's foreign-call program.
    Foreign,
}

/// The slot's flags as plain booleans, and the clear that
/// [`SlotRules::ClearOutsideLock`] holds back until after the lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
struct PlainFlags {
    has_calls: bool,
    busy: bool,
    deferred_clear: bool,
}

/// The flags as one rule set sees them.
struct Bent<'a> {
    flags: &'a mut PlainFlags,
    rules: SlotRules,
}

impl Flags for Bent<'_> {
    fn has_calls(&self) -> bool {
        self.flags.has_calls
    }
    fn set_has_calls(&mut self, to: bool) {
        if !to && self.rules == SlotRules::ClearOutsideLock {
            self.flags.deferred_clear = true;
        } else {
            self.flags.has_calls = to;
        }
    }
    fn claim_busy(&mut self) -> bool {
        let free = !self.flags.busy || self.rules == SlotRules::NoBusyFlag;
        self.flags.busy = true;
        free
    }
    fn release_busy(&mut self) {
        self.flags.busy = false;
    }
    fn busy(&self) -> bool {
        self.flags.busy
    }
}

/// Where a worker is in its round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum WorkerAt {
    /// The top of a round: rule 2's read of `has_calls` next.
    Top,
    /// Rule 2's CAS on `busy` next.
    Claim,
    /// About to run a ready task, exit, or go idle.
    Pick,
    /// Running a task.
    Running,
    /// Sleeping in its poller.
    Asleep,
    /// Left its loop at shutdown.
    Exited,
}

/// Where a green thread is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Park {
    Ready,
    Running,
    /// Parked on a timer (`time.sleep`).
    Timer,
    /// Parked until the condition holds.
    Until(Cond),
    Done,
}

/// Where a pending-call drain is (rule 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum SlotAt {
    /// Pop the next call (or stop at the bound).
    Pop,
    /// [`SlotRules::ClearOutsideLock`]: the held-back clear.
    Clear,
    /// Release `busy` and end.
    End,
}

/// Where `CleanupQueue::drain` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum CleanupAt {
    Begin,
    Next,
    End,
}

/// A frame of a green thread or a plain thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Frame {
    Code {
        prog: ProgRef,
        pc: u8,
    },
    /// The pending-call drain's loop, `ran` calls so far.
    Slot {
        ran: u8,
        at: SlotAt,
    },
    /// `CleanupQueue::drain`.
    Cleanup(CleanupAt),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Task {
    worker: u8,
    park: Park,
    frames: Vec<Frame>,
    /// Resumed at least once (a task not yet started when the shutdown
    /// begins is dropped unrun).
    started: bool,
}

/// A dying thread: its operation, the sub-step of a death, the frames of a
/// drain it runs on itself, and what it waits for there.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct DyingAt {
    pc: u8,
    sub: u8,
    inline: Vec<Frame>,
    blocked: Option<Cond>,
}

// Sub-steps of ThreadOp::Die.
const DIE_PUSH: u8 = 0;
const DIE_CHECK: u8 = 1;
const DIE_ADD: u8 = 2;
const DIE_NOTIFY: u8 = 3;
const DIE_FAILED: u8 = 4;
const DIE_INLINE: u8 = 5;

/// The shutdown, on the thread that called `block_on`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ShutAt {
    /// Not begun.
    No,
    /// Begun: waiting for the workers to exit.
    Begun,
    /// Rule 6: running the calls the slot still holds.
    Calls,
    /// Draining the cleanup queue.
    Queue,
    /// The runtime is gone.
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct HubState {
    ring: Ring<Call>,
    flags: PlainFlags,
    queue: QueueCore<StateToken>,
    workers: Vec<WorkerAt>,
    main: Task,
    drains: Vec<Task>,
    dying: Vec<DyingAt>,
    shut: ShutAt,
    shut_frames: Vec<Frame>,
    events: u8,
    /// A worker with nothing to run stayed awake while a drain ran.
    spun_while_busy: bool,
}

/// Who took a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Who {
    Worker(u8),
    Main,
    Drain(u8),
    Dying(u8),
    Shutdown,
}

/// What a step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Act {
    ReadHasCalls(bool),
    Claim(bool),
    DroppedUnrun(bool, bool),
    Run(Who),
    Spin,
    Sleep,
    Exit,
    Woken,
    Notify(Option<u8>),
    Test(Cond, bool),
    Park(Park),
    SetEvent(u8),
    AddForeign(bool),
    Shutdown,
    Pop(Option<Call>),
    Bound,
    ClearLate,
    EndDrain(bool),
    CleanupBegin,
    CleanupPop(Option<StateToken>),
    CleanupEnd,
    Push(&'static str),
    Check(bool),
    Add(&'static str),
    ScheduleFailed(Retry),
    Waited(Cond),
    Touch,
    Return,
    PlainSleep,
    WorkersExited,
    ShutdownPop(Option<Call>),
    Gone,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct HubStep {
    who: Who,
    act: Act,
}

/// A context whose frames a step runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ctx {
    Main,
    Drain(usize),
    Dying(usize),
    Shutdown,
}

struct HubModel<'a> {
    model: Model<'a>,
    policy: Policy,
    rules: SlotRules,
    workers: usize,
}

/// At most this many drains are followed at once (a second is already a
/// violation).
const MAX_DRAINS: usize = 2;

impl HubModel<'_> {
    fn scenario(&self) -> &Scenario {
        self.model.scenario
    }

    fn bent<'s>(&self, flags: &'s mut PlainFlags) -> Bent<'s> {
        Bent {
            flags,
            rules: self.rules,
        }
    }

    fn cond(&self, st: &HubState, c: Cond) -> bool {
        match c {
            Cond::QueueNonEmpty => !st.queue.is_empty(),
            Cond::RingEmpty => st.ring.len() == 0,
            Cond::Event(n) => st.events & (1 << n) != 0,
            Cond::ThreadExited(n) => {
                let t = n as usize;
                let ops = &self.scenario().threads[t].ops;
                ops[st.dying[t].pc as usize..]
                    .iter()
                    .all(|op| *op == ThreadOp::Die)
            }
        }
    }

    fn dying_done(&self, st: &HubState, t: usize) -> bool {
        st.dying[t].pc as usize >= self.scenario().threads[t].ops.len()
    }

    fn frames_mut<'s>(&self, st: &'s mut HubState, ctx: Ctx) -> &'s mut Vec<Frame> {
        match ctx {
            Ctx::Main => &mut st.main.frames,
            Ctx::Drain(i) => &mut st.drains[i].frames,
            Ctx::Dying(t) => &mut st.dying[t].inline,
            Ctx::Shutdown => &mut st.shut_frames,
        }
    }

    /// Skip what takes no step on the hub (function entries, check sites,
    /// loops' jumps, greenlet switches, `_Py_FinishPendingCalls`), and pop
    /// code frames that ended.
    fn settle(&self, frames: &mut Vec<Frame>) {
        for _ in 0..64 {
            let Some(Frame::Code { prog, pc }) = frames.last_mut() else {
                return;
            };
            let ops = self.model.ops(*prog);
            match ops.get(*pc as usize) {
                None => {
                    frames.pop();
                }
                Some(Op::Loop(target)) => *pc = *target,
                Some(Op::Enter(_) | Op::AfterCall | Op::Switch(_) | Op::FinishPendingCalls) => {
                    *pc += 1
                }
                Some(_) => return,
            }
        }
    }

    fn advance(&self, frames: &mut Vec<Frame>) {
        if let Some(Frame::Code { pc, .. }) = frames.last_mut() {
            *pc += 1;
        }
        self.settle(frames);
    }

    fn call(&self, frames: &mut Vec<Frame>, prog: ProgRef) {
        frames.push(Frame::Code { prog, pc: 0 });
        self.settle(frames);
    }

    /// The frame a popped call runs in.
    fn run_call(&self, frames: &mut Vec<Frame>, call: Call) {
        match call {
            Call::Drain => frames.push(Frame::Cleanup(CleanupAt::Begin)),
            Call::Foreign => self.call(frames, ProgRef::ForeignCall),
            Call::Other => {}
        }
    }

    /// `Shared::notify_idle`: wake one sleeping worker, any of them (the
    /// live one starts from a rotating index); none asleep: nothing.
    fn notify(&self, st: &HubState, mut then: impl FnMut(Option<u8>, HubState)) {
        let asleep: Vec<usize> = (0..st.workers.len())
            .filter(|&w| st.workers[w] == WorkerAt::Asleep)
            .collect();
        if asleep.is_empty() {
            then(None, st.clone());
        }
        for w in asleep {
            let mut s = st.clone();
            s.workers[w] = WorkerAt::Top;
            then(Some(w as u8), s);
        }
    }

    /// A green thread finished its current piece of work (parked or
    /// ended): its worker goes back to the top of its round.
    fn yield_to_hub(st: &mut HubState, ctx: Ctx, park: Park) {
        let task = match ctx {
            Ctx::Main => &mut st.main,
            Ctx::Drain(i) => &mut st.drains[i],
            _ => return,
        };
        task.park = park;
        let w = task.worker as usize;
        st.workers[w] = WorkerAt::Top;
        if park == Park::Done {
            if let Ctx::Drain(i) = ctx {
                st.drains.remove(i);
            }
        }
    }

    fn is_task(ctx: Ctx) -> bool {
        matches!(ctx, Ctx::Main | Ctx::Drain(_))
    }

    /// One step of the top frame of `ctx` (running on its worker, or a
    /// plain thread).
    fn frame_step(&self, st: &HubState, ctx: Ctx, who: Who, out: &mut Vec<(HubStep, HubState)>) {
        let mut push = |act: Act, s: HubState| out.push((HubStep { who, act }, s));
        let mut s = st.clone();
        let Some(&top) = self.frames_mut(&mut s, ctx).last() else {
            // A green thread whose program ended returns to its hub.
            if Self::is_task(ctx) {
                Self::yield_to_hub(&mut s, ctx, Park::Done);
                push(Act::Return, s);
            }
            return;
        };
        let shutting = st.shut != ShutAt::No;
        match top {
            Frame::Code { prog, pc } => match self.model.ops(prog)[pc as usize] {
                Op::JumpIf(c, target) => {
                    let holds = self.cond(st, c);
                    let frames = self.frames_mut(&mut s, ctx);
                    if holds {
                        if let Some(Frame::Code { pc, .. }) = frames.last_mut() {
                            *pc = target;
                        }
                        self.settle(frames);
                    } else {
                        self.advance(frames);
                    }
                    self.after_frames(&mut s, ctx);
                    push(Act::Test(c, holds), s);
                }
                op @ (Op::Sleep | Op::Block(_)) => {
                    let park = match op {
                        Op::Block(c) => Park::Until(c),
                        _ => Park::Timer,
                    };
                    self.advance(self.frames_mut(&mut s, ctx));
                    if Self::is_task(ctx) && !shutting {
                        // Parked: the worker goes back to its loop.
                        Self::yield_to_hub(&mut s, ctx, park);
                        push(Act::Park(park), s);
                    } else if let (Park::Until(c), Ctx::Dying(t)) = (park, ctx) {
                        s.dying[t].blocked = Some(c);
                        push(Act::Park(park), s);
                    } else {
                        // A plain thread's sleep, or a park cancelled by
                        // the shutdown: returns at once. (A call parked on
                        // the live drain is unwound instead, which ends
                        // that drain, `pending::run_call`; the calls left
                        // then run at shutdown, rule 6. Modelled here as a
                        // return after which the drain goes on: either way
                        // each queued call runs once.)
                        self.after_frames(&mut s, ctx);
                        push(Act::PlainSleep, s);
                    }
                }
                Op::SetEvent(n) => {
                    s.events |= 1 << n;
                    self.advance(self.frames_mut(&mut s, ctx));
                    self.after_frames(&mut s, ctx);
                    push(Act::SetEvent(n), s);
                }
                Op::PushPythonCall => {
                    // Handle::add_pending_call: refused while shutting
                    // down; else rule 1 under the lock.
                    let mut flags = s.flags;
                    let ok = !shutting
                        && s.ring
                            .add(&mut self.bent(&mut flags), Call::Foreign)
                            .is_ok();
                    s.flags = flags;
                    self.advance(self.frames_mut(&mut s, ctx));
                    self.after_frames(&mut s, ctx);
                    push(Act::AddForeign(ok), s);
                }
                Op::SignalPendingCalls => {
                    // The same add's wake of an idle worker, after the lock.
                    self.advance(self.frames_mut(&mut s, ctx));
                    self.after_frames(&mut s, ctx);
                    self.notify(&s, |w, s2| push(Act::Notify(w), s2));
                }
                Op::Finalize => {
                    // The runtime shuts down: the main task returns, every
                    // worker is woken to cancel what is left.
                    s.shut = ShutAt::Begun;
                    for w in s.workers.iter_mut() {
                        if *w == WorkerAt::Asleep {
                            *w = WorkerAt::Top;
                        }
                    }
                    s.main.frames.clear();
                    Self::yield_to_hub(&mut s, Ctx::Main, Park::Done);
                    push(Act::Shutdown, s);
                }
                // settle() skipped every other operation.
                _ => {}
            },
            Frame::Slot { ran, at } => match at {
                SlotAt::Pop => {
                    if !drain_goes_on(ran as usize, st.ring.capacity()) {
                        self.set_slot(&mut s, ctx, ran, SlotAt::End);
                        push(Act::Bound, s);
                        return;
                    }
                    let mut flags = s.flags;
                    let call = s.ring.pop(&mut self.bent(&mut flags));
                    s.flags = flags;
                    match call {
                        Some(call) => {
                            self.set_slot(&mut s, ctx, ran + 1, SlotAt::Pop);
                            self.run_call(self.frames_mut(&mut s, ctx), call);
                        }
                        None if s.flags.deferred_clear => {
                            self.set_slot(&mut s, ctx, ran, SlotAt::Clear)
                        }
                        None => self.set_slot(&mut s, ctx, ran, SlotAt::End),
                    }
                    push(Act::Pop(call), s);
                }
                SlotAt::Clear => {
                    s.flags.has_calls = false;
                    s.flags.deferred_clear = false;
                    self.set_slot(&mut s, ctx, ran, SlotAt::End);
                    push(Act::ClearLate, s);
                }
                SlotAt::End => {
                    let mut flags = s.flags;
                    let wake = end_drain(&mut self.bent(&mut flags));
                    s.flags = flags;
                    self.frames_mut(&mut s, ctx).clear();
                    Self::yield_to_hub(&mut s, ctx, Park::Done);
                    if wake {
                        self.notify(&s, |_, s2| push(Act::EndDrain(true), s2));
                    } else {
                        push(Act::EndDrain(false), s);
                    }
                }
            },
            Frame::Cleanup(at) => {
                let frames_top = |s: &mut HubState, at: CleanupAt| {
                    if let Some(f) = self.frames_mut(s, ctx).last_mut() {
                        *f = Frame::Cleanup(at);
                    }
                };
                match at {
                    CleanupAt::Begin => {
                        s.queue.drain_begin();
                        frames_top(&mut s, CleanupAt::Next);
                        push(Act::CleanupBegin, s);
                    }
                    CleanupAt::Next => {
                        let next = s.queue.drain_next();
                        match next {
                            Some(token) => {
                                self.call(self.frames_mut(&mut s, ctx), ProgRef::Finalizer(token))
                            }
                            None => frames_top(&mut s, CleanupAt::End),
                        }
                        push(Act::CleanupPop(next), s);
                    }
                    CleanupAt::End => {
                        s.queue.drain_end();
                        self.frames_mut(&mut s, ctx).pop();
                        self.after_frames(&mut s, ctx);
                        push(Act::CleanupEnd, s);
                    }
                }
            }
        }
    }

    /// Rule 2's sleep test, as the rule set has it.
    fn may_sleep(&self, flags: &mut PlainFlags) -> bool {
        let bent = self.bent(flags);
        if self.rules == SlotRules::SpinWhileBusy {
            !wants_drain(&bent)
        } else {
            may_sleep(&bent)
        }
    }

    fn set_slot(&self, s: &mut HubState, ctx: Ctx, ran: u8, at: SlotAt) {
        if let Some(f @ Frame::Slot { .. }) = self.frames_mut(s, ctx).last_mut() {
            *f = Frame::Slot { ran, at };
        }
    }

    /// After a step of `ctx`'s frames: a dying thread whose drain on itself
    /// ended has finished its death.
    fn after_frames(&self, s: &mut HubState, ctx: Ctx) {
        if !self.frames_mut(s, ctx).is_empty() {
            return;
        }
        if let Ctx::Dying(t) = ctx {
            if s.dying[t].sub == DIE_INLINE {
                s.dying[t].pc += 1;
                s.dying[t].sub = DIE_PUSH;
            }
        }
    }

    fn worker_steps(&self, st: &HubState, w: usize, out: &mut Vec<(HubStep, HubState)>) {
        let who = Who::Worker(w as u8);
        let mut push = |act: Act, s: HubState| out.push((HubStep { who, act }, s));
        let mut s = st.clone();
        match st.workers[w] {
            WorkerAt::Top => {
                // Rule 2: the scheduling point's read (none once shutting
                // down, unless the rule is broken).
                let wants = (st.shut == ShutAt::No || self.rules == SlotRules::DrainAtShutdown)
                    && wants_drain(&self.bent(&mut s.flags));
                s.workers[w] = if wants {
                    WorkerAt::Claim
                } else {
                    WorkerAt::Pick
                };
                push(Act::ReadHasCalls(wants), s);
            }
            WorkerAt::Claim => {
                // Rule 2: the CAS on busy.
                let mut flags = s.flags;
                let claimed = s.drains.len() < MAX_DRAINS && self.bent(&mut flags).claim_busy();
                s.workers[w] = WorkerAt::Pick;
                if !claimed {
                    push(Act::Claim(false), s);
                    return;
                }
                s.flags = flags;
                s.drains.push(Task {
                    worker: w as u8,
                    started: false,
                    park: Park::Ready,
                    frames: vec![Frame::Slot {
                        ran: 0,
                        at: SlotAt::Pop,
                    }],
                });
                push(Act::Claim(true), s);
            }
            WorkerAt::Pick => {
                let ready = |t: &Task| t.worker as usize == w && t.park == Park::Ready;
                if let Some(i) = st.drains.iter().position(ready) {
                    if !st.drains[i].started {
                        // Worker::start drops the drain unrun once the
                        // shutdown began, or (rule 5) may find no stack for
                        // it; its dropped closure releases busy.
                        let mut dropped = s.clone();
                        dropped.drains.remove(i);
                        let mut flags = dropped.flags;
                        let wake = end_drain(&mut self.bent(&mut flags));
                        dropped.flags = flags;
                        dropped.workers[w] = WorkerAt::Top;
                        let shutting = st.shut != ShutAt::No;
                        if wake {
                            self.notify(&dropped, |_, s2| {
                                push(Act::DroppedUnrun(shutting, true), s2)
                            });
                        } else {
                            push(Act::DroppedUnrun(shutting, false), dropped);
                        }
                        if shutting {
                            return;
                        }
                    }
                    s.drains[i].park = Park::Running;
                    s.drains[i].started = true;
                    s.workers[w] = WorkerAt::Running;
                    push(Act::Run(Who::Drain(i as u8)), s);
                } else if ready(&st.main) {
                    s.main.park = Park::Running;
                    s.workers[w] = WorkerAt::Running;
                    push(Act::Run(Who::Main), s);
                } else if st.shut != ShutAt::No
                    && !st
                        .drains
                        .iter()
                        .chain(std::iter::once(&st.main))
                        .any(|t| t.worker as usize == w && t.park != Park::Done)
                {
                    s.workers[w] = WorkerAt::Exited;
                    push(Act::Exit, s);
                } else if !self.may_sleep(&mut s.flags) {
                    // Rule 2: not asleep while a drain could start.
                    s.spun_while_busy |= s.flags.busy;
                    s.workers[w] = WorkerAt::Top;
                    push(Act::Spin, s);
                } else {
                    s.workers[w] = WorkerAt::Asleep;
                    push(Act::Sleep, s);
                }
            }
            WorkerAt::Running | WorkerAt::Asleep | WorkerAt::Exited => {}
        }
    }

    /// A parked green thread's wake: a timer fires (at any later moment), a
    /// condition it waits for holds, or the shutdown cancels it.
    fn wake_steps(&self, st: &HubState, ctx: Ctx, who: Who, out: &mut Vec<(HubStep, HubState)>) {
        let task = match ctx {
            Ctx::Main => &st.main,
            Ctx::Drain(i) => &st.drains[i],
            _ => return,
        };
        let due = match task.park {
            Park::Timer => true,
            Park::Until(c) => self.cond(st, c) || st.shut != ShutAt::No,
            _ => false,
        };
        if !due {
            return;
        }
        let mut s = st.clone();
        let w = task.worker as usize;
        match ctx {
            Ctx::Main => s.main.park = Park::Ready,
            Ctx::Drain(i) => s.drains[i].park = Park::Ready,
            _ => {}
        }
        if s.workers[w] == WorkerAt::Asleep {
            s.workers[w] = WorkerAt::Top;
        }
        out.push((
            HubStep {
                who,
                act: Act::Woken,
            },
            s,
        ));
    }

    fn dying_steps(&self, st: &HubState, t: usize, out: &mut Vec<(HubStep, HubState)>) {
        let who = Who::Dying(t as u8);
        let d = &st.dying[t];
        let Some(&op) = self.scenario().threads[t].ops.get(d.pc as usize) else {
            return;
        };
        if let Some(c) = d.blocked {
            if self.cond(st, c) {
                let mut s = st.clone();
                s.dying[t].blocked = None;
                self.after_frames(&mut s, Ctx::Dying(t));
                out.push((
                    HubStep {
                        who,
                        act: Act::Waited(c),
                    },
                    s,
                ));
            }
            return;
        }
        if d.sub == DIE_INLINE {
            return self.frame_step(st, Ctx::Dying(t), who, out);
        }
        let mut push = |act: Act, s: HubState| out.push((HubStep { who, act }, s));
        let mut s = st.clone();
        let set = |s: &mut HubState, pc: u8, sub: u8| {
            s.dying[t].pc = pc;
            s.dying[t].sub = sub;
        };
        let pc = d.pc;
        match op {
            ThreadOp::Python => {
                // Touching greenlet state takes no lock of the hub's.
                set(&mut s, pc + 1, DIE_PUSH);
                push(Act::Touch, s);
            }
            ThreadOp::Wait(c) => {
                if self.cond(st, c) {
                    set(&mut s, pc + 1, DIE_PUSH);
                    push(Act::Waited(c), s);
                }
            }
            ThreadOp::Die => match d.sub {
                DIE_PUSH => {
                    let what = match s.queue.push(t as StateToken) {
                        PushAction::Schedule => {
                            set(&mut s, pc, DIE_CHECK);
                            "schedule"
                        }
                        PushAction::Nothing => {
                            set(&mut s, pc + 1, DIE_PUSH);
                            "nothing"
                        }
                        PushAction::Leaked(_) => {
                            set(&mut s, pc + 1, DIE_PUSH);
                            "leaked"
                        }
                    };
                    push(Act::Push(what), s);
                }
                DIE_CHECK => {
                    // HubScheduler::schedule: the runtime gone or shutting
                    // down: drain here.
                    let down = st.shut != ShutAt::No;
                    if down {
                        self.inline_drain(&mut s, t);
                    } else {
                        set(&mut s, pc, DIE_ADD);
                    }
                    push(Act::Check(down), s);
                }
                DIE_ADD => {
                    let mut flags = s.flags;
                    let mut bent = self.bent(&mut flags);
                    let added = if self.rules == SlotRules::CleanupCounted {
                        s.ring.add(&mut bent, Call::Drain)
                    } else {
                        s.ring.add_cleanup(&mut bent, Call::Drain)
                    };
                    s.flags = flags;
                    let what = match added {
                        Ok(()) => {
                            set(&mut s, pc, DIE_NOTIFY);
                            "ok"
                        }
                        Err(Refused::Full(_)) => {
                            set(&mut s, pc, DIE_FAILED);
                            "full"
                        }
                        Err(Refused::Closed(_)) => {
                            self.inline_drain(&mut s, t);
                            "closed: drain here"
                        }
                    };
                    push(Act::Add(what), s);
                }
                DIE_NOTIFY => {
                    set(&mut s, pc + 1, DIE_PUSH);
                    self.notify(&s, |w, s2| push(Act::Notify(w), s2));
                }
                _ => {
                    let retry = s.queue.schedule_failed();
                    if retry == Retry::Schedule {
                        set(&mut s, pc, DIE_CHECK);
                    } else {
                        set(&mut s, pc + 1, DIE_PUSH);
                    }
                    push(Act::ScheduleFailed(retry), s);
                }
            },
        }
    }

    fn inline_drain(&self, s: &mut HubState, t: usize) {
        s.dying[t].sub = DIE_INLINE;
        s.dying[t].inline = vec![Frame::Cleanup(CleanupAt::Begin)];
    }

    fn shutdown_steps(&self, st: &HubState, out: &mut Vec<(HubStep, HubState)>) {
        let who = Who::Shutdown;
        let mut s = st.clone();
        match st.shut {
            ShutAt::Begun => {
                if st.workers.iter().all(|w| *w == WorkerAt::Exited) {
                    s.shut = ShutAt::Calls;
                    out.push((
                        HubStep {
                            who,
                            act: Act::WorkersExited,
                        },
                        s,
                    ));
                }
            }
            ShutAt::Calls if st.shut_frames.is_empty() => {
                // Rule 6: the next call still in the slot, on this thread.
                let mut flags = s.flags;
                let mut bent = self.bent(&mut flags);
                let call = if self.rules == SlotRules::NoCloseAtShutdown {
                    s.ring.pop(&mut bent)
                } else {
                    s.ring.pop_at_shutdown(&mut bent)
                };
                s.flags = flags;
                match call {
                    Some(call) => self.run_call(&mut s.shut_frames, call),
                    None => {
                        s.shut = ShutAt::Queue;
                        s.shut_frames = vec![Frame::Cleanup(CleanupAt::Begin)];
                    }
                }
                out.push((
                    HubStep {
                        who,
                        act: Act::ShutdownPop(call),
                    },
                    s,
                ));
            }
            ShutAt::Queue if st.shut_frames.is_empty() => {
                s.shut = ShutAt::Done;
                out.push((
                    HubStep {
                        who,
                        act: Act::Gone,
                    },
                    s,
                ));
            }
            ShutAt::Calls | ShutAt::Queue => self.frame_step(st, Ctx::Shutdown, who, out),
            ShutAt::No | ShutAt::Done => {}
        }
    }

    fn task_text(&self, t: &Task) -> String {
        let park = match t.park {
            Park::Ready => "ready".to_string(),
            Park::Running => "running".to_string(),
            Park::Timer => "parked on a timer".to_string(),
            Park::Until(c) => format!("parked until {c:?}"),
            Park::Done => "done".to_string(),
        };
        format!("W{} {park} [{}]", t.worker, self.frames_text(&t.frames))
    }

    fn frames_text(&self, frames: &[Frame]) -> String {
        let parts: Vec<String> = frames
            .iter()
            .rev()
            .map(|f| match *f {
                Frame::Code { prog, pc } => format!("{}@{pc}", self.model.prog_name(prog)),
                Frame::Slot { ran, at } => format!("slot drain[ran {ran}, {at:?}]"),
                Frame::Cleanup(at) => format!("CleanupQueue::drain[{at:?}]"),
            })
            .collect();
        parts.join(" < ")
    }

    fn who_text(&self, who: Who) -> String {
        match who {
            Who::Worker(w) => format!("W{w} worker"),
            Who::Main => "G main (green)".into(),
            Who::Drain(i) => format!("G drain#{i} (green)"),
            Who::Dying(t) => format!("T{} {}", t + 1, self.scenario().threads[t as usize].name),
            Who::Shutdown => "T0 shutdown".into(),
        }
    }
}

impl Host for HubModel<'_> {
    type State = HubState;
    type Step = HubStep;
    const LIVELOCK_IS_NO_PROGRESS: bool = true;

    fn initial(&self) -> HubState {
        let mut ring = Ring::new(HUB_CAPACITY);
        let mut flags = PlainFlags::default();
        if self.scenario().ring_full_at_start {
            while ring.add(&mut self.bent(&mut flags), Call::Other).is_ok() {}
        }
        let mut main = vec![Frame::Code {
            prog: ProgRef::Main,
            pc: 0,
        }];
        self.settle(&mut main);
        HubState {
            ring,
            flags,
            queue: QueueCore::new(self.policy),
            workers: vec![WorkerAt::Top; self.workers],
            main: Task {
                worker: 0,
                started: true,
                park: Park::Ready,
                frames: main,
            },
            drains: Vec::new(),
            dying: vec![
                DyingAt {
                    pc: 0,
                    sub: DIE_PUSH,
                    inline: Vec::new(),
                    blocked: None,
                };
                self.scenario().threads.len()
            ],
            shut: ShutAt::No,
            shut_frames: Vec::new(),
            events: 0,
            spun_while_busy: false,
        }
    }

    fn successors(&self, st: &HubState, out: &mut Vec<(HubStep, HubState)>) {
        out.clear();
        for w in 0..st.workers.len() {
            self.worker_steps(st, w, out);
        }
        match st.main.park {
            Park::Running => self.frame_step(st, Ctx::Main, Who::Main, out),
            _ => self.wake_steps(st, Ctx::Main, Who::Main, out),
        }
        for i in 0..st.drains.len() {
            let who = Who::Drain(i as u8);
            match st.drains[i].park {
                Park::Running => self.frame_step(st, Ctx::Drain(i), who, out),
                _ => self.wake_steps(st, Ctx::Drain(i), who, out),
            }
        }
        for t in 0..st.dying.len() {
            self.dying_steps(st, t, out);
        }
        self.shutdown_steps(st, out);
    }

    fn queue<'s>(&self, st: &'s HubState) -> &'s QueueCore<StateToken> {
        &st.queue
    }

    fn quiescent(&self, st: &HubState) -> bool {
        let idle = st.shut == ShutAt::Done
            || match (st.main.frames.as_slice(), self.scenario().idle_from) {
                (
                    [Frame::Code {
                        prog: ProgRef::Main,
                        pc,
                    }],
                    Some(from),
                ) => *pc >= from,
                _ => false,
            };
        idle && (0..st.dying.len()).all(|t| self.dying_done(st, t))
            && st.drains.is_empty()
            && st.ring.len() == 0
            && !st.flags.busy
    }

    fn main_done(&self, st: &HubState) -> bool {
        st.shut == ShutAt::Done
    }

    fn livelocked(&self, _: &HubState) -> bool {
        false
    }

    fn violation(&self, st: &HubState, terminal: bool) -> Option<String> {
        if st.ring.len() > 0 && !st.flags.has_calls {
            return Some(format!(
                "{} call(s) wait in the slot with has_calls clear: no scheduling point starts a \
                 drain for them and every worker may sleep (rules 1 and 3: has_calls changes only \
                 under the lock)",
                st.ring.len()
            ));
        }
        if st.drains.len() > 1 {
            return Some(
                "two drains at once: a call runs while another is parked (rule 4 needs rule 2's \
                 busy flag)"
                    .into(),
            );
        }
        if st.spun_while_busy {
            return Some(
                "a worker with nothing to run stayed awake while the drain ran (busy set, \
                 has_calls set until the drain's next pop): it spins for as long as the call \
                 parks (rule 2 lets it sleep: the drain's end wakes a worker)"
                    .into(),
            );
        }
        if terminal && st.ring.len() > 0 {
            return Some(format!(
                "the runtime is gone and {} call(s) accepted by add were never run (rule 6)",
                st.ring.len()
            ));
        }
        None
    }

    fn describe(&self, step: HubStep) -> String {
        let add_rule = if self.rules == SlotRules::CleanupCounted {
            1
        } else {
            7
        };
        let what = match step.act {
            Act::ReadHasCalls(v) => format!("rule 2: scheduling point: has_calls -> {v}"),
            Act::Claim(ok) => format!(
                "rule 2: CAS busy false->true -> {}",
                if ok { "ok, drain started" } else { "failed" }
            ),
            Act::DroppedUnrun(shutting, wake) => format!(
                "rule 5: Worker::start drops the drain unrun ({}): busy released{}",
                if shutting {
                    "shutting down"
                } else {
                    "no stack"
                },
                if wake {
                    "; wakes an idle worker, if one sleeps"
                } else {
                    ""
                }
            ),
            Act::Run(who) => format!("rule 2: runs {}", self.who_text(who)),
            Act::Spin => "rule 2: nothing ready, has_calls set: does not sleep".into(),
            Act::Sleep => "rule 2: nothing ready, may sleep: sleeps".into(),
            Act::Exit => "rule 6: shutting down, no green thread left: exits".into(),
            Act::Woken => "woken (timer, condition or the shutdown's kill): ready".into(),
            Act::Notify(Some(w)) => format!("rule 1: after the lock: wakes idle worker W{w}"),
            Act::Notify(None) => "rule 1: after the lock: no worker asleep".into(),
            Act::Test(c, v) => format!("test {c:?} -> {v}"),
            Act::Park(p) => match step.who {
                Who::Drain(_) => format!("parks ({p:?}); rule 4: busy stays set"),
                _ => format!("parks ({p:?})"),
            },
            Act::SetEvent(n) => format!("set event {n}"),
            Act::AddForeign(ok) => format!(
                "rule 1: add_pending_call(another call) -> {}",
                if ok { "ok" } else { "refused" }
            ),
            Act::Shutdown => "returns: the runtime shuts down (rule 6)".into(),
            Act::Pop(c) => format!("rule 3: pop under the lock -> {c:?}"),
            Act::Bound => "rule 3: ran capacity calls: stops, has_calls left as is".into(),
            Act::ClearLate => "rule 3 broken: clears has_calls after the lock".into(),
            Act::EndDrain(wake) => format!(
                "rule 3: drain ends: busy released{}",
                if wake {
                    "; has_calls set: wakes an idle worker, if one sleeps"
                } else {
                    ""
                }
            ),
            Act::CleanupBegin => "CleanupQueue::drain begins".into(),
            Act::CleanupPop(Some(t)) => format!("CleanupQueue::drain pops the state of T{}", t + 1),
            Act::CleanupPop(None) => "CleanupQueue::drain: queue empty, flags released".into(),
            Act::CleanupEnd => "CleanupQueue::drain returns".into(),
            Act::Push(what) => format!("dies: state pushed -> {what}"),
            Act::Check(down) => format!(
                "HubScheduler::schedule: {}",
                if down {
                    "shutting down: drains here"
                } else {
                    "runtime running"
                }
            ),
            Act::Add(what) => format!("rule {add_rule}: add(drain) under the lock -> {what}"),
            Act::ScheduleFailed(r) => format!("schedule failed, reported -> {r:?}"),
            Act::Waited(c) => format!("waited: {c:?}"),
            Act::Touch => "touches its greenlet state".into(),
            Act::Return => "its program returned: done".into(),
            Act::PlainSleep => "sleeps and wakes (plain thread or cancelled park)".into(),
            Act::WorkersExited => "rule 6: workers joined".into(),
            Act::ShutdownPop(c) => format!("rule 6: shutdown: pop under the lock -> {c:?}"),
            Act::Gone => "shutdown done: the runtime is gone".into(),
        };
        format!("{}: {what}", self.who_text(step.who))
    }

    fn describe_state(&self, st: &HubState) -> String {
        let workers: Vec<String> = st
            .workers
            .iter()
            .enumerate()
            .map(|(w, at)| format!("W{w}={at:?}"))
            .collect();
        let drains: Vec<String> = st.drains.iter().map(|t| self.task_text(t)).collect();
        let dying: Vec<String> = st
            .dying
            .iter()
            .enumerate()
            .map(|(t, d)| {
                let spec = &self.scenario().threads[t];
                match spec.ops.get(d.pc as usize) {
                    None => format!("{}=done", spec.name),
                    Some(op) if d.inline.is_empty() => format!("{}={op:?}/{}", spec.name, d.sub),
                    Some(_) => format!("{}=[{}]", spec.name, self.frames_text(&d.inline)),
                }
            })
            .collect();
        format!(
            "slot ring={} has_calls={} busy={} | queue len={} draining={} scheduled={} \
             outstanding={} | {} | main: {} | drains: [{}] | {} | shutdown={:?}",
            st.ring.len(),
            u8::from(st.flags.has_calls),
            u8::from(st.flags.busy),
            st.queue.len(),
            u8::from(st.queue.draining_flag()),
            u8::from(st.queue.scheduled_flag()),
            st.queue.outstanding(),
            workers.join(" "),
            self.task_text(&st.main),
            drains.join("; "),
            dying.join(" "),
            st.shut,
        )
    }

    fn livelock_conclusion(&self, st: &HubState) -> String {
        format!(
            "NO PROGRESS: from here no schedule reaches quiescence (cleanup queue: {} state(s), \
             {} drain(s) outstanding; main: {})",
            st.queue.len(),
            st.queue.outstanding(),
            self.main_stack(st)
        )
    }

    fn main_stack(&self, st: &HubState) -> String {
        self.task_text(&st.main)
    }
}
