//! Starting and resuming a green thread: the switch from the hub into it
//! (the lean `coroutine::direct` path, or the full protocol to throw a
//! cancellation), the bookkeeping of a resume, and what the worker
//! records when a switch comes back through the full protocol (an error,
//! a green thread that ended).
//!
//! Owns: the `live` table's entries (made in `start`, dropped by
//! [`drop_entry`]) and the task's `greenlet` address that mirrors its entry. Uses the coroutine API (`Greenlet::builder` with the
//! hub as parent, `throw`), the task's launch and outcome.

use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use slab::Slab;

use crate::coroutine::direct::{self, Resumed};
use crate::coroutine::{getcurrent, ErrorKind, Greenlet, GreenletError, Value};

use super::super::error::JoinError;
use super::super::task_header::Task;
use super::super::unstarted::{Launch, NotStarted};
use super::remote::Remote;
use super::state::Worker;

impl Worker {
    /// Start the task of `u` as a greenlet whose parent is the hub. Called
    /// by the loop only, so on the hub (the thread's main greenlet): the
    /// builder's default parent, the current greenlet, is the hub, and
    /// left as the default it costs no new handle of it (a spare record of
    /// the coroutine layer keeps its main parent's).
    pub(super) fn start<K: 'static>(&self, u: NotStarted<K>) {
        debug_assert!(
            self.current.get().is_null() && getcurrent() == self.hub,
            "a task is started from the hub's loop"
        );
        if u.task().cancel_requested() || self.shared.is_shutting_down() {
            drop(u);
            return;
        }
        // SAFETY: `task`, the token's count, becomes the `live` entry's,
        // which goes only after its greenlet is dead or dropped (see
        // `drop_entry`); on the error path below, `spawn` dropped the
        // closure (with the launch) before it returned.
        let (launch, task) = unsafe { Launch::new(u) };
        task.set_owner(self.index);
        task.set_finisher(self.index);
        let body = launch.greenlet_body();
        let spawned = match task.has_name() {
            Some(name) => Greenlet::builder()
                .stack_size(task.stack_size)
                .name(name)
                .spawn(body),
            None => Greenlet::spawn_for_task(task.stack_size, task.id, body),
        };
        let g = match spawned {
            Ok(g) => g,
            Err(e) => {
                task.finish(Some(JoinError::Cancelled {
                    name: format!("{} (not started: {e})", task.name()),
                }));
                return;
            }
        };
        let key = self.live.borrow_mut().insert((task, g));
        let live = self.live.borrow();
        let (task, g) = &live[key];
        task.live_key.store(key, Ordering::Relaxed);
        task.greenlet
            .store(direct::record_of(g).cast_mut(), Ordering::Relaxed);
        let full = if Self::runnable(task) {
            self.switch_to(self.remote(), &live, key, task, g, direct::start)
        } else {
            None
        };
        // Its coroutine exists now (unless it ended): where the watchdog
        // finds its saved context.
        // SAFETY: this worker's thread made `g` (above), so it is its
        // owner; between switches, on the hub, nothing of its owner-only
        // part is borrowed.
        if let Some(top) = unsafe { direct::stack_top(g) } {
            task.stack_top.store(top, Ordering::Relaxed);
        }
        drop(live);
        if let Some((key, result, dead)) = full {
            self.after_full_switch(key, result, dead);
        }
    }

    /// The started green threads of this worker other than the running
    /// one, with their greenlets (for a dump of their stacks).
    pub(crate) fn suspended_greenlets(&self) -> Vec<(Arc<Task>, Greenlet)> {
        let running = self.current.get();
        self.live
            .borrow()
            .iter()
            .filter(|(_, (t, _))| !ptr::eq(Arc::as_ptr(t), running))
            .map(|(_, (t, g))| (Arc::clone(t), g.clone()))
            .collect()
    }

    /// Switch into a started task until it parks or ends, with this
    /// worker's `remote` at hand.
    pub(super) fn resume_on(&self, remote: &Remote, task: &Arc<Task>) {
        let live = self.live.borrow();
        let full = self.switch_into(remote, &live, task, direct::resume);
        drop(live);
        if let Some((key, result, dead)) = full {
            self.after_full_switch(key, result, dead);
        }
    }

    /// Switch into `task`, whose greenlet is in `live` (this worker's
    /// table, borrowed by the caller across the switch: only this loop
    /// borrows it mutably, in `start`, `after_full_switch`, `cancel_all`
    /// and teardown, and it is suspended meanwhile), through `lean`
    /// (`direct::start` for its first run, `direct::resume` after) unless
    /// a cancellation is to be thrown into it, until control comes back to
    /// the hub: from `task`, or from the last of the green threads it and
    /// its successors handed the CPU to (see
    /// [`next_after_park`](Self::next_after_park)). What a switch through
    /// the full protocol returned, the `live` key of the green thread that
    /// came back with it, and whether that one's greenlet is dead now, for
    /// [`after_full_switch`](Self::after_full_switch) once the caller's
    /// borrow is gone.
    #[inline(always)]
    pub(super) fn switch_into(
        &self,
        remote: &Remote,
        live: &Slab<(Arc<Task>, Greenlet)>,
        task: &Task,
        lean: fn(&Greenlet) -> Resumed,
    ) -> Option<(usize, Result<Value, GreenletError>, bool)> {
        if !Self::runnable(task) {
            return None;
        }
        let key = task.live_key.load(Ordering::Relaxed);
        let g = match live.get(key) {
            Some((t, g)) if ptr::eq(Arc::as_ptr(t), task) => g,
            _ => return None,
        };
        self.switch_to(remote, live, key, task, g, lean)
    }

    /// Clear `task`'s wake flag before a switch into it (a wake from now
    /// on queues it again); whether it is to be switched into (not done).
    #[inline(always)]
    fn runnable(task: &Task) -> bool {
        task.take_scheduled();
        !task.is_done()
    }

    /// [`switch_into`](Self::switch_into) once `task` is
    /// [`runnable`](Self::runnable), with its `live` entry at hand: `key`,
    /// holding `g` (found by `switch_into`, or made just now by
    /// [`start`](Self::start), which needs no look).
    #[inline(always)]
    fn switch_to(
        &self,
        remote: &Remote,
        live: &Slab<(Arc<Task>, Greenlet)>,
        key: usize,
        task: &Task,
        g: &Greenlet,
        lean: fn(&Greenlet) -> Resumed,
    ) -> Option<(usize, Result<Value, GreenletError>, bool)> {
        self.enter(remote, task);
        let resumed = if task.take_cancel() {
            Resumed::Full(g.throw(GreenletError::exit()))
        } else {
            lean(g)
        };
        let back = self.current.replace(ptr::null());
        remote.running.store(0, Ordering::Relaxed);
        self.release_held();
        match resumed {
            Resumed::Full(result) if ptr::eq(back, task) => Some((key, result, g.is_dead())),
            Resumed::Full(result) => Some(Self::came_back(live, back, result)),
            Resumed::Parked => None,
        }
    }

    /// [`switch_into`](Self::switch_into)'s outcome when the full protocol
    /// brought `result` back from `back`, a green thread handed the CPU to
    /// (out of line: the loop stays small enough for the compiler to
    /// inline the switch into it).
    #[cold]
    #[inline(never)]
    pub(super) fn came_back(
        live: &Slab<(Arc<Task>, Greenlet)>,
        back: *const Task,
        result: Result<Value, GreenletError>,
    ) -> (usize, Result<Value, GreenletError>, bool) {
        // SAFETY: `back` is the task that ran last (a hand-off made it
        // current), whose `live` entry keeps it alive: only this loop
        // removes entries, after this.
        let key = unsafe { (*back).live_key.load(Ordering::Relaxed) };
        let dead = live.get(key).is_none_or(|(_, g)| g.is_dead());
        (key, result, dead)
    }

    /// The bookkeeping of a resume of `task` (by the loop or a hand-off):
    /// its wake sequence (older timers go stale), its state, the watchdog's
    /// counters, and the worker's current task. With more than one green
    /// thread queued it also starts loading the stack top of the next one
    /// (see [`prefetch`]): with few, their stacks stay cached and the look
    /// would only add instructions to every switch.
    #[inline(always)]
    pub(super) fn enter(&self, remote: &Remote, task: &Task) {
        self.enter_unseen(remote, task);
        self.ready.with_front_of_many(see_next);
    }

    /// [`enter`](Self::enter) without the look at the next one's stack
    /// top: for a hand-off, which looked when it took `task` off the ready
    /// queue (`ReadyQueue::pop_front_seeing` with [`see_next`]).
    #[inline(always)]
    pub(super) fn enter_unseen(&self, remote: &Remote, task: &Task) {
        // Only this thread writes these two counters.
        let seq = task.park_seq.load(Ordering::Relaxed);
        task.park_seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        task.set_running();
        remote.running.store(task.id, Ordering::Relaxed);
        let tick = remote.tick.load(Ordering::Relaxed);
        remote.tick.store(tick.wrapping_add(1), Ordering::Relaxed);
        self.current.set(task);
    }

    /// A switch into the task at `key` of `live` came back through the
    /// full protocol: record how the task ended if it did (`dead`: its
    /// entry leaves `live`, and its greenlet is dropped after).
    pub(super) fn after_full_switch(
        &self,
        key: usize,
        result: Result<Value, GreenletError>,
        dead: bool,
    ) {
        if dead {
            let Some(entry) = self.live.borrow_mut().try_remove(key) else {
                return;
            };
            let task = &entry.0;
            if let Err(e) = result {
                Self::record_error(task, e);
            }
            drop_entry(entry);
        } else if let Err(e) = result {
            let task = self.live.borrow().get(key).map(|(t, _)| Arc::clone(t));
            if let Some(task) = task {
                Self::record_error(&task, e);
            }
        }
    }

    /// The outcome of a task whose switch through the full protocol
    /// returned `error`, unless that is its cancellation.
    pub(super) fn record_error(task: &Task, error: GreenletError) {
        if error.is_exit() {
            return;
        }
        match error.into_kind() {
            ErrorKind::StackAllocation { size, source, .. } => {
                task.finish(Some(JoinError::NoStack {
                    name: task.name(),
                    size,
                    reason: source.to_string(),
                }));
            }
            e => task.finish(Some(JoinError::Panicked {
                name: task.name(),
                message: e.to_string(),
            })),
        }
    }
}

/// The look at the green thread queued next that a resume starts (see
/// [`prefetch`]).
#[inline(always)]
pub(super) fn see_next(next: &Arc<Task>) {
    prefetch(next.stack_top.load(Ordering::Relaxed));
}

/// Start loading the cache line at `address` (the top of the stack of the
/// green thread queued next, where its resume first reads its saved stack
/// pointer): with hundreds of green threads that line is rarely cached,
/// and the one resumed now runs while it comes. At 500 echo connections
/// on one worker this takes 10-28% off the server's user time per request
/// and 1-3% off its CPU (`benches/net-peers/cpusplit.sh`, a build with it
/// paired with one without), for 4 instructions more per switch between
/// green threads when more than one is queued (`hub_hot_loops`
/// `yield-pair` and `ping-pong` under callgrind). A hint only; nothing
/// elsewhere than x86_64.
#[inline(always)]
fn prefetch(address: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing architecturally and never faults,
    // whatever the address (Intel SDM, PREFETCHh: a hint); SSE, which has
    // it, is part of the x86_64 baseline.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(address as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// Drop an entry of a worker's `live` table: its greenlet first, then its
/// task, finished (as cancelled) if nothing finished it yet. The entry's
/// `Arc` is the count that keeps the task alive for the greenlet's launch
/// and body, which hold none of their own (see `body::Launch`): a greenlet
/// that never started still holds its launch, and one that refused to die
/// may unwind frames that borrow the task when its last handle goes. And
/// the entry is what finishes a started task whose body did not: the
/// registry holds no count of a listed task, which is alive only while
/// something that will finish it holds one.
#[inline]
pub(super) fn drop_entry((task, g): (Arc<Task>, Greenlet)) {
    task.greenlet.store(ptr::null_mut(), Ordering::Relaxed);
    drop(g);
    if !task.is_done() {
        finish_cancelled(&task);
    }
    drop(task);
}

/// Finish `task` as cancelled (out of line: only an entry that goes
/// before its body finished, at teardown or when the loop unwinds).
#[cold]
#[inline(never)]
pub(super) fn finish_cancelled(task: &Task) {
    task.finish(Some(JoinError::Cancelled { name: task.name() }));
}
