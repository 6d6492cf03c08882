//! The hub host as the search sees it: its verdicts (quiescence, the
//! slot's safety rules) and the text of its steps and states for
//! counterexamples.
//!
//! Owns: `HubHost`, the [`Host`] over `HubModel`'s transitions. Uses the
//! host's state ([`super::state`]), its transitions ([`super::steps`]) and
//! the frame machine shared with the CPython model
//! ([`super::super::frames`]).

use crate::cleanup::QueueCore;

use super::super::frames::{PushOutcome, StateToken};
use super::super::search::Host;
use super::state::{Act, Frame, HubState, HubStep, Park, ShutAt, Task, Who};
use super::steps::HubModel;
use super::SlotRules;

/// One hub cell's transition system as a [`Host`] of the search.
pub(super) struct HubHost<'a> {
    /// The transitions.
    pub(super) model: HubModel<'a>,
}

impl HubHost<'_> {
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
                Frame::Code { prog, pc } => format!("{}@{pc}", self.model.progs.prog_name(prog)),
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
            Who::Dying(t) => {
                let tid = t as usize + 1;
                format!("T{tid} {}", self.model.progs.thread_name(tid))
            }
            Who::Shutdown => "T0 shutdown".into(),
        }
    }
}

impl Host for HubHost<'_> {
    type State = HubState;
    type Step = HubStep;
    const LIVELOCK_IS_NO_PROGRESS: bool = true;

    fn initial(&self) -> HubState {
        self.model.initial()
    }

    fn successors(&self, st: &HubState, out: &mut Vec<(HubStep, HubState)>) {
        self.model.successors(st, out)
    }

    fn queue<'s>(&self, st: &'s HubState) -> &'s QueueCore<StateToken> {
        &st.queue
    }

    fn quiescent(&self, st: &HubState) -> bool {
        let progs = self.model.progs;
        let idle = st.shut == ShutAt::Done
            || match st.main.frames.as_slice() {
                [Frame::Code { prog, pc }] => progs.idle_at(*prog, *pc),
                _ => false,
            };
        idle && (0..st.dying.len()).all(|t| progs.finished(st, t))
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
        let add_rule = if self.model.rules == SlotRules::CleanupCounted {
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
            Act::Push(outcome) => format!(
                "dies: state pushed -> {}",
                match outcome {
                    PushOutcome::Schedule => "schedule",
                    PushOutcome::Nothing => "nothing",
                    PushOutcome::Leaked => "leaked",
                }
            ),
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
                let progs = self.model.progs;
                if d.inline.is_empty() || progs.finished(st, t) {
                    progs.dying_text(t, d.pc, d.sub)
                } else {
                    let name = progs.scenario.threads[t].name;
                    format!("{name}=[{}]", self.frames_text(&d.inline))
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
