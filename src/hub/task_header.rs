//! A green thread's shared header ([`Task`]: identity, state, wake and
//! cancel flags, join waiters, its closure until it starts, its value once
//! it finished).
//!
//! Owns the task's state machine as seen from other threads, and its
//! [`RuntimeLink`]. Calls nothing of the scheduler: a wake goes through
//! the task's [`Wake`] implementation, which the worker provides (see
//! `worker::wake`). Uses the registry to deregister a finished task, and
//! the closure storage, output slot, spin lock, `timeout` scopes and
//! task-local table it holds. It names nothing of the runtime above it:
//! the runtime's shared state (`shared`), which queues and lists tasks,
//! is held through the [`RuntimeLink`], its type erased.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::panic::Location;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};

use super::error::JoinError;
use super::local_table::Locals;
use super::output::Output;
use super::registry::{Links, Listed, Registry};
use super::scopes::Scopes;
use super::spin_lock::{QuickGuard, QuickMutex};
use super::task_body::Body;
use super::task_info::TaskInfo;
use super::task_state::{TaskState, Wait};

/// `owner` of a task that has not started on any worker.
pub(crate) const NO_OWNER: usize = usize::MAX;

const QUEUED: u16 = 0;
const READY: u16 = 1;
const RUNNING: u16 = 2;
const PARKED: u16 = 3;
const BLOCKING: u16 = 4;
const FINISHED: u16 = 5;

/// The state word of a parked task (see [`Task::parked_as`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Parked(u16);

/// The part of a green thread that any thread may see. Its greenlet handle
/// stays on the owner worker (see `worker::Worker::live`).
pub(crate) struct Task {
    pub(crate) id: u64,
    name: Option<Box<str>>,
    pub(crate) site: &'static Location<'static>,
    /// The runtime it belongs to.
    pub(crate) runtime: RuntimeLink,
    /// The worker it started on (`NO_OWNER` before): written once, by that
    /// worker, before the task can be woken.
    owner: AtomicUsize,
    /// The worker whose thread alone can finish it now (`NO_OWNER`: none
    /// known): the one it started on, or before that the worker of a
    /// one-worker runtime whose own spawn stack holds its token (nothing
    /// steals from there). Written by that worker's thread only, so read
    /// as its own on that thread (see `add_green_joiner`).
    finisher: AtomicUsize,
    /// Its state (`QUEUED`...`FINISHED`) in the low byte and, while it is
    /// `PARKED`, what it waits for (`Wait::code`) in the high byte: a park
    /// sets both with one store, and a reader sees the two together.
    state: AtomicU16,
    /// On a ready queue (or about to be): a second wake pushes nothing.
    scheduled: AtomicBool,
    /// Cancellation requested and not yet delivered at a parking point.
    cancel: AtomicBool,
    /// Bumped at every resume: a timer armed for an older park is stale.
    pub(crate) park_seq: AtomicU64,
    /// The key in the owner worker's table of live greenlets.
    pub(crate) live_key: AtomicUsize,
    /// Its greenlet's record (`direct::record_of`) while its entry is in
    /// that table, else null: set and cleared by that worker's thread only
    /// (a hand-off finds the greenlet to switch to in one load).
    pub(crate) greenlet: AtomicPtr<()>,
    /// Where its greenlet's coroutine state lies once started (0 before):
    /// written by its worker after its first run, read by the watchdog to
    /// unwind its stack from its saved context while that worker is
    /// stalled (`stall_stacks`).
    #[cfg_attr(
        not(all(target_os = "linux", target_arch = "x86_64")),
        allow(dead_code)
    )]
    pub(crate) stack_top: AtomicUsize,
    /// Its place in the runtime's registry shard `shard`.
    pub(crate) links: Links<Task>,
    pub(crate) shard: usize,
    /// The stack size its greenlet asks for.
    pub(crate) stack_size: usize,
    /// Set once the outcome is recorded (under the `outcome` lock).
    done: AtomicBool,
    /// Its outcome and joiners, under one lock (held for a few
    /// instructions, never across a wake or a drop of a value: a
    /// [`QuickMutex`], unlocked by a plain store).
    outcome: QuickMutex<Outcome>,
    /// Its `timeout` scopes.
    pub(crate) scopes: Scopes,
    /// Its closure until it starts (reached through its `NotStarted`).
    pub(crate) body: Body<Task>,
    /// Its task-local values (used and cleared by its body only).
    pub(crate) locals: Locals,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Task {
    pub(crate) fn new(
        runtime: RuntimeLink,
        name: Option<Box<str>>,
        site: &'static Location<'static>,
        stack_size: usize,
        shard: usize,
        body: Body<Task>,
    ) -> Task {
        Task {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name,
            site,
            runtime,
            owner: AtomicUsize::new(NO_OWNER),
            finisher: AtomicUsize::new(NO_OWNER),
            state: AtomicU16::new(QUEUED),
            scheduled: AtomicBool::new(false),
            cancel: AtomicBool::new(false),
            park_seq: AtomicU64::new(0),
            live_key: AtomicUsize::new(usize::MAX),
            greenlet: AtomicPtr::new(ptr::null_mut()),
            stack_top: AtomicUsize::new(0),
            links: Links::new(),
            shard,
            stack_size,
            done: AtomicBool::new(false),
            outcome: QuickMutex::new(Outcome {
                waiters: JoinWaiters::new(),
                output: Output::new(),
                error: None,
            }),
            scopes: Scopes::default(),
            body,
            locals: Locals::new(),
        }
    }

    /// A new task in a new allocation: made in it (`new_cyclic` allocates
    /// first), not moved there: `Arc::new` of the task (some 400 bytes)
    /// cost a `memcpy` of it per spawn.
    pub(crate) fn allocate(
        runtime: RuntimeLink,
        name: Option<Box<str>>,
        site: &'static Location<'static>,
        stack_size: usize,
        shard: usize,
        body: Body<Task>,
    ) -> Arc<Task> {
        Arc::new_cyclic(|_| Task::new(runtime, name, site, stack_size, shard, body))
    }

    /// Whether this task's allocation may be made a new task
    /// ([`renew`](Self::renew)): it finished, and its value, error,
    /// joiners, closure and `timeout` scopes are gone. Its caller holds the
    /// only reference (`&mut`: see `spawn::is_only_and_spent`), so no handle, waker,
    /// timer or queue can see it any more, and, done, it left its registry
    /// shard (`complete`).
    #[inline]
    pub(crate) fn is_spent(&mut self) -> bool {
        let outcome = self.outcome.get_mut();
        *self.done.get_mut()
            && outcome.waiters.first.is_none()
            && outcome.waiters.rest.capacity() == 0
            && outcome.output.is_empty()
            && outcome.error.is_none()
            && self.body.is_empty()
            && self.scopes.earliest().is_none()
            && self.locals.is_empty()
    }

    /// Make this spent task (see [`is_spent`](Self::is_spent)) a new one,
    /// as [`Task::new`] would, in its allocation: a new id, queued, not
    /// started, with `body` to run. Only what a task's life changed is
    /// written again (its runtime stays: the pool that keeps it is one
    /// of that runtime's workers').
    pub(crate) fn renew(
        &mut self,
        name: Option<Box<str>>,
        site: &'static Location<'static>,
        stack_size: usize,
        shard: usize,
        body: Body<Task>,
    ) {
        self.id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        self.name = name;
        self.site = site;
        self.stack_size = stack_size;
        self.shard = shard;
        *self.owner.get_mut() = NO_OWNER;
        *self.finisher.get_mut() = NO_OWNER;
        *self.state.get_mut() = QUEUED;
        *self.scheduled.get_mut() = false;
        *self.cancel.get_mut() = false;
        *self.park_seq.get_mut() = 0;
        *self.live_key.get_mut() = usize::MAX;
        *self.greenlet.get_mut() = ptr::null_mut();
        *self.stack_top.get_mut() = 0;
        *self.done.get_mut() = false;
        self.outcome.get_mut().output.renew();
        self.body = body;
    }

    /// Its name: the one given to [`task()`](super::task), else `task-<id>`.
    pub(crate) fn name(&self) -> String {
        match &self.name {
            Some(n) => n.to_string(),
            None => format!("task-{}", self.id),
        }
    }

    /// What a dump shows of it now.
    pub(crate) fn info(&self) -> TaskInfo {
        let owner = self.owner();
        TaskInfo {
            id: self.id,
            name: self.name(),
            state: self.state(),
            worker: (owner != NO_OWNER).then_some(owner),
            spawned_at: self.site.to_string(),
        }
    }

    pub(crate) fn has_name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    #[inline]
    pub(crate) fn owner(&self) -> usize {
        self.owner.load(Ordering::Acquire)
    }

    pub(crate) fn set_owner(&self, worker: usize) {
        self.owner.store(worker, Ordering::Release);
    }

    pub(crate) fn state(&self) -> TaskState {
        let word = self.state.load(Ordering::Relaxed);
        match word & 0xff {
            QUEUED => TaskState::Queued,
            READY => TaskState::Ready,
            RUNNING => TaskState::Running,
            PARKED => TaskState::Parked(Wait::from_code((word >> 8) as u8)),
            BLOCKING => TaskState::Blocking,
            _ => TaskState::Finished,
        }
    }

    pub(crate) fn set_running(&self) {
        self.state.store(RUNNING, Ordering::Relaxed);
    }

    pub(crate) fn set_blocking(&self) {
        self.state.store(BLOCKING, Ordering::Relaxed);
    }

    pub(crate) fn set_parked(&self, wait: Wait) {
        self.set_parked_as(Task::parked_as(wait));
    }

    /// The state of a task parked for `wait`, for
    /// [`set_parked_as`](Self::set_parked_as): made where `wait` is known
    /// (a constant at most parks), so that the park stores it as it is.
    #[inline(always)]
    pub(crate) fn parked_as(wait: Wait) -> Parked {
        Parked(PARKED | u16::from(wait.code()) << 8)
    }

    /// [`set_parked`](Self::set_parked) with its state made already.
    #[inline(always)]
    pub(crate) fn set_parked_as(&self, parked: Parked) {
        self.state.store(parked.0, Ordering::Relaxed);
    }

    /// Clear the wake flag before resuming it: a wake from now on queues it
    /// again.
    pub(crate) fn take_scheduled(&self) {
        self.scheduled.store(false, Ordering::Release);
    }

    /// Whether a cancellation is waiting to be delivered; clears it.
    pub(crate) fn take_cancel(&self) -> bool {
        self.cancel.load(Ordering::Relaxed) && self.cancel.swap(false, Ordering::AcqRel)
    }

    pub(crate) fn cancel_requested(&self) -> bool {
        self.cancel.load(Ordering::Acquire)
    }

    /// Ask for cancellation and wake it so its parking point sees it.
    pub(crate) fn request_cancel(self: &Arc<Task>) {
        if self.is_done() {
            return;
        }
        self.cancel.store(true, Ordering::Release);
        if self.owner() != NO_OWNER {
            Wake::wake_by_ref(self);
        }
    }

    /// Mark it scheduled and ready; the owner worker the caller must queue
    /// it on (see the worker's `push_ready`), unless it was scheduled
    /// already, is not started or is done. Inline: part of every wake.
    #[inline]
    pub(crate) fn mark_scheduled(&self) -> Option<usize> {
        if self.scheduled.swap(true, Ordering::AcqRel) {
            return None;
        }
        let owner = self.owner();
        if owner == NO_OWNER || self.is_done() {
            return None;
        }
        self.state.store(READY, Ordering::Relaxed);
        Some(owner)
    }

    /// Mark it scheduled and ready, from its owner worker's thread: whether
    /// the caller must queue it (it was not scheduled already).
    #[inline]
    pub(crate) fn mark_ready(&self) -> bool {
        if self.scheduled.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.state.store(READY, Ordering::Relaxed);
        true
    }

    #[inline]
    pub(crate) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Record the outcome when it is not a value (`None`: cancelled, or a
    /// value already put), wake the joiners, and leave the registry. Only
    /// the first outcome counts.
    pub(crate) fn finish(&self, error: Option<JoinError>) {
        let mut outcome = self.outcome.lock();
        if self.is_done() {
            return;
        }
        outcome.error = error;
        self.complete(outcome);
    }

    /// With its outcome recorded under `outcome`'s lock: mark it done, wake
    /// the joiners (after the lock), and leave the registry. The joiners
    /// are taken before `done` is set, and the guard not used after: from
    /// then on the handle reads the outcome without the lock (see
    /// [`take_outcome`](Self::take_outcome)).
    fn complete(&self, mut outcome: QuickGuard<'_, Outcome>) {
        // The first (usually the only) joiner without the list: that is
        // moved out only when it was ever used.
        let first = outcome.waiters.first.take();
        let rest = match outcome.waiters.rest.capacity() {
            0 => None,
            _ => Some(std::mem::take(&mut outcome.waiters.rest)),
        };
        self.done.store(true, Ordering::Release);
        drop(outcome);
        self.state.store(FINISHED, Ordering::Relaxed);
        self.runtime.registry().remove(self);
        if let Some(j) = first {
            j.wake();
        }
        if let Some(rest) = rest {
            wake_all(rest);
        }
    }

    /// Register `joiner` to be woken when it finishes; `false` if it already
    /// has (nothing registered).
    fn add_joiner(&self, joiner: Joiner) -> bool {
        let mut outcome = self.outcome.lock();
        if self.is_done() {
            return false;
        }
        outcome.waiters.add(joiner);
        true
    }

    /// Record that only worker `w`'s thread can finish it from now on (see
    /// `finisher`): `w` starts it, or keeps its token where only `w` takes
    /// it. Called on `w`'s thread.
    #[inline]
    pub(crate) fn set_finisher(&self, w: usize) {
        self.finisher.store(w, Ordering::Relaxed);
    }

    /// Register the green thread `me`, running on worker `w` of its
    /// runtime, to be woken
    /// when it finishes; `false` if it already has. Without the lock when
    /// only `w`'s thread can finish it (`finisher` is `w`, of `w`'s
    /// runtime, `me`'s; written on this thread, so this load reads this thread's
    /// own store): then everything that writes its outcome runs on this
    /// thread (its body; the worker's own finishing of it in
    /// `after_full_switch`, `drop_entry` and teardown; the drop of its
    /// token from the spawn stack) and not now (this thread runs `me`), and
    /// the only other party, its handle, is the caller, here.
    #[inline]
    pub(crate) fn add_green_joiner(&self, w: usize, me: &Arc<Task>) -> bool {
        if self.finisher.load(Ordering::Relaxed) != w || !self.runtime.same_as(&me.runtime) {
            return self.add_joiner(Joiner::Green(Arc::clone(me)));
        }
        if self.is_done() {
            return false;
        }
        let outcome = self.outcome.data_ptr();
        // SAFETY: nothing else reaches the outcome meanwhile, as said
        // above; the reference lives for this statement only.
        unsafe { (*outcome).waiters.add(Joiner::Green(Arc::clone(me))) };
        true
    }

    /// Register `waker` to be woken when it finishes; `false` if it already
    /// has (nothing registered).
    pub(crate) fn add_join_waiter(&self, waker: Waker) -> bool {
        self.add_joiner(Joiner::Other(waker))
    }
}

/// A joiner of a task: a green thread, woken by a direct call of its
/// `Wake::wake` (no waker, so no vtable and no waker clone's indirection),
/// or any other waker.
enum Joiner {
    Green(Arc<Task>),
    Other(Waker),
}

impl Joiner {
    /// Whether both wake the same thing.
    fn same(&self, other: &Joiner) -> bool {
        match (self, other) {
            (Joiner::Green(a), Joiner::Green(b)) => Arc::ptr_eq(a, b),
            (Joiner::Other(a), Joiner::Other(b)) => a.will_wake(b),
            _ => false,
        }
    }

    fn wake(self) {
        match self {
            Joiner::Green(t) => Wake::wake(t),
            Joiner::Other(w) => w.wake(),
        }
    }
}

/// A task's outcome and its joiners (see `Task::outcome`).
struct Outcome {
    waiters: JoinWaiters,
    /// Its value, once its body put it (typed by its `Slot<T>`).
    output: Output,
    /// The outcome when it is not a value.
    error: Option<JoinError>,
}

/// A task's joiners, each once: the first kept inline, so that the usual
/// single joiner allocates no list.
#[derive(Default)]
struct JoinWaiters {
    first: Option<Joiner>,
    rest: Vec<Joiner>,
}

impl JoinWaiters {
    const fn new() -> JoinWaiters {
        JoinWaiters {
            first: None,
            rest: Vec::new(),
        }
    }

    /// Add `joiner` unless one that wakes the same is there.
    #[inline]
    fn add(&mut self, joiner: Joiner) {
        match &self.first {
            None => self.first = Some(joiner),
            Some(_) => self.add_more(joiner),
        }
    }

    /// [`add`](Self::add) with a first joiner there (out of line: a
    /// single join stays small).
    #[inline(never)]
    fn add_more(&mut self, joiner: Joiner) {
        let known = |j: &Joiner| j.same(&joiner);
        match &self.first {
            Some(first) if known(first) => {}
            _ if self.rest.iter().any(known) => {}
            _ => self.rest.push(joiner),
        }
    }
}

/// Wake the joiners after the first (out of line: rare).
#[cold]
#[inline(never)]
fn wake_all(rest: Vec<Joiner>) {
    rest.into_iter().for_each(Joiner::wake);
}

impl Drop for Task {
    /// A task leaves the registry when it finishes, before its last count
    /// can go (see the registry's module doc); one still listed now (a bug
    /// elsewhere) is taken out under its shard's lock before any of it is
    /// freed, so the registry never points at freed memory.
    fn drop(&mut self) {
        let linked = self.links.is_linked();
        debug_assert!(!linked, "task {} dropped while registered", self.id);
        if linked {
            self.runtime.registry().remove(self);
        }
    }
}

impl Listed for Task {
    #[inline]
    fn links(&self) -> &Links<Task> {
        &self.links
    }

    #[inline]
    fn shard(&self) -> usize {
        self.shard
    }

    #[inline]
    fn id(&self) -> u64 {
        self.id
    }
}

/// A task's link to the runtime it belongs to: a count of the runtime's
/// shared state, whose type the header does not name (that state queues
/// and lists tasks, so it sits above this file), and the registry inside
/// it, which the task leaves when it finishes. The shared state makes the
/// link (`Shared::link`) and finds itself in it (`Shared::of`; a worker
/// compares its registry's address, `Worker::owns`).
pub(crate) struct RuntimeLink {
    /// Keeps the runtime's shared state alive.
    owner: Arc<dyn Any + Send + Sync>,
    /// The registry inside `owner`.
    registry: NonNull<Registry<Task>>,
}

// SAFETY: `owner` is `Send + Sync`; `registry` points into it (see
// `RuntimeLink::new`), at a registry, which is `Sync` (each shard under its
// lock) and only ever shared.
unsafe impl Send for RuntimeLink {}
// SAFETY: as for `Send`.
unsafe impl Sync for RuntimeLink {}

impl RuntimeLink {
    /// The link to `owner`, the runtime's shared state, whose registry
    /// `registry` finds.
    pub(crate) fn new<S: Any + Send + Sync>(
        owner: Arc<S>,
        registry: impl FnOnce(&S) -> &Registry<Task>,
    ) -> RuntimeLink {
        let registry = NonNull::from(registry(&owner));
        RuntimeLink { owner, registry }
    }

    /// The runtime's registry.
    #[inline]
    pub(crate) fn registry(&self) -> &Registry<Task> {
        // SAFETY: `registry` was borrowed from the value `owner` holds (see
        // `new`), which does not move and lives while `owner`, a count of
        // it, does: at least as long as `self`.
        unsafe { self.registry.as_ref() }
    }

    /// Whether `registry` (an address only, never read) is this runtime's:
    /// the identity of a runtime, as each has one registry.
    #[inline]
    pub(crate) fn is_of(&self, registry: *const Registry<Task>) -> bool {
        ptr::eq(self.registry.as_ptr(), registry)
    }

    /// Whether `other` links to the same runtime.
    #[inline]
    pub(crate) fn same_as(&self, other: &RuntimeLink) -> bool {
        self.registry == other.registry
    }

    /// The runtime's shared state, its type erased.
    pub(crate) fn owner(&self) -> &(dyn Any + Send + Sync) {
        &*self.owner
    }
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task")
            .field("id", &self.id)
            .field("name", &self.name())
            .field("state", &self.state())
            .finish()
    }
}

/// The type of a task's value: a token made with the task (by
/// `spawning::NewTask`) that lets its body put a `T` into the task's
/// [`Output`] and its [`JoinHandle`](super::JoinHandle) take one, and
/// gives the handle `T`'s auto traits (those of an
/// `Arc<Mutex<Option<T>>>`).
pub(crate) struct Slot<T>(PhantomData<QuickMutex<T>>);

impl<T> Slot<T> {
    /// The token of a task made just now.
    pub(crate) fn new() -> Slot<T> {
        Slot(PhantomData)
    }
}

impl<T> Clone for Slot<T> {
    fn clone(&self) -> Slot<T> {
        *self
    }
}

impl<T> Copy for Slot<T> {}

impl Task {
    /// Put the value of its body (which ran `f` of a `T: Send`) and finish
    /// it (see [`finish`](Self::finish)), under one lock; unless it is
    /// done already (only the first outcome counts), then the value is
    /// dropped (after the lock): nothing writes the outcome once it is done.
    pub(crate) fn finish_with_output<T: Send>(&self, _: Slot<T>, value: T) {
        let mut outcome = self.outcome.lock();
        if self.is_done() {
            drop(outcome);
            drop(value);
            return;
        }
        // SAFETY: the slot token types every put and take of this task's
        // output as `T` (it is made with the task, for one `T`).
        let unwanted = unsafe { outcome.output.put(value) };
        self.complete(outcome);
        drop(unwanted);
    }

    /// [`finish_with_output`](Self::finish_with_output) for a `spawn_local`
    /// task, whose value need not be `Send`.
    pub(crate) fn finish_with_local_output<T>(&self, _: Slot<T>, value: T) {
        let mut outcome = self.outcome.lock();
        if self.is_done() {
            drop(outcome);
            drop(value);
            return;
        }
        // SAFETY: as in `finish_with_output`; the handle of a `T` that is
        // not `Send` is not `Send` (its `Slot<T>`), as `put_local` requires.
        let unwanted = unsafe { outcome.output.put_local(value) };
        self.complete(outcome);
        drop(unwanted);
    }

    /// Take its outcome: its value, if it was put and not taken yet, else
    /// its error (cancelled when there is none). Only by its handle, once
    /// this thread saw it done; without the lock: once done, nothing but
    /// the handle touches the value and the error (`finish` and the puts
    /// write them only while it is not done, under the lock, before
    /// `complete` sets `done`; `add_joiner` and `finish` look at nothing
    /// but `done` then; `complete` uses its guard no more after setting it).
    pub(crate) fn take_outcome<T>(&self, _: Slot<T>) -> Result<T, JoinError> {
        debug_assert!(self.is_done(), "an outcome is taken once it is done");
        let outcome = self.outcome.data_ptr();
        // SAFETY: this thread saw `done` set (the caller's contract, with
        // an `Acquire` load that pairs with `complete`'s `Release` store,
        // so the value's and the error's writes happen before), after
        // which only the handle (the caller, which is not `Clone`) reaches
        // them, as said above: these `&mut`s of the two fields alias
        // nothing. The slot token types the value as in
        // `finish_with_output`.
        let (output, error) = unsafe { (&mut (*outcome).output, &mut (*outcome).error) };
        // SAFETY: as in `finish_with_output`.
        if let Some(v) = unsafe { output.take() } {
            return Ok(v);
        }
        Err(error
            .take()
            .unwrap_or_else(|| JoinError::Cancelled { name: self.name() }))
    }

    /// Its handle goes: a value put already is dropped now (after the
    /// lock), one put later by its body.
    pub(crate) fn abandon_output<T>(&self, _: Slot<T>) {
        // SAFETY: as in `finish_with_output`.
        let value = unsafe { self.outcome.lock().output.abandon::<T>() };
        drop(value);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    use super::{JoinWaiters, Joiner};

    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn join_waiters_keep_each_waker_once_the_first_inline() {
        let counts: Vec<Arc<Count>> = (0..3).map(|_| Arc::default()).collect();
        let wakers: Vec<Waker> = counts.iter().map(|c| Waker::from(Arc::clone(c))).collect();
        let mut waiters = JoinWaiters::new();
        waiters.add(Joiner::Other(wakers[0].clone()));
        waiters.add(Joiner::Other(wakers[0].clone()));
        assert!(
            waiters.first.is_some() && waiters.rest.is_empty(),
            "one joiner: no list"
        );
        for i in [1, 2, 1, 0, 2] {
            waiters.add(Joiner::Other(wakers[i].clone()));
        }
        assert_eq!(waiters.rest.len(), 2);
        let taken = std::mem::take(&mut waiters);
        for j in taken.first.into_iter().chain(taken.rest) {
            j.wake();
        }
        let woken: Vec<usize> = counts.iter().map(|c| c.0.load(Ordering::Relaxed)).collect();
        assert_eq!(woken, [1, 1, 1], "each waker woken once");
        assert!(
            waiters.first.is_none() && waiters.rest.is_empty(),
            "taken: empty again"
        );
    }
}
