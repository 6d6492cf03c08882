//! Which worker starts a connection's handler: the dealing of a green
//! thread's first spawn after it accepted a connection, by turn and by
//! load, and the load each worker publishes for it.
//!
//! # A spawn after an accept
//! A green thread that accepted a connection (`net`'s listeners call
//! [`Worker::note_accepted`]) has its next spawn dealt out over the
//! workers (`net::serve` is such a loop): that spawn is the connection's
//! handler (the accept loop written as `loop { let (s, _) = l.accept()?;
//! hub::spawn(move || handle(s)); }`), whose socket's waits stay with the
//! worker it starts on, as the green thread does: a started green thread
//! never moves, so where a connection starts is the only choice there is
//! of which worker serves it. Left to the newest-spawn slot, every
//! handler started on the accepting worker (it accepts a burst and starts
//! each new task before another worker looks), so one worker served the
//! whole server. A spawn that is not the handler (the accepting green
//! thread spawns something else first) is only placed elsewhere; a green
//! thread that accepts and never spawns leaves a mark that costs a later
//! green thread at its address (a reused task) one such placement.
//!
//! # By turn, unless a worker is stalled or loaded
//! The workers take turns, so that connections accepted in a burst (a
//! load test opening its connections, a pool reconnecting) are spread
//! exactly; the turn passes over a worker that cannot start a handler
//! soon or that holds clearly more than another:
//! - **Stalled**: not idle, and no green thread resumed on it for
//!   [`STALL`] since the dealer first saw it so: one green thread computes
//!   without parking, or blocks its thread (a thread waiting for a CPU
//!   waits less than that). A handler placed there would wait as long;
//!   another worker starts it now. The accepting worker itself is never
//!   stalled (it is running), so there is always a worker to deal to.
//! - **Loaded**: its load exceeds the least load of the workers that are
//!   not stalled by more than [`SLACK`]. A worker's load is its green
//!   threads started and not finished, its tasks queued to start, its ready
//!   queue (green threads woken and waiting for its CPU: the backlog a
//!   worker starved of CPU builds up) and the handlers dealt to it and not
//!   yet taken. The accepting worker counts its own exactly; each other
//!   worker publishes its counts (the `tasks` and `ready_depth` of its
//!   `Counters`) at its polls that do not wait, when it goes idle and when
//!   it takes placed tasks, and the dealer adds `placed`, the handlers
//!   dealt to it that it has not taken. A published count is late by at most one poll
//!   cadence: it may still count green threads that finished since.
//!
//! Owns: the dealing ([`Worker::note_accepted`], `deal_accepted`), its
//! constants and the worker's published load. Uses the worker's state,
//! the other workers' `Remote` (their counters, `tick` and placement
//! queue).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::super::unstarted::Unstarted;
use super::state::{DealWatch, Worker};

/// How long a worker that is not idle may go without resuming a green
/// thread before the dealing passes over it (see the module doc). Shorter
/// sends connections away sooner from a worker whose green thread computes
/// or blocks; longer keeps the exact turn while a worker's thread only
/// waits for a CPU. A busy worker resumes a green thread every few
/// microseconds; on a loaded machine its thread may wait a scheduler
/// period for a CPU (a few to about 20 milliseconds), and a turn skipped
/// for that stays skipped for the connection's life: with a 2 ms bound,
/// two-worker echo on a loaded machine (50 and 500 connections opened in
/// a burst) served its slowest connection at a median 0.75 of the mean
/// against 0.88 for the exact turn in the same runs. Re-measure with
/// `PARTS=2 PROTOCOLS=echo bash benches/net-peers/run.sh` (the slowest
/// connection over the mean, "slow/mean") and `cargo test --release
/// --test net deal_by_load`.
pub(crate) const STALL: Duration = Duration::from_millis(50);

/// How much more load than the least loaded worker the turn's worker may
/// hold and still be dealt to (see the module doc). Smaller moves new
/// connections off a worker at a smaller imbalance; larger keeps the exact
/// turn when counts are late or a few green threads besides the handlers
/// (the accept loop, the root) sit on one worker. Re-measure as
/// [`STALL`].
pub(crate) const SLACK: usize = 8;

impl Worker {
    /// The running green thread accepted a connection: on a runtime of
    /// several workers its next spawn is dealt out (see the module doc).
    pub(crate) fn note_accepted(&self) {
        if self.shared.workers.len() > 1 {
            self.accepted.set(self.current.get());
        }
    }

    /// Start `u`, the first spawn since its spawner accepted a connection,
    /// on the worker [`deal_to`](Self::deal_to) picks: this one's own line
    /// of new tasks, or another's placement queue (no other worker steals
    /// from either, so the dealing is exact).
    #[cold]
    #[inline(never)]
    pub(super) fn deal_accepted(&self, u: Unstarted) {
        self.accepted.set(std::ptr::null());
        let to = self.deal_to();
        if to == self.index {
            return self.push_local(u.into_local());
        }
        let remote = &self.shared.workers[to];
        // Counted before it can be taken, so the owner's count down (in
        // `took_placed`) never passes it.
        remote.counters.placed.fetch_add(1, Ordering::Relaxed);
        if let Err(u) = remote.place(u) {
            // That worker has ended (the runtime is shutting down).
            remote.counters.placed.fetch_sub(1, Ordering::Relaxed);
            drop(u);
        }
    }

    /// The worker the next handler starts on: the first in turn that is
    /// not stalled and not loaded (see the module doc); the turn moves
    /// past it.
    fn deal_to(&self) -> usize {
        let n = self.shared.workers.len();
        let now = Instant::now();
        let least = (0..n)
            .filter(|&i| !self.look_stalled(i, now))
            .map(|i| self.load(i))
            .min()
            .unwrap_or(0);
        let turn = self.deal_turn.get();
        let to = (0..n)
            .map(|k| (turn + k) % n)
            .find(|&i| !self.seen_stalled(i) && self.load(i) <= least.saturating_add(SLACK))
            .unwrap_or(self.index);
        self.deal_turn.set((to + 1) % n);
        to
    }

    /// Worker `i`'s load (see the module doc): this worker's own, counted
    /// now; another's as it last published it, plus the handlers dealt to
    /// it that it has not taken.
    fn load(&self, i: usize) -> usize {
        if i == self.index {
            return self.live_count() + self.queued() + self.ready.len();
        }
        let c = &self.shared.workers[i].counters;
        // `placed` before `tasks`: an owner that took placed tasks published
        // `tasks` (with them) before it counted them out of `placed`.
        let placed = c.placed.load(Ordering::Acquire);
        c.tasks.load(Ordering::Relaxed) + c.ready_depth.load(Ordering::Relaxed) + placed
    }

    /// Whether worker `i` is stalled (see the module doc), updating what
    /// this worker saw of it: its `tick` and since when.
    fn look_stalled(&self, i: usize, now: Instant) -> bool {
        if i == self.index {
            return false;
        }
        let r = &self.shared.workers[i];
        let seen = &self.deal_watch[i];
        let idle = r.counters.idle_from.load(Ordering::Relaxed) != 0;
        let tick = r.tick.load(Ordering::Relaxed);
        match seen.get() {
            Some(w) if w.tick == tick && !idle => {
                let stalled = now.saturating_duration_since(w.since) >= STALL;
                seen.set(Some(DealWatch { stalled, ..w }));
                stalled
            }
            _ => {
                seen.set(Some(DealWatch {
                    tick,
                    since: now,
                    stalled: false,
                }));
                false
            }
        }
    }

    /// What the last [`look_stalled`](Self::look_stalled) at worker `i`
    /// found.
    fn seen_stalled(&self, i: usize) -> bool {
        self.deal_watch[i].get().is_some_and(|w| w.stalled)
    }

    /// Publish this worker's count of green threads started and not
    /// finished plus tasks queued to start, for the dealing on other
    /// workers (see the module doc): at its polls that do not wait and
    /// when it goes idle.
    #[inline]
    pub(super) fn publish_load(&self) {
        let tasks = self.live_count() + self.queued();
        self.remote().counters.tasks.store(tasks, Ordering::Relaxed);
    }

    /// Tasks on this worker's line of new tasks (`spawn_local` and placed
    /// ones).
    fn queued(&self) -> usize {
        self.local_new.try_borrow().map_or(0, |q| q.len())
    }

    /// This worker took `n` placed tasks onto its line of new tasks, which
    /// holds `queued` now: publish its count with them, then count them out
    /// of `placed` (in that order: see [`load`](Self::load)).
    pub(super) fn took_placed(&self, n: usize, queued: usize) {
        let c = &self.remote().counters;
        c.tasks.store(self.live_count() + queued, Ordering::Relaxed);
        c.placed.fetch_sub(n, Ordering::Release);
    }
}
