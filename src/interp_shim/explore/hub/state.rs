//! The hub host's explored state: the slot (its ring and flags), the
//! workers, the green threads (the main program's and the slot's drains)
//! with their frames, the dying threads, the shutdown; and what a step is
//! (who took it, what it did).
//!
//! Owns: `HubState` and its parts, `Bent` (the slot's flags under one
//! [`SlotRules`]), `HubStep`, `Who`, `Act` and `Ctx`. Uses the slot's
//! `Ring` and `Flags` from `crate::hub::pending`, the shared frame
//! machine's types ([`super::super::frames`]) and the scenarios' `Cond`.

use crate::cleanup::{QueueCore, Retry};
use crate::hub::pending::{Flags, Ring};

use super::super::frames::{DrainStage, ProgRef, PushOutcome, StateToken, World};
use super::super::scenario::Cond;
use super::SlotRules;

/// A call in the slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Call {
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
pub(super) struct PlainFlags {
    pub(super) has_calls: bool,
    pub(super) busy: bool,
    pub(super) deferred_clear: bool,
}

/// The flags as one rule set sees them.
pub(super) struct Bent<'a> {
    pub(super) flags: &'a mut PlainFlags,
    pub(super) rules: SlotRules,
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
pub(super) enum WorkerAt {
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
pub(super) enum Park {
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
pub(super) enum SlotAt {
    /// Pop the next call (or stop at the bound).
    Pop,
    /// [`SlotRules::ClearOutsideLock`]: the held-back clear.
    Clear,
    /// Release `busy` and end.
    End,
}

/// A frame of a green thread or a plain thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Frame {
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
    Cleanup(DrainStage),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Task {
    pub(super) worker: u8,
    pub(super) park: Park,
    pub(super) frames: Vec<Frame>,
    /// Resumed at least once (a task not yet started when the shutdown
    /// begins is dropped unrun).
    pub(super) started: bool,
}

/// A dying thread: its operation, the sub-step of a death, the frames of a
/// drain it runs on itself, and what it waits for there.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct DyingAt {
    pub(super) pc: u8,
    pub(super) sub: u8,
    pub(super) inline: Vec<Frame>,
    pub(super) blocked: Option<Cond>,
}

// Sub-steps of ThreadOp::Die.
pub(super) const DIE_PUSH: u8 = 0;
pub(super) const DIE_CHECK: u8 = 1;
pub(super) const DIE_ADD: u8 = 2;
pub(super) const DIE_NOTIFY: u8 = 3;
pub(super) const DIE_FAILED: u8 = 4;
pub(super) const DIE_INLINE: u8 = 5;

/// The shutdown, on the thread that called `block_on`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum ShutAt {
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
pub(super) struct HubState {
    pub(super) ring: Ring<Call>,
    pub(super) flags: PlainFlags,
    pub(super) queue: QueueCore<StateToken>,
    pub(super) workers: Vec<WorkerAt>,
    pub(super) main: Task,
    pub(super) drains: Vec<Task>,
    pub(super) dying: Vec<DyingAt>,
    pub(super) shut: ShutAt,
    pub(super) shut_frames: Vec<Frame>,
    pub(super) events: u8,
    /// A worker with nothing to run stayed awake while a drain ran.
    pub(super) spun_while_busy: bool,
}

impl World for HubState {
    fn queue(&self) -> &QueueCore<StateToken> {
        &self.queue
    }
    fn ring_len(&self) -> usize {
        self.ring.len()
    }
    fn events(&self) -> u8 {
        self.events
    }
    fn dying_pc(&self, t: usize) -> u8 {
        self.dying[t].pc
    }
}

/// Who took a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Who {
    Worker(u8),
    Main,
    Drain(u8),
    Dying(u8),
    Shutdown,
}

/// What a step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Act {
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
    Push(PushOutcome),
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
pub(super) struct HubStep {
    pub(super) who: Who,
    pub(super) act: Act,
}

/// A context whose frames a step runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ctx {
    Main,
    Drain(usize),
    Dying(usize),
    Shutdown,
}
