//! The explored state and its transitions: the semantic core
//! ([`InterpCore`] and [`QueueCore`]) plus every thread's program counter and
//! the main thread's frame stack, with each atomic step of each thread as one
//! explicit transition that calls the core.
//!
//! Nothing here restates a rule of CPython or of a cleanup policy: where a
//! thread touches shared state, the step is one call of a core method, and
//! the driver only moves program counters and pushes and pops frames.
//!
//! Owns: [`Model`], [`State`] and its parts, [`Step`] and [`Action`] (their
//! text in `text`). Uses [`InterpCore`] and [`QueueCore`] for every rule,
//! the frame machine it shares with the hub's host ([`super::frames`]:
//! programs, conditions, the cleanup queue's drain, a dying thread's push),
//! and the scenarios' operations ([`super::scenario`]).
//!
//! Slightly longer than the crate's usual 800 lines because it is one
//! type's cohesive logic: [`Model`]'s successor function (the main
//! thread's and the dying threads' steps, one match arm per frame or
//! operation kind), read together.

mod text;

use crate::cleanup::{Policy, QueueCore, Retry};
use crate::interp_shim::core::{CheckSite, Continuation, InterpCore, MakeBegin};
use crate::interp_shim::{ThreadIdx, MAIN_THREAD};

use super::frames::{
    drain_step, push_state, DrainMove, DrainStage, ProgRef, Programs, PushOutcome, StateToken,
    World,
};
use super::scenario::{Cond, Op, Scenario, ThreadOp};
use super::Mode;
use text::{ActionText, OpText};

/// A call in the pending-call ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CallToken {
    /// greenlet's `PendingCallback_DestroyQueue`: a drain of the cleanup queue.
    Drain,
    /// Another C-level pending call (not the cleanup queue's); returns at once.
    Other,
    /// Another extension's Python-level pending call: runs the scenario's
    /// foreign-call program, its entry a `RESUME` check site.
    Python,
}

/// Where a code frame is inside its current operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Wait {
    /// About to run the operation (for a check site: about to test the
    /// eval breaker). The thread holds the GIL.
    Ready,
    /// Dropped the GIL (sleep, block), waiting to take it back.
    Gil,
    /// Blocked without the GIL until the operation's condition holds.
    Cond,
}

/// A stage of handling the eval breaker at a check site
/// (`eval_frame_handle_pending` / `_Py_HandlePending`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum HandleStage {
    /// Signals were taken with the check; next, pending calls:
    /// `calls_to_do` tested and `make_pending_calls` entered.
    Calls,
    /// Then the drop request.
    Drop,
    /// Dropped the GIL on request; waiting to take it back.
    Regain,
    /// The end: 3.12's final recompute and the continuation.
    End,
}

/// A frame on the main thread's stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Frame {
    /// Simulated Python code.
    Code {
        /// Which program.
        prog: ProgRef,
        /// The operation.
        pc: u8,
        /// Where inside it.
        wait: Wait,
    },
    /// Handling the eval breaker at the check site of the code frame below.
    Handle {
        /// The check site.
        site: CheckSite,
        /// The stage.
        stage: HandleStage,
    },
    /// `make_pending_calls`' loop, at iteration `iter`.
    Make {
        /// Calls popped so far.
        iter: u8,
    },
    /// A drain, run as the pending call the frame below popped.
    Drain {
        /// The stage.
        stage: DrainStage,
    },
}

/// Where a dying thread is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Dying {
    /// Its operation ([`ThreadSpec::ops`](super::scenario::ThreadSpec::ops)); finished at the end.
    pub pc: u8,
    /// Where inside it.
    pub sub: u8,
}

// Sub-steps of ThreadOp::Python.
const PY_WAIT: u8 = 0;
const PY_HOLD: u8 = 1;
// Sub-steps of ThreadOp::Die.
const DIE_PUSH: u8 = 0;
const DIE_ADD: u8 = 1;
const DIE_SIGNAL_OK: u8 = 2;
const DIE_SIGNAL_FAILED: u8 = 3;
const DIE_FAILED: u8 = 4;

/// One explored state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct State {
    /// The interpreter.
    pub py: InterpCore<CallToken>,
    /// The cleanup queue.
    pub queue: QueueCore<StateToken>,
    /// The main thread's frames, innermost last; empty once it finished.
    pub main: Vec<Frame>,
    /// The dying threads (interpreter thread `i + 1`).
    pub dying: Vec<Dying>,
    /// Events set, one bit each.
    pub events: u8,
    /// The main thread's running greenlet (0: its main greenlet), whose
    /// frames `main` holds.
    pub greenlet: u8,
    /// The saved stacks of the main thread's greenlets, by greenlet (the
    /// running one's is empty here; a dead greenlet's is empty too):
    /// greenlet's `PythonState` and its saved C stack.
    pub parked: Vec<Vec<Frame>>,
}

impl World for State {
    fn queue(&self) -> &QueueCore<StateToken> {
        &self.queue
    }
    fn ring_len(&self) -> usize {
        self.py.ring_len()
    }
    fn events(&self) -> u8 {
        self.events
    }
    fn dying_pc(&self, t: usize) -> u8 {
        self.dying[t].pc
    }
}

/// What one step did: the thread and the action, for counterexamples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Step {
    /// The interpreter thread that took the step.
    pub thread: ThreadIdx,
    /// What it did.
    pub action: Action,
}

/// The actions, each one atomic step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// A check site found the breaker clear and went on.
    CheckClear(CheckSite),
    /// A check site found the breaker set and began handling it with
    /// `take_signals` (whether handlers ran: never, in these scenarios).
    CheckSet(CheckSite, bool),
    /// `calls_to_do` clear: `make_pending_calls` not entered.
    NoCalls,
    /// `make_pending_calls` entered with this outcome.
    MakeBegin(MakeBegin),
    /// No drop request.
    NoDrop,
    /// Dropped the GIL on a drop request.
    DropOnRequest,
    /// `handle_pending_end` and the continuation.
    HandleEnd(Continuation),
    /// `make_pending_calls` popped this call and ran it (a drain starts).
    Pop(CallToken),
    /// `make_pending_calls` found nothing (or hit its bound) and returned.
    MakeEnd,
    /// `drain_begin`.
    DrainBegin,
    /// `drain_next` popped this state (and, unshielded, starts destroying it).
    DrainPop(StateToken),
    /// `drain_next` found the queue empty and released the policy's flags.
    DrainEmpty,
    /// `enter_tracing` before destroying this state.
    EnterTracing(StateToken),
    /// `leave_tracing` after a destruction.
    LeaveTracing,
    /// `drain_end`: the drain returns.
    DrainEnd,
    /// A finalizer or the main program evaluated a condition.
    Test(Cond, bool),
    /// Dropped the GIL to sleep.
    Sleep,
    /// Dropped the GIL to block.
    Block(Cond),
    /// Took the GIL (`take_gil` recomputes the breaker as this thread).
    TakeGil,
    /// Waited a switch interval and asked the holder to drop the GIL.
    RequestDrop,
    /// Set an event.
    SetEvent(u8),
    /// `_Py_FinishPendingCalls`: `make_pending_calls` entered with this
    /// outcome (on 3.13, once per make until no call is queued), or not
    /// entered (nothing to do).
    FinishPendingCalls(Option<MakeBegin>),
    /// `Py_FinalizeEx` set the runtime finalizing; the cleanup queue finalized.
    Finalize,
    /// A dying thread ran Python code and dropped the GIL.
    DropGil,
    /// A dying thread found the interpreter finalizing at `take_gil` and exited.
    ExitAtTakeGil,
    /// A dying thread's wait ended.
    Woke(Cond),
    /// A dying thread pushed its state; the policy said this.
    Push(PushOutcome),
    /// `Py_AddPendingCall`'s push: succeeded or found the ring full.
    AddPending(bool),
    /// `Py_AddPendingCall`'s signal (after a failed push: still signals).
    Signal,
    /// The failed schedule reported to the queue; it asks for a retry or not.
    ScheduleFailed(bool),
    /// `greenlet.switch()` to this greenlet of the main thread.
    Switch(u8),
}

/// The transition relation of one scenario: the initial state, and every
/// step any thread can take from a state.
pub(crate) struct Model<'a> {
    /// The scenario.
    pub scenario: &'a Scenario,
}

impl<'a> Model<'a> {
    /// The initial state.
    pub(crate) fn initial(
        &self,
        version: crate::interp_shim::PyVersion,
        policy: Policy,
        mode: Mode,
    ) -> State {
        let mut py = InterpCore::new(version);
        for _ in &self.scenario.threads {
            py.add_thread();
        }
        match mode {
            Mode::Trace => py.set_trace(MAIN_THREAD, true),
            Mode::Profile => py.set_profile(MAIN_THREAD, true),
            Mode::None => {}
        }
        if let Some(filler) = self.scenario.ring_full_at_start.then(|| py.add_thread()) {
            // Added by a thread that is gone before the scenario starts.
            while py.add_pending_push(CallToken::Other).is_ok() {}
            py.add_pending_signal(filler);
        }
        State {
            py,
            queue: QueueCore::new(policy),
            main: vec![Frame::Code {
                prog: ProgRef::Main,
                pc: 0,
                wait: Wait::Ready,
            }],
            dying: vec![Dying { pc: 0, sub: 0 }; self.scenario.threads.len()],
            events: 0,
            greenlet: 0,
            parked: std::iter::once(Vec::new())
                .chain((1..=self.scenario.greenlets.len()).map(|n| {
                    vec![Frame::Code {
                        prog: ProgRef::Greenlet(n as u8),
                        pc: 0,
                        wait: Wait::Ready,
                    }]
                }))
                .collect(),
        }
    }

    /// The scenario's programs and threads.
    pub(crate) fn progs(&self) -> Programs<'a> {
        Programs {
            scenario: self.scenario,
        }
    }

    fn ops(&self, prog: ProgRef) -> &'a [Op] {
        self.progs().ops(prog)
    }

    fn cond(&self, st: &State, c: Cond) -> bool {
        self.progs().cond(st, c)
    }

    /// The main thread has finished its program.
    pub(crate) fn main_done(&self, st: &State) -> bool {
        st.main.is_empty()
    }

    /// Quiescence: every dying thread finished; the main thread is in its
    /// idle loop with nothing below (no handler, no pending call running) and
    /// the ring is empty, so nothing will ever run a drain again.
    pub(crate) fn quiescent(&self, st: &State) -> bool {
        let idle = match st.main.as_slice() {
            [Frame::Code { prog, pc, .. }] => self.progs().idle_at(*prog, *pc),
            _ => false,
        };
        idle && (0..st.dying.len()).all(|t| self.progs().finished(st, t))
            && st.py.ring_len() == 0
            && !st.py.busy()
    }

    /// If the main thread is ready at a `RESUME`, the index of that code frame.
    pub(crate) fn main_at_resume(&self, st: &State) -> Option<usize> {
        let idx = st.main.len().checked_sub(1)?;
        match st.main[idx] {
            Frame::Code {
                prog,
                pc,
                wait: Wait::Ready,
            } => matches!(self.ops(prog).get(pc as usize), Some(Op::Enter(_))).then_some(idx),
            _ => None,
        }
    }

    /// Every step any thread can take from `st`, with the state after it.
    pub(crate) fn successors(&self, st: &State, out: &mut Vec<(Step, State)>) {
        out.clear();
        self.main_steps(st, out);
        for t in 0..st.dying.len() {
            self.dying_steps(st, t, out);
        }
    }

    /// The steps the main thread can take (at most two: take the GIL, or ask
    /// for it).
    pub(crate) fn main_steps(&self, st: &State, out: &mut Vec<(Step, State)>) {
        let Some(&top) = st.main.last() else { return };
        let mut push = |action: Action, next: State| {
            out.push((
                Step {
                    thread: MAIN_THREAD,
                    action,
                },
                next,
            ))
        };
        match top {
            Frame::Code { prog, pc, wait } => {
                let op = self.ops(prog)[pc as usize];
                match wait {
                    Wait::Gil => self.gil_wait(st, MAIN_THREAD, |s| advance(self, s), &mut push),
                    Wait::Cond => {
                        // Only a Block waits on a condition.
                        if let Op::Block(c) = op {
                            if self.cond(st, c) {
                                self.gil_wait(st, MAIN_THREAD, |s| advance(self, s), &mut push);
                            }
                        }
                    }
                    Wait::Ready => self.main_ready(st, op, &mut push),
                }
            }
            Frame::Handle { site, stage } => {
                let mut s = st.clone();
                let set_stage = |s: &mut State, stage: HandleStage| {
                    if let Some(Frame::Handle { stage: st, .. }) = s.main.last_mut() {
                        *st = stage;
                    }
                };
                match stage {
                    HandleStage::Calls => {
                        set_stage(&mut s, HandleStage::Drop);
                        if s.py.wants_pending_calls(MAIN_THREAD) {
                            let begin = begin_make(&mut s);
                            push(Action::MakeBegin(begin), s);
                        } else {
                            push(Action::NoCalls, s);
                        }
                    }
                    HandleStage::Drop => {
                        if s.py.drop_requested(MAIN_THREAD) {
                            s.py.drop_gil(MAIN_THREAD);
                            set_stage(&mut s, HandleStage::Regain);
                            push(Action::DropOnRequest, s);
                        } else {
                            set_stage(&mut s, HandleStage::End);
                            push(Action::NoDrop, s);
                        }
                    }
                    HandleStage::Regain => self.gil_wait(
                        st,
                        MAIN_THREAD,
                        |s| set_stage(s, HandleStage::End),
                        &mut push,
                    ),
                    HandleStage::End => {
                        s.py.handle_pending_end(MAIN_THREAD);
                        let cont = s.py.continuation(MAIN_THREAD, site);
                        s.main.pop();
                        if cont == Continuation::Continue {
                            advance(self, &mut s);
                        }
                        push(Action::HandleEnd(cont), s);
                    }
                }
            }
            Frame::Make { iter } => {
                let mut s = st.clone();
                match s.py.make_pending_calls_pop(u32::from(iter)) {
                    Some(call) => {
                        if let Some(Frame::Make { iter }) = s.main.last_mut() {
                            *iter += 1;
                        }
                        match call {
                            CallToken::Drain => s.main.push(Frame::Drain {
                                stage: DrainStage::Begin,
                            }),
                            CallToken::Python => self.call(&mut s, ProgRef::ForeignCall),
                            CallToken::Other => {}
                        }
                        push(Action::Pop(call), s);
                    }
                    None => {
                        s.py.make_pending_calls_end(MAIN_THREAD, false);
                        s.main.pop();
                        push(Action::MakeEnd, s);
                    }
                }
            }
            Frame::Drain { stage } => {
                let mut s = st.clone();
                let set_stage = |s: &mut State, stage: DrainStage| {
                    if let Some(Frame::Drain { stage: st }) = s.main.last_mut() {
                        *st = stage;
                    }
                };
                match stage {
                    DrainStage::Shield(token) => {
                        s.py.enter_tracing(MAIN_THREAD);
                        set_stage(&mut s, DrainStage::Unshield);
                        self.call(&mut s, ProgRef::Finalizer(token));
                        push(Action::EnterTracing(token), s);
                    }
                    DrainStage::Unshield => {
                        s.py.leave_tracing(MAIN_THREAD);
                        set_stage(&mut s, DrainStage::Next);
                        push(Action::LeaveTracing, s);
                    }
                    _ => {
                        let mut next = stage;
                        let shield = s.queue.policy().shields();
                        let Some(done) = drain_step(&mut s.queue, &mut next, shield) else {
                            return;
                        };
                        set_stage(&mut s, next);
                        let action = match done {
                            DrainMove::Began => Action::DrainBegin,
                            DrainMove::Destroy(token) => {
                                self.call(&mut s, ProgRef::Finalizer(token));
                                Action::DrainPop(token)
                            }
                            DrainMove::Shield(token) => Action::DrainPop(token),
                            DrainMove::Empty => Action::DrainEmpty,
                            DrainMove::Ended => {
                                s.main.pop();
                                Action::DrainEnd
                            }
                        };
                        push(action, s);
                    }
                }
            }
        }
    }

    /// Start running `prog` on the main thread (a finalizer called by the
    /// drain); an empty program returns at once.
    fn call(&self, s: &mut State, prog: ProgRef) {
        if !self.ops(prog).is_empty() {
            s.main.push(Frame::Code {
                prog,
                pc: 0,
                wait: Wait::Ready,
            });
        }
    }

    fn main_ready(&self, st: &State, op: Op, push: &mut impl FnMut(Action, State)) {
        let mut s = st.clone();
        match op {
            Op::Enter(_) | Op::AfterCall | Op::Loop(_) => {
                let site = match op {
                    Op::Enter(_) => CheckSite::Resume,
                    Op::AfterCall => CheckSite::AfterCall,
                    _ => CheckSite::BackwardJump,
                };
                if s.py.breaker_set(MAIN_THREAD) {
                    // The first stage of handling, signals, is taken in the
                    // same step: no thread of these scenarios raises a signal,
                    // so nothing can come between the two.
                    let took = s.py.take_signals(MAIN_THREAD);
                    s.main.push(Frame::Handle {
                        site,
                        stage: HandleStage::Calls,
                    });
                    push(Action::CheckSet(site, took), s);
                } else {
                    advance(self, &mut s);
                    push(Action::CheckClear(site), s);
                }
            }
            Op::JumpIf(c, target) => {
                let holds = self.cond(&s, c);
                if holds {
                    set_pc(self, &mut s, target);
                } else {
                    advance(self, &mut s);
                }
                push(Action::Test(c, holds), s);
            }
            Op::Sleep => {
                s.py.drop_gil(MAIN_THREAD);
                set_wait(&mut s, Wait::Gil);
                push(Action::Sleep, s);
            }
            Op::Block(c) => {
                s.py.drop_gil(MAIN_THREAD);
                set_wait(&mut s, Wait::Cond);
                push(Action::Block(c), s);
            }
            Op::SetEvent(n) => {
                s.events |= 1 << n;
                advance(self, &mut s);
                push(Action::SetEvent(n), s);
            }
            Op::FinishPendingCalls => {
                // 3.13 comes back to this operation after each make that
                // starts here, until no call is queued.
                let again = s.py.finish_pending_calls_wanted()
                    && s.py.finish_pending_calls_repeats()
                    && !s.py.busy();
                if !again {
                    advance(self, &mut s);
                }
                if s.py.finish_pending_calls_wanted() {
                    let begin = begin_make(&mut s);
                    push(Action::FinishPendingCalls(Some(begin)), s);
                } else {
                    push(Action::FinishPendingCalls(None), s);
                }
            }
            Op::PushPythonCall => {
                // Py_AddPendingCall → _push_pending_call; a full ring
                // refuses it (the caller gets -1 and goes on).
                let ok = s.py.add_pending_push(CallToken::Python).is_ok();
                advance(self, &mut s);
                push(Action::AddPending(ok), s);
            }
            Op::SignalPendingCalls => {
                s.py.add_pending_signal(MAIN_THREAD);
                advance(self, &mut s);
                push(Action::Signal, s);
            }
            Op::Finalize => {
                s.py.finalize();
                // Leaked on purpose: the host runs no user code any more.
                let _ = s.queue.finalize();
                advance(self, &mut s);
                push(Action::Finalize, s);
            }
            Op::Switch(target) => {
                // the origin resumes after its switch() call
                advance(self, &mut s);
                let dead = target != s.greenlet && s.parked[target as usize].is_empty();
                if !dead && target != s.greenlet {
                    switch_stacks(&mut s, target);
                }
                push(Action::Switch(target), s);
            }
        }
    }

    /// A thread waiting for the GIL: take it if it can (then `then`), or,
    /// after a switch interval, ask the holder to drop it.
    fn gil_wait(
        &self,
        st: &State,
        t: ThreadIdx,
        then: impl FnOnce(&mut State),
        push: &mut impl FnMut(Action, State),
    ) {
        if st.py.can_take_gil(t) {
            let mut s = st.clone();
            s.py.take_gil(t);
            then(&mut s);
            push(Action::TakeGil, s);
        }
        if let Some(holder) = st.py.gil_holder() {
            if holder != t && !st.py.drop_requested(holder) {
                let mut s = st.clone();
                s.py.request_drop(t);
                push(Action::RequestDrop, s);
            }
        }
    }

    /// The steps dying thread `t` (0-based; interpreter thread `t + 1`) can take.
    pub(crate) fn dying_steps(&self, st: &State, t: usize, out: &mut Vec<(Step, State)>) {
        let tid = t + 1;
        let Dying { pc, sub } = st.dying[t];
        let Some(&op) = self.scenario.threads[t].ops.get(pc as usize) else {
            return;
        };
        let mut push = |action: Action, next: State| {
            out.push((
                Step {
                    thread: tid,
                    action,
                },
                next,
            ))
        };
        let set = |s: &mut State, pc: u8, sub: u8| s.dying[t] = Dying { pc, sub };
        match op {
            ThreadOp::Python => match sub {
                PY_WAIT if st.py.is_finalizing() => {
                    let mut s = st.clone();
                    set(&mut s, pc + 1, 0);
                    push(Action::ExitAtTakeGil, s);
                }
                PY_WAIT => self.gil_wait(st, tid, |s| set(s, pc, PY_HOLD), &mut push),
                _ => {
                    let mut s = st.clone();
                    s.py.drop_gil(tid);
                    set(&mut s, pc + 1, 0);
                    push(Action::DropGil, s);
                }
            },
            ThreadOp::Wait(c) => {
                if self.cond(st, c) {
                    let mut s = st.clone();
                    set(&mut s, pc + 1, 0);
                    push(Action::Woke(c), s);
                }
            }
            ThreadOp::Die => {
                let mut s = st.clone();
                match sub {
                    DIE_PUSH => {
                        let outcome = push_state(&mut s.queue, t);
                        if outcome == PushOutcome::Schedule {
                            set(&mut s, pc, DIE_ADD);
                        } else {
                            set(&mut s, pc + 1, 0);
                        }
                        push(Action::Push(outcome), s);
                    }
                    DIE_ADD => {
                        let ok = s.py.add_pending_push(CallToken::Drain).is_ok();
                        set(
                            &mut s,
                            pc,
                            if ok { DIE_SIGNAL_OK } else { DIE_SIGNAL_FAILED },
                        );
                        push(Action::AddPending(ok), s);
                    }
                    DIE_SIGNAL_OK | DIE_SIGNAL_FAILED => {
                        s.py.add_pending_signal(tid);
                        if sub == DIE_SIGNAL_OK {
                            set(&mut s, pc + 1, 0);
                        } else {
                            set(&mut s, pc, DIE_FAILED);
                        }
                        push(Action::Signal, s);
                    }
                    _ => {
                        let retry = s.queue.schedule_failed() == Retry::Schedule;
                        if retry {
                            set(&mut s, pc, DIE_ADD);
                        } else {
                            set(&mut s, pc + 1, 0);
                        }
                        push(Action::ScheduleFailed(retry), s);
                    }
                }
            }
        }
    }

    /// One line describing a step.
    pub(crate) fn describe(&self, step: Step) -> String {
        let who = format!("T{} {}", step.thread, self.progs().thread_name(step.thread));
        format!("{who}: {}", ActionText(step.action))
    }

    /// The main thread's stack, innermost first, as frame names.
    pub(crate) fn main_stack(&self, st: &State) -> String {
        if st.main.is_empty() {
            return "(finished)".into();
        }
        let mut parts = Vec::new();
        for f in st.main.iter().rev() {
            parts.push(match *f {
                Frame::Code { prog, pc, wait } => {
                    let op = self.ops(prog)[pc as usize];
                    let w = match wait {
                        Wait::Ready => "",
                        Wait::Gil => " (waiting for the GIL)",
                        Wait::Cond => " (blocked)",
                    };
                    format!("{}@{pc}:{}{w}", self.progs().prog_name(prog), OpText(op))
                }
                Frame::Handle { site, stage } => format!("handle_pending[{site:?}:{stage:?}]"),
                Frame::Make { iter } => format!("make_pending_calls[iter {iter}]"),
                Frame::Drain { stage } => format!("DestroyQueue[{stage:?}]"),
            });
        }
        parts.join(" < ")
    }

    /// The state in one line: the interpreter, the queue, the threads.
    pub(crate) fn describe_state(&self, st: &State) -> String {
        let dying: Vec<String> = st
            .dying
            .iter()
            .enumerate()
            .map(|(t, d)| self.progs().dying_text(t, d.pc, d.sub))
            .collect();
        format!(
            "{} tracing_suspended={} | queue len={} draining={} scheduled={} outstanding={} | {} | main: {}",
            st.py.summary(),
            // Inside a shielded destruction (between enter and leave).
            // A greenlet switched to from there has it in a saved stack.
            u8::from(st.main.iter().chain(st.parked.iter().flatten()).any(|f| matches!(
                f,
                Frame::Drain {
                    stage: DrainStage::Unshield
                }
            ))),
            st.queue.len(),
            u8::from(st.queue.draining_flag()),
            u8::from(st.queue.scheduled_flag()),
            st.queue.outstanding(),
            dying.join(" "),
            self.main_stack(st),
        )
    }
}

/// The main thread calls `make_pending_calls`: one call of the core's
/// [`InterpCore::make_pending_calls_begin`]; its loop becomes a frame when
/// it started.
fn begin_make(s: &mut State) -> MakeBegin {
    let begin = s.py.make_pending_calls_begin(MAIN_THREAD);
    if begin == MakeBegin::Started {
        s.main.push(Frame::Make { iter: 0 });
    }
    begin
}

fn set_wait(s: &mut State, w: Wait) {
    if let Some(Frame::Code { wait, .. }) = s.main.last_mut() {
        *wait = w;
    }
}

fn set_pc(model: &Model<'_>, s: &mut State, target: u8) {
    if let Some(Frame::Code { pc, wait, .. }) = s.main.last_mut() {
        *pc = target;
        *wait = Wait::Ready;
    }
    pop_finished(model, s);
}

/// The top code frame's operation is done: go to the next one (a loop: its
/// target) and pop the frame when its program ends.
fn advance(model: &Model<'_>, s: &mut State) {
    if let Some(Frame::Code { prog, pc, wait }) = s.main.last_mut() {
        *pc = model.progs().next_pc(*prog, *pc);
        *wait = Wait::Ready;
    }
    pop_finished(model, s);
}

fn pop_finished(model: &Model<'_>, s: &mut State) {
    if let Some(Frame::Code { prog, pc, .. }) = s.main.last() {
        if *pc as usize >= model.ops(*prog).len() {
            s.main.pop();
            // A greenlet whose run returned: greenlet's g_switch_finish
            // hands its result to the parent (here always the main
            // greenlet), which resumes.
            if s.main.is_empty() && s.greenlet != 0 {
                switch_stacks(s, 0);
            }
        }
    }
}

/// `Greenlet::g_switchstack`: the running greenlet's stack is saved
/// (`PythonState::operator<<`, the C stack by `slp_switch`) and `target`'s
/// restored (`g_switchstack_success`: `PythonState::operator>>`). The
/// interpreter's tracing state is not touched: `tstate->tracing` and the
/// hooks are never saved, and 3.11's `will_switch_from` gives the target
/// the origin's `use_tracing`, so tracing stays the thread's.
fn switch_stacks(s: &mut State, target: u8) {
    let origin = std::mem::take(&mut s.main);
    s.parked[s.greenlet as usize] = origin;
    s.main = std::mem::take(&mut s.parked[target as usize]);
    s.greenlet = target;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp_shim::explore::ScenarioName;
    use crate::interp_shim::PyVersion;

    #[test]
    fn the_seed_starts_with_main_blocking_and_both_threads_waiting_for_the_gil() {
        let scenario = ScenarioName::Seed.build();
        let model = Model {
            scenario: &scenario,
        };
        let init = model.initial(PyVersion::V3_11, Policy::Legacy, Mode::Trace);
        let mut next = Vec::new();
        model.successors(&init, &mut next);
        // The main thread blocks in A.join(); A and B wait for the GIL.
        let steps: Vec<String> = next.iter().map(|(step, _)| model.describe(*step)).collect();
        assert_eq!(steps.len(), 3, "{steps:?}");
        assert!(steps[0].starts_with("T0 main: block until"));
    }
}
