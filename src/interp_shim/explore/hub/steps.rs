//! The hub host's transitions: every step a worker (its scheduling point,
//! its pick of a ready task, its sleep), a green thread (the main program,
//! a slot drain), a dying thread or the shutdown can take from a state.
//!
//! Owns: `HubModel`. Uses the slot's rules from `crate::hub::pending` as
//! pure steps, the host's state ([`super::state`]), the frame machine
//! shared with the CPython model ([`super::super::frames`]) and the
//! scenarios' operations.

use crate::cleanup::{Policy, QueueCore, Retry};
use crate::hub::pending::{drain_goes_on, end_drain, may_sleep, wants_drain, Flags, Refused, Ring};

use super::super::frames::{
    drain_step, push_state, DrainMove, DrainStage, ProgRef, Programs, PushOutcome,
};
use super::super::scenario::{Cond, Op, Scenario, ThreadOp};
use super::state::{
    Act, Bent, Call, Ctx, DyingAt, Frame, HubState, HubStep, Park, PlainFlags, ShutAt, SlotAt,
    Task, Who, WorkerAt, DIE_ADD, DIE_CHECK, DIE_FAILED, DIE_INLINE, DIE_NOTIFY, DIE_PUSH,
};
use super::{SlotRules, HUB_CAPACITY};

/// The transition relation of one hub cell: the scenario's programs, the
/// policy, the slot's rules and the number of workers.
pub(super) struct HubModel<'a> {
    /// The scenario's programs and threads.
    pub(super) progs: Programs<'a>,
    /// The cleanup policy.
    pub(super) policy: Policy,
    /// The slot's rules (the real ones, or one broken on purpose).
    pub(super) rules: SlotRules,
    /// How many workers the runtime has.
    pub(super) workers: usize,
}

/// At most this many drains are followed at once (a second is already a
/// violation).
const MAX_DRAINS: usize = 2;

impl HubModel<'_> {
    fn scenario(&self) -> &Scenario {
        self.progs.scenario
    }

    fn bent<'s>(&self, flags: &'s mut PlainFlags) -> Bent<'s> {
        Bent {
            flags,
            rules: self.rules,
        }
    }

    fn cond(&self, st: &HubState, c: Cond) -> bool {
        self.progs.cond(st, c)
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
            let ops = self.progs.ops(*prog);
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
            Call::Drain => frames.push(Frame::Cleanup(DrainStage::Begin)),
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
            Frame::Code { prog, pc } => match self.progs.ops(prog)[pc as usize] {
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
            Frame::Cleanup(mut stage) => {
                // The hub has no tracing: no destruction is shielded.
                let Some(done) = drain_step(&mut s.queue, &mut stage, false) else {
                    return;
                };
                if let Some(f) = self.frames_mut(&mut s, ctx).last_mut() {
                    *f = Frame::Cleanup(stage);
                }
                let act = match done {
                    DrainMove::Began => Act::CleanupBegin,
                    DrainMove::Destroy(token) | DrainMove::Shield(token) => {
                        self.call(self.frames_mut(&mut s, ctx), ProgRef::Finalizer(token));
                        Act::CleanupPop(Some(token))
                    }
                    DrainMove::Empty => Act::CleanupPop(None),
                    DrainMove::Ended => {
                        self.frames_mut(&mut s, ctx).pop();
                        self.after_frames(&mut s, ctx);
                        Act::CleanupEnd
                    }
                };
                push(act, s);
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
                    let outcome = push_state(&mut s.queue, t);
                    if outcome == PushOutcome::Schedule {
                        set(&mut s, pc, DIE_CHECK);
                    } else {
                        set(&mut s, pc + 1, DIE_PUSH);
                    }
                    push(Act::Push(outcome), s);
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
        s.dying[t].inline = vec![Frame::Cleanup(DrainStage::Begin)];
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
                        s.shut_frames = vec![Frame::Cleanup(DrainStage::Begin)];
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

    /// The initial state: the slot (full, if the scenario says so), the
    /// main program's green thread ready on worker 0, every worker at the
    /// top of its round.
    pub(super) fn initial(&self) -> HubState {
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

    /// Every step any worker or thread can take from `st`, with the state
    /// after it (`out` is cleared first).
    pub(super) fn successors(&self, st: &HubState, out: &mut Vec<(HubStep, HubState)>) {
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
}
