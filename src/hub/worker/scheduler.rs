//! The scheduling loop of one worker thread, on the thread's own stack
//! (its main greenlet, the hub): [`main`] runs it, then the teardown.
//!
//! # The loop
//! Each round (a scheduling point): start a pending-call drain if calls
//! wait (see `hub::pending`); move the remote queue onto the ready
//! queue (and tasks other threads placed on this worker onto its own line
//! of new tasks); fire due timers; every [`POLL_EVERY`] rounds poll without
//! waiting (so busy green threads cannot starve I/O sources registered
//! with the poller); then start an unstarted task (this worker's own
//! `spawn_local` ones, its deque, the injector, stolen batches from other
//! workers) or resume a ready one. New tasks go first, but never more than
//! [`START_BURST`] in a row while ready tasks wait; while ready tasks wait,
//! the runtime-wide sources (the injector, other workers' deques, whose
//! look costs a `SeqCst` fence per worker) are looked at only in the
//! rounds that poll, so a busy worker takes them at most [`POLL_EVERY`]
//! rounds late (an idle one looks at once); where a spawned task waits
//! and which worker starts it is [`super::placement`]'s. With nothing to
//! do the
//! worker spins a moment watching for work, or yields its CPU a few times
//! (the idle policy of `hub::idle` decides), then sleeps in
//! its poller (epoll or an io_uring ring, see `hub::driver`) until the
//! next timer's deadline, a wake from another thread (through its
//! unparker), or I/O. The network layer registers a socket with the poller
//! of the worker its green thread lives on, and a readiness event (or an
//! operation's completion) wakes the parked green thread.
//!
//! Owns: the round's order, [`POLL_EVERY`], [`START_BURST`], the idle
//! step and the poller. Uses the placement (what to start), the switch
//! (start and resume), the idle policy, the timers and the pending-call
//! drain.

use std::cell::{Cell, RefCell};
use std::collections::hash_map::DefaultHasher;
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::ptr;
use std::rc::Rc;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use slab::Slab;

use crate::coroutine::{direct, getcurrent};
use crate::diag::diag_warn;

use super::super::counters::Counters;
use super::super::deadlock::is_certain_wait;
use super::super::idle::{self, Idle, Plan, Spun, SPIN_WINDOW};
use super::super::ready::ReadyQueue;
use super::super::registry::Registry;
use super::super::shared::Shared;
use super::super::task_header::Task;
use super::super::task_pool::TaskPool;
use super::super::timer::Timers;
use super::super::unstarted::Unstarted;
use super::current::MarkRunning;
use super::gate::Gate;
use super::placement::NO_BATCH;
use super::remote::Remote;
use super::state::{Seed, Worker};

/// Rounds between two polls that do not wait.
pub(crate) const POLL_EVERY: u32 = 61;
/// New tasks started in a row at most while ready tasks wait.
const START_BURST: u32 = 32;

/// Run a worker thread: the hub loop, then its teardown.
pub(crate) fn main(shared: Arc<Shared>, seed: Seed) {
    let remote: *const Remote = &shared.workers[seed.index];
    shared.workers[seed.index].counters.note_thread();
    let watch = shared.workers.iter().map(|_| Cell::new(None)).collect();
    let deal_watch = shared.workers.iter().map(|_| Cell::new(None)).collect();
    let registry: *const Registry<Task> = &shared.registry;
    let w = Rc::new(Worker {
        index: seed.index,
        shared,
        registry,
        remote,
        hub: getcurrent(),
        thread: direct::this_thread(),
        ready: ReadyQueue::new(),
        local_new: RefCell::new(VecDeque::new()),
        spawned: RefCell::new(Vec::new()),
        has_spawned: Cell::new(false),
        batch: Cell::new(NO_BATCH),
        deque: seed.deque,
        timers: RefCell::new(Timers::default()),
        current: Cell::new(ptr::null()),
        live: RefCell::new(Slab::new()),
        held: Cell::new(ptr::null()),
        poller: seed.poll.into(),
        gate: Gate::new(POLL_EVERY),
        cancelled_all: Cell::new(false),
        accepted: Cell::new(ptr::null()),
        deal_turn: Cell::new(seed.index),
        deal_watch,
        pool: TaskPool::new(),
        watch,
    });
    if w.thread.is_none() {
        // No greenlet state to switch through (its thread-locals would be
        // gone): every park goes to the hub.
        w.gate.bar_handoffs();
    }
    let running = MarkRunning::new(&w);
    w.run();
    super::current::mark_ended();
    w.teardown();
    drop(running);
}

impl Worker {
    pub(super) fn run(self: &Rc<Self>) {
        let remote = self.remote();
        let mut burst: u32 = 0;
        let mut due = Vec::new();
        loop {
            if self.shared.pending.wants_drain() {
                super::super::pending_drain::scheduling_point(self);
            }
            self.take_remote(remote);
            if self.gate.timers() {
                self.fire_timers(Instant::now(), &mut due);
            }
            let polled = self.gate.count_loop_round(POLL_EVERY);
            if polled {
                self.poll_once(Some(Duration::ZERO));
            }
            let shutting_down = self.shared.is_shutting_down();
            if shutting_down && !self.cancelled_all.get() {
                self.cancel_all();
            }
            let has_ready = !self.ready.is_empty();
            // With ready tasks waiting, the runtime-wide sources (the
            // injector, other workers' deques) at the poll's cadence only.
            let wide = !has_ready || polled;
            let look = !has_ready || (burst < START_BURST && (wide || self.gate.local_work()));
            if look && self.start_next(wide) {
                self.flush_spawned();
                burst += 1;
                continue;
            }
            burst = 0;
            let next = self.ready.pop_front();
            if let Some(task) = next {
                self.resume_on(remote, &task);
                self.flush_spawned();
                continue;
            }
            if shutting_down {
                if self.live_count() == 0 {
                    break;
                }
                if self
                    .shared
                    .shutdown_deadline()
                    .is_some_and(|d| Instant::now() >= d)
                {
                    self.report_refusals();
                    break;
                }
            }
            self.idle();
        }
    }

    /// Whether work may have arrived from other threads.
    pub(super) fn work_from_outside(&self) -> bool {
        self.remote().inbox.has_work(Ordering::SeqCst)
            || !self.shared.injector.is_empty()
            || !self.shared.pending.may_sleep()
            || self.others_have_unstarted()
            || (self.shared.is_shutting_down() && !self.cancelled_all.get())
    }

    /// Nothing to do: spin a moment, or yield the CPU a few times, as the
    /// idle policy says (see [`super::super::idle`]), then sleep in the poller
    /// until a wake, I/O, the next timer or the shutdown deadline. Except
    /// when another worker's newest spawn is about to age with its spawner
    /// not parking (see [`slot_due`](Self::slot_due)): then spin to that
    /// moment (at most [`SLOT_AGE`](super::placement::SLOT_AGE)), and take it; and a sleep while such
    /// a slot is watched ends when it ages (see
    /// [`slot_deadline`](Self::slot_deadline)).
    ///
    /// The spin and the yields only look at the remote queue (a spin also
    /// at [`work_from_outside`](Self::work_from_outside)) before the sleep
    /// handshake, which is unchanged by them: `sleeping` is set,
    /// a `SeqCst` fence, then every source of work is read again; a waker
    /// pushes (a `SeqCst` compare-and-swap of the inbox's slot, or a
    /// `SeqCst` store of its `more`), then reads `sleeping` (`SeqCst`).
    /// Either the worker sees the work, or the waker sees `sleeping` and
    /// writes the `mio::Waker` (whose readiness the poll still returns if
    /// written before it waits). While the worker spins `sleeping` is
    /// clear, so a wake then costs the waker no system call.
    #[inline(never)]
    pub(super) fn idle(&self) {
        let now = Instant::now();
        let counters = &self.remote().counters;
        counters.ready_depth.store(0, Ordering::Relaxed);
        self.publish_load();
        counters.idle_begin(now);
        self.idle_from(now);
        counters.idle_end(now);
    }

    /// [`idle`](Self::idle)'s steps, from `now`, its start.
    fn idle_from(&self, now: Instant) {
        let remote = self.remote();
        let quick = || remote.inbox.look();
        // Another worker's newest spawn about to age, its spawner not
        // parking (see `slot_due`): spin to that moment, then take it; the
        // policy's rules but its backoff decide whether to.
        let shutting_down = self.shared.is_shutting_down();
        let slot_due = self.slot_due(now).filter(|_| !shutting_down);
        let plan = if shutting_down {
            Plan::Sleep
        } else {
            let (all, me, cpu) = (&self.shared.workers[..], self.index, idle::current_cpu());
            fn state(r: &Remote) -> &Idle {
                &r.idle
            }
            let asleep = |r: &Remote| r.sleeping.load(Ordering::Relaxed);
            let has_work = |r: &Remote| r.inbox.has_work(Ordering::Relaxed);
            let crowded = || idle::crowded(now);
            match slot_due {
                Some(_) => Idle::plan_to_deadline(all, me, cpu, state, asleep, has_work, crowded),
                None => Idle::plan(all, me, cpu, state, asleep, has_work, crowded),
            }
        };
        let found = match plan {
            Plan::Spin => {
                let window = slot_due.unwrap_or(now + SPIN_WINDOW);
                let timer = self.timers.borrow().next_deadline();
                let until = timer.map_or(window, |t| t.min(window));
                let by_timer = slot_due.is_some() || timer.is_some_and(|t| t <= window);
                let spun = remote
                    .idle
                    .spin(now, until, by_timer, quick, || self.work_from_outside());
                spun != Spun::Missed
            }
            Plan::Sleep => remote.idle.yield_briefly(quick, std::thread::yield_now),
        };
        if found {
            remote.idle.note_cpu();
            return;
        }
        // About to sleep: the spent tasks of a burst beyond what a pause
        // keeps go (see `TaskPool`).
        self.pool.trim();
        remote.sleeping.store(true, Ordering::SeqCst);
        self.shared.idle.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // (A slot that came due at this look, where the policy lets this
        // worker spin: back to the loop, whose next idle spins to it.)
        let spin_to_slot = |now| plan == Plan::Spin && self.slot_due(now).is_some();
        if !self.work_from_outside() && !spin_to_slot(Instant::now()) {
            let mut deadline = self.timers.borrow().next_deadline();
            if let Some(slot) = self.slot_deadline() {
                deadline = Some(deadline.map_or(slot, |d| d.min(slot)));
            }
            if self.shared.is_shutting_down() {
                deadline = match (deadline, self.shared.shutdown_deadline()) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            let timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let forever = timeout.is_none() && !self.shared.is_shutting_down();
            if forever {
                remote.forever.store(true, Ordering::SeqCst);
                self.look_for_deadlock();
            }
            self.poll_once(timeout);
            if forever {
                remote.forever.store(false, Ordering::Relaxed);
            }
        }
        remote.sleeping.store(false, Ordering::SeqCst);
        self.shared.idle.fetch_sub(1, Ordering::SeqCst);
        remote.idle.note_cpu();
    }

    /// About to sleep with no timer: if every worker is asleep so, with
    /// nothing queued anywhere, a root `Runtime::block_on` waits, and every
    /// green thread of the runtime waits where only another can wake it
    /// (`deadlock::is_certain_wait`), report
    /// the deadlock (once for the same green threads in the same states).
    /// Of two workers that go to sleep at once, each sets its `forever`
    /// before it reads the other's (all `SeqCst`): at least one sees both.
    #[cold]
    #[inline(never)]
    fn look_for_deadlock(&self) {
        // A ring operation in flight has its green thread parked on I/O,
        // which no deadlock includes: no look (its snapshot of every green
        // thread costs more than a request).
        if self.poller.has_ops_in_flight() {
            return;
        }
        let shared = &self.shared;
        let all_asleep = shared.workers.iter().all(|r| {
            r.forever.load(Ordering::SeqCst)
                && r.sleeping.load(Ordering::SeqCst)
                && !r.inbox.has_work(Ordering::SeqCst)
        });
        if !all_asleep
            || !shared.deadlock.has_roots()
            || !shared.injector.is_empty()
            || !shared.pending.may_sleep()
            || self.others_have_unstarted()
        {
            return;
        }
        // Every green thread in a certain wait, read first without taking
        // a copy: a server's sleep finds one parked on a socket at once
        // (the copy below, with names and spawn sites, is the report's).
        if !shared.registry.all(|t| is_certain_wait(t.state())) {
            return;
        }
        let tasks = shared.registry.snapshot(Task::info);
        if tasks.is_empty() || !tasks.iter().all(|t| is_certain_wait(t.state)) {
            return;
        }
        let mut fingerprint = DefaultHasher::new();
        for t in &tasks {
            (t.id, t.state).hash(&mut fingerprint);
        }
        if shared.deadlock.is_new(fingerprint.finish()) {
            super::super::deadlock::report(shared, &tasks);
        }
    }

    pub(super) fn poll_once(&self, timeout: Option<Duration>) {
        let counters = &self.remote().counters;
        Counters::add(&counters.polls, 1);
        if timeout == Some(Duration::ZERO) {
            let depth = self.ready.len();
            counters.ready_depth.store(depth, Ordering::Relaxed);
            self.publish_load();
        }
        if let Err(e) = self.poller.poll(timeout) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                diag_warn!("hub worker {}: poll failed: {e}", self.index);
            }
        }
    }

    pub(super) fn take_remote(&self, remote: &Remote) {
        let inbox = &remote.inbox;
        if inbox.has_work(Ordering::Relaxed) {
            let mut woken = 0;
            inbox.take(
                |t| {
                    woken += 1;
                    self.ready.push_back(t);
                },
                |placed| {
                    let mut local = self.local_new.borrow_mut();
                    let n = placed.len();
                    local.extend(placed.drain(..).map(Unstarted::into_local));
                    self.took_placed(n, local.len());
                    self.gate.set_local_work(true);
                },
            );
            Counters::add(&remote.counters.remote_wakes, woken);
        }
    }

    /// Queue every task whose timer is due at `now`, in deadline order.
    /// (A live timer's task is parked on this worker, in the park that armed
    /// it: not done, not queued.) Through the loop's `due` buffer: queued
    /// straight from the expiry instead, the loop grows past the size at
    /// which the compiler inlines the switch into it (`hub_hot_loops --op
    /// yield` under callgrind shows the difference).
    pub(super) fn fire_timers(&self, now: Instant, due: &mut Vec<Arc<Task>>) {
        self.expire_timers(now, |t| due.push(t));
        for t in due.drain(..) {
            self.schedule_local(&t);
        }
    }
}
