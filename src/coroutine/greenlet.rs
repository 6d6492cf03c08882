//! [`Greenlet`] handles and the shared greenlet record behind them.
//!
//! Owns [`Core`] (identity, observable flags, parent link, finalizers, and
//! the owner-only part: the `run` closure, the coroutine and its stack), the
//! handle count that drives kill-on-drop, [`Greenlet`], [`GreenletBuilder`]
//! and [`getcurrent`]; the record life cycle: registration ([`unregister`]),
//! per-thread reuse of dead records ([`Spare`]), the closure kept in the
//! record ([`Run`]), and the per-thread counts behind [`live_greenlets`].
//! Uses the dispatcher for every switch and the thread state for ownership
//! checks.

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::mem::{self, ManuallyDrop, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{
    fence, AtomicBool, AtomicIsize, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::Arc;

use corosensei::Yielder;
use parking_lot::Mutex;

use super::dispatch::{self, Co, Kind, Raised};
use super::error::{GreenletError, GreenletExit};
use super::stack::{default_stack_size, PooledStack};
use super::thread_state::{self, ThreadLink, ThreadState};
use super::value::Value;

pub(crate) const STARTED: u8 = 1;
pub(crate) const DEAD: u8 = 2;
pub(crate) const MAIN: u8 = 4;
/// Ignored a kill on drop, or is being killed on drop (that kill may
/// succeed: dead then too); left alone by further kills on drop, and
/// suspended until its thread exits if it survived.
pub(crate) const LEAKED: u8 = 8;

/// A callback run when a greenlet is finalized.
pub(crate) type Finalizer = Box<dyn FnOnce() + Send + 'static>;

/// Words of closure a greenlet keeps in its record without boxing it.
const RUN_WORDS: usize = 3;

type RunStorage = MaybeUninit<[usize; RUN_WORDS]>;

/// The body of a greenlet: its closure, kept in place when it fits in
/// [`RUN_WORDS`] words (a closure capturing a few handles, numbers or
/// `Arc`s), boxed otherwise, so that making a greenlet with a small closure
/// allocates nothing; or nothing, once it ran or was dropped. Like
/// `Box<dyn FnOnce>`, it is neither `Send` nor `Sync` (the closure may be
/// neither).
pub(crate) struct Run {
    storage: RunStorage,
    /// How to call or drop what `storage` holds; `None`: it holds nothing.
    vtable: Option<&'static RunVtable>,
    _not_send: PhantomData<*const ()>,
}

struct RunVtable {
    /// Moves the closure out of the storage and calls it.
    call: unsafe fn(*mut RunStorage, Value) -> Result<Value, GreenletError>,
    /// Drops the closure in the storage without calling it.
    drop: unsafe fn(*mut RunStorage),
}

/// Whether a `T` is kept in a [`Run`]'s storage itself.
const fn fits_in_run<T>() -> bool {
    mem::size_of::<T>() <= mem::size_of::<RunStorage>()
        && mem::align_of::<T>() <= mem::align_of::<RunStorage>()
}

/// # Safety
/// `storage` holds an initialized `F`, which the call consumes.
unsafe fn call_stored<F>(storage: *mut RunStorage, value: Value) -> Result<Value, GreenletError>
where
    F: FnOnce(Value) -> Result<Value, GreenletError>,
{
    // SAFETY: guaranteed by the caller; the `F` is moved out exactly once,
    // before anything else (the storage is not touched again).
    let run = unsafe { ptr::read(storage.cast::<F>()) };
    run(value)
}

/// # Safety
/// `storage` holds an initialized `Box<F>`, which the call consumes.
unsafe fn call_boxed<F>(storage: *mut RunStorage, value: Value) -> Result<Value, GreenletError>
where
    F: FnOnce(Value) -> Result<Value, GreenletError>,
{
    // SAFETY: guaranteed by the caller; the box is moved out exactly once,
    // before anything else.
    let run = unsafe { ptr::read(storage.cast::<Box<F>>()) };
    run(value)
}

/// # Safety
/// `storage` holds an initialized `S`, dropped here.
unsafe fn drop_stored<S>(storage: *mut RunStorage) {
    // SAFETY: guaranteed by the caller.
    unsafe { ptr::drop_in_place(storage.cast::<S>()) }
}

impl Run {
    /// No closure.
    pub(crate) const fn none() -> Run {
        Run {
            storage: RunStorage::uninit(),
            vtable: None,
            _not_send: PhantomData,
        }
    }

    pub(crate) fn new<F>(run: F) -> Run
    where
        F: FnOnce(Value) -> Result<Value, GreenletError> + 'static,
    {
        let mut storage = RunStorage::uninit();
        let vtable: &'static RunVtable = if fits_in_run::<F>() {
            // SAFETY: `F` fits the storage's size and alignment (checked).
            unsafe { storage.as_mut_ptr().cast::<F>().write(run) };
            const {
                &RunVtable {
                    call: call_stored::<F>,
                    drop: drop_stored::<F>,
                }
            }
        } else {
            const { assert!(fits_in_run::<Box<()>>()) };
            // SAFETY: a `Box` of a sized type is one word (asserted above).
            unsafe { storage.as_mut_ptr().cast::<Box<F>>().write(Box::new(run)) };
            const {
                &RunVtable {
                    call: call_boxed::<F>,
                    drop: drop_stored::<Box<F>>,
                }
            }
        };
        Run {
            storage,
            vtable: Some(vtable),
            _not_send: PhantomData,
        }
    }

    pub(crate) fn is_some(&self) -> bool {
        self.vtable.is_some()
    }

    /// Move the closure out, leaving nothing.
    pub(crate) fn take(&mut self) -> Run {
        mem::replace(self, Run::none())
    }

    /// Call the closure where it is, with `value`, leaving nothing in
    /// `this` (already before the call, which may switch away or panic).
    /// `Err(value)` if there is no closure.
    ///
    /// # Safety
    /// `this` points to a live `Run` that nothing else accesses during this
    /// call (the closure is moved out of it before it runs, and `this` is
    /// not used after that).
    pub(crate) unsafe fn call_in_place(
        this: *mut Run,
        value: Value,
    ) -> Result<Result<Value, GreenletError>, Value> {
        // SAFETY: guaranteed by the caller.
        unsafe {
            let Some(vtable) = (*this).vtable.take() else {
                return Err(value);
            };
            // The storage holds what `vtable` expects (set together in
            // `new`); with `vtable` cleared, it is consumed exactly once.
            Ok((vtable.call)(ptr::addr_of_mut!((*this).storage), value))
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(vtable) = self.vtable {
            // SAFETY: the storage holds what `vtable` expects (set together
            // in `new`), not consumed (consuming clears `vtable`).
            unsafe { (vtable.drop)(&mut self.storage) }
        }
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// How many ids a thread takes from [`NEXT_ID`] at once, so that creating a
/// greenlet costs no shared atomic operation for its id.
const ID_BLOCK: u64 = 1024;

/// A fresh process-unique id from the process-wide counter.
fn global_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// Most finished records a thread keeps for its next greenlets.
const SPARE_RECORDS: usize = 64;

/// Records made minus records dropped on threads without greenlet state,
/// plus the final counts of the thread states that were torn down.
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// The record count of every live thread state (records made minus records
/// dropped or kept for reuse on that thread; written only by that thread,
/// so that creating a greenlet costs no shared atomic operation).
static THREAD_COUNTS: Mutex<Vec<Arc<AtomicIsize>>> = Mutex::new(Vec::new());

/// How many greenlet records (main greenlets included) are in use in the
/// process: a record counts while a handle, a child, or its thread refers
/// to it, except the dead records a thread keeps for reuse, and a dead
/// greenlet whose last handle went on another thread (no longer counted,
/// though its owner may not have released it yet). For leak checks: exact
/// while no other thread makes or drops greenlets (each thread keeps its
/// own count, summed here).
///
/// # Example
/// ```
/// let g = greenlet::Greenlet::new(|v| Ok(v));
/// assert!(greenlet::live_greenlets() >= 1);
/// drop(g);
/// ```
pub fn live_greenlets() -> usize {
    let counts = THREAD_COUNTS.lock();
    let sum = counts
        .iter()
        .map(|count| count.load(Ordering::Relaxed))
        .fold(LIVE.load(Ordering::Relaxed), isize::wrapping_add);
    usize::try_from(sum).unwrap_or(0)
}

/// A new thread state's record count, registered for [`live_greenlets`].
pub(crate) fn register_record_count() -> Arc<AtomicIsize> {
    let count = Arc::new(AtomicIsize::new(0));
    THREAD_COUNTS.lock().push(Arc::clone(&count));
    count
}

/// A thread state goes: fold its record count into the global one, in one
/// step for [`live_greenlets`].
pub(crate) fn retire_record_count(count: &Arc<AtomicIsize>) {
    let mut counts = THREAD_COUNTS.lock();
    counts.retain(|c| !Arc::ptr_eq(c, count));
    LIVE.fetch_add(count.swap(0, Ordering::Relaxed), Ordering::Relaxed);
}

/// Count records made (`delta > 0`) or gone: in the calling thread's state
/// if it has one, else in the global count.
fn count_records(delta: isize) {
    match thread_state::existing_state() {
        // SAFETY: `ts` is this thread's live state; short access.
        Some(ts) => unsafe { (*ts).count_records(delta) },
        None => {
            LIVE.fetch_add(delta, Ordering::Relaxed);
        }
    }
}

/// The owner-thread-only part of a greenlet.
pub(crate) struct Local {
    pub(crate) run: Run,
    /// Declared before `stack`: the coroutine runs on it.
    pub(crate) co: Option<Co>,
    pub(crate) stack: Option<PooledStack>,
    pub(crate) yielder: *const Yielder<usize, usize>,
    /// Where the result goes instead of the parent (the killer).
    pub(crate) return_to: Option<Arc<Core>>,
    /// Key in the owner's registry; `usize::MAX` while not in it (cleared
    /// by [`unregister`]).
    pub(crate) key: usize,
    pub(crate) stack_size: usize,
    /// The next record of the owner's spare list, while this one is in it.
    next_spare: Option<Arc<Core>>,
}

impl Local {
    /// Nothing yet: not in the registry, no closure, no stack, no
    /// coroutine. As it stays for a main greenlet or one born dead; a new
    /// record starts from it.
    fn empty() -> Local {
        Local {
            run: Run::none(),
            co: None,
            stack: None,
            yielder: std::ptr::null(),
            return_to: None,
            key: usize::MAX,
            stack_size: 0,
            next_spare: None,
        }
    }
}

/// A thread's spare records (see [`Core`]): dead records that only this
/// list and the thread's registry refer to, linked through their
/// `next_spare` field.
pub(crate) struct Spare {
    top: Option<Arc<Core>>,
    len: usize,
}

impl Spare {
    pub(crate) const fn new() -> Spare {
        Spare { top: None, len: 0 }
    }

    /// Take a record off the list.
    ///
    /// # Safety
    /// Called on the thread that owns the list.
    #[inline]
    pub(crate) unsafe fn pop(&mut self) -> Option<Arc<Core>> {
        let core = self.top.take()?;
        // SAFETY: the owner thread; the record is referred to by this list
        // and the registry only, so nothing else accesses its `local`.
        self.top = unsafe { (*core.local()).next_spare.take() };
        self.len -= 1;
        Some(core)
    }

    /// Put a record on the list.
    ///
    /// # Safety
    /// Called on the thread that owns the list; `core` is a reset dead
    /// record of that thread, registered, with no other reference.
    #[inline]
    unsafe fn push(&mut self, core: Arc<Core>) {
        // SAFETY: guaranteed by the caller.
        unsafe { (*core.local()).next_spare = self.top.take() };
        self.top = Some(core);
        self.len += 1;
    }
}

impl Drop for Spare {
    fn drop(&mut self) {
        // SAFETY: the list is dropped with its thread's state, on that thread.
        while let Some(core) = unsafe { self.pop() } {
            drop(core);
        }
    }
}

/// The record shared by every handle of one greenlet.
///
/// Its owner thread's registry refers to it from its creation until it dies,
/// or, if it still has handles then, until its last handle goes (see
/// [`unregister`]). When that happens on the owner thread and nothing else
/// refers to it, the record may instead be kept by the thread
/// (`ThreadState::spare`), still registered, and reused for the thread's
/// next greenlet: it keeps its thread link, its registry entry, and its
/// parent if that is the thread's main greenlet, so that making a greenlet
/// usually allocates nothing, touches no shared counter and leaves the
/// registry as it is. A dead greenlet's last handle dropped on another
/// thread is sent to the owner, which unregisters it.
pub(crate) struct Core {
    id: u64,
    name: Option<Box<str>>,
    /// Live [`Greenlet`] handles (not counting internal references).
    handles: AtomicUsize,
    flags: AtomicU8,
    pub(crate) thread: Arc<ThreadLink>,
    /// Written only on the owner thread (under the lock); read under the
    /// lock elsewhere, and without it on the owner (`live_parent_ptr`).
    parent: Mutex<Option<Greenlet>>,
    /// `None` once finalized.
    finalizers: Mutex<Option<Vec<Finalizer>>>,
    /// Set (under the `finalizers` lock) once a finalizer was registered, so
    /// that finalizing a record nobody else can reach skips the lock.
    has_finalizers: AtomicBool,
    /// Already taken out of [`live_greenlets`]: a dead greenlet whose last
    /// handle went on another thread, sent to its owner to be unregistered.
    uncounted: AtomicBool,
    local: UnsafeCell<Local>,
}

// SAFETY: everything but `local` is Send + Sync. `local` (which holds the
// non-Send `run` closure and coroutine) is only accessed on the owner thread:
// every access goes through `Core::local`, whose callers first check that the
// calling thread owns the greenlet (or run inside that thread's dispatcher).
// It is emptied on the owner thread before the owner lets go of the record:
// the registry holds a reference until then (or, for a greenlet that just
// finished with no handle left, `retiring` does, until the dispatcher has
// dropped its coroutine and stack), so the record can only be dropped
// elsewhere with an empty `local` (`Drop for Core` leaks it otherwise rather
// than drop it on the wrong thread).
unsafe impl Send for Core {}
// SAFETY: see the `Send` impl: shared access from other threads never reaches
// `local`.
unsafe impl Sync for Core {}

impl Core {
    /// A record with `handles` handles (the caller makes them), counted
    /// by the caller in [`live_greenlets`].
    fn new(
        id: u64,
        name: Option<Box<str>>,
        flags: u8,
        handles: usize,
        thread: Arc<ThreadLink>,
        parent: Option<Greenlet>,
        local: Local,
    ) -> Core {
        Core {
            id,
            name,
            handles: AtomicUsize::new(handles),
            flags: AtomicU8::new(flags),
            thread,
            parent: Mutex::new(parent),
            finalizers: Mutex::new(Some(Vec::new())),
            has_finalizers: AtomicBool::new(false),
            uncounted: AtomicBool::new(false),
            local: UnsafeCell::new(local),
        }
    }

    pub(crate) fn new_main(thread: Arc<ThreadLink>) -> Arc<Core> {
        let local = Local::empty();
        let dead = if thread.alive.load(Ordering::Relaxed) {
            0
        } else {
            DEAD
        };
        count_records(1);
        Arc::new(Core::new(
            global_id(),
            None,
            STARTED | MAIN | dead,
            0,
            thread,
            None,
            local,
        ))
    }

    /// The owner-only part.
    ///
    /// # Safety
    /// The caller runs on the owner thread and holds no other reference
    /// into the same fields across user code or a stack switch.
    #[inline]
    pub(crate) unsafe fn local(&self) -> *mut Local {
        self.local.get()
    }

    #[inline]
    pub(crate) fn flags(&self) -> u8 {
        self.flags.load(Ordering::Acquire)
    }

    /// Set a flag. Only the owner thread (or the thread tearing its state
    /// down, which is the same thread) ever writes the flags, so a plain
    /// load and store suffice; other threads only read them.
    #[inline]
    pub(crate) fn mark(&self, flag: u8) {
        let flags = self.flags.load(Ordering::Relaxed);
        self.flags.store(flags | flag, Ordering::Release);
    }

    /// The parent, if it can receive a value as it is (started and alive):
    /// no reference is taken, the parent being kept alive by its thread.
    ///
    /// # Safety
    /// Called on the owner thread.
    #[inline]
    pub(crate) unsafe fn live_parent_ptr(&self) -> Option<*const Core> {
        // SAFETY: the parent is written only on the owner thread (at
        // creation, and by `set_parent` after its owner check, under the
        // lock); other threads only read it, under the lock. So a read on the
        // owner thread never overlaps a write and needs no lock.
        let parent = unsafe { &*self.parent.data_ptr() };
        let parent = parent.as_ref()?;
        (parent.core.flags() & (STARTED | DEAD) == STARTED).then_some(Arc::as_ptr(&parent.core))
    }

    pub(crate) fn is_leaked(&self) -> bool {
        self.flags() & LEAKED != 0
    }

    pub(crate) fn handles(&self) -> usize {
        self.handles.load(Ordering::Acquire)
    }

    pub(crate) fn name(&self) -> String {
        match &self.name {
            Some(name) => name.to_string(),
            None if self.flags() & MAIN != 0 => "main".into(),
            None => format!("greenlet-{}", self.id),
        }
    }

    /// `'name' (id N)`, for messages.
    pub(crate) fn label(&self) -> String {
        format!("'{}' (id {})", self.name(), self.id)
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The name given at creation, if any.
    pub(crate) fn given_name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    pub(crate) fn parent_core(&self) -> Option<Arc<Core>> {
        self.parent.lock().as_ref().map(|p| Arc::clone(&p.core))
    }

    /// Take the finalizers, marking the greenlet finalized.
    pub(crate) fn take_finalizers(&self) -> Vec<Finalizer> {
        self.finalizers.lock().take().unwrap_or_default()
    }

    /// Run the finalizers now (once).
    pub(crate) fn finalize(&self) {
        let finalizers = self.take_finalizers();
        if !finalizers.is_empty() {
            // Reported already; a greenlet's finalization never panics.
            drop(run_finalizers(finalizers, &self.label()));
        }
    }

    /// [`finalize`](Self::finalize) for a record with no handle left, whose
    /// caller holds `held` of its references and drops (or recycles) them
    /// afterwards. When those are all the references, nobody can register a
    /// finalizer any more or see whether the record was marked finalized, so
    /// a record that never had a finalizer is left as it is, without taking
    /// the lock.
    pub(crate) fn finalize_unreachable(this: &Arc<Core>, held: usize) {
        // The Acquire pairs with the Release store in `on_finalize`; that
        // thread's handle drop (AcqRel) also orders it before this call.
        if Arc::strong_count(this) == held && !this.has_finalizers.load(Ordering::Acquire) {
            return;
        }
        this.finalize();
    }

    /// A dead greenlet's last handle went on a thread other than its
    /// owner's: take it out of [`live_greenlets`] now, before it is sent to
    /// the owner (undone by [`Core::recount`] if it cannot be sent).
    ///
    /// Once only until a recount: its last handle may go elsewhere twice
    /// before the owner reads its mail (a trace hook gets a new handle as
    /// the origin of its finishing event and drops it on another thread),
    /// and both must not count.
    pub(crate) fn uncount(&self) {
        if !self.uncounted.swap(true, Ordering::Relaxed) {
            count_records(-1);
        }
    }

    /// Undo [`Core::uncount`]: it is counted again (a handle was made
    /// again, or it could not be sent to its owner).
    pub(crate) fn recount(&self) {
        if self.uncounted.swap(false, Ordering::Relaxed) {
            count_records(1);
        }
    }
}

/// Thread exit: drop this thread's spare records, counted back first (a
/// spare record is not live), and their registry entries.
///
/// # Safety
/// `ts` is the calling thread's state, not yet freed.
pub(crate) unsafe fn drain_spare(ts: *mut ThreadState) {
    // SAFETY: guaranteed by the caller; short accesses.
    unsafe {
        while let Some(core) = (*ts).spare.pop() {
            (*ts).count_records(1);
            drop(unregister(ts, &core));
            drop(core);
        }
    }
}

/// Thread exit: release the registry's references to dead greenlets (their
/// handles outlive the thread; they are finalized when the last one goes),
/// clearing their keys so that nothing later removes another entry by them.
///
/// # Safety
/// `ts` is the calling thread's state, not yet freed.
pub(crate) unsafe fn release_dead_registered(ts: *mut ThreadState) {
    // SAFETY: guaranteed by the caller; short accesses.
    unsafe {
        for core in registered(ts, true) {
            drop(unregister(ts, &core));
        }
    }
}

/// The registered greenlets of `ts` that are dead (`dead`) or not (dead
/// ones stay registered while they have handles: see [`Core`]).
///
/// # Safety
/// `ts` is the calling thread's state, not yet freed.
pub(crate) unsafe fn registered(ts: *mut ThreadState, dead: bool) -> Vec<Arc<Core>> {
    // SAFETY: guaranteed by the caller; short access.
    unsafe {
        (*ts)
            .registry
            .iter()
            .filter(|(_, core)| (core.flags() & DEAD != 0) == dead)
            .map(|(_, core)| Arc::clone(core))
            .collect()
    }
}

/// Take `core` out of its thread's registry, if it is still there, and
/// return the registry's reference. Each record leaves the registry once:
/// its key is cleared, so that a later call (which could otherwise remove
/// another greenlet that got the key since) finds nothing.
///
/// # Safety
/// `ts` is the calling thread's live state, which owns `core`.
#[inline]
pub(crate) unsafe fn unregister(ts: *mut ThreadState, core: &Core) -> Option<Arc<Core>> {
    // SAFETY: guaranteed by the caller; short accesses to `local`.
    unsafe {
        let local = core.local();
        let key = std::mem::replace(&mut (*local).key, usize::MAX);
        if key == usize::MAX {
            return None;
        }
        let entry = (*ts).registry.try_remove(key);
        debug_assert!(entry
            .as_ref()
            .is_some_and(|e| std::ptr::eq(Arc::as_ptr(e), core)));
        entry
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        if !*self.uncounted.get_mut() {
            count_records(-1);
        }
        let local = self.local.get_mut();
        if local.run.is_some() || local.co.is_some() {
            // Unreachable by the registry invariant (see the Send impl); if it
            // ever happens, leaking is the only sound choice on an unknown thread.
            std::mem::forget(local.run.take());
            std::mem::forget(local.co.take());
            std::mem::forget(local.stack.take());
        }
    }
}

/// Run finalizers, each isolated: a panicking one is reported on stderr
/// and the others still run. Returns the first panic's payload, for a caller
/// that wants to re-raise it (the cleanup queue counts finalizer panics).
pub(crate) fn run_finalizers(
    finalizers: Vec<Finalizer>,
    label: &str,
) -> Option<Box<dyn std::any::Any + Send>> {
    let mut first_panic = None;
    for finalizer in finalizers {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(finalizer)) {
            eprintln!(
                "greenlet: a finalizer of {label} panicked: {}",
                panic_message(&*payload)
            );
            first_panic.get_or_insert(payload);
        }
    }
    first_panic
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".into()
    }
}

/// A handle to a greenlet: a cheap, clonable, `Send + Sync` reference.
///
/// Any thread may hold handles and observe the greenlet ([`is_dead`](Self::is_dead),
/// [`id`](Self::id), [`name`](Self::name)); only the thread that created it
/// may switch to it, throw into it or re-parent it (other threads get
/// [`GreenletError::WrongThread`] or [`GreenletError::ThreadExited`]).
///
/// When the last handle of a started, unfinished greenlet is dropped, the
/// greenlet is killed: synchronously on its own thread (control comes back
/// to the code that dropped it, and its locals' destructors have run), or at
/// its thread's next greenlet operation when dropped on another thread.
/// Children hold their parent, and the running greenlet is never killed
/// until it switches away.
///
/// # Example
/// ```
/// use greenlet::{getcurrent, Greenlet};
///
/// let main = getcurrent();
/// let child = Greenlet::new(move |v| {
///     let n = v.downcast::<i32>()?;
///     let back = main.switch(n + 1)?; // suspend, sending n + 1 to main
///     Ok(back) // finishing sends `back` to the parent (main)
/// });
/// assert_eq!(child.switch(41).unwrap().downcast::<i32>().unwrap(), 42);
/// assert!(child.is_active());
/// assert_eq!(child.switch("bye").unwrap().downcast::<&str>().unwrap(), "bye");
/// assert!(child.is_dead());
/// ```
pub struct Greenlet {
    /// Released by hand in `Drop`, which may keep the record for reuse.
    core: ManuallyDrop<Arc<Core>>,
}

impl Greenlet {
    /// Give a greenlet just made by [`spawn_in`] its closure, written
    /// straight into the record (generic, so not copied through a
    /// non-generic call).
    ///
    /// # Safety
    /// `self` was just returned by `spawn_in` on this thread.
    #[inline(always)]
    unsafe fn install<F>(self, run: F) -> Greenlet
    where
        F: FnOnce(Value) -> Result<Value, GreenletError> + 'static,
    {
        // SAFETY: a record fresh from `spawn_in` belongs to this thread, has
        // an empty `run` (nothing to drop) and has not run, so nothing else
        // accesses its `local` now.
        unsafe { ptr::write(ptr::addr_of_mut!((*self.core.local()).run), Run::new(run)) };
        self
    }

    /// A handle from an internal reference (or, for `Clone`, from a handle
    /// the caller holds).
    ///
    /// Apart from `Clone`, only ever called on `core`'s owner thread (or for
    /// a record no other thread can reach yet): dropping an only handle on
    /// the owner thread relies on it (see `drop_only_handle`).
    #[inline]
    pub(crate) fn from_core(core: Arc<Core>) -> Greenlet {
        core.handles.fetch_add(1, Ordering::Relaxed);
        Greenlet {
            core: ManuallyDrop::new(core),
        }
    }

    /// A new greenlet that will run `run` with the value of the first switch
    /// into it. Its parent is the current greenlet; its stack has
    /// [`default_stack_size()`](crate::coroutine::default_stack_size) bytes
    /// (256 KiB unless changed) and is taken when it starts.
    ///
    /// `run` returns the value for the parent's pending switch, or an error
    /// raised there (`GreenletExit` counts as a normal end).
    ///
    /// ```
    /// let g = greenlet::Greenlet::new(|v| Ok((v.downcast::<i32>()? * 2).into()));
    /// assert_eq!(g.switch(21).unwrap().downcast::<i32>().unwrap(), 42);
    /// ```
    pub fn new<F>(run: F) -> Greenlet
    where
        F: FnOnce(Value) -> Result<Value, GreenletError> + 'static,
    {
        match thread_state::state() {
            // SAFETY: `ts` is this thread's live state.
            Some(ts) => unsafe { spawn_in(ts, None, None, default_stack_size()).install(run) },
            None => dead_on_arrival(None),
        }
    }

    /// Configure a greenlet before creating it.
    ///
    /// ```
    /// let g = greenlet::Greenlet::builder()
    ///     .name("worker")
    ///     .stack_size(64 * 1024)
    ///     .spawn(|v| Ok(v))
    ///     .unwrap();
    /// assert_eq!(g.name(), "worker");
    /// ```
    pub fn builder() -> GreenletBuilder {
        GreenletBuilder {
            parent: None,
            stack_size: default_stack_size(),
            name: None,
        }
    }

    /// Switch to this greenlet, sending `value`; returns what the next switch
    /// back to the caller carries (or the error thrown into it).
    ///
    /// Unstarted: runs it with `value`. Suspended: its pending `switch`
    /// returns `value`. Dead: the value goes to its nearest live ancestor.
    /// The current greenlet: returns `value` at once.
    ///
    /// # Errors
    /// Whatever a greenlet raises into the caller (an error or panic of a
    /// child that ends, a `throw`); [`GreenletError::WrongThread`] /
    /// [`GreenletError::ThreadExited`] for another thread's greenlet;
    /// [`GreenletError::StackAllocation`] if it could not start.
    ///
    /// ```
    /// let me = greenlet::getcurrent();
    /// assert_eq!(me.switch(7).unwrap().downcast::<i32>().unwrap(), 7);
    /// ```
    #[inline]
    pub fn switch(&self, value: impl Into<Value>) -> Result<Value, GreenletError> {
        dispatch::send(&self.core, Ok(value.into()), Kind::Switch)
    }

    /// Raise `err` in this greenlet: its pending `switch` returns `Err(err)`.
    ///
    /// Unstarted: it dies without running and `err` goes up its parent
    /// chain. Dead: `GreenletExit` comes straight back as a value, other
    /// errors go to its nearest live ancestor.
    ///
    /// # Errors
    /// As for [`switch`](Self::switch): whatever comes back to the caller.
    ///
    /// ```
    /// use greenlet::{Greenlet, GreenletError};
    ///
    /// let g = Greenlet::new(|_| {
    ///     let main = greenlet::getcurrent().parent().unwrap();
    ///     match main.switch(()) {
    ///         Err(e) => Ok(format!("caught: {e}").into()),
    ///         Ok(_) => Ok("no error".into()),
    ///     }
    /// });
    /// g.switch(()).unwrap();
    /// let v = g.throw(GreenletError::user("boom")).unwrap();
    /// assert_eq!(v.downcast::<String>().unwrap(), "caught: boom");
    /// ```
    pub fn throw(&self, err: GreenletError) -> Result<Value, GreenletError> {
        dispatch::send(&self.core, Err(Raised::new(err)), Kind::Throw)
    }

    /// Kill this greenlet: throw `GreenletExit` into it and let it run to
    /// its end, with control coming back to the caller (not to its parent).
    /// Unstarted: it dies without running. Dead: nothing happens. The
    /// running greenlet killing itself gets `Err(GreenletExit)` back at once
    /// (propagate it with `?`). A main greenlet never dies while its thread
    /// runs: killing one only throws `GreenletExit` into it.
    ///
    /// # Errors
    /// [`GreenletError::KillIgnored`] if it caught the exit and switched
    /// back instead of finishing; the error it ended with if it turned the
    /// exit into another error; an error raised in the caller before it
    /// finished (thrown back by it, or by another greenlet while it was
    /// away: a `GreenletExit` if the caller was killed meanwhile); the
    /// thread errors of [`switch`](Self::switch).
    ///
    /// ```
    /// use std::rc::Rc;
    /// let token = Rc::new(());
    /// let held = Rc::clone(&token);
    /// let g = greenlet::Greenlet::new(move |_| {
    ///     let _keep = held;
    ///     greenlet::getcurrent().parent().unwrap().switch(())?;
    ///     Ok(().into())
    /// });
    /// g.switch(()).unwrap();
    /// assert_eq!(Rc::strong_count(&token), 2);
    /// g.kill().unwrap();
    /// assert!(g.is_dead());
    /// assert_eq!(Rc::strong_count(&token), 1); // its locals were dropped
    /// ```
    pub fn kill(&self) -> Result<(), GreenletError> {
        dispatch::kill_from_api(&self.core)
    }

    /// Whether it has finished (or was killed). A main greenlet is dead once
    /// its thread has exited.
    ///
    /// ```
    /// let g = greenlet::Greenlet::new(Ok);
    /// assert!(!g.is_dead());
    /// g.switch(()).unwrap();
    /// assert!(g.is_dead());
    /// ```
    #[inline]
    pub fn is_dead(&self) -> bool {
        self.core.flags() & DEAD != 0
    }

    /// Whether it has been switched into (main greenlets always have).
    ///
    /// ```
    /// let g = greenlet::Greenlet::new(Ok);
    /// assert!(!g.is_started());
    /// g.switch(()).unwrap();
    /// assert!(g.is_started());
    /// ```
    #[inline]
    pub fn is_started(&self) -> bool {
        self.core.flags() & STARTED != 0
    }

    /// Started and not dead (Python's `bool(g)`).
    ///
    /// ```
    /// let g = greenlet::Greenlet::new(|v| Ok(v));
    /// assert!(!g.is_active());
    /// g.switch(()).unwrap();
    /// assert!(!g.is_active() && g.is_dead());
    /// ```
    #[inline]
    pub fn is_active(&self) -> bool {
        self.core.flags() & (STARTED | DEAD) == STARTED
    }

    /// Whether it is a thread's main greenlet.
    ///
    /// ```
    /// assert!(greenlet::getcurrent().is_main());
    /// ```
    #[inline]
    pub fn is_main(&self) -> bool {
        self.core.flags() & MAIN != 0
    }

    /// A process-unique id.
    ///
    /// ```
    /// let (a, b) = (greenlet::Greenlet::new(Ok), greenlet::Greenlet::new(Ok));
    /// assert_ne!(a.id(), b.id());
    /// assert_eq!(a.id(), a.clone().id());
    /// ```
    #[inline]
    pub fn id(&self) -> u64 {
        self.core.id
    }

    /// Its name: the one given to the builder, `main` for a main greenlet,
    /// else `greenlet-<id>`.
    ///
    /// ```
    /// let g = greenlet::Greenlet::new(Ok);
    /// assert_eq!(g.name(), format!("greenlet-{}", g.id()));
    /// assert_eq!(greenlet::getcurrent().name(), "main");
    /// ```
    pub fn name(&self) -> String {
        self.core.name()
    }

    /// Its parent (`None` for a main greenlet).
    ///
    /// ```
    /// let main = greenlet::getcurrent();
    /// let g = greenlet::Greenlet::new(|v| Ok(v));
    /// assert_eq!(g.parent(), Some(main));
    /// ```
    pub fn parent(&self) -> Option<Greenlet> {
        self.core.parent.lock().clone()
    }

    /// Make `parent` this greenlet's parent (where its result goes).
    ///
    /// # Errors
    /// [`GreenletError::MainCannotHaveParent`],
    /// [`GreenletError::ParentCycle`] if `parent` descends from this
    /// greenlet, [`GreenletError::ParentOnOtherThread`], and the thread
    /// errors when called from another thread than the greenlet's.
    ///
    /// ```
    /// use greenlet::{Greenlet, GreenletError};
    /// let a = Greenlet::new(|v| Ok(v));
    /// let b = Greenlet::new(|v| Ok(v));
    /// b.set_parent(&a).unwrap();
    /// assert!(matches!(a.set_parent(&b), Err(GreenletError::ParentCycle { .. })));
    /// ```
    pub fn set_parent(&self, parent: &Greenlet) -> Result<(), GreenletError> {
        dispatch::check_owner(&self.core)?;
        if self.is_main() {
            return Err(GreenletError::MainCannotHaveParent {
                greenlet: self.core.label(),
            });
        }
        if !Arc::ptr_eq(&self.core.thread, &parent.core.thread) {
            return Err(parent_thread_error(&self.core, &parent.core));
        }
        let mut ancestor = Some(Arc::clone(&parent.core));
        while let Some(a) = ancestor {
            if Arc::ptr_eq(&a, &self.core) {
                return Err(GreenletError::ParentCycle {
                    greenlet: self.core.label(),
                    parent: parent.core.label(),
                });
            }
            ancestor = a.parent_core();
        }
        let old = self.core.parent.lock().replace(parent.clone());
        drop(old);
        Ok(())
    }

    /// Run `callback` when this greenlet is finalized, like a Python weakref
    /// callback: when it is dead and its last handle goes, or when its
    /// thread exits while it is still alive (main greenlets: when their
    /// thread exits, through the thread's cleanup queue). Registered on an
    /// already finalized greenlet, `callback` runs at once.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// let ran = Arc::new(AtomicBool::new(false));
    /// let g = greenlet::Greenlet::new(|v| Ok(v));
    /// let flag = Arc::clone(&ran);
    /// g.on_finalize(move || flag.store(true, Ordering::SeqCst));
    /// g.switch(()).unwrap();
    /// assert!(!ran.load(Ordering::SeqCst)); // dead, but a handle remains
    /// drop(g);
    /// assert!(ran.load(Ordering::SeqCst));
    /// ```
    pub fn on_finalize(&self, callback: impl FnOnce() + Send + 'static) {
        let mut finalizers = self.core.finalizers.lock();
        match finalizers.as_mut() {
            Some(list) => {
                list.push(Box::new(callback));
                self.core.has_finalizers.store(true, Ordering::Release);
            }
            None => {
                drop(finalizers);
                drop(run_finalizers(vec![Box::new(callback)], &self.core.label()));
            }
        }
    }
}

fn parent_thread_error(child: &Core, parent: &Core) -> GreenletError {
    GreenletError::ParentOnOtherThread {
        greenlet: child.label(),
        thread: child.thread.label.clone(),
        parent: parent.label(),
        parent_thread: parent.thread.label.clone(),
    }
}

impl Clone for Greenlet {
    #[inline]
    fn clone(&self) -> Greenlet {
        Greenlet::from_core(Arc::clone(&self.core))
    }
}

impl Drop for Greenlet {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: `self.core` is never used again.
        let core = unsafe { ManuallyDrop::take(&mut self.core) };
        // The Acquire pairs with other threads' handle drops (AcqRel), as
        // the `fetch_sub` below does.
        if core.handles.load(Ordering::Acquire) == 1 {
            drop_only_handle(core);
        } else if core.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            last_handle_dropped(core);
        }
    }
}

/// Drop a handle that was the only one a moment ago. On the greenlet's own
/// thread it still is, and the count is cleared without an atomic
/// read-modify-write: other threads make handles only by cloning handles
/// they can reach (every handle made from an internal reference is made on
/// the owner thread: `getcurrent`, `spawn_in`, trace events), and there is
/// no other handle to clone. A clone made on another thread from a handle
/// this thread now owns (one shared through a lock, such as a child's
/// `parent` field, which [`Greenlet::parent`] clones under the field's lock)
/// happened before this thread took the handle over, so the `Acquire` load
/// of the caller already counts it. Elsewhere, another handle may have been
/// made since, so the count is decremented.
#[inline(never)]
fn drop_only_handle(core: Arc<Core>) {
    match owner_state(&core) {
        Some(ts) => {
            core.handles.store(0, Ordering::Relaxed);
            // SAFETY: `ts` is this thread's live state and owns `core`.
            unsafe {
                owner_last_handle_gone(ts, &core);
                recycle(ts, core);
            }
        }
        None => {
            if core.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
                dispatch::last_handle_gone(&core);
            }
        }
    }
}

/// [`dispatch::last_handle_gone`] on the owner thread, with the common case
/// first: a dead greenlet (not the current one, which `finish` may still
/// be leaving, nor a leaked one) is only finalized; [`recycle`] then keeps
/// or unregisters it.
///
/// # Safety
/// `ts` is the calling thread's live state, which owns `core`.
#[inline]
unsafe fn owner_last_handle_gone(ts: *mut ThreadState, core: &Arc<Core>) {
    // SAFETY: guaranteed by the caller; short reads.
    unsafe {
        let current = std::ptr::eq(Arc::as_ptr(core), (*ts).current);
        if core.flags() & (DEAD | MAIN | LEAKED) == DEAD && !current {
            let registered = (*core.local()).key != usize::MAX;
            Core::finalize_unreachable(core, 1 + usize::from(registered));
        } else {
            dispatch::last_handle_gone(core);
        }
    }
}

/// The last handle of `core` went: kill or finalize it, then keep the
/// record for reuse if this was its last reference.
#[inline(never)]
fn last_handle_dropped(core: Arc<Core>) {
    dispatch::last_handle_gone(&core);
    if let Some(ts) = owner_state(&core) {
        // SAFETY: `ts` is this thread's live state and owns `core`.
        unsafe { recycle(ts, core) };
    }
}

/// The calling thread's state, if the thread owns `core`.
#[inline]
pub(crate) fn owner_state(core: &Core) -> Option<*mut ThreadState> {
    let ts = thread_state::existing_state()?;
    // SAFETY: `ts` is this thread's live state; short read.
    let link = unsafe { Arc::as_ptr(&(*ts).link) };
    std::ptr::eq(Arc::as_ptr(&core.thread), link).then_some(ts)
}

/// `core`'s last handle went on its owner thread: keep the record in the
/// thread's spare records if it is a dead greenlet that nothing but `core`
/// and the registry refers to; else drop `core`, and the registry's
/// reference too if it is dead.
///
/// # Safety
/// `ts` is the calling thread's live state, which owns `core`.
#[inline(always)]
unsafe fn recycle(ts: *mut ThreadState, core: Arc<Core>) {
    // SAFETY: guaranteed by the caller; short reads of the owner-only part.
    let (registered, room, empty) = unsafe {
        let local = &*core.local();
        (
            local.key != usize::MAX,
            (*ts).spare.len < SPARE_RECORDS,
            !local.run.is_some()
                && local.co.is_none()
                && local.stack.is_none()
                && local.return_to.is_none(),
        )
    };
    let flags = core.flags();
    if !room
        || !empty
        || flags & (DEAD | MAIN) != DEAD
        || Arc::strong_count(&core) != 1 + usize::from(registered)
        || Arc::weak_count(&core) != 0
    {
        if flags & (DEAD | MAIN) == DEAD {
            // SAFETY: guaranteed by the caller.
            drop(unsafe { unregister(ts, &core) });
        }
        return;
    }
    // Other threads' last uses of the record happen before its reuse (their
    // reference drops were Release decrements).
    fence(Ordering::Acquire);
    // SAFETY: `core` and the registry's entry are the only references to the
    // record (the strong count says so, and there are no weak ones); the
    // entry is not used during the reset, so nothing else can read or write
    // the record meanwhile: no other thread can reach it, and this thread's
    // state refers to records only through `Arc`s (its raw `current` is a
    // live greenlet). The record's allocation came from `Arc::new`, so it is
    // writable. `main` is another record (this one is not a main greenlet's).
    let reset = unsafe { reset_for_reuse(&mut *Arc::as_ptr(&core).cast_mut(), &(*ts).main) };
    let Some((counted, old_parent)) = reset else {
        // Finalizers that did not run: a greenlet leaked (it ignored the
        // kill of its last handle's drop) that finished later, which
        // `finalize_or_kill` leaves alone. Not reused: released, and its
        // finalizers dropped with it, as before records were reused.
        // SAFETY: guaranteed by the caller; the reset's borrow has ended.
        drop(unsafe { unregister(ts, &core) });
        return;
    };
    // SAFETY: `ts` is live and owns the reset record; short accesses.
    unsafe {
        if !registered {
            // Left the registry already (it was killed by this drop, or its
            // handle count raced): back in, as every spare record is.
            let key = (*ts).registry.insert(Arc::clone(&core));
            (*core.local()).key = key;
        }
        if counted {
            (*ts).count_records(-1);
        }
        (*ts).spare.push(core);
    }
    // Dropping another parent's handle may kill it (user code), after the
    // record was put away.
    drop(old_parent);
}

/// Clear what a dead record kept of its greenlet, for [`recycle`]; returns
/// whether it was still counted in [`live_greenlets`] and the parent handle
/// to release (none if that is `main`'s, kept for the next greenlet: its
/// handle count drives nothing). `None`, with nothing changed, if its
/// finalizers did not run: it is not reused then.
#[inline(always)]
fn reset_for_reuse(record: &mut Core, main: &Arc<Core>) -> Option<(bool, Option<Greenlet>)> {
    let finalizers = record.finalizers.get_mut();
    if finalizers.as_ref().is_some_and(|list| !list.is_empty()) {
        return None;
    }
    // `None` once finalized; else already the empty list.
    finalizers.get_or_insert_with(Vec::new);
    *record.has_finalizers.get_mut() = false;
    let counted = !mem::replace(record.uncounted.get_mut(), false);
    record.local.get_mut().yielder = ptr::null();
    record.name = None;
    let parent = record.parent.get_mut();
    let keep = parent.as_ref().is_some_and(|p| Arc::ptr_eq(&p.core, main));
    Some((counted, if keep { None } else { parent.take() }))
}

impl PartialEq for Greenlet {
    fn eq(&self, other: &Greenlet) -> bool {
        Arc::ptr_eq(&self.core, &other.core)
    }
}

impl Eq for Greenlet {}

impl std::hash::Hash for Greenlet {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.core.id.hash(state);
    }
}

impl fmt::Debug for Greenlet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flags = self.core.flags();
        let state = if flags & DEAD != 0 {
            "dead"
        } else if flags & STARTED != 0 {
            "active"
        } else {
            "unstarted"
        };
        f.debug_struct("Greenlet")
            .field("id", &self.core.id)
            .field("name", &self.core.name())
            .field("thread", &self.core.thread.label)
            .field("state", &state)
            .finish()
    }
}

/// Options for a new greenlet: see [`Greenlet::builder`].
#[derive(Debug)]
pub struct GreenletBuilder {
    parent: Option<Greenlet>,
    stack_size: usize,
    name: Option<String>,
}

impl GreenletBuilder {
    /// Its parent (default: the current greenlet). Must belong to the
    /// calling thread.
    ///
    /// ```
    /// let p = greenlet::Greenlet::new(Ok);
    /// let g = greenlet::Greenlet::builder().parent(&p).spawn(Ok).unwrap();
    /// assert_eq!(g.parent(), Some(p));
    /// ```
    pub fn parent(mut self, parent: &Greenlet) -> Self {
        self.parent = Some(parent.clone());
        self
    }

    /// Usable stack bytes (default
    /// [`default_stack_size()`](crate::coroutine::default_stack_size)),
    /// rounded up to whole pages; the stack is taken when the greenlet starts.
    ///
    /// ```
    /// let g = greenlet::Greenlet::builder().stack_size(32 * 1024).spawn(Ok).unwrap();
    /// g.switch(()).unwrap();
    /// ```
    pub fn stack_size(mut self, size: usize) -> Self {
        self.stack_size = size;
        self
    }

    /// Its name, for messages and [`Greenlet::name`].
    ///
    /// ```
    /// let g = greenlet::Greenlet::builder().name("io").spawn(Ok).unwrap();
    /// assert_eq!(g.name(), "io");
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Create the greenlet (it starts at the first switch into it).
    ///
    /// # Errors
    /// [`GreenletError::ParentOnOtherThread`] if the parent belongs to
    /// another thread; [`GreenletError::ThreadExited`] if called while the
    /// calling thread's greenlet state is being torn down.
    ///
    /// ```
    /// let main = greenlet::getcurrent();
    /// let outer = greenlet::Greenlet::new(|v| Ok(v));
    /// let g = greenlet::Greenlet::builder().parent(&outer).spawn(|v| Ok(v)).unwrap();
    /// assert_eq!(g.parent(), Some(outer));
    /// # drop(main);
    /// ```
    pub fn spawn<F>(self, run: F) -> Result<Greenlet, GreenletError>
    where
        F: FnOnce(Value) -> Result<Value, GreenletError> + 'static,
    {
        let name = self.name.map(String::into_boxed_str);
        let Some(ts) = thread_state::state() else {
            let g = dead_on_arrival(name);
            return Err(GreenletError::ThreadExited {
                target: g.core.label(),
                target_thread: g.core.thread.label.clone(),
            });
        };
        if let Some(parent) = &self.parent {
            // SAFETY: `ts` is this thread's live state; short read.
            let link = unsafe { Arc::as_ptr(&(*ts).link) };
            if !std::ptr::eq(Arc::as_ptr(&parent.core.thread), link) {
                let g = dead_on_arrival(name.clone());
                return Err(parent_thread_error(&g.core, &parent.core));
            }
        }
        // SAFETY: `ts` is this thread's live state.
        Ok(unsafe { spawn_in(ts, self.parent, name, self.stack_size).install(run) })
    }
}

/// Create a greenlet in `ts`'s thread, without its closure (see
/// [`Greenlet::install`]).
///
/// # Safety
/// `ts` is the calling thread's live state.
unsafe fn spawn_in(
    ts: *mut ThreadState,
    parent: Option<Greenlet>,
    name: Option<Box<str>>,
    stack_size: usize,
) -> Greenlet {
    // SAFETY: `ts` is live; the accesses below are short and run no user code.
    unsafe {
        dispatch::check_mail(ts);
        (*ts).count_records(1);
        let id = (*ts).fresh_id();
        let core = match (*ts).spare.pop() {
            // Still registered, under the key its `local` holds.
            Some(core) => {
                let old_parent = reuse(ts, &core, id, name, parent, stack_size);
                // Only ever the main greenlet's handle: no user code runs.
                drop(old_parent);
                core
            }
            None => new_record(ts, id, name, parent, stack_size),
        };
        Greenlet {
            core: ManuallyDrop::new(core),
        }
    }
}

/// A new registered record, when the thread has no spare one (kept out of
/// `spawn_in`, whose common case is a reused record).
///
/// # Safety
/// `ts` is the calling thread's live state.
#[cold]
#[inline(never)]
unsafe fn new_record(
    ts: *mut ThreadState,
    id: u64,
    name: Option<Box<str>>,
    parent: Option<Greenlet>,
    stack_size: usize,
) -> Arc<Core> {
    // SAFETY: guaranteed by the caller; short accesses, no user code.
    unsafe {
        let key = (*ts).registry.vacant_key();
        let parent = match parent {
            Some(p) => p,
            None => Greenlet::from_core((*ts).current_arc()),
        };
        let local = Local {
            key,
            stack_size,
            ..Local::empty()
        };
        let core = Arc::new(Core::new(
            id,
            name,
            0,
            1,
            Arc::clone(&(*ts).link),
            Some(parent),
            local,
        ));
        let inserted = (*ts).registry.insert(Arc::clone(&core));
        debug_assert_eq!(inserted, key, "the registry changed meanwhile");
        core
    }
}

/// Make a spare record (see [`recycle`]) the record of a new greenlet with
/// one handle; returns the parent handle it replaced, if any.
///
/// # Safety
/// `ts` is the calling thread's live state and `core` came from its `spare`
/// list (a reset record of this thread, referred to by `core` and the
/// registry only).
unsafe fn reuse(
    ts: *mut ThreadState,
    core: &Arc<Core>,
    id: u64,
    name: Option<Box<str>>,
    parent: Option<Greenlet>,
    stack_size: usize,
) -> Option<Greenlet> {
    // SAFETY: the caller guarantees `ts`; the current greenlet is alive.
    let current_is_main = unsafe { std::ptr::eq((*ts).current, Arc::as_ptr(&(*ts).main)) };
    // The new parent handle, unless the record's kept one (main) will do.
    let parent = match parent {
        Some(p) => Some(p),
        None if current_is_main => None,
        // SAFETY: as above.
        None => Some(Greenlet::from_core(unsafe { (*ts).current_arc() })),
    };
    // SAFETY: `core` and the registry's entry (not used meanwhile) are the
    // only references to the record (see `recycle`), so nothing else reads
    // or writes it while `record` lives.
    unsafe {
        let record = &mut *Arc::as_ptr(core).cast_mut();
        record.id = id;
        record.name = name;
        *record.handles.get_mut() = 1;
        *record.flags.get_mut() = 0;
        let local = record.local.get_mut();
        local.stack_size = stack_size;
        let slot = record.parent.get_mut();
        match parent {
            Some(p) => slot.replace(p),
            None if slot.is_some() => None,
            // A spare record whose parent was not main: main is current.
            None => slot.replace(Greenlet::from_core((*ts).current_arc())),
        }
    }
}

/// A greenlet created where no thread state exists any more: it can never
/// run, so it is born dead and its closure is never kept.
fn dead_on_arrival(name: Option<Box<str>>) -> Greenlet {
    let local = Local::empty();
    count_records(1);
    let core = Core::new(
        global_id(),
        name,
        STARTED | DEAD,
        1,
        ThreadLink::exited(),
        None,
        local,
    );
    Greenlet {
        core: ManuallyDrop::new(Arc::new(core)),
    }
}

/// The greenlet running on the calling thread, created (with the thread's
/// greenlet state) on first use.
///
/// Called from a thread-local destructor after the thread's greenlet state
/// was torn down, it returns a dead stand-in main greenlet.
///
/// # Example
/// ```
/// let main = greenlet::getcurrent();
/// assert!(main.is_main() && main.is_active());
/// let g = greenlet::Greenlet::new(|_| Ok(greenlet::Value::new(greenlet::getcurrent().id())));
/// let id = g.switch(()).unwrap().downcast::<u64>().unwrap();
/// assert_eq!(id, g.id());
/// ```
pub fn getcurrent() -> Greenlet {
    match thread_state::state() {
        Some(ts) => {
            // SAFETY: `ts` is this thread's live state.
            unsafe {
                dispatch::check_mail(ts);
                Greenlet::from_core((*ts).current_arc())
            }
        }
        None => Greenlet::from_core(thread_state::detached_main()),
    }
}

impl ThreadState {
    /// Add `delta` to this thread's record count (only this thread writes it).
    #[inline]
    fn count_records(&self, delta: isize) {
        let count = &*self.records;
        count.store(
            count.load(Ordering::Relaxed).wrapping_add(delta),
            Ordering::Relaxed,
        );
    }

    /// A process-unique id for a greenlet of this thread, from the thread's
    /// block of ids (refilled from the process-wide counter).
    fn fresh_id(&mut self) -> u64 {
        if self.next_id == self.ids_end {
            self.next_id = NEXT_ID.fetch_add(ID_BLOCK, Ordering::Relaxed);
            self.ids_end = self.next_id + ID_BLOCK;
        }
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// A new reference to the current greenlet's record.
    ///
    /// # Safety
    /// `self.current` points to a live record (kept by `main` or the registry).
    pub(crate) unsafe fn current_arc(&self) -> Arc<Core> {
        // SAFETY: `current` came from `Arc::as_ptr` of a record that the
        // state keeps alive (main or registry), per the invariant above.
        unsafe {
            Arc::increment_strong_count(self.current);
            Arc::from_raw(self.current)
        }
    }
}

/// The value a greenlet's parent receives when it ended with `GreenletExit`.
pub(crate) fn exit_value(value: Option<Value>) -> Value {
    value.unwrap_or_else(|| Value::new(GreenletExit))
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;

    /// A closure capturing `captured` (and a counter of its drops), that
    /// returns the value it is called with plus the captured sum.
    fn adder<T: 'static>(
        captured: T,
        sum: fn(&T) -> u64,
        drops: &Rc<()>,
    ) -> impl FnOnce(Value) -> Result<Value, GreenletError> + 'static {
        let held = Rc::clone(drops);
        move |value| {
            let _held = held;
            Ok(Value::new(value.downcast::<u64>()? + sum(&captured)))
        }
    }

    #[test]
    fn a_record_whose_last_handle_goes_elsewhere_twice_is_uncounted_once() {
        std::thread::spawn(|| {
            let g = Greenlet::new(Ok);
            g.switch(()).unwrap();
            assert!(g.is_dead());
            let ts = thread_state::existing_state().unwrap();
            // SAFETY: this thread's live state, whose count only this
            // thread writes; short read.
            let count = || unsafe { (*ts).records.load(Ordering::Relaxed) };
            let before = count();
            // What two other threads' drops of its last handle do (the
            // second with a handle a trace hook got meanwhile), with no
            // owner step between them to recount it.
            g.core.uncount();
            g.core.uncount();
            assert_eq!(count(), before - 1, "uncounted once");
            g.core.recount();
            assert_eq!(count(), before, "counted again once");
            drop(g);
            assert_eq!(count(), before - 1, "dropped (or kept for reuse)");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn small_closures_are_kept_in_place_and_large_or_overaligned_ones_boxed() {
        assert!(fits_in_run::<(u64, u64, u64)>());
        assert!(!fits_in_run::<[u64; 4]>());
        let drops = Rc::new(());
        let runs = [
            Run::new(adder((), |_| 0, &drops)),
            Run::new(adder(5u64, |c| *c, &drops)),
            Run::new(adder([1u64, 2, 3, 4, 5], |c| c.iter().sum(), &drops)),
            Run::new(adder(7u128, |c| *c as u64, &drops)),
        ];
        assert_eq!(Rc::strong_count(&drops), 5);
        let mut results = Vec::new();
        for mut run in runs {
            assert!(run.is_some());
            // SAFETY: `run` is a live local that nothing else touches.
            let result = unsafe { Run::call_in_place(&mut run, Value::new(100u64)) };
            assert!(!run.is_some(), "called: nothing left");
            let Ok(Ok(value)) = result else {
                panic!("the closure was called and returned Ok");
            };
            results.push(value.downcast::<u64>().unwrap());
            // SAFETY: as above; called again, there is nothing to call.
            let again = unsafe { Run::call_in_place(&mut run, Value::new(1u64)) };
            assert_eq!(again.err().unwrap().downcast::<u64>().unwrap(), 1);
        }
        assert_eq!(results, [100, 105, 115, 107]);
        assert_eq!(Rc::strong_count(&drops), 1, "each closure dropped once");
    }

    #[test]
    fn a_closure_never_called_is_dropped_once_taken_or_not() {
        let drops = Rc::new(());
        let inline = Run::new(adder(1u64, |c| *c, &drops));
        let boxed = Run::new(adder([0u64; 8], |_| 0, &drops));
        let mut taken = Run::new(adder(2u64, |c| *c, &drops));
        let moved = taken.take();
        assert!(!taken.is_some() && moved.is_some());
        assert_eq!(Rc::strong_count(&drops), 4);
        drop((inline, boxed, taken));
        assert_eq!(Rc::strong_count(&drops), 2);
        drop(moved);
        assert_eq!(Rc::strong_count(&drops), 1);
        drop(Run::none());
    }

    #[test]
    fn a_panicking_closure_is_consumed_once() {
        let drops = Rc::new(());
        let held = Rc::clone(&drops);
        let mut run = Run::new(move |_: Value| -> Result<Value, GreenletError> {
            let _held = held;
            panic!("closure panic (expected in this test)");
        });
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: `run` is a live local that nothing else touches.
            let _ = unsafe { Run::call_in_place(&mut run, Value::unit()) };
        }));
        assert!(outcome.is_err());
        assert!(!run.is_some());
        drop(run);
        assert_eq!(Rc::strong_count(&drops), 1);
    }
}
