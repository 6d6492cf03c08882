//! One worker OS thread: its hub (the scheduler loop, on the thread's own
//! stack, the thread's main greenlet), its ready queue, its unstarted
//! tasks, its timers and its poller.
//!
//! Owns: the scheduling loop and everything only the worker's thread
//! touches ([`Worker`], kept in a thread-local), the part other threads
//! reach ([`Remote`]: the remote wake queue, the poller's `mio::Waker`, the
//! stealer, the watchdog's counters), and the routing of a wake
//! ([`push_ready`]). Uses the coroutine API (`Greenlet::builder` with the
//! hub as parent, `throw`, `kill`; a start, a resume and a park take the
//! lean `coroutine::direct` path), `crossbeam-deque` for the
//! unstarted tasks, `mio` for idle sleep.
//!
//! # The loop
//! Each round (a scheduling point): start a pending-call drain if calls
//! wait (see [`super::pending`]); move the remote queue onto the ready
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
//! rounds late (an idle one looks at once). The deque is LIFO: a
//! worker starts the newest unstarted task first (depth first, so a tree
//! of tasks keeps few stacks alive), and other workers steal the oldest.
//! With other workers a spawned task goes in the worker's newest-spawn
//! slot, which other workers do not steal from until it has aged (see
//! [`Worker::push_unstarted`]), and the one it displaces on top of the
//! deque, so siblings start newest first, and a task spawned by a green
//! thread that then parks starts on that green thread's worker (as a
//! task and the one it talks to are best placed); on a runtime of one
//! worker the tasks a green thread spawns wait on the
//! worker's own stack instead (no stealer, so no deque), put in order when
//! it parks, the first spawned on top, so they start in spawn order (and
//! before older unstarted tasks). With nothing to do the
//! worker spins a moment watching for work, or yields its CPU a few times
//! (the idle policy of [`super::idle`] decides), then sleeps in `mio::Poll::poll` until the next timer's deadline, a
//! wake from another thread (through the `mio::Waker`), or I/O. Tokens
//! other than [`WAKE_TOKEN`] are for the network layer: it registers a
//! socket with the poller of the worker its green thread lives on (through
//! `Poll::registry`), and a readiness event wakes the parked green thread.
//!
//! # Hand-offs
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
//! of green threads reaches the loop at least every [`POLL_EVERY`] rounds:
//! I/O and the runtime-wide sources (the injector, other workers' deques,
//! the shutdown) are taken then, and nothing starves; a cancellation
//! waiting for the front is left to the loop, which throws it.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::mem::ManuallyDrop;
use std::ptr;
use std::rc::Rc;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_deque::{Steal, Stealer};
use crossbeam_utils::CachePadded;
use slab::Slab;

use crate::coroutine::direct::{self, Resumed};
use crate::coroutine::{getcurrent, ErrorKind, Greenlet, GreenletError, Value};
use crate::diag::diag_warn;

use super::body::{Launch, LocalUnstarted, NotStarted, Unstarted};
use super::error::JoinError;
use super::idle::{self, Idle, Plan, Spun, SPIN_WINDOW};
use super::inbox::Inbox;
use super::newest::Newest;
use super::ready::ReadyQueue;
use super::runtime::Shared;
use super::spawn::TaskPool;
use super::task::Task;
use super::timer::Timers;

/// Rounds between two polls that do not wait.
pub(crate) const POLL_EVERY: u32 = 61;
/// How long another worker leaves a worker's newest spawn (see
/// [`Worker::push_unstarted`]) alone while that worker has not come back
/// to its hub, from the first time it saw it there. A green thread that
/// spawns and then parks or yields is back in well under a microsecond; one
/// that has not come back in this long is computing (or lost its CPU), and
/// its newest spawn has already waited as long as a wake of a sleeping
/// worker costs on this 2-vCPU guest (about 20 µs), so moving it costs
/// less than waiting on. Below [`SPIN_WINDOW`], so that a spinning worker
/// that saw it at the start of its spin takes it before the spin ends.
pub(crate) const SLOT_AGE: Duration = Duration::from_micros(20);
/// New tasks started in a row at most while ready tasks wait.
const START_BURST: u32 = 32;
/// The poller token of the worker's `mio::Waker`.
pub(crate) const WAKE_TOKEN: mio::Token = mio::Token(usize::MAX);
/// `Worker::batch` with no batch open.
const NO_BATCH: usize = usize::MAX;

/// The part of a worker that other threads reach, laid out by who writes
/// what: a waker on another CPU writes the [`Inbox`] and reads the rest;
/// the owner writes `tick` and `running` at every resume and `idle` at
/// every spin. Each part has cache lines of its own (`CachePadded`), so a
/// cross-thread wake moves the inbox's line between the two CPUs and
/// nothing else of the worker's (the two-worker ping-pong crosses threads
/// twice per round trip), the lines other workers read in every round
/// (`stealer`) are never written, and the workers' `Remote`s, side by side
/// in one slice, share no line.
#[repr(C)]
pub(crate) struct Remote {
    /// Tasks woken for this worker and tasks placed on it by other threads
    /// (see [`super::inbox`]): one cache line.
    inbox: CachePadded<Inbox<Task, Unstarted>>,
    /// In (or about to enter) a waiting poll; cleared by whoever unparks
    /// it. Not in the inbox's line: a waker reads it right after its push,
    /// when the owner, spinning, may already have taken that line back
    /// (the read then waited for it, a third of `push`'s samples).
    sleeping: CachePadded<AtomicBool>,
    /// Bumped at every resume of a green thread (read by the watchdog).
    pub(crate) tick: CachePadded<AtomicU64>,
    /// The id of the green thread running now, 0 while in the hub.
    pub(crate) running: CachePadded<AtomicU64>,
    /// Read by other threads, written by nobody after the start: its line
    /// stays in every reader's cache (every round of every other worker's
    /// loop reads `stealer`).
    waker: mio::Waker,
    pub(crate) stealer: Stealer<Unstarted>,
    /// The newest task a green thread of this worker spawned, which the
    /// worker starts at its next scheduling point; other workers take it
    /// only once it aged (see [`Worker::push_unstarted`]). Written by the
    /// owner at a spawn and a start, read by idle workers at every look:
    /// a line of its own.
    newest: CachePadded<Newest<Unstarted>>,
    /// The idle policy's state (whether it spins, where it runs): written
    /// by the owner at every spin, so not on the line of `stealer`.
    pub(crate) idle: CachePadded<Idle>,
}

impl Remote {
    pub(crate) fn new(waker: mio::Waker, stealer: Stealer<Unstarted>) -> Remote {
        Remote {
            inbox: CachePadded::new(Inbox::default()),
            sleeping: CachePadded::new(AtomicBool::new(false)),
            tick: CachePadded::new(AtomicU64::new(0)),
            running: CachePadded::new(AtomicU64::new(0)),
            waker,
            stealer,
            newest: CachePadded::new(Newest::default()),
            idle: CachePadded::new(Idle::default()),
        }
    }

    /// Queue a woken task from another thread and unpark the worker if it
    /// sleeps. A worker that has ended takes no task: the task is dropped
    /// here (see [`close`](Self::close)).
    fn push(&self, task: Arc<Task>) {
        if self.inbox.push(task).is_err() {
            return;
        }
        // No fence: the push's `SeqCst` announcement and the `SeqCst` load
        // of `sleeping` after it, against the owner's `SeqCst` store of
        // `sleeping` and its `SeqCst` loads of the inbox (see `idle`), are
        // all in the one total order of `SeqCst` operations, so at least
        // one side sees the other's (on x86 the announcement is a locked
        // instruction, a full barrier: a fence after it only cost time).
        self.unpark_if_marked_sleeping();
    }

    /// Queue an unstarted task that must start on this worker (another
    /// worker's accept loop spreading its connections, see
    /// `net::serve`), and unpark the worker if it sleeps. The worker moves
    /// it to its own line of new tasks, which no other worker steals
    /// from, so it starts here (unless the runtime shuts down first: then
    /// it is dropped unstarted, as a refused spawn is).
    ///
    /// # Errors
    /// The task back, unstarted, once the worker has ended (its inbox is
    /// [closed](Self::close)): the caller drops it (it finishes as
    /// cancelled) outside any lock of the inbox.
    pub(crate) fn place(&self, u: Unstarted) -> Result<(), Unstarted> {
        self.inbox.place(u)?;
        self.unpark_if_sleeping();
        Ok(())
    }

    /// The worker has ended: drop the woken and placed tasks it did not
    /// take, and refuse later ones (a task left here would hold the
    /// runtime's `Shared`, which holds this inbox: a leak of the task and
    /// of everything it holds). The placed ones finish as cancelled.
    pub(crate) fn close(&self) {
        self.inbox.close();
    }

    /// Wake the worker if it is in (or entering) its waiting poll. Only the
    /// caller that clears `sleeping` writes to the waker.
    pub(crate) fn unpark_if_sleeping(&self) -> bool {
        fence(Ordering::SeqCst);
        self.unpark_if_marked_sleeping()
    }

    /// [`unpark_if_sleeping`](Self::unpark_if_sleeping) for a caller whose
    /// announcement of work was a `SeqCst` store, ordered with the load of
    /// `sleeping` without a fence.
    #[inline]
    fn unpark_if_marked_sleeping(&self) -> bool {
        let sleeping = &self.sleeping;
        if sleeping.load(Ordering::SeqCst)
            && sleeping
                .compare_exchange(true, false, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            self.unpark();
            return true;
        }
        false
    }

    /// Wake the worker's poll unconditionally.
    pub(crate) fn unpark(&self) {
        if let Err(e) = self.waker.wake() {
            diag_warn!("hub: could not wake a worker's poller: {e}");
        }
    }
}

/// What a worker thread is started with.
pub(crate) struct Seed {
    pub(crate) index: usize,
    pub(crate) poll: mio::Poll,
    pub(crate) deque: crossbeam_deque::Worker<Unstarted>,
}

/// A worker's thread-local state.
pub(crate) struct Worker {
    pub(crate) index: usize,
    pub(crate) shared: Arc<Shared>,
    /// The thread's main greenlet: the hub. Parking switches to it.
    pub(crate) hub: Greenlet,
    /// This worker's entry of `shared.workers` (see [`remote`](Self::remote)).
    remote: *const Remote,
    ready: RefCell<ReadyQueue<Arc<Task>>>,
    local_new: RefCell<VecDeque<LocalUnstarted>>,
    /// On a runtime of one worker, its unstarted `Send` tasks spawned on
    /// it: a stack, the next to start last, with the batch of the green
    /// thread running now at its end in spawn order from `batch` on, until
    /// it parks (see [`flush_spawned`](Self::flush_spawned)). Empty with
    /// other workers (their spawns go to the newest-spawn slot and the
    /// deque).
    spawned: RefCell<Vec<Unstarted>>,
    /// Whether `spawned` may hold tasks (one load where the loop checks).
    has_spawned: Cell<bool>,
    /// Where the open batch of `spawned` starts ([`NO_BATCH`]: none open).
    batch: Cell<usize>,
    /// Whether a task queued on this worker to start may wait (`spawned`,
    /// `local_new`, the newest-spawn slot or the deque may hold one): set
    /// by whoever queues one (`push_unstarted`, `push_local`,
    /// `push_local_first`, a steal of a batch onto the deque in
    /// `find_unstarted`), cleared by the loop when it finds none to start.
    /// One load for a hand-off's check (see
    /// [`hub_is_idle`](Self::hub_is_idle)) instead of four.
    local_work: Cell<bool>,
    /// Unstarted `Send` tasks, newest batch on top (a LIFO deque); other
    /// workers steal the oldest.
    deque: crossbeam_deque::Worker<Unstarted>,
    pub(crate) timers: RefCell<Timers>,
    /// The green thread running now (`Arc::as_ptr` of it), or null. Its
    /// entry in `live` keeps it alive while it runs.
    current: Cell<*const Task>,
    /// Started green threads, with the only greenlet handles.
    live: RefCell<Slab<(Arc<Task>, Greenlet)>>,
    /// A reference to the running green thread that this worker owns
    /// (`Arc::into_raw`), or null: the ready queue's reference of the task
    /// a hand-off resumed, kept instead of dropped, so that the task's next
    /// queuing of itself (a yield) or registration as a waiter moves it
    /// instead of cloning one ([`take_ref`](Self::take_ref)): no reference
    /// count changes on a hand-off. Dropped when another task is held,
    /// whenever control comes back to the hub, and at teardown, so it
    /// never keeps a finished task from its pool.
    held: Cell<*const Task>,
    poll: RefCell<mio::Poll>,
    events: RefCell<mio::Events>,
    /// Scheduling rounds (the loop's, and hand-offs) left before the next
    /// poll that does not wait.
    until_poll: Cell<u32>,
    cancelled_all: Cell<bool>,
    /// Spent tasks, for spawns on this worker to reuse.
    pub(crate) pool: TaskPool,
    /// What this worker last saw of each other worker's newest-spawn slot
    /// while it was occupied (see [`aged_slot`](Self::aged_slot)).
    watch: Box<[Cell<Option<Watch>>]>,
}

/// An occupied newest-spawn slot of another worker, as seen: that
/// worker's `tick` then, when it was first seen with that tick, and
/// whether a later look saw it so again (its spawner did not park between
/// two looks: it may be computing).
#[derive(Clone, Copy, Debug)]
struct Watch {
    tick: u64,
    since: Instant,
    again: bool,
}

thread_local! {
    /// `Rc::as_ptr` of this thread's worker while its loop and teardown
    /// run (the only time green threads run on it), else null. No
    /// destructor, so a park reads it in one load.
    static RUNNING: Cell<*const Worker> = const { Cell::new(ptr::null()) };
}

/// Run `f` with this thread's worker, borrowed, while its loop or teardown
/// runs; `None` elsewhere (a plain thread). `f` may park.
#[inline]
fn with_worker<R>(f: impl FnOnce(&Worker) -> R) -> Option<R> {
    let w = RUNNING.with(Cell::get);
    // SAFETY: a non-null `RUNNING` was set by `main` (through
    // `MarkRunning`) to the worker its `Rc` keeps alive until after it is
    // cleared, on this thread, also when the loop unwinds.
    unsafe { w.as_ref() }.map(f)
}

/// Run `f` with this thread's worker, borrowed, or `None` on a thread that
/// is not a worker; `f` may not park.
#[inline]
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&Worker>) -> R) -> R {
    let w = RUNNING.with(Cell::get);
    // SAFETY: as in `with_worker`.
    f(unsafe { w.as_ref() })
}

/// This thread's worker, if it is one.
pub(crate) fn current() -> Option<Rc<Worker>> {
    with_worker(|w| {
        let w: *const Worker = w;
        // SAFETY: `w` is `Rc::as_ptr` of `main`'s live `Rc` (`with_worker`);
        // the count is raised first, so the `Rc` made here owns a reference.
        unsafe {
            Rc::increment_strong_count(w);
            Rc::from_raw(w)
        }
    })
}

/// The calling green thread and its worker (`None` on a plain thread, and
/// on a worker's hub outside any green thread).
pub(crate) fn current_task() -> Option<(Rc<Worker>, Arc<Task>)> {
    let w = current()?;
    let t = with_current_task(|_, t| Arc::clone(t))?;
    Some((w, t))
}

/// Run `f` with the calling green thread's worker and task, borrowed (no
/// reference count changes); `None` on a plain thread and on a worker's
/// hub outside any green thread. `f` may park.
#[inline]
pub(crate) fn with_current_task<R>(f: impl FnOnce(&Worker, &Arc<Task>) -> R) -> Option<R> {
    with_worker(|w| {
        let t = w.current.get();
        if t.is_null() {
            return None;
        }
        // SAFETY: `t` is `Arc::as_ptr` of the running task, whose `live`
        // entry holds a reference until its greenlet is dead, so after this
        // call (which runs on that greenlet) returns. Never dropped: no
        // count change.
        let task = ManuallyDrop::new(unsafe { Arc::from_raw(t) });
        Some(f(w, &task))
    })
    .flatten()
}

/// Put a woken task on the ready queue of worker `owner`: directly when
/// called on that worker, else through its remote queue. Inlined into
/// the waker: a local wake is one frame.
#[inline(always)]
pub(crate) fn push_ready(task: Arc<Task>, owner: usize) {
    let mut task = Some(task);
    with_worker(|w| {
        if let Some(t) = task.take_if(|t| w.index == owner && Arc::ptr_eq(&w.shared, &t.shared)) {
            w.push_ready_local(t);
        }
    });
    if let Some(task) = task {
        push_remote(task, owner);
    }
}

/// [`push_ready`] to another thread's worker. Out of line: the local wake
/// stays as small as it was. On a worker of the same runtime the remote
/// queue is reached through this worker's `shared`, so the task moves into
/// it without a reference count change.
#[inline(never)]
fn push_remote(task: Arc<Task>, owner: usize) {
    let mut task = Some(task);
    with_current(|w| {
        let Some(w) = w else { return };
        if let Some(t) = task.take_if(|t| Arc::ptr_eq(&w.shared, &t.shared)) {
            if let Some(remote) = w.shared.workers.get(owner) {
                remote.push(t);
            }
        }
    });
    if let Some(task) = task {
        if let Some(remote) = task.shared.workers.get(owner) {
            remote.push(Arc::clone(&task));
        }
    }
}

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

/// Keeps `RUNNING` pointing at a worker while it lives, and clears it when
/// dropped, also when the loop unwinds: made after the worker's `Rc` in
/// `main`, so dropped before it.
struct MarkRunning;

impl MarkRunning {
    fn new(w: &Rc<Worker>) -> MarkRunning {
        RUNNING.with(|r| r.set(Rc::as_ptr(w)));
        MarkRunning
    }
}

impl Drop for MarkRunning {
    fn drop(&mut self) {
        RUNNING.with(|r| r.set(ptr::null()));
    }
}

/// The held reference and the `live` entries go with the worker also when
/// its loop unwinds (no teardown then); the entries greenlet first, as
/// everywhere (see [`drop_entry`]).
impl Drop for Worker {
    fn drop(&mut self) {
        self.release_held();
        drop(self.remote().newest.take());
        self.live.get_mut().drain().for_each(drop_entry);
    }
}

/// Run a worker thread: the hub loop, then its teardown.
pub(crate) fn main(shared: Arc<Shared>, seed: Seed) {
    let remote: *const Remote = &shared.workers[seed.index];
    let watch = shared.workers.iter().map(|_| Cell::new(None)).collect();
    let w = Rc::new(Worker {
        index: seed.index,
        shared,
        remote,
        hub: getcurrent(),
        ready: RefCell::new(ReadyQueue::new()),
        local_new: RefCell::new(VecDeque::new()),
        spawned: RefCell::new(Vec::new()),
        has_spawned: Cell::new(false),
        batch: Cell::new(NO_BATCH),
        local_work: Cell::new(false),
        deque: seed.deque,
        timers: RefCell::new(Timers::default()),
        current: Cell::new(ptr::null()),
        live: RefCell::new(Slab::new()),
        held: Cell::new(ptr::null()),
        poll: RefCell::new(seed.poll),
        events: RefCell::new(mio::Events::with_capacity(256)),
        until_poll: Cell::new(POLL_EVERY),
        cancelled_all: Cell::new(false),
        pool: TaskPool::new(),
        watch,
    });
    let running = MarkRunning::new(&w);
    w.run();
    w.teardown();
    drop(running);
}

impl Worker {
    /// The part of this worker that other threads reach: without the
    /// bounds check and index arithmetic of `shared.workers[index]` (a
    /// hand-off and every resume read it).
    #[inline(always)]
    fn remote(&self) -> &Remote {
        // SAFETY: `remote` points into `shared.workers`, a boxed slice made
        // before the workers start and never resized, which `self.shared`
        // keeps alive as long as `self`.
        unsafe { &*self.remote }
    }

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
            if let Some(older) = self.remote().newest.put(u) {
                self.deque.push(older);
            }
            self.local_work.set(true);
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
        self.local_work.set(true);
    }

    /// On a runtime of one worker, close the batch of tasks spawned since
    /// the last flush: turned round in place, so that the first spawned is
    /// on top of the stack and the worker starts them in spawn order and
    /// before the tasks queued earlier (depth first: a tree of tasks keeps
    /// few stacks alive). No other worker to wake, so no notification.
    #[inline]
    fn flush_spawned(&self) {
        if self.batch.get() != NO_BATCH {
            self.flush_spawned_now();
        }
    }

    /// [`flush_spawned`](Self::flush_spawned), with a batch open.
    fn flush_spawned_now(&self) {
        let batch = self.batch.replace(NO_BATCH);
        let mut spawned = self.spawned.borrow_mut();
        if let Some(open) = spawned.get_mut(batch..) {
            open.reverse();
        }
    }

    /// The top of the one-worker stack of unstarted tasks (see
    /// [`push_unstarted`](Self::push_unstarted)), if it holds one.
    fn pop_spawned(&self) -> Option<Unstarted> {
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
        self.local_work.set(true);
    }

    /// Start a task at the front of the line (the pending-call drain).
    pub(crate) fn push_local_first(&self, u: LocalUnstarted) {
        self.local_new.borrow_mut().push_front(u);
        self.local_work.set(true);
    }

    /// How many green threads this worker has started and not finished.
    pub(crate) fn live_count(&self) -> usize {
        self.live.borrow().len()
    }

    fn run(self: &Rc<Self>) {
        let remote = self.remote();
        let mut burst: u32 = 0;
        let mut due = Vec::new();
        loop {
            if self.shared.pending.wants_drain() {
                super::pending::scheduling_point(self);
            }
            self.take_remote(remote);
            if !self.timers.borrow().is_empty() {
                self.fire_timers(Instant::now(), &mut due);
            }
            let until_poll = self.until_poll.get() - 1;
            let polled = until_poll == 0;
            if polled {
                self.until_poll.set(POLL_EVERY);
                self.poll_once(Some(Duration::ZERO));
            } else {
                self.until_poll.set(until_poll);
            }
            let shutting_down = self.shared.is_shutting_down();
            if shutting_down && !self.cancelled_all.get() {
                self.cancel_all();
            }
            let has_ready = !self.ready.borrow().is_empty();
            // With ready tasks waiting, the runtime-wide sources (the
            // injector, other workers' deques) at the poll's cadence only.
            let wide = !has_ready || polled;
            let look = !has_ready || (burst < START_BURST && (wide || self.local_work.get()));
            if look && self.start_next(wide) {
                self.flush_spawned();
                burst += 1;
                continue;
            }
            burst = 0;
            let next = self.ready.borrow_mut().pop_front();
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

    /// Start one unstarted task, if there is one; whether one was: queued
    /// on this worker, or (`wide`) from the runtime's injector or stolen
    /// from another worker. With none, `local_work` is cleared: nothing is
    /// queued on this worker to start (unless the hub itself spawned one,
    /// in `cancel_all`: it waits in `spawned`).
    fn start_next(&self, wide: bool) -> bool {
        let local = self.local_new.borrow_mut().pop_front();
        if let Some(u) = local {
            self.start(u);
            return true;
        }
        if let Some(u) = self.find_unstarted(wide) {
            self.start(u);
            return true;
        }
        self.local_work.set(self.has_spawned.get());
        false
    }

    /// An unstarted `Send` task: this worker's own (its one-worker stack,
    /// its newest-spawn slot, its deque), else (`wide`) one of the
    /// injector's, a stolen batch's, or another worker's aged newest spawn.
    fn find_unstarted(&self, wide: bool) -> Option<Unstarted> {
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
                    self.local_work.set(true);
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
                        self.local_work.set(true);
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
    fn take_aged_slot(&self) -> Option<Unstarted> {
        if self.shared.workers.len() == 1 {
            return None;
        }
        let victim = self.aged_slot()?;
        self.watch[victim].set(None);
        self.shared.workers[victim].newest.take()
    }

    /// Another worker whose newest-spawn slot has aged: occupied, with
    /// that worker's `tick` (moved at every resume it makes, so at every
    /// scheduling point, where it would start the slot's task) unchanged
    /// for [`SLOT_AGE`] (the runtime's `slot_age`) since this worker first
    /// saw it so. Updates `watch` with what it sees; reads the clock only
    /// for an occupied slot.
    #[inline(never)]
    fn aged_slot(&self) -> Option<usize> {
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
    fn slot_deadline(&self) -> Option<Instant> {
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
    fn slot_due(&self, now: Instant) -> Option<Instant> {
        self.watch
            .iter()
            .filter_map(|w| w.get().filter(|w| w.again))
            .map(|w| w.since + self.shared.slot_age)
            .filter(|d| d.saturating_duration_since(now) <= SLOT_AGE)
            .min()
    }

    /// Whether work may have arrived from other threads.
    fn work_from_outside(&self) -> bool {
        self.remote().inbox.has_work(Ordering::SeqCst)
            || !self.shared.injector.is_empty()
            || !self.shared.pending.may_sleep()
            || self.others_have_unstarted()
            || (self.shared.is_shutting_down() && !self.cancelled_all.get())
    }

    /// Whether another worker's deque holds unstarted tasks to steal, or
    /// its newest-spawn slot has aged (a slot that has not is no work for
    /// this worker: an idle worker that counted it would spin on it).
    #[inline(always)]
    fn others_have_unstarted(&self) -> bool {
        self.shared.workers.len() > 1
            && (self.others_have_stealable() || self.aged_slot().is_some())
    }

    /// Whether another worker's deque holds unstarted tasks to steal.
    #[inline(always)]
    fn others_have_stealable(&self) -> bool {
        let workers = &self.shared.workers;
        workers.len() > 1
            && workers
                .iter()
                .enumerate()
                .any(|(i, r)| i != self.index && !r.stealer.is_empty())
    }

    /// Nothing to do: spin a moment, or yield the CPU a few times, as the
    /// idle policy says (see [`super::idle`]), then sleep in the poller
    /// until a wake, I/O, the next timer or the shutdown deadline. Except
    /// when another worker's newest spawn is about to age with its spawner
    /// not parking (see [`slot_due`](Self::slot_due)): then spin to that
    /// moment (at most [`SLOT_AGE`]), and take it; and a sleep while such
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
    fn idle(&self) {
        let remote = self.remote();
        let now = Instant::now();
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
            self.poll_once(timeout);
        }
        remote.sleeping.store(false, Ordering::SeqCst);
        self.shared.idle.fetch_sub(1, Ordering::SeqCst);
        remote.idle.note_cpu();
    }

    fn poll_once(&self, timeout: Option<Duration>) {
        let mut events = self.events.borrow_mut();
        let result = self.poll.borrow_mut().poll(&mut events, timeout);
        if let Err(e) = result {
            if e.kind() != std::io::ErrorKind::Interrupted {
                diag_warn!("hub worker {}: poll failed: {e}", self.index);
            }
            return;
        }
        for event in events.iter() {
            if event.token() != WAKE_TOKEN {
                super::net::dispatch(event);
            }
        }
    }

    /// Run `f` with this worker's `mio` registry (the network layer
    /// registers its sockets through it).
    pub(crate) fn with_registry<R>(&self, f: impl FnOnce(&mio::Registry) -> R) -> R {
        f(self.poll.borrow().registry())
    }

    fn take_remote(&self, remote: &Remote) {
        let inbox = &remote.inbox;
        if inbox.has_work(Ordering::Relaxed) {
            let mut ready = self.ready.borrow_mut();
            inbox.take(
                |t| ready.push_back(t),
                |placed| {
                    let mut local = self.local_new.borrow_mut();
                    local.extend(placed.drain(..).map(Unstarted::into_local));
                    self.local_work.set(true);
                },
            );
        }
    }

    /// Queue every task whose timer is due at `now`, in deadline order.
    /// (A live timer's task is parked on this worker, in the park that armed
    /// it: not done, not queued.) Through the loop's `due` buffer: queued
    /// straight from the expiry instead, the loop grew past the size at
    /// which the compiler inlines the switch into it (+20 instructions per
    /// yield, callgrind).
    fn fire_timers(&self, now: Instant, due: &mut Vec<Arc<Task>>) {
        self.timers.borrow_mut().expire(now, |t| due.push(t));
        for t in due.drain(..) {
            t.schedule_on(self);
        }
    }

    /// Start the task of `u` as a greenlet whose parent is the hub. Called
    /// by the loop only, so on the hub (the thread's main greenlet): the
    /// builder's default parent, the current greenlet, is the hub, and
    /// left as the default it costs no new handle of it (a spare record of
    /// the coroutine layer keeps its main parent's).
    fn start<K: 'static>(&self, u: NotStarted<K>) {
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
        let mut builder = Greenlet::builder().stack_size(task.stack_size);
        if let Some(name) = task.has_name() {
            builder = builder.name(name);
        }
        let g = match builder.spawn(move |_| {
            launch.run();
            Ok(Value::unit())
        }) {
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
        let task = &live[key].0;
        task.live_key.store(key, Ordering::Relaxed);
        let full = self.switch_into(self.remote(), &live, task, direct::start);
        drop(live);
        if let Some((key, result, dead)) = full {
            self.after_full_switch(key, result, dead);
        }
    }

    /// Switch into a started task until it parks or ends, with this
    /// worker's `remote` at hand.
    fn resume_on(&self, remote: &Remote, task: &Arc<Task>) {
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
    fn switch_into(
        &self,
        remote: &Remote,
        live: &Slab<(Arc<Task>, Greenlet)>,
        task: &Task,
        lean: fn(&Greenlet) -> Resumed,
    ) -> Option<(usize, Result<Value, GreenletError>, bool)> {
        task.take_scheduled();
        if task.is_done() {
            return None;
        }
        let key = task.live_key.load(Ordering::Relaxed);
        let g = match live.get(key) {
            Some((t, g)) if ptr::eq(Arc::as_ptr(t), task) => g,
            _ => return None,
        };
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
    fn came_back(
        live: &Slab<(Arc<Task>, Greenlet)>,
        back: *const Task,
        result: Result<Value, GreenletError>,
    ) -> (usize, Result<Value, GreenletError>, bool) {
        // SAFETY: `back` is the task that ran last (a hand-off made it
        // current), whose `live` entry keeps it alive: only this loop
        // removes entries, after this.
        let key = unsafe { (*back).live_key.load(Ordering::Relaxed) };
        let dead = live.get(key).map_or(true, |(_, g)| g.is_dead());
        (key, result, dead)
    }

    /// The bookkeeping of a resume of `task` (by the loop or a hand-off):
    /// its wake sequence (older timers go stale), its state, the watchdog's
    /// counters, and the worker's current task.
    #[inline(always)]
    fn enter(&self, remote: &Remote, task: &Task) {
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
    fn after_full_switch(&self, key: usize, result: Result<Value, GreenletError>, dead: bool) {
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
    fn record_error(task: &Task, error: GreenletError) {
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

    /// Queue `task`, a task of this worker, on the ready queue.
    #[inline]
    pub(crate) fn push_ready_local(&self, task: Arc<Task>) {
        self.ready.borrow_mut().push_back(task);
    }

    /// A reference to `me`, the running green thread: the one this worker
    /// holds for it (see `held`), moved out, else a clone.
    #[inline(always)]
    pub(crate) fn take_ref(&self, me: &Arc<Task>) -> Arc<Task> {
        let held = self.held.get();
        if ptr::eq(held, Arc::as_ptr(me)) {
            self.held.set(ptr::null());
            // SAFETY: a non-null `held` is `Arc::into_raw` of a reference
            // this worker owns; cleared first, so it is taken once.
            return unsafe { Arc::from_raw(held) };
        }
        Arc::clone(me)
    }

    /// Keep `next`, the task a hand-off resumes, as the held reference
    /// (see `held`), dropping the one held before, if any.
    #[inline(always)]
    fn hold(&self, next: Arc<Task>) {
        self.replace_held(Arc::into_raw(next));
    }

    /// Drop the held reference, if any (see `held`).
    #[inline(always)]
    fn release_held(&self) {
        self.replace_held(ptr::null());
    }

    /// Put `new` (`Arc::into_raw` of an owned reference, or null) in
    /// `held`, dropping the reference held before, if any.
    #[inline(always)]
    fn replace_held(&self, new: *const Task) {
        let old = self.held.replace(new);
        if !old.is_null() {
            Self::drop_ref(old);
        }
    }

    /// Drop a reference that was held (out of line: a hand-off's park
    /// usually gave its own away, to the ready queue or a wait list).
    #[cold]
    #[inline(never)]
    fn drop_ref(held: *const Task) {
        // SAFETY: `held` came from `Arc::into_raw` of an owned reference,
        // no longer in `held`: dropped once.
        drop(unsafe { Arc::from_raw(held) });
    }

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
        let Some(until_poll) = self.hub_is_idle(remote) else {
            if let Some(me) = requeue {
                self.push_ready_local(me);
            }
            return Next::Hub;
        };
        let next = {
            let mut ready = self.ready.borrow_mut();
            match requeue.map(|me| ready.replace_single(me)) {
                None => ready.pop_front(),
                Some(Ok(front)) => Some(front),
                Some(Err(me)) => {
                    ready.push_back(me);
                    ready.pop_front()
                }
            }
        };
        let Some(next) = next else {
            return Next::Hub;
        };
        // `Some(None)`: the front is `me` itself, to run on without a
        // switch; `Some(Some(_))`: a sibling to switch to; `None`: neither
        // (the front goes back, and the park to the hub).
        let handed = if ptr::eq(Arc::as_ptr(&next), me) {
            // Hooks see a park switch to the hub and back.
            (!direct::observed()).then_some(None)
        } else {
            self.live_sibling(&next).map(Some)
        };
        let Some(to) = handed.filter(|_| !next.is_done() && self.no_timer_due()) else {
            self.ready.borrow_mut().push_front(next);
            return Next::Hub;
        };
        self.until_poll.set(until_poll - 1);
        next.take_scheduled();
        if next.take_cancel() {
            // The loop throws it into a sibling: asked for again, which
            // queues the sibling again (its wake flag is clear).
            if to.is_some() {
                next.request_cancel();
                return Next::Hub;
            }
            self.enter(remote, &next);
            self.hold(next);
            return Next::Cancelled;
        }
        self.enter(remote, &next);
        self.hold(next);
        match to {
            Some(s) => Next::Sibling(s),
            None => Next::Myself,
        }
    }

    /// The greenlet of `next`, a started task of this worker, as a sibling
    /// the running green thread may switch straight to (see
    /// `direct::sibling`), if it is one.
    #[inline(always)]
    fn live_sibling(&self, next: &Arc<Task>) -> Option<direct::Sibling> {
        // SAFETY: the table is read only until `sibling` returns (the
        // `Sibling` holds no reference into it), with no call in between
        // that could reach the code that borrows it mutably (the hub's,
        // suspended).
        let live = unsafe { self.live.try_borrow_unguarded() }.ok()?;
        match live.get(next.live_key.load(Ordering::Relaxed)) {
            // SAFETY: every greenlet in `live` was made by `start`, on
            // this worker's thread, which runs this.
            Some((t, g)) if Arc::ptr_eq(t, next) => unsafe { direct::sibling(g) },
            _ => None,
        }
    }

    /// A yield of the green thread `me` when nothing else is ready and the
    /// loop would only resume it (see [`hub_is_idle`](Self::hub_is_idle)),
    /// no timer being due: it runs on where it is; whether it does. A round
    /// of the poll cadence without the rest of a resume's bookkeeping: it
    /// never left the running state, `current` and the watchdog's `running`
    /// name it already, its wake sequence only matters to timers (none is
    /// armed for it: it has not parked since its last resume, which made
    /// older entries stale), and the watchdog's tick moves at the loop's
    /// resume, at least every [`POLL_EVERY`] rounds. A pending cancellation
    /// is left to the park, and so is a yield that trace hooks observe.
    #[inline(always)]
    pub(crate) fn yield_in_place(&self, me: &Task) -> bool {
        if !self.ready.borrow().is_empty() || me.cancel_requested() || direct::observed() {
            return false;
        }
        let Some(until_poll) = self.hub_is_idle(self.remote()) else {
            return false;
        };
        if !self.no_timer_due() {
            return false;
        }
        self.until_poll.set(until_poll - 1);
        true
    }

    /// Whether no timer is due now: the loop's next round would fire none.
    /// Reads the clock only while a timer is armed (the loop's round reads
    /// it then too, to fire them), so a green thread with a deadline (a
    /// `sleep`, a `timeout`, a server's) does not keep its worker from
    /// handing off, and a due timer sends the parking green thread to the
    /// loop, which fires it: timers fire at the first scheduling point
    /// after their deadline, hand-off or not.
    #[inline(always)]
    fn no_timer_due(&self) -> bool {
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
    /// at it go: no task queued here to start (`local_work`), no remote
    /// wake, no pending call, and the poll cadence not due. `Some` of the
    /// rounds left before the next poll, then. (Timers: see
    /// [`no_timer_due`](Self::no_timer_due), asked once a hand-off has
    /// someone to resume.)
    ///
    /// A round without the loop counts as one of its rounds, so the worker
    /// still polls every [`POLL_EVERY`] rounds, and a busy set of green
    /// threads reaches the loop at least that often. What any worker of
    /// the runtime may serve (tasks on the injector or on another worker's
    /// deque, to steal) and the shutdown are left to that round: a busy
    /// worker takes them late by at most [`POLL_EVERY`] rounds (as it
    /// does I/O), never starved; an idle one sees them before it sleeps
    /// ([`work_from_outside`](Self::work_from_outside), unchanged), and
    /// their producers wake a sleeping worker as before. Only the wakes
    /// and calls that must run at this worker's next scheduling point are
    /// read at every hand-off: the inbox's slot (one word: a task, or the
    /// mark of its overflow; the one wake it may miss, racing the loop's
    /// take, the loop takes at most [`POLL_EVERY`] rounds later, see
    /// `Inbox::marked`) and the pending-call flag. No new flag is shared
    /// between threads, and the sleep handshake reads the whole inbox, so
    /// no interleaving can lose a wake.
    #[inline(always)]
    fn hub_is_idle(&self, remote: &Remote) -> Option<u32> {
        let until_poll = self.until_poll.get();
        let busy = until_poll <= 1
            || self.local_work.get()
            || remote.inbox.marked()
            || self.shared.pending.wants_drain();
        (!busy).then_some(until_poll)
    }

    /// Shutdown began: cancel every started task, drop every unstarted one.
    fn cancel_all(&self) {
        self.cancelled_all.set(true);
        let tasks: Vec<Arc<Task>> = self
            .live
            .borrow()
            .iter()
            .map(|(_, (t, _))| Arc::clone(t))
            .collect();
        for t in tasks {
            t.request_cancel();
        }
        // Taken out first: a closure's destructor may spawn.
        drop(self.local_new.take());
        drop(self.spawned.take());
        drop(self.remote().newest.take());
        while let Some(u) = self.deque.pop() {
            drop(u);
        }
        loop {
            match self.shared.injector.steal() {
                Steal::Success(u) => drop(u),
                Steal::Retry => continue,
                Steal::Empty => break,
            }
        }
    }

    /// The shutdown deadline passed with green threads still alive.
    fn report_refusals(&self) {
        let live = self.live.borrow();
        for (_, (t, _)) in live.iter() {
            diag_warn!(
                "hub worker {}: green thread '{}' (id {}, spawned at {}) did not finish within the \
                 shutdown timeout after it was cancelled ({}); it is killed now and force-unwound if \
                 it refuses again",
                self.index,
                t.name(),
                t.id,
                t.site,
                t.state()
            );
            self.shared.record_refusal(t);
        }
    }

    /// After the loop: kill what is left (their stacks unwind), drop the
    /// rest.
    fn teardown(&self) {
        let entries: Vec<(Arc<Task>, Greenlet)> = self.live.borrow_mut().drain().collect();
        for (task, g) in &entries {
            if g.is_dead() {
                continue;
            }
            self.current.set(Arc::as_ptr(task));
            let result = g.kill();
            self.current.set(ptr::null());
            if let Err(e) = result {
                diag_warn!(
                    "hub worker {}: green thread '{}' (id {}, spawned at {}) refused to die at \
                     shutdown: {e}",
                    self.index,
                    task.name(),
                    task.id,
                    task.site
                );
            }
            task.finish(Some(JoinError::Cancelled { name: task.name() }));
        }
        self.release_held();
        drop(self.spawned.take());
        drop(self.remote().newest.take());
        self.pool.clear();
        self.timers.borrow_mut().clear();
        self.ready.borrow_mut().clear();
        entries.into_iter().for_each(drop_entry);
    }
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
fn drop_entry((task, g): (Arc<Task>, Greenlet)) {
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
fn finish_cancelled(task: &Task) {
    task.finish(Some(JoinError::Cancelled { name: task.name() }));
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    use std::panic::Location;
    use std::sync::mpsc;

    use crate::hub::spawn::NewTask;
    use crate::hub::Runtime;

    /// How long a test waits for what must happen before it calls it hung.
    const HANG: Duration = Duration::from_secs(30);

    /// A runtime of two workers (no watchdog) and its shared state.
    pub(crate) fn runtime_of_two() -> (Runtime, Arc<Shared>) {
        let rt = Runtime::builder()
            .worker_threads(2)
            .watchdog(None)
            .build()
            .expect("a runtime");
        let shared = rt
            .block_on(|| Arc::clone(&current().expect("a worker").shared))
            .expect("the block_on task");
        (rt, shared)
    }

    /// A runtime of two workers (no watchdog) whose newest spawns never
    /// age: no worker takes another's.
    fn runtime_of_two_never_aging() -> Runtime {
        Runtime::builder()
            .worker_threads(2)
            .watchdog(None)
            .slot_age(Duration::from_secs(3600))
            .build()
            .expect("a runtime")
    }

    /// Spin (not parking) until `flag` is set, at most [`HANG`]; whether it
    /// was.
    fn spin_until(flag: &AtomicBool) -> bool {
        let start = Instant::now();
        while !flag.load(Ordering::Acquire) {
            if start.elapsed() > HANG {
                return false;
            }
            std::hint::spin_loop();
        }
        true
    }

    /// A green thread that spawns a task and then parks (joins it) has it
    /// start on its own worker, while the other worker is idle and looks
    /// for work after the spawn: the spawn wakes it from its sleep, and it
    /// goes through a round of its loop (where it would steal a task from
    /// the deque) before it sleeps again. The newest spawn waits in the
    /// spawner's slot, which the other worker leaves alone until it ages
    /// (never, here), so it has not started when the spawner parks, and
    /// then starts on the spawner's worker.
    #[test]
    fn a_spawn_joined_after_the_other_worker_looked_starts_on_the_spawners_worker() {
        let rt = runtime_of_two_never_aging();
        let outcomes = rt
            .block_on(|| {
                let here = current().expect("a worker");
                let me = std::thread::current().id();
                let other = &here.shared.workers[1 - here.index];
                let asleep = || {
                    other.sleeping.load(Ordering::SeqCst)
                        && here.shared.idle.load(Ordering::SeqCst) > 0
                };
                (0..20)
                    .map(|_| {
                        let start = Instant::now();
                        while !asleep() {
                            assert!(start.elapsed() < HANG, "the other worker never slept");
                            std::hint::spin_loop();
                        }
                        let ran = Arc::new(AtomicBool::new(false));
                        let flag = Arc::clone(&ran);
                        let h = crate::hub::spawn(move || {
                            flag.store(true, Ordering::Release);
                            std::thread::current().id()
                        });
                        // Woken by the spawn (which cleared its flag), it
                        // sets it again once its round found nothing.
                        let slept = spin_until(&other.sleeping);
                        let early = ran.load(Ordering::Acquire);
                        let on = h.join().expect("the child");
                        (slept, early, on == me)
                    })
                    .collect::<Vec<_>>()
            })
            .expect("the block_on task");
        for outcome in outcomes {
            assert_eq!(
                outcome,
                (true, false, true),
                "(the other worker slept again, the child started before the join, \
                 the child started on the spawner's worker)"
            );
        }
    }

    /// A newer spawn moves the older one to the deque, where the idle
    /// worker steals it while the spawner spins; the newest stays in the
    /// slot (not started while the spawner does not park) and starts on
    /// the spawner's worker once it joins.
    #[test]
    fn a_newer_spawn_leaves_the_older_one_to_steal() {
        let rt = runtime_of_two_never_aging();
        let outcome = rt
            .block_on(|| {
                let me = std::thread::current().id();
                let older_ran = Arc::new(AtomicBool::new(false));
                let newest_ran = Arc::new(AtomicBool::new(false));
                let flag = Arc::clone(&older_ran);
                let older = crate::hub::spawn(move || {
                    flag.store(true, Ordering::Release);
                    std::thread::current().id()
                });
                let flag = Arc::clone(&newest_ran);
                let newest = crate::hub::spawn(move || {
                    flag.store(true, Ordering::Release);
                    std::thread::current().id()
                });
                let stolen = spin_until(&older_ran);
                let newest_early = newest_ran.load(Ordering::Acquire);
                let older_on = older.join().expect("the older task");
                let newest_on = newest.join().expect("the newest task");
                (stolen, newest_early, older_on != me, newest_on == me)
            })
            .expect("the block_on task");
        assert_eq!(
            outcome,
            (true, false, true, true),
            "(older started while the spawner spun, newest started while the spawner spun, \
             older on the other worker, newest on the spawner's)"
        );
    }

    /// `net::serve` on a blocking-pool thread places its connections'
    /// tasks through `Remote::place`; one placed after the shutdown has
    /// closed the inboxes (the thread was past its check of the shutdown
    /// flag) must be refused, so the caller drops it: left in the inbox,
    /// it held the runtime's `Shared` (which holds the inbox) for ever,
    /// and its closure, and the connection in it, with it.
    #[test]
    fn a_placement_after_the_shutdown_is_refused_not_leaked() {
        const PLACED: usize = 8;
        let (rt, shared) = runtime_of_two();
        let runtime_state = Arc::downgrade(&shared);
        let held = Arc::new(());
        let in_closures = Arc::clone(&held);
        let (go, wait_for_go) = mpsc::channel::<()>();
        let (started, wait_for_start) = mpsc::channel::<()>();
        let (report, refusals) = mpsc::channel();
        drop(rt.handle().spawn_blocking(move || {
            started.send(()).expect("the test waits");
            wait_for_go.recv().expect("the test's go");
            let mut refused = 0;
            for i in 0..PLACED {
                let guard = Arc::clone(&in_closures);
                let (u, join) = NewTask {
                    shared: &shared,
                    name: None,
                    stack_size: None,
                    site: Location::caller(),
                    shard: shared.workers.len(),
                }
                .build(move || drop(guard));
                drop(join);
                if let Err(u) = shared.workers[i % 2].place(u) {
                    drop(u);
                    refused += 1;
                }
            }
            drop((in_closures, shared));
            report.send(refused).expect("the test waits");
        }));
        // Running (a queued call would be cancelled by the shutdown).
        wait_for_start
            .recv_timeout(HANG)
            .expect("the blocking call never started");
        drop(rt);
        go.send(()).expect("the blocking call waits");
        let refused = refusals.recv_timeout(HANG).expect("the blocking call hung");
        assert_eq!(refused, PLACED, "placements on ended workers were taken");
        assert_eq!(
            Arc::strong_count(&held),
            1,
            "a refused task's closure was not dropped"
        );
        // The pool thread lets its context go as it ends: then nothing
        // holds the runtime's state.
        let start = Instant::now();
        while runtime_state.strong_count() > 0 {
            assert!(
                start.elapsed() < HANG,
                "the runtime's shared state outlived its shutdown"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
