//! Hand-offs: a parking or yielding green thread resumes the next one
//! itself when the loop's next round would do nothing else.
//!
//! A green thread that parks or yields while the loop's next round would
//! only resume the front of the ready queue (no task queued on this worker
//! to start, no remote wake, no pending call, no timer due, and no poll
//! due) does that resume itself: the same bookkeeping (wake flag, wake
//! sequence, state, the watchdog's counters, the current task), then a
//! switch straight to that green thread through the dispatcher on the
//! hub's stack (the hub stays suspended in its resume, and finds which
//! green thread came back through `current`), or no switch at all when the
//! front is itself. Armed timers do not stop it: it reads the clock and
//! compares with the soonest deadline, so a due timer sends it to the
//! loop. A hand-off counts as a round of the poll cadence, so a busy set
//! of green threads reaches the loop at least every [`POLL_EVERY`](super::scheduler::POLL_EVERY) rounds:
//! I/O and the runtime-wide sources (the injector, other workers' deques,
//! the shutdown) are taken then, and nothing starves; a cancellation
//! waiting for the front is left to the loop, which throws it.
//!
//! Owns: [`Next`], [`Idle`] and the check that the loop may be skipped. Uses the
//! worker's state, the held reference, the resume bookkeeping of
//! `switch` and `coroutine::direct`'s sibling switch.

use std::mem::ManuallyDrop;
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::coroutine::direct;

use super::super::task_header::Task;
use super::gate::Gate;
use super::remote::Remote;
use super::state::Worker;
use super::switch::see_next;

/// The gate's word (see [`Gate`]) when [`Worker::hub_is_idle`] let a
/// hand-off by: made there only, so holding one proves it (see
/// [`Worker::live_sibling`]).
pub(super) struct Idle(u32);

/// What a parking green thread does next (see
/// [`Worker::next_after_park`]).
#[derive(Debug)]
pub(crate) enum Next {
    /// Park: switch to the hub.
    Hub,
    /// Run on: it was the next ready task (resumed, without a switch).
    Myself,
    /// Resumed as [`Next::Myself`], with a cancellation to deliver.
    Cancelled,
    /// Hand the CPU to this green thread (resumed), without the hub.
    Sibling(direct::Sibling),
}

impl Worker {
    /// The green thread `me`, parking (its state set, its timer armed),
    /// picks what runs next without the loop's round when the loop would
    /// only resume the front of the ready queue (see
    /// [`hub_is_idle`](Self::hub_is_idle)). The front is resumed as the
    /// loop would resume it (the same bookkeeping), unless it is done or a
    /// cancellation waits for a sibling (queued again for the loop, which
    /// throws it): [`Next::Myself`] when it is `me` (woken already; with a
    /// cancellation, [`Next::Cancelled`]), else a [`Next::Sibling`] to hand
    /// the CPU to. [`Next::Hub`]: park.
    ///
    /// `requeue`: a yield's own reference, queued at the back first (with
    /// one other task ready, the two trade places in the queue's one slot).
    #[inline(always)]
    pub(crate) fn next_after_park(&self, me: &Task, requeue: Option<Arc<Task>>) -> Next {
        let remote = self.remote();
        let Some(idle) = self.hub_is_idle(remote) else {
            if let Some(me) = requeue {
                self.push_ready_local(me);
            }
            return Next::Hub;
        };
        let ready = &self.ready;
        // The next one's stack top is looked at when more than one is
        // left (see `enter`): with one left (a yield's trade in the
        // queue's one slot), nothing to look at.
        let next = match requeue.map(|me| ready.replace_single(me)) {
            None => ready.pop_front_seeing(see_next),
            Some(Ok(front)) => Some(front),
            Some(Err(me)) => {
                ready.push_back(me);
                ready.pop_front_seeing(see_next)
            }
        };
        let Some(next) = next else {
            return Next::Hub;
        };
        // Without drop glue from here on, so that no unwind path keeps it
        // in the frame: each way out below gives the reference on, or
        // drops it, once.
        let next = ManuallyDrop::new(next);
        // `Some(None)`: the front is `me` itself, to run on without a
        // switch; `Some(Some(_))`: a sibling to switch to; `None`: neither
        // (the front goes back, and the park to the hub).
        let handed = if ptr::eq(Arc::as_ptr(&next), me) {
            // Hooks see a park switch to the hub and back.
            (!direct::observed()).then_some(None)
        } else {
            self.live_sibling(&next, &idle).map(Some)
        };
        let Some(to) = handed.filter(|_| !next.is_done() && self.no_timer_due(idle.0)) else {
            self.ready.push_front(ManuallyDrop::into_inner(next));
            return Next::Hub;
        };
        self.gate.count(idle.0);
        next.take_scheduled();
        if next.take_cancel() {
            // The loop throws it into a sibling: asked for again, which
            // queues the sibling again (its wake flag is clear).
            if to.is_some() {
                next.request_cancel();
                drop(ManuallyDrop::into_inner(next));
                return Next::Hub;
            }
            self.enter_unseen(remote, &next);
            self.hold(ManuallyDrop::into_inner(next));
            return Next::Cancelled;
        }
        self.enter_unseen(remote, &next);
        self.hold(ManuallyDrop::into_inner(next));
        match to {
            Some(s) => Next::Sibling(s),
            None => Next::Myself,
        }
    }

    /// The greenlet of `next`, a started task of this worker, as a sibling
    /// the running green thread may switch straight to (see
    /// `direct::sibling_of`), if it is one: found through the task's
    /// `greenlet` address, set while its entry is in `live` (no lookup in
    /// the table). `_idle`: the proof that the gate let a hand-off by, so
    /// that this worker has its thread's greenlet state.
    #[inline(always)]
    pub(super) fn live_sibling(&self, next: &Arc<Task>, _idle: &Idle) -> Option<direct::Sibling> {
        let record = next.greenlet.load(Ordering::Relaxed);
        if record.is_null() {
            return None;
        }
        // SAFETY: `thread` is `Some`: an `Idle` is made only by
        // `hub_is_idle`, when the gate lets a hand-off by, which it never
        // does on a worker whose `thread` is `None` (`main` bars them then,
        // for good, before the loop). It was taken on this worker's thread,
        // which runs this, before its loop (its greenlet state lives until
        // the thread's teardown, after the worker); a non-null `greenlet`
        // is the record of the greenlet of `next`'s entry in `live`, made
        // by `start` on this thread and held by that entry (the address is
        // cleared before the entry goes, see `drop_entry` and teardown).
        unsafe { direct::sibling_of(self.thread.unwrap_unchecked(), record) }
    }

    /// A yield of the green thread `me` when nothing else is ready and the
    /// loop would only resume it (see [`hub_is_idle`](Self::hub_is_idle)),
    /// no timer being due: it runs on where it is; whether it does. A round
    /// of the poll cadence without the rest of a resume's bookkeeping: it
    /// never left the running state, `current` and the watchdog's `running`
    /// name it already, its wake sequence only matters to timers (none is
    /// armed for it: it has not parked since its last resume, which made
    /// older entries stale), and the watchdog's tick moves at the loop's
    /// resume, at least every [`POLL_EVERY`](super::scheduler::POLL_EVERY) rounds. A pending cancellation
    /// is left to the park, and so is a yield that trace hooks observe.
    #[inline(always)]
    pub(crate) fn yield_in_place(&self, me: &Task) -> bool {
        if !self.ready.is_empty() || me.cancel_requested() || direct::observed() {
            return false;
        }
        let Some(idle) = self.hub_is_idle(self.remote()) else {
            return false;
        };
        if !self.no_timer_due(idle.0) {
            return false;
        }
        self.gate.count(idle.0);
        true
    }

    /// Whether no timer is due now: the loop's next round would fire none.
    /// Reads the clock only while a timer is armed (the loop's round reads
    /// it then too, to fire them), so a green thread with a deadline (a
    /// `sleep`, a `timeout`, a server's) does not keep its worker from
    /// handing off, and a due timer sends the parking green thread to the
    /// loop, which fires it: timers fire at the first scheduling point
    /// after their deadline, hand-off or not.
    /// `gate`: the gate's word the hand-off read (with no timer armed,
    /// nothing else is read).
    #[inline(always)]
    pub(super) fn no_timer_due(&self, gate: u32) -> bool {
        if !Gate::timers_armed(gate) {
            return true;
        }
        // SAFETY: the reference ends when `none_due` returns, which calls
        // nothing but the clock: nothing that could borrow the timers
        // mutably runs meanwhile (as `borrow` would check, at a cost).
        match unsafe { self.timers.try_borrow_unguarded() } {
            Ok(timers) => timers.none_due(Instant::now),
            Err(_) => false,
        }
    }

    /// Whether the loop's next round would only resume the front of the
    /// ready queue, as far as this worker's own work and the wakes aimed
    /// at it go: no task queued here to start (the gate's local-work flag), no remote
    /// wake, no pending call, and the poll cadence not due. `Some` of the
    /// gate's word (see [`Gate`]) as an [`Idle`], then. (Timers: see
    /// [`no_timer_due`](Self::no_timer_due), asked once a hand-off has
    /// someone to resume.)
    ///
    /// A round without the loop counts as one of its rounds, so the worker
    /// still polls every [`POLL_EVERY`](super::scheduler::POLL_EVERY) rounds, and a busy set of green
    /// threads reaches the loop at least that often. What any worker of
    /// the runtime may serve (tasks on the injector or on another worker's
    /// deque, to steal) and the shutdown are left to that round: a busy
    /// worker takes them late by at most [`POLL_EVERY`](super::scheduler::POLL_EVERY) rounds (as it
    /// does I/O), never starved; an idle one sees them before it sleeps
    /// ([`work_from_outside`](Self::work_from_outside), unchanged), and
    /// their producers wake a sleeping worker as before. Only the wakes
    /// and calls that must run at this worker's next scheduling point are
    /// read at every hand-off: the inbox's slot (one word: a task, or the
    /// mark of its overflow; the one wake it may miss, racing the loop's
    /// take, the loop takes at most [`POLL_EVERY`](super::scheduler::POLL_EVERY) rounds later, see
    /// `Inbox::marked`) and the pending-call flag. No new flag is shared
    /// between threads, and the sleep handshake reads the whole inbox, so
    /// no interleaving can lose a wake.
    #[inline(always)]
    pub(super) fn hub_is_idle(&self, remote: &Remote) -> Option<Idle> {
        let gate = self.gate.word();
        let busy =
            !Gate::lets_by(gate) || remote.inbox.marked() || self.shared.pending.wants_drain();
        (!busy).then_some(Idle(gate))
    }
}
