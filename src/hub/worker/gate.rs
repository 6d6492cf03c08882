//! The one word a hand-off reads for the worker's own reasons to go
//! through the loop ([`Gate`]): the rounds left before the next poll, and
//! three flags, "a task queued here to start may wait", "a timer may be
//! armed" and "no hand-offs on this worker". A park tests it with one
//! comparison (see `Worker::hub_is_idle`), and the timers only while one
//! may be armed; the flags are set and cleared where those things change,
//! all on the worker's own thread.
//!
//! Owns: [`Gate`], and the worker's timer calls that keep its timers flag
//! ([`Worker::arm_timer`], [`Worker::cancel_timer`],
//! [`Worker::expire_timers`], [`Worker::clear_timers`]). Uses the worker's
//! timers.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Instant;

use super::super::task_header::Task;
use super::super::timer::TimerKey;
use super::state::Worker;

/// Set while a timer may be armed (cleared when the timers are empty):
/// the lowest bit, below the rounds, so that it does not change which
/// words [`Gate::lets_by`] lets by.
const TIMERS: u32 = 1;
/// One round of the rounds left before the next poll (see `POLL_EVERY`),
/// counted in the bits above [`TIMERS`] and below [`NO_HANDOFF`].
const ROUND: u32 = 2;
/// Set for good on a worker whose thread has no greenlet state to hand
/// off through (see `Worker::bar_handoffs`): no hand-off is let by.
const NO_HANDOFF: u32 = 1 << 29;
/// Set while a task queued on this worker to start may wait.
const LOCAL_WORK: u32 = 1 << 31;
/// The bits of the rounds left.
const ROUNDS: u32 = (NO_HANDOFF - 1) & !TIMERS;

/// The rounds left before the worker's next poll, between the timers
/// flag below them and the other two flags above them (see the module
/// doc). At least two rounds with neither flag above is a word in
/// `4..NO_HANDOFF`, whatever the timers flag: one comparison lets a
/// hand-off by.
pub(crate) struct Gate(Cell<u32>);

impl Gate {
    /// `rounds` to the first poll, no flag set.
    pub(super) const fn new(rounds: u32) -> Gate {
        Gate(Cell::new((rounds * ROUND) & ROUNDS))
    }

    /// The word, for [`lets_by`](Self::lets_by),
    /// [`timers_armed`](Self::timers_armed) and [`count`](Self::count).
    #[inline(always)]
    pub(super) fn word(&self) -> u32 {
        self.0.get()
    }

    /// Whether `word` lets a hand-off skip the loop as far as this worker's
    /// own work goes: at least two rounds left before the poll (the
    /// hand-off counts one), no task queued to start, and hand-offs not
    /// barred; a timer may be armed (then
    /// [`timers_armed`](Self::timers_armed), and the clock decides).
    #[inline(always)]
    pub(super) fn lets_by(word: u32) -> bool {
        word.wrapping_sub(2 * ROUND) < NO_HANDOFF - 2 * ROUND
    }

    /// Whether a timer may be armed, by `word`.
    #[inline(always)]
    pub(super) fn timers_armed(word: u32) -> bool {
        word & TIMERS != 0
    }

    /// Count a hand-off's round: `word` (read by [`word`](Self::word), let
    /// by [`lets_by`](Self::lets_by), so with two rounds left at least)
    /// less one round.
    #[inline(always)]
    pub(super) fn count(&self, word: u32) {
        self.0.set(word - ROUND);
    }

    /// Count a round of the loop: whether it is the one that polls (the
    /// last of the rounds left, which start again at `every`).
    #[inline(always)]
    pub(super) fn count_loop_round(&self, every: u32) -> bool {
        let word = self.0.get();
        if word & ROUNDS > ROUND {
            self.0.set(word - ROUND);
            return false;
        }
        self.0.set((word & !ROUNDS) | ((every * ROUND) & ROUNDS));
        true
    }

    /// The rounds left before the next poll.
    #[cfg(test)]
    fn rounds(&self) -> u32 {
        (self.0.get() & ROUNDS) / ROUND
    }

    /// Whether a task queued on this worker to start may wait.
    pub(super) fn local_work(&self) -> bool {
        self.0.get() & LOCAL_WORK != 0
    }

    /// Say whether a task queued on this worker to start may wait.
    pub(super) fn set_local_work(&self, on: bool) {
        self.set_flag(LOCAL_WORK, on);
    }

    /// Whether a timer may be armed.
    pub(super) fn timers(&self) -> bool {
        Self::timers_armed(self.0.get())
    }

    /// Let no hand-off by from now on (never undone).
    pub(super) fn bar_handoffs(&self) {
        self.set_flag(NO_HANDOFF, true);
    }

    fn set_flag(&self, flag: u32, on: bool) {
        let word = self.0.get() & !flag;
        self.0.set(if on { word | flag } else { word });
    }
}

impl Worker {
    /// Arm a timer for `task` at `at` (see `Timers::arm`).
    #[inline]
    pub(crate) fn arm_timer(&self, at: Instant, task: &Arc<Task>) -> TimerKey {
        let key = self.timers.borrow_mut().arm(at, Arc::clone(task));
        self.gate.set_flag(TIMERS, true);
        key
    }

    /// Cancel the timer `key` (a no-op for one that fired); its target, to
    /// drop once the timers are no longer borrowed.
    #[inline]
    pub(crate) fn cancel_timer(&self, key: TimerKey) -> Option<Arc<Task>> {
        let mut timers = self.timers.borrow_mut();
        let target = timers.cancel(key);
        self.gate.set_flag(TIMERS, !timers.is_empty());
        target
    }

    /// Hand `wake` every target due at `now` (see `Timers::expire`).
    pub(super) fn expire_timers(&self, now: Instant, wake: impl FnMut(Arc<Task>)) {
        let mut timers = self.timers.borrow_mut();
        timers.expire(now, wake);
        self.gate.set_flag(TIMERS, !timers.is_empty());
    }

    /// Drop every timer (the worker's teardown).
    pub(super) fn clear_timers(&self) {
        self.timers.borrow_mut().clear();
        self.gate.set_flag(TIMERS, false);
    }
}

#[cfg(test)]
mod tests {
    use super::{Gate, LOCAL_WORK, NO_HANDOFF, ROUND, ROUNDS, TIMERS};

    #[test]
    fn only_two_rounds_or_more_with_no_work_to_start_let_a_hand_off_by() {
        for rounds in [0, 1, 2, 3, 61, ROUNDS / ROUND] {
            for flags in (0..8).map(|k| {
                [LOCAL_WORK, TIMERS, NO_HANDOFF]
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| k & (1 << i) != 0)
                    .fold(0, |all, (_, f)| all | f)
            }) {
                let word = (rounds * ROUND) | flags;
                let expected = rounds >= 2 && flags & (LOCAL_WORK | NO_HANDOFF) == 0;
                assert_eq!(Gate::lets_by(word), expected, "{word:#x}");
                assert_eq!(Gate::timers_armed(word), flags & TIMERS != 0, "{word:#x}");
            }
        }
    }

    #[test]
    fn a_counted_round_and_the_setters_keep_the_other_parts() {
        let gate = Gate::new(61);
        gate.set_local_work(true);
        gate.set_flag(TIMERS, true);
        for _ in 0..56 {
            assert!(!gate.count_loop_round(61));
        }
        assert!(gate.local_work() && gate.timers());
        assert_eq!(gate.rounds(), 5);
        gate.set_local_work(false);
        assert!(Gate::lets_by(gate.word()));
        gate.count(gate.word());
        assert_eq!(gate.rounds(), 4);
        assert!(gate.timers() && !gate.local_work());
        gate.set_flag(TIMERS, false);
        assert_eq!(gate.word(), 4 * ROUND);
        gate.bar_handoffs();
        assert!(!Gate::lets_by(gate.word()));
        gate.set_local_work(true);
        gate.set_local_work(false);
        assert!(!Gate::lets_by(gate.word()), "barred for good");
        gate.set_flag(NO_HANDOFF, false);
        for _ in 0..3 {
            assert!(!gate.count_loop_round(61));
        }
        assert!(gate.count_loop_round(61), "the last round left polls");
        assert_eq!(gate.rounds(), 61);
    }
}
