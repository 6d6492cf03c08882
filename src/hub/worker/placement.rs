//! Where an unstarted task waits and which worker starts it: the
//! newest-spawn slot, the worker's deque, its one-worker spawn stack and
//! its line of `spawn_local` and placed tasks; finding the next task to
//! start (own queues first, then the injector, stolen batches, and other
//! workers' newest spawns once they aged).
//!
//! # The newest-spawn slot
//! With other workers a spawned task goes in the worker's newest-spawn
//! slot, which other workers do not steal from until it has aged (see
//! [`Worker::push_unstarted`]), and the one it displaces on top of the
//! deque, so siblings start newest first, and a task spawned by a green
//! thread that then parks starts on that green thread's worker (as a task
//! and the one it talks to are best placed). The deque is LIFO: a worker
//! starts the newest unstarted task first (depth first, so a tree of tasks
//! keeps few stacks alive), and other workers steal the oldest. On a
//! runtime of one worker the tasks a green thread spawns wait on the
//! worker's own stack instead (no stealer, so no deque), put in order when
//! it parks, the first spawned on top, so they start in spawn order (and
//! before older unstarted tasks).
//!
//! # A spawn after an accept
//! A green thread's first spawn after it accepted a connection is the
//! connection's handler: it is dealt out over the workers (see `deal`).
//!
//! Owns: [`SLOT_AGE`], the slot's aging rule and the steal order. Uses the
//! worker's state, the newest-spawn slot and `crossbeam-deque`.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_deque::Steal;

use super::super::counters::Counters;

use super::super::unstarted::{LocalUnstarted, Unstarted};
use super::state::{Watch, Worker};

/// How long another worker leaves a worker's newest spawn (see
/// [`Worker::push_unstarted`]) alone while that worker has not come back
/// to its hub, from the first time it saw it there. It trades locality
/// (a task starting beside the green thread that spawned it, which then
/// joins it or talks to it) against latency (a spawner that computes holds
/// its task back this long). A green thread that spawns and then parks or
/// yields is back in well under a microsecond; one that has not come back
/// in this long is computing (or lost its CPU), and its newest spawn has
/// already waited as long as a wake of a sleeping worker costs on a
/// virtual machine (about 20 µs), so moving it costs less than waiting on.
/// Re-measure with `cargo bench --bench hub -- "2 workers"` (the two-worker
/// ping-pong, whose pinger spins until its echo started, and the spawn
/// tree). Below [`SPIN_WINDOW`](super::super::idle::SPIN_WINDOW), so that a spinning worker
/// that saw it at the start of its spin takes it before the spin ends.
pub(crate) const SLOT_AGE: Duration = Duration::from_micros(20);
/// `Worker::batch` with no batch open.
pub(super) const NO_BATCH: usize = usize::MAX;

impl Worker {
    /// Queue a `Send` task spawned on this worker. With other workers it
    /// goes in the newest-spawn slot (`Remote::newest`), and the task it
    /// displaces, if any, on top of the deque, where other workers may
    /// steal it: this worker starts the newest first (depth first), and a
    /// burst of spawns still spreads. The slot's task starts here at the
    /// next scheduling point (the spawner's park or yield), so a green
    /// thread that spawns a task and then waits for it, or talks to it,
    /// keeps it on its own worker. Other workers leave the slot alone
    /// until it has aged: occupied, with this worker not back at its hub,
    /// for [`SLOT_AGE`] since they first saw it so (see
    /// [`aged_slot`](Self::aged_slot)); then one takes it, so a spawner
    /// that spins or computes does not hold its task back (the two-worker
    /// ping-pong's pinger spins until the other worker has started its
    /// echo: kept aside without that bound, it hung). An idle worker is
    /// notified as before: it is the one that watches the slot's age.
    ///
    /// On a runtime of one worker nobody steals, so it stays on this
    /// worker's own stack (`spawned`: no deque, whose `pop` costs a
    /// `SeqCst` fence and, for its last task, a `cmpxchg`), in the batch of
    /// its spawner, which goes on top in spawn order when the spawner parks
    /// (see [`flush_spawned`](Self::flush_spawned)).
    pub(crate) fn push_unstarted(&self, u: Unstarted) {
        if self.shared.workers.len() > 1 {
            let accepted = self.accepted.get();
            if !accepted.is_null() && accepted == self.current.get() {
                return self.deal_accepted(u);
            }
            if let Some(older) = self.remote().newest.put(u) {
                self.deque.push(older);
            }
            self.gate.set_local_work(true);
            self.shared.notify_idle();
            return;
        }
        let mut spawned = self.spawned.borrow_mut();
        if self.batch.get() == NO_BATCH {
            self.batch.set(spawned.len());
        }
        // Only this thread takes it from here (to start it, or to drop it
        // at shutdown), so only this thread can finish it.
        u.task().set_finisher(self.index);
        spawned.push(u);
        self.has_spawned.set(true);
        self.gate.set_local_work(true);
    }

    /// On a runtime of one worker, close the batch of tasks spawned since
    /// the last flush: turned round in place, so that the first spawned is
    /// on top of the stack and the worker starts them in spawn order and
    /// before the tasks queued earlier (depth first: a tree of tasks keeps
    /// few stacks alive). No other worker to wake, so no notification.
    #[inline]
    pub(super) fn flush_spawned(&self) {
        if self.batch.get() != NO_BATCH {
            self.flush_spawned_now();
        }
    }

    /// [`flush_spawned`](Self::flush_spawned), with a batch open.
    pub(super) fn flush_spawned_now(&self) {
        let batch = self.batch.replace(NO_BATCH);
        let mut spawned = self.spawned.borrow_mut();
        if let Some(open) = spawned.get_mut(batch..) {
            open.reverse();
        }
    }

    /// The top of the one-worker stack of unstarted tasks (see
    /// [`push_unstarted`](Self::push_unstarted)), if it holds one.
    pub(super) fn pop_spawned(&self) -> Option<Unstarted> {
        let mut spawned = self.spawned.borrow_mut();
        let u = spawned.pop();
        if spawned.is_empty() {
            self.has_spawned.set(false);
        }
        u
    }

    /// Queue a `!Send` task on this worker.
    pub(crate) fn push_local(&self, u: LocalUnstarted) {
        self.local_new.borrow_mut().push_back(u);
        self.gate.set_local_work(true);
    }

    /// Start a task at the front of the line (the pending-call drain).
    pub(crate) fn push_local_first(&self, u: LocalUnstarted) {
        self.local_new.borrow_mut().push_front(u);
        self.gate.set_local_work(true);
    }

    /// Start one unstarted task, if there is one; whether one was: queued
    /// on this worker, or (`wide`) from the runtime's injector or stolen
    /// from another worker. With none, the gate's local-work flag is cleared: nothing is
    /// queued on this worker to start (unless the hub itself spawned one,
    /// in `cancel_all`: it waits in `spawned`).
    pub(super) fn start_next(&self, wide: bool) -> bool {
        let local = self.local_new.borrow_mut().pop_front();
        if let Some(u) = local {
            self.start(u);
            return true;
        }
        if let Some(u) = self.find_unstarted(wide) {
            self.start(u);
            return true;
        }
        self.gate.set_local_work(self.has_spawned.get());
        false
    }

    /// An unstarted `Send` task: this worker's own (its one-worker stack,
    /// its newest-spawn slot, its deque), else (`wide`) one of the
    /// injector's, a stolen batch's, or another worker's aged newest spawn.
    pub(super) fn find_unstarted(&self, wide: bool) -> Option<Unstarted> {
        if self.has_spawned.get() {
            if let Some(u) = self.pop_spawned() {
                return Some(u);
            }
        }
        if let Some(u) = self.remote().newest.take() {
            return Some(u);
        }
        if !self.deque.is_empty() {
            if let Some(u) = self.deque.pop() {
                return Some(u);
            }
        }
        if !wide {
            return None;
        }
        if self.shared.injector.is_empty() && !self.others_have_stealable() {
            return self.take_aged_slot();
        }
        loop {
            match self.shared.injector.steal_batch_and_pop(&self.deque) {
                Steal::Success(u) => {
                    // The rest of the batch waits on the deque.
                    self.gate.set_local_work(true);
                    return Some(u);
                }
                Steal::Retry => continue,
                Steal::Empty => break,
            }
        }
        let n = self.shared.workers.len();
        for k in 1..n {
            let victim = &self.shared.workers[(self.index + k) % n];
            loop {
                match victim.stealer.steal_batch_and_pop(&self.deque) {
                    Steal::Success(u) => {
                        Counters::add(&self.remote().counters.steals, 1);
                        self.gate.set_local_work(true);
                        return Some(u);
                    }
                    Steal::Retry => continue,
                    Steal::Empty => break,
                }
            }
        }
        self.take_aged_slot()
    }

    /// The task in another worker's newest-spawn slot, if that slot has
    /// aged (see [`aged_slot`](Self::aged_slot)).
    pub(super) fn take_aged_slot(&self) -> Option<Unstarted> {
        if self.shared.workers.len() == 1 {
            return None;
        }
        let victim = self.aged_slot()?;
        self.watch[victim].set(None);
        let taken = self.shared.workers[victim].newest.take();
        if taken.is_some() {
            Counters::add(&self.remote().counters.steals, 1);
        }
        taken
    }

    /// Another worker whose newest-spawn slot has aged: occupied, with
    /// that worker's `tick` (moved at every resume it makes, so at every
    /// scheduling point, where it would start the slot's task) unchanged
    /// for [`SLOT_AGE`] (the runtime's `slot_age`) since this worker first
    /// saw it so. Updates `watch` with what it sees; reads the clock only
    /// for an occupied slot.
    #[inline(never)]
    pub(super) fn aged_slot(&self) -> Option<usize> {
        let workers = &self.shared.workers;
        let mut now = None;
        let mut aged = None;
        for (i, r) in workers.iter().enumerate() {
            if i == self.index {
                continue;
            }
            let watch = &self.watch[i];
            if !r.newest.is_occupied() {
                watch.set(None);
                continue;
            }
            let now = *now.get_or_insert_with(Instant::now);
            let tick = r.tick.load(Ordering::Relaxed);
            match watch.get() {
                Some(w) if w.tick == tick => {
                    if !w.again {
                        watch.set(Some(Watch { again: true, ..w }));
                    }
                    let age = now.saturating_duration_since(w.since);
                    if aged.is_none() && age >= self.shared.slot_age {
                        aged = Some(i);
                    }
                }
                _ => watch.set(Some(Watch {
                    tick,
                    since: now,
                    again: false,
                })),
            }
        }
        aged
    }

    /// When the soonest newest-spawn slot this worker watches will have
    /// aged (see [`aged_slot`](Self::aged_slot)), if it watches one: an
    /// idle worker sleeps no longer, so that it takes the task of a
    /// spawner that does not come back to its hub.
    #[inline(never)]
    pub(super) fn slot_deadline(&self) -> Option<Instant> {
        self.watch
            .iter()
            .filter_map(|w| w.get().map(|w| w.since + self.shared.slot_age))
            .min()
    }

    /// The soonest deadline of a watched slot seen occupied at two looks
    /// with its worker not back at its hub in between, if it is at most
    /// [`SLOT_AGE`] after `now`: an idle worker spins to it rather than
    /// sleep, which would last the poller's millisecond at least. Not
    /// for a slot seen once: a spawner that parks at once (a spawn and
    /// join, a ping-pong) empties its slot well before a second look, and
    /// another worker spinning on each of its spawns would spin all the
    /// time.
    #[inline(never)]
    pub(super) fn slot_due(&self, now: Instant) -> Option<Instant> {
        self.watch
            .iter()
            .filter_map(|w| w.get().filter(|w| w.again))
            .map(|w| w.since + self.shared.slot_age)
            .filter(|d| d.saturating_duration_since(now) <= SLOT_AGE)
            .min()
    }

    /// Whether another worker's deque holds unstarted tasks to steal, or
    /// its newest-spawn slot has aged (a slot that has not is no work for
    /// this worker: an idle worker that counted it would spin on it).
    #[inline(always)]
    pub(super) fn others_have_unstarted(&self) -> bool {
        self.shared.workers.len() > 1
            && (self.others_have_stealable() || self.aged_slot().is_some())
    }

    /// Whether another worker's deque holds unstarted tasks to steal.
    #[inline(always)]
    pub(super) fn others_have_stealable(&self) -> bool {
        let workers = &self.shared.workers;
        workers.len() > 1
            && workers
                .iter()
                .enumerate()
                .any(|(i, r)| i != self.index && !r.stealer.is_empty())
    }
}
