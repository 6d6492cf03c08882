//! A worker's thread-local state ([`Worker`]) and what its thread is
//! started with ([`Seed`]).
//!
//! Owns: the fields every concern of the worker reads (the ready queue, the
//! queues of tasks to start, the table of started green threads, the
//! timers, the poller, the held reference). Their logic lives in the files
//! of this folder, one concern each. Uses the runtime's shared state, the
//! ready queue, the timers and the task pool.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use slab::Slab;

use crate::coroutine::direct;
use crate::coroutine::Greenlet;

use super::super::driver::{Poller, PollerSeed};
use super::super::ready::ReadyQueue;
use super::super::registry::Registry;
use super::super::shared::Shared;
use super::super::task_header::Task;
use super::super::task_pool::TaskPool;
use super::super::timer::Timers;
use super::super::unstarted::{LocalUnstarted, Unstarted};
use super::gate::Gate;
use super::remote::Remote;

/// What a worker thread is started with.
pub(crate) struct Seed {
    pub(crate) index: usize,
    pub(crate) poll: PollerSeed,
    pub(crate) deque: crossbeam_deque::Worker<Unstarted>,
}

/// A worker's thread-local state.
pub(crate) struct Worker {
    pub(crate) index: usize,
    pub(crate) shared: Arc<Shared>,
    /// The address of `shared`'s registry (the runtime's identity, see
    /// [`owns`](Self::owns)): one load for a wake's check.
    pub(super) registry: *const Registry<Task>,
    /// The thread's main greenlet: the hub. Parking switches to it.
    pub(crate) hub: Greenlet,
    /// The thread's greenlet state, taken when the hub was (for a
    /// hand-off's sibling switch, see `live_sibling`). Never changed; when
    /// `None`, `main` bars hand-offs at the gate for good.
    pub(super) thread: Option<direct::ThreadToken>,
    /// This worker's entry of `shared.workers` (see [`remote`](Self::remote)).
    pub(super) remote: *const Remote,
    pub(super) ready: ReadyQueue<Arc<Task>>,
    pub(super) local_new: RefCell<VecDeque<LocalUnstarted>>,
    /// On a runtime of one worker, its unstarted `Send` tasks spawned on
    /// it: a stack, the next to start last, with the batch of the green
    /// thread running now at its end in spawn order from `batch` on, until
    /// it parks (see [`flush_spawned`](Self::flush_spawned)). Empty with
    /// other workers (their spawns go to the newest-spawn slot and the
    /// deque).
    pub(super) spawned: RefCell<Vec<Unstarted>>,
    /// Whether `spawned` may hold tasks (one load where the loop checks).
    pub(super) has_spawned: Cell<bool>,
    /// Where the open batch of `spawned` starts ([`NO_BATCH`](super::placement::NO_BATCH): none open).
    pub(super) batch: Cell<usize>,
    /// Unstarted `Send` tasks, newest batch on top (a LIFO deque); other
    /// workers steal the oldest.
    pub(super) deque: crossbeam_deque::Worker<Unstarted>,
    pub(crate) timers: RefCell<Timers>,
    /// The green thread running now (`Arc::as_ptr` of it), or null. Its
    /// entry in `live` keeps it alive while it runs.
    pub(super) current: Cell<*const Task>,
    /// Started green threads, with the only greenlet handles.
    pub(super) live: RefCell<Slab<(Arc<Task>, Greenlet)>>,
    /// A reference to the running green thread that this worker owns
    /// (`Arc::into_raw`), or null: the ready queue's reference of the task
    /// a hand-off resumed, kept instead of dropped, so that the task's next
    /// queuing of itself (a yield) or registration as a waiter moves it
    /// instead of cloning one ([`take_ref`](Self::take_ref)): no reference
    /// count changes on a hand-off. Dropped when another task is held,
    /// whenever control comes back to the hub, and at teardown, so it
    /// never keeps a finished task from its pool.
    pub(super) held: Cell<*const Task>,
    pub(super) poller: Poller,
    /// Scheduling rounds (the loop's, and hand-offs) left before the next
    /// poll that does not wait; whether a task queued on this worker to
    /// start may wait (`spawned`, `local_new`, the newest-spawn slot or the
    /// deque may hold one: set by whoever queues one, `push_unstarted`,
    /// `push_local`, `push_local_first`, a steal of a batch onto the deque
    /// in `find_unstarted`, cleared by the loop when it finds none to
    /// start); and whether a timer may be armed. One word for a hand-off's
    /// check (see [`hub_is_idle`](Self::hub_is_idle)).
    pub(super) gate: Gate,
    pub(super) cancelled_all: Cell<bool>,
    /// Spent tasks, for spawns on this worker to reuse.
    pub(crate) pool: TaskPool,
    /// The green thread (`Arc::as_ptr`) that accepted a connection last
    /// and has not spawned since, or null: its next spawn is dealt out over
    /// the workers (see [`note_accepted`](Self::note_accepted)).
    pub(super) accepted: Cell<*const Task>,
    /// The worker the next dealt-out spawn starts on (a turn over all).
    pub(super) deal_turn: Cell<usize>,
    /// What the dealing last saw of each other worker (see
    /// `deal_accepted`): its `tick`, since when, and whether it was stalled.
    pub(super) deal_watch: Box<[Cell<Option<DealWatch>>]>,
    /// What this worker last saw of each other worker's newest-spawn slot
    /// while it was occupied (see [`aged_slot`](Self::aged_slot)).
    pub(super) watch: Box<[Cell<Option<Watch>>]>,
}

impl Worker {
    /// The part of this worker that other threads reach: without the
    /// bounds check and index arithmetic of `shared.workers[index]` (a
    /// hand-off and every resume read it).
    #[inline(always)]
    pub(super) fn remote(&self) -> &Remote {
        // SAFETY: `remote` points into `shared.workers`, a boxed slice made
        // before the workers start and never resized, which `self.shared`
        // keeps alive as long as `self`.
        unsafe { &*self.remote }
    }

    /// Whether `task` belongs to this worker's runtime: its link names the
    /// runtime's registry.
    #[inline(always)]
    pub(crate) fn owns(&self, task: &Task) -> bool {
        task.runtime.is_of(self.registry)
    }

    /// How many green threads this worker has started and not finished.
    pub(crate) fn live_count(&self) -> usize {
        self.live.borrow().len()
    }

    /// This worker's poller (the network layer registers its sockets
    /// with it, and starts ring operations on it).
    pub(crate) fn poller(&self) -> &Poller {
        &self.poller
    }
}

/// An occupied newest-spawn slot of another worker, as seen: that
/// worker's `tick` then, when it was first seen with that tick, and
/// whether a later look saw it so again (its spawner did not park between
/// two looks: it may be computing).
#[derive(Clone, Copy, Debug)]
pub(super) struct Watch {
    pub(super) tick: u64,
    pub(super) since: Instant,
    pub(super) again: bool,
}

/// Another worker as the dealing of accepted connections last saw it
/// (see `deal`): its `tick`, when it was first seen with that tick while
/// not idle, and whether it had been so for `STALL` at that look.
#[derive(Clone, Copy, Debug)]
pub(super) struct DealWatch {
    pub(super) tick: u64,
    pub(super) since: Instant,
    pub(super) stalled: bool,
}
