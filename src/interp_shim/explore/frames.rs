//! The frame machine both explorer hosts share: a scenario's programs as
//! code frames (which program a frame runs, which operation comes after
//! which, when the main program is idle), the conditions a program or a
//! thread waits for, a dying thread's push of its state onto the cleanup
//! queue, and the cleanup queue's drain as a frame of whichever thread runs
//! it.
//!
//! Owns: [`StateToken`], [`ProgRef`], [`Programs`], the [`World`] a host's
//! state shows them, [`DrainStage`] with its step [`drain_step`], and
//! [`PushOutcome`] with [`push_state`]. Uses [`QueueCore`] for every rule
//! of the cleanup policy and the scenarios' operations
//! ([`super::scenario`]); it knows nothing of CPython's interpreter or of
//! the hub's slot. Each host keeps what differs: the CPython model
//! (`model`) its check sites, eval-breaker handling, `make_pending_calls`
//! and GIL; the hub (`hub`) its workers, green threads and slot drain.

use crate::cleanup::{PushAction, QueueCore};
use crate::interp_shim::{ThreadIdx, MAIN_THREAD};

use super::scenario::{Cond, Op, Scenario, ThreadOp};

/// A queued thread state: the index of the dying thread it belonged to.
pub(crate) type StateToken = u8;

/// Which program a code frame runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ProgRef {
    /// The main thread's own program.
    Main,
    /// The finalizer of dying thread `n`'s state.
    Finalizer(u8),
    /// A Python-level pending call of another extension.
    ForeignCall,
    /// The body of the main thread's greenlet `n` (`n >= 1`).
    Greenlet(u8),
}

/// What a host's state shows the shared conditions: the cleanup queue, the
/// pending-call ring's length, the events set and each dying thread's
/// operation.
pub(crate) trait World {
    /// The cleanup queue.
    fn queue(&self) -> &QueueCore<StateToken>;
    /// Calls waiting in the host's pending-call ring (CPython's ring, the
    /// hub's slot).
    fn ring_len(&self) -> usize;
    /// The events set, one bit each.
    fn events(&self) -> u8;
    /// Dying thread `t`'s operation (0-based; past its last: finished).
    fn dying_pc(&self, t: usize) -> u8;
}

/// A scenario's programs and threads, as the frames see them.
#[derive(Clone, Copy)]
pub(crate) struct Programs<'a> {
    /// The scenario.
    pub scenario: &'a Scenario,
}

impl<'a> Programs<'a> {
    /// The operations of `prog`.
    pub(crate) fn ops(self, prog: ProgRef) -> &'a [Op] {
        match prog {
            ProgRef::Main => &self.scenario.main.ops,
            ProgRef::Finalizer(n) => &self.scenario.threads[n as usize].finalizer.ops,
            ProgRef::ForeignCall => &self.scenario.foreign_call.ops,
            ProgRef::Greenlet(n) => &self.scenario.greenlets[n as usize - 1].ops,
        }
    }

    /// The frame name of a program.
    pub(crate) fn prog_name(self, prog: ProgRef) -> &'a str {
        match prog {
            ProgRef::Main => self.scenario.main.name,
            ProgRef::Finalizer(n) => self.scenario.threads[n as usize].finalizer.name,
            ProgRef::ForeignCall => self.scenario.foreign_call.name,
            ProgRef::Greenlet(n) => self.scenario.greenlets[n as usize - 1].name,
        }
    }

    /// The display name of interpreter thread `t` (0: the main thread;
    /// `t >= 1`: dying thread `t - 1`).
    pub(crate) fn thread_name(self, t: ThreadIdx) -> &'a str {
        if t == MAIN_THREAD {
            "main"
        } else {
            self.scenario.threads[t - 1].name
        }
    }

    /// The operation after `pc` in `prog` once it is done: a loop's
    /// target, else the next one.
    pub(crate) fn next_pc(self, prog: ProgRef, pc: u8) -> u8 {
        match self.ops(prog)[pc as usize] {
            Op::Loop(target) => target,
            _ => pc + 1,
        }
    }

    /// Whether the main program at `pc` is in its idle loop (the scenario
    /// has one and `pc` is inside it).
    pub(crate) fn idle_at(self, prog: ProgRef, pc: u8) -> bool {
        prog == ProgRef::Main && self.scenario.idle_from.is_some_and(|from| pc >= from)
    }

    /// Whether dying thread `t` (0-based) has finished.
    pub(crate) fn finished(self, w: &impl World, t: usize) -> bool {
        w.dying_pc(t) as usize >= self.scenario.threads[t].ops.len()
    }

    /// Whether condition `c` holds in `w`.
    pub(crate) fn cond(self, w: &impl World, c: Cond) -> bool {
        match c {
            Cond::QueueNonEmpty => !w.queue().is_empty(),
            Cond::RingEmpty => w.ring_len() == 0,
            Cond::Event(n) => w.events() & (1 << n) != 0,
            Cond::ThreadExited(n) => {
                let t = n as usize;
                let ops = &self.scenario.threads[t].ops;
                ops[w.dying_pc(t) as usize..]
                    .iter()
                    .all(|op| *op == ThreadOp::Die)
            }
        }
    }

    /// Dying thread `t` in a state's one-line description: finished, or
    /// its operation and sub-step.
    pub(crate) fn dying_text(self, t: usize, pc: u8, sub: u8) -> String {
        let spec = &self.scenario.threads[t];
        match spec.ops.get(pc as usize) {
            None => format!("{}=done", spec.name),
            Some(op) => format!("{}={op:?}/{sub}", spec.name),
        }
    }
}

/// A stage of the cleanup queue's drain (greenlet's
/// `PendingCallback_DestroyQueue`, the hub's `CleanupQueue::drain`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum DrainStage {
    /// Entered.
    Begin,
    /// About to take the next state.
    Next,
    /// A shielding policy: about to suspend tracing before destroying this
    /// state (CPython only: the hub has no tracing).
    Shield(StateToken),
    /// A shielding policy: the destruction returned; about to resume
    /// tracing (CPython only).
    Unshield,
    /// Found the queue empty; about to return.
    End,
}

/// What one step of the drain did, and what the host does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DrainMove {
    /// `drain_begin`: the stage is now [`DrainStage::Next`].
    Began,
    /// `drain_next` popped this state: the host runs its finalizer above
    /// the drain's frame, which stays at [`DrainStage::Next`].
    Destroy(StateToken),
    /// `drain_next` popped this state under a shielding policy: the stage
    /// is now [`DrainStage::Shield`].
    Shield(StateToken),
    /// `drain_next` found the queue empty and released the policy's flags:
    /// the stage is now [`DrainStage::End`].
    Empty,
    /// `drain_end`: the drain returns; the host pops its frame.
    Ended,
}

/// One step of the drain at `stage` on `queue`, setting `*stage` to the
/// stage after it; `shield` is whether the host shields each destruction
/// from tracing. `None` for [`DrainStage::Shield`] and
/// [`DrainStage::Unshield`]: those touch the interpreter's tracing, a step
/// of the host's own.
pub(crate) fn drain_step(
    queue: &mut QueueCore<StateToken>,
    stage: &mut DrainStage,
    shield: bool,
) -> Option<DrainMove> {
    Some(match *stage {
        DrainStage::Begin => {
            queue.drain_begin();
            *stage = DrainStage::Next;
            DrainMove::Began
        }
        DrainStage::Next => match queue.drain_next() {
            Some(token) if shield => {
                *stage = DrainStage::Shield(token);
                DrainMove::Shield(token)
            }
            Some(token) => DrainMove::Destroy(token),
            None => {
                *stage = DrainStage::End;
                DrainMove::Empty
            }
        },
        DrainStage::End => {
            queue.drain_end();
            DrainMove::Ended
        }
        DrainStage::Shield(_) | DrainStage::Unshield => return None,
    })
}

/// What [`QueueCore::push`] answered a dying thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum PushOutcome {
    /// Schedule a drain.
    Schedule,
    /// Nothing to do.
    Nothing,
    /// The queue is finalized: leaked on purpose.
    Leaked,
}

/// Dying thread `t` pushes its state onto `queue` (greenlet's
/// `ThreadStateCreator` destructor → `AddToCleanupQueue`).
pub(crate) fn push_state(queue: &mut QueueCore<StateToken>, t: usize) -> PushOutcome {
    match queue.push(t as StateToken) {
        PushAction::Schedule => PushOutcome::Schedule,
        PushAction::Nothing => PushOutcome::Nothing,
        PushAction::Leaked(_) => PushOutcome::Leaked,
    }
}
