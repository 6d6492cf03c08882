//! The CPython model's steps and operations as counterexample text.
//!
//! Owns: `OpText` (an operation of a program) and `ActionText` (what a step
//! did). Uses the model's [`Action`] and the scenarios' [`Op`].

use std::fmt;

use super::super::scenario::Op;
use super::Action;

pub(super) struct OpText(pub(super) Op);

impl fmt::Display for OpText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Op::Enter(name) => write!(f, "call {name}() (RESUME)"),
            Op::AfterCall => f.write_str("after call"),
            Op::Loop(t) => write!(f, "loop back to {t}"),
            Op::JumpIf(c, t) => write!(f, "if {c:?} goto {t}"),
            Op::Sleep => f.write_str("time.sleep()"),
            Op::Block(c) => write!(f, "wait until {c:?}"),
            Op::SetEvent(n) => write!(f, "set event {n}"),
            Op::FinishPendingCalls => f.write_str("_Py_FinishPendingCalls()"),
            Op::PushPythonCall => f.write_str("Py_AddPendingCall(second_call) push"),
            Op::SignalPendingCalls => f.write_str("Py_AddPendingCall: SIGNAL_PENDING_CALLS"),
            Op::Finalize => f.write_str("Py_FinalizeEx()"),
            Op::Switch(n) => write!(f, "switch to greenlet {n}"),
        }
    }
}

pub(super) struct ActionText(pub(super) Action);

impl fmt::Display for ActionText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Action::CheckClear(site) => write!(f, "check site {site:?}: eval breaker clear, go on"),
            Action::CheckSet(site, took) => write!(
                f,
                "check site {site:?}: eval breaker set -> handle_pending; signals: {}",
                if took { "ran handlers" } else { "none" }
            ),
            Action::NoCalls => f.write_str("handle: calls_to_do clear"),
            Action::MakeBegin(b) => write!(f, "handle: make_pending_calls -> {b:?}"),
            Action::NoDrop => f.write_str("handle: no drop request"),
            Action::DropOnRequest => f.write_str("handle: drop request -> drop_gil"),
            Action::HandleEnd(c) => write!(f, "handle: end -> {c:?}"),
            Action::Pop(c) => write!(f, "make_pending_calls: pop and run {c:?}"),
            Action::MakeEnd => f.write_str("make_pending_calls: ring empty -> return (busy = 0)"),
            Action::DrainBegin => f.write_str("DestroyQueue: begin"),
            Action::DrainPop(s) => write!(f, "DestroyQueue: pop state of thread {}", s + 1),
            Action::DrainEmpty => f.write_str("DestroyQueue: queue empty -> flags released"),
            Action::EnterTracing(s) => {
                write!(
                    f,
                    "DestroyQueue: EnterTracing, destroy state of thread {}",
                    s + 1
                )
            }
            Action::LeaveTracing => f.write_str("DestroyQueue: LeaveTracing"),
            Action::DrainEnd => f.write_str("DestroyQueue: return"),
            Action::Test(c, v) => write!(f, "test {c:?} -> {v}"),
            Action::Sleep => f.write_str("time.sleep: drop_gil"),
            Action::Block(c) => write!(f, "block until {c:?}: drop_gil"),
            Action::TakeGil => f.write_str("take_gil (breaker recomputed as this thread)"),
            Action::RequestDrop => f.write_str("waited 5 ms for the GIL: SET_GIL_DROP_REQUEST"),
            Action::SetEvent(n) => write!(f, "set event {n}"),
            Action::FinishPendingCalls(b) => match b {
                Some(b) => write!(f, "_Py_FinishPendingCalls: make_pending_calls -> {b:?}"),
                None => f.write_str("_Py_FinishPendingCalls: nothing to do"),
            },
            Action::Finalize => f.write_str("Py_FinalizeEx: finalizing; cleanup queue finalized"),
            Action::DropGil => f.write_str("ran Python code; drop_gil"),
            Action::ExitAtTakeGil => f.write_str("take_gil while finalizing: thread exits"),
            Action::Woke(c) => write!(f, "woke: {c:?}"),
            Action::Push(o) => write!(f, "dies: push state onto the cleanup queue -> {o:?}"),
            Action::AddPending(ok) => write!(
                f,
                "Py_AddPendingCall: push -> {}",
                if ok { "ok" } else { "ring full" }
            ),
            Action::Signal => f.write_str("Py_AddPendingCall: SIGNAL_PENDING_CALLS as this thread"),
            Action::ScheduleFailed(retry) => write!(
                f,
                "schedule failed, reported to the queue -> {}",
                if retry { "retry" } else { "give up" }
            ),
            Action::Switch(n) => write!(f, "greenlet.switch() to greenlet {n}"),
        }
    }
}
