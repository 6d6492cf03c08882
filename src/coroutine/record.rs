//! The greenlet [`Record`] shared by a greenlet's handles, and what is
//! counted about records.
//!
//! Owns the record (identity, [`Flags`], handle count, parent link,
//! finalizers, and the owner-only [`Local`] part: the closure, the
//! coroutine and its stack), its reset for reuse and the thread's [`Spare`]
//! list of reusable records, greenlet ids ([`IdBlock`]) and the record
//! counts behind [`live_greenlets`] ([`RecordCount`]). This file holds the
//! record, its [`Local`] part and the [`Spare`] list; submodules: `flags`
//! (the state bits), `finalizers` (the list and running it), `ids` (greenlet
//! ids) and `counts` (the record counts).
//!
//! Also defines the handle's struct, [`Greenlet`] (a record holds its
//! parent's handle; the handle's methods and trait impls are in
//! `handle.rs`).
//!
//! Uses the stored closure ([`Run`]), the stack pool, and, as a field type
//! only, the [`ThreadLink`] of its owner thread. Calls nothing above it: the thread
//! state, the switch and the lifecycle use records, not the reverse.

use std::cell::UnsafeCell;
use std::mem::{self, ManuallyDrop};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

mod counts;
mod finalizers;
mod flags;
mod ids;

use self::counts::count_records;
pub use self::counts::live_greenlets;
pub(crate) use self::counts::RecordCount;
pub(crate) use self::finalizers::{drop_quietly, run_finalizers, Finalizer, Finalizers};
pub(crate) use self::flags::Flags;
pub(crate) use self::ids::{global_id, IdBlock};

use super::arch::Top;
use super::fiber::Fiber;
use super::run::Run;
use super::thread_link::ThreadLink;

/// A handle to a greenlet: a cheap, clonable, `Send + Sync` reference.
///
/// Any thread may hold handles and observe the greenlet ([`is_dead`](Self::is_dead),
/// [`id`](Self::id), [`name`](Self::name)); only the thread that created it
/// may switch to it, throw into it or re-parent it (other threads get
/// [`ErrorKind::WrongThread`](crate::ErrorKind::WrongThread) or [`ErrorKind::ThreadExited`](crate::ErrorKind::ThreadExited)).
///
/// When the last handle of a started, unfinished greenlet is dropped, the
/// greenlet is killed: synchronously on its own thread (control comes back
/// to the code that dropped it, and its locals' destructors have run), or at
/// its thread's next greenlet operation when dropped on another thread.
/// Children hold their parent, and the running greenlet is never killed
/// until it switches away.
///
/// Handles the greenlet holds itself count too: one it holds to itself
/// while suspended (a `let me = getcurrent()`, as a reference from its own
/// frame does in Python, or the temporary `getcurrent()` of
/// `getcurrent().parent().unwrap().switch(v)`, which lives until the end of
/// that statement where Python's is gone before the switch) keeps it alive
/// until it is killed or its thread exits.
/// Bind the parent first (`let parent = getcurrent().parent().unwrap();`),
/// then switch to it.
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
    pub(crate) record: ManuallyDrop<Arc<Record>>,
}

/// The owner-thread-only part of a greenlet.
pub(crate) struct Local {
    /// The closure, until the greenlet starts (or dies unstarted).
    pub(crate) run: Run,
    /// The coroutine and the stack it runs on, taken when the greenlet
    /// starts (the thread's kept one, or a new one) and given back when it
    /// finishes.
    pub(crate) fiber: Option<Fiber>,
    /// Its coroutine's state (its fiber's top), set when it starts (null
    /// before its first greenlet; a reused record keeps its last one's,
    /// never read before the start sets it again): where the running
    /// greenlet's switches save its context.
    pub(crate) top: *mut Top,
    /// Where the result goes instead of the parent (the killer).
    pub(crate) return_to: Option<Arc<Record>>,
    /// Key in the owner's registry; `usize::MAX` while not in it (cleared
    /// by `ThreadState::unregister`).
    pub(crate) key: usize,
    /// The stack size asked for at creation.
    pub(crate) stack_size: usize,
    /// The next record of the owner's spare list, while this one is in it.
    next_spare: Option<Arc<Record>>,
}

impl Local {
    /// Nothing yet: not in the registry, no closure, no stack, no
    /// coroutine. As it stays for a main greenlet or one born dead; a new
    /// record starts from it.
    pub(crate) fn empty() -> Local {
        Local {
            run: Run::none(),
            fiber: None,
            top: std::ptr::null_mut(),
            return_to: None,
            key: usize::MAX,
            stack_size: 0,
            next_spare: None,
        }
    }

    /// A new greenlet's part, registered under `key`, its stack to be
    /// `stack_size` bytes.
    pub(crate) fn registered(key: usize, stack_size: usize) -> Local {
        Local {
            key,
            stack_size,
            ..Local::empty()
        }
    }
}

/// A thread's spare records (see [`Record`]): dead records that only this
/// list and the thread's registry refer to, each with main's handle as its
/// parent (kept, or given by the reset: see [`Record::reset_for_reuse`]).
/// The one kept last waits in `hot`, so that the common drop of one
/// greenlet followed by the creation of the next moves it in and out of
/// one slot; the others are linked through their `next_spare` field.
pub(crate) struct Spare {
    hot: Option<Arc<Record>>,
    top: Option<Arc<Record>>,
    /// Records in the linked list (`hot` not counted).
    len: usize,
}

/// Most finished records a thread keeps for its next greenlets.
const SPARE_RECORDS: usize = 64;

impl Spare {
    /// No spare record.
    pub(crate) const fn new() -> Spare {
        Spare {
            hot: None,
            top: None,
            len: 0,
        }
    }

    /// Whether another record may be kept.
    #[inline(always)]
    pub(crate) fn has_room(&self) -> bool {
        self.hot.is_none() || self.len < SPARE_RECORDS - 1
    }

    /// Take a record (the one kept last if there is one).
    ///
    /// # Safety
    /// Called on the thread that owns the list.
    #[inline(always)]
    pub(crate) unsafe fn pop(&mut self) -> Option<Arc<Record>> {
        if let Some(record) = self.hot.take() {
            return Some(record);
        }
        let record = self.top.take()?;
        // SAFETY: the owner thread; the record is referred to by this list
        // and the registry only, so nothing else accesses its `local`.
        // `top` was emptied by the `take`: the write over it drops nothing
        // (and the pop calls nothing).
        unsafe { ptr::write(&mut self.top, (*record.local()).next_spare.take()) };
        self.len -= 1;
        Some(record)
    }

    /// Keep a record (there is room: [`has_room`](Self::has_room)).
    ///
    /// # Safety
    /// Called on the thread that owns the list; `record` is a reset dead
    /// record of that thread, registered, with no other reference, and
    /// main's handle as its parent.
    #[inline(always)]
    pub(crate) unsafe fn push(&mut self, record: Arc<Record>) {
        debug_assert!(self.has_room());
        if self.hot.is_none() {
            // SAFETY: written over `None`: nothing to drop (and the push
            // calls nothing).
            unsafe { ptr::write(&mut self.hot, Some(record)) };
            return;
        }
        // SAFETY: guaranteed by the caller. A record off the list has no
        // next one (`pop` takes it), and `top` is empty once taken, so
        // neither write drops anything.
        unsafe {
            let next = ptr::addr_of_mut!((*record.local()).next_spare);
            debug_assert!((*next).is_none(), "a record off the list has no next");
            ptr::write(next, self.top.take());
            ptr::write(&mut self.top, Some(record));
        }
        self.len += 1;
    }
}

impl Drop for Spare {
    fn drop(&mut self) {
        // SAFETY: the list is dropped with its thread's state, on that thread.
        while let Some(record) = unsafe { self.pop() } {
            drop(record);
        }
    }
}

/// The record shared by every handle of one greenlet.
///
/// Its owner thread's registry refers to it from its creation until it dies,
/// or, if it still has handles then, until its last handle goes (see
/// `ThreadState::unregister`). When that happens on the owner thread and nothing else
/// refers to it, the record may instead be kept by the thread
/// (`ThreadState::spare`), still registered, and reused for the thread's
/// next greenlet: it keeps its thread link, its registry entry, and its
/// parent if that is the thread's main greenlet, so that making a greenlet
/// usually allocates nothing, touches no shared counter and leaves the
/// registry as it is. A dead greenlet's last handle dropped on another
/// thread is sent to the owner, which unregisters it.
pub(crate) struct Record {
    id: u64,
    name: Option<Box<str>>,
    /// The hub green thread it runs (see `name_after_task`, with the
    /// `hub` feature), read only when [`Flags::is_named`] and `name` is
    /// `None`.
    task: AtomicU64,
    /// Live [`Greenlet`] handles (not counting internal references).
    handles: AtomicUsize,
    /// [`Flags`]; written only on the owner thread (see [`Record::mark`]).
    flags: AtomicU8,
    /// The owner thread.
    pub(crate) thread: Arc<ThreadLink<Arc<Record>>>,
    /// Written only on the owner thread (under the lock); read under the
    /// lock elsewhere, and without it on the owner (`live_parent_ptr`).
    parent: Mutex<Option<Greenlet>>,
    /// `None` once finalized.
    finalizers: Mutex<Option<Finalizers>>,
    /// Set (under the `finalizers` lock) once a finalizer was registered or
    /// the list was taken (finalized), so that finalizing a record nobody
    /// else can reach skips the lock, and a record without it still has its
    /// empty list (its reset for reuse has nothing to restore). Cleared by
    /// that reset.
    has_finalizers: AtomicBool,
    /// Already taken out of [`live_greenlets`]: a dead greenlet whose last
    /// handle went on another thread, sent to its owner to be unregistered.
    uncounted: AtomicBool,
    local: UnsafeCell<Local>,
}

// SAFETY: everything but `local` is Send + Sync. `local` (which holds the
// non-Send `run` closure and coroutine) is only accessed on the owner thread:
// every access goes through `Record::local`, whose callers first check that the
// calling thread owns the greenlet (or run inside that thread's dispatcher).
// It is emptied on the owner thread before the owner lets go of the record:
// the registry holds a reference until then (or, for a greenlet that just
// finished with no handle left, `retiring` does, until the dispatcher has
// dropped its coroutine and stack), so the record can only be dropped
// elsewhere with an empty `local` (`Drop for Record` leaks it otherwise rather
// than drop it on the wrong thread).
unsafe impl Send for Record {}
// SAFETY: see the `Send` impl: shared access from other threads never reaches
// `local`.
unsafe impl Sync for Record {}

impl Record {
    /// A record with `handles` handles (the caller makes them), counted
    /// by the caller in [`live_greenlets`]; `flags` gain
    /// [`Flags::is_named`] with a name.
    pub(crate) fn new(
        id: u64,
        name: Option<Box<str>>,
        flags: Flags,
        handles: usize,
        thread: Arc<ThreadLink<Arc<Record>>>,
        parent: Option<Greenlet>,
        local: Local,
    ) -> Record {
        let named = if name.is_some() { Flags::NAMED } else { 0 };
        Record {
            id,
            name,
            task: AtomicU64::new(0),
            handles: AtomicUsize::new(handles),
            flags: AtomicU8::new(flags.0 | named),
            thread,
            parent: Mutex::new(parent),
            finalizers: Mutex::new(Some(Finalizers::new())),
            has_finalizers: AtomicBool::new(false),
            uncounted: AtomicBool::new(false),
            local: UnsafeCell::new(local),
        }
    }

    /// The main greenlet of `thread` (dead if that thread is gone).
    pub(crate) fn new_main(thread: Arc<ThreadLink<Arc<Record>>>) -> Arc<Record> {
        let local = Local::empty();
        let flags = Flags::main(thread.alive.load(Ordering::Relaxed));
        count_records(1);
        Arc::new(Record::new(
            global_id(),
            None,
            flags,
            0,
            thread,
            None,
            local,
        ))
    }

    /// A record with one handle (the caller makes it) of a greenlet created
    /// where no thread state exists any more: it can never run, so it is
    /// born dead and its closure is never kept.
    pub(crate) fn new_dead(name: Option<Box<str>>) -> Arc<Record> {
        count_records(1);
        Arc::new(Record::new(
            global_id(),
            name,
            Flags::BORN_DEAD,
            1,
            ThreadLink::exited(),
            None,
            Local::empty(),
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

    /// Its flags, as any thread sees them.
    #[inline]
    pub(crate) fn flags(&self) -> Flags {
        Flags(self.flags.load(Ordering::Acquire))
    }

    /// Set a flag (a constant at every caller): `DEAD` clears `ACTIVE`,
    /// `STARTED` (only ever set on a greenlet that is not dead) sets it.
    /// Only the owner thread (or the thread tearing its state down, which
    /// is the same thread) ever writes the flags, so a plain load and store
    /// suffice; other threads only read them.
    #[inline(always)]
    fn mark(&self, flag: u8) {
        let flags = self.flags.load(Ordering::Relaxed);
        let flags = if flag & Flags::DEAD != 0 {
            (flags | flag) & !Flags::ACTIVE
        } else if flag & Flags::STARTED != 0 {
            flags | flag | Flags::ACTIVE
        } else {
            flags | flag
        };
        debug_assert_eq!(flags, Flags::derive_active(flags), "the active bit");
        self.flags.store(flags, Ordering::Release);
    }

    /// It has been switched into: its body runs.
    #[inline]
    pub(crate) fn mark_started(&self) {
        debug_assert!(!self.flags().is_dead(), "a dead greenlet started");
        self.mark(Flags::STARTED);
    }

    /// It finished, was killed, or (a main greenlet) its thread exited.
    #[inline]
    pub(crate) fn mark_dead(&self) {
        self.mark(Flags::DEAD);
    }

    /// Its body ended (see `switch::finish`): dead, and
    /// [`reusable`](Flags::is_reusable) if `reusable`.
    #[inline(always)]
    pub(crate) fn mark_finished(&self, reusable: bool) {
        let reusable = if reusable { Flags::REUSABLE } else { 0 };
        self.mark(Flags::DEAD | reusable);
    }

    /// No longer [`reusable`](Flags::is_reusable) as it is.
    #[inline]
    pub(crate) fn clear_reusable(&self) {
        let flags = self.flags.load(Ordering::Relaxed);
        if flags & Flags::REUSABLE != 0 {
            self.flags
                .store(flags & !Flags::REUSABLE, Ordering::Release);
        }
    }

    /// It ignored the kill of its last handle's drop (see [`Flags`]).
    #[inline]
    pub(crate) fn mark_leaked(&self) {
        self.mark(Flags::LEAKED);
    }

    /// Its kill on drop starts (`true`) or is over (`false`); owner thread
    /// only, as every flag write.
    pub(crate) fn set_killing(&self, on: bool) {
        let flags = self.flags.load(Ordering::Relaxed);
        let flags = if on {
            flags | Flags::KILLING
        } else {
            flags & !Flags::KILLING
        };
        self.flags.store(flags, Ordering::Release);
    }

    /// The parent, if it can receive a value as it is (started and alive):
    /// no reference is taken, the parent being kept alive by its thread.
    ///
    /// # Safety
    /// Called on the owner thread.
    #[inline]
    pub(crate) unsafe fn live_parent_ptr(&self) -> Option<*const Record> {
        // SAFETY: the parent is written only on the owner thread (at
        // creation, and by `set_parent` after its owner check, under the
        // lock); other threads only read it, under the lock. So a read on the
        // owner thread never overlaps a write and needs no lock.
        let parent = unsafe { &*self.parent.data_ptr() };
        let parent = parent.as_ref()?;
        parent
            .record
            .flags()
            .is_active()
            .then_some(Arc::as_ptr(&parent.record))
    }

    /// Live handles (not counting internal references).
    #[inline]
    pub(crate) fn handles(&self) -> usize {
        self.handles.load(Ordering::Acquire)
    }

    /// A new handle to `this`.
    ///
    /// Apart from cloning a handle and upgrading a weak one to a main
    /// greenlet (whose handle count drives nothing), only ever called on the
    /// record's owner thread (or for a record no other thread can reach
    /// yet): dropping an only handle on the owner thread relies on it (see
    /// `lifecycle::drop_only_handle`, which counts down atomically while a
    /// weak handle exists).
    #[inline]
    pub(crate) fn new_handle(this: Arc<Record>) -> Greenlet {
        this.handles.fetch_add(1, Ordering::Relaxed);
        Greenlet {
            record: ManuallyDrop::new(this),
        }
    }

    /// Make a handle's count for a [`WeakGreenlet`](super::weak::WeakGreenlet)'s
    /// upgrade, on any thread: only while some handle exists (an owner
    /// dropping the last one makes no new one meanwhile; see
    /// `lifecycle::drop_only_handle`, which counts down atomically while a
    /// weak handle exists). Returns whether it was made.
    pub(crate) fn add_handle_if_any(&self) -> bool {
        let mut count = self.handles.load(Ordering::Relaxed);
        while count > 0 {
            match self.handles.compare_exchange_weak(
                count,
                count + 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => count = now,
            }
        }
        false
    }

    /// Drop one handle; true if it was the last one.
    #[inline]
    pub(crate) fn release_handle(&self) -> bool {
        self.handles.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// The only handle went, on the owner thread: no other handle can be
    /// made meanwhile, so the count is cleared without a read-modify-write
    /// (see `lifecycle::drop_only_handle`).
    #[inline]
    pub(crate) fn clear_only_handle(&self) {
        self.handles.store(0, Ordering::Relaxed);
    }

    /// Its name: the given one, its thread's for a main greenlet,
    /// `task-<n>` for one that runs the hub's unnamed green thread `n`, or
    /// `greenlet-<id>`.
    pub(crate) fn name(&self) -> String {
        match &self.name {
            Some(name) => name.to_string(),
            None if self.flags().is_main() => self.thread.main_name.to_string(),
            None if self.flags().is_named() => format!("task-{}", self.task_id()),
            None => format!("greenlet-{}", self.id),
        }
    }

    /// `'name' (id N)`, for messages.
    pub(crate) fn label(&self) -> String {
        format!("'{}' (id {})", self.name(), self.id)
    }

    /// Its process-unique id.
    #[inline]
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The name given at creation, if any.
    #[inline]
    pub(crate) fn given_name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Name this greenlet, made just now without a name (its flags are
    /// [`Flags::UNSTARTED`]), `task-<task>`, after the hub's green thread
    /// `task` that it runs: without allocating, and only until the record
    /// is reused (which rewrites the flags). Owner thread only, as every
    /// flag write.
    #[cfg(feature = "hub")]
    #[inline]
    pub(crate) fn name_after_task(&self, task: u64) {
        debug_assert!(
            self.name.is_none() && self.flags() == Flags::UNSTARTED,
            "only a new, unnamed greenlet is named after a task"
        );
        self.task.store(task, Ordering::Relaxed);
        self.flags.store(Flags::NAMED, Ordering::Release);
    }

    /// The green thread given to `name_after_task`;
    /// meaningful only when [`Flags::is_named`] and no name was given.
    #[inline]
    pub(crate) fn task_id(&self) -> u64 {
        self.task.load(Ordering::Relaxed)
    }

    /// Its parent's record.
    pub(crate) fn parent_record(&self) -> Option<Arc<Record>> {
        self.parent.lock().as_ref().map(|p| Arc::clone(&p.record))
    }

    /// A handle to its parent.
    pub(crate) fn parent(&self) -> Option<Greenlet> {
        self.parent.lock().clone()
    }

    /// Make `parent` its parent; returns the previous one (for the caller
    /// to drop after the lock is released). On the owner thread, with a
    /// parent of that thread (it writes the flags: the record is no longer
    /// [`reusable`](Flags::is_reusable) as it is unless the new parent is
    /// the thread's main greenlet, as a kill from main makes it).
    pub(crate) fn replace_parent(&self, parent: Greenlet) -> Option<Greenlet> {
        if !parent.record.flags().is_main() {
            self.clear_reusable();
        }
        self.parent.lock().replace(parent)
    }

    /// Register a finalizer, or hand it back if the greenlet was finalized
    /// already.
    pub(crate) fn add_finalizer(&self, finalizer: Finalizer) -> Result<(), Finalizer> {
        let mut finalizers = self.finalizers.lock();
        match finalizers.as_mut() {
            Some(list) => {
                list.push(finalizer);
                self.has_finalizers.store(true, Ordering::Release);
                Ok(())
            }
            None => Err(finalizer),
        }
    }

    /// Whether a finalizer was ever registered or the list taken (see
    /// `has_finalizers`).
    #[inline]
    pub(crate) fn has_finalizers(&self) -> bool {
        // Pairs with the Release stores in `add_finalizer` and
        // `take_finalizers`.
        self.has_finalizers.load(Ordering::Acquire)
    }

    /// Take the finalizers, marking the greenlet finalized.
    pub(crate) fn take_finalizers(&self) -> Finalizers {
        let mut finalizers = self.finalizers.lock();
        self.has_finalizers.store(true, Ordering::Release);
        finalizers.take().unwrap_or_default()
    }

    /// Run the finalizers now (once).
    pub(crate) fn finalize(&self) {
        let finalizers = self.take_finalizers();
        if !finalizers.is_empty() {
            // Reported already; a greenlet's finalization never panics.
            drop(run_finalizers(finalizers, || self.label()));
        }
    }

    /// [`finalize`](Self::finalize) for a record with no handle left, whose
    /// caller holds `held` of its references and drops (or recycles) them
    /// afterwards. When those are all the references, nobody can register a
    /// finalizer any more or see whether the record was marked finalized, so
    /// a record that never had a finalizer is left as it is, without taking
    /// the lock.
    pub(crate) fn finalize_unreachable(this: &Arc<Record>, held: usize) {
        // The Acquire pairs with the Release store in `add_finalizer`; that
        // thread's handle drop (AcqRel) also orders it before this call.
        if Arc::strong_count(this) == held && !this.has_finalizers() {
            return;
        }
        this.finalize();
    }

    /// A dead greenlet's last handle went on a thread other than its
    /// owner's: take it out of [`live_greenlets`] now, before it is sent to
    /// the owner (undone by [`Record::recount`] if it cannot be sent).
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

    /// Undo [`Record::uncount`]: it is counted again (a handle was made
    /// again, or it could not be sent to its owner).
    pub(crate) fn recount(&self) {
        if self.uncounted.swap(false, Ordering::Relaxed) {
            count_records(1);
        }
    }

    /// Clear what a dead record kept of its greenlet, for
    /// `ThreadState::recycle`; returns whether it was still counted in
    /// [`live_greenlets`] and the parent handle to release: the record gets
    /// a handle of `main` as its parent (kept if it had one: its handle
    /// count drives nothing) for the next greenlet (see [`Spare`]). `None`, with nothing changed, if its finalizers did not
    /// run: it is not reused then.
    #[inline(always)]
    pub(crate) fn reset_for_reuse(
        &mut self,
        main: &Arc<Record>,
    ) -> Option<(bool, Option<Greenlet>)> {
        let finalizers = self.finalizers.get_mut();
        if finalizers.as_ref().is_some_and(|list| !list.is_empty()) {
            return None;
        }
        // `None` once finalized; else already the empty list.
        if finalizers.is_none() {
            *finalizers = Some(Finalizers::new());
        }
        *self.has_finalizers.get_mut() = false;
        self.name = None;
        let parent = self.parent.get_mut();
        let keep = parent
            .as_ref()
            .is_some_and(|p| Arc::ptr_eq(&p.record, main));
        let old_parent = if keep {
            None
        } else {
            // Main's handle, which a spare record always has (see `Spare`).
            parent.replace(Record::new_handle(Arc::clone(main)))
        };
        Some((self.reset_kept(), old_parent))
    }

    /// Whether a dead record's reset would keep everything but its
    /// finalizer list and count as it is: it has no name and its parent is
    /// `main` (kept for the next greenlet).
    ///
    /// # Safety
    /// Called on the owner thread.
    #[inline(always)]
    pub(crate) unsafe fn resets_in_place(&self, main: *const Record) -> bool {
        // SAFETY: the parent is written only on the owner thread, the
        // caller's (see `live_parent_ptr`), so this read overlaps no write.
        let parent = unsafe { &*self.parent.data_ptr() };
        self.name.is_none()
            && parent
                .as_ref()
                .is_some_and(|p| ptr::eq(Arc::as_ptr(&p.record), main))
    }

    /// The part of a dead record's reset that every reuse needs, all of it
    /// for a record that [`resets_in_place`](Self::resets_in_place) and
    /// whose `has_finalizers` is false (as `ThreadState::recycle_finished`
    /// tested: its finalizer list is the empty one it was made with):
    /// counted again. Returns whether it was still counted in
    /// [`live_greenlets`]. Its coroutine state (`Local::top`) stays as it
    /// was: it is read only while its greenlet runs, and set when it starts.
    #[inline(always)]
    pub(crate) fn reset_kept(&mut self) -> bool {
        debug_assert!(self
            .finalizers
            .get_mut()
            .as_ref()
            .is_some_and(Finalizers::is_empty));
        !mem::replace(self.uncounted.get_mut(), false)
    }

    /// Make a spare record (reset by [`reset_for_reuse`](Self::reset_for_reuse))
    /// the record of a new greenlet with one handle. `parent` replaces the
    /// parent it kept, if given (it keeps main's otherwise); returns the
    /// parent handle it replaced.
    #[inline(always)]
    pub(crate) fn reuse(
        &mut self,
        id: u64,
        name: Option<Box<str>>,
        stack_size: usize,
        parent: Option<Greenlet>,
    ) -> Option<Greenlet> {
        self.id = id;
        // Written over the `None` the reset left (no drop test; were it
        // ever a name, it would only leak).
        debug_assert!(self.name.is_none(), "a spare record is reset");
        let named = if name.is_some() { Flags::NAMED } else { 0 };
        mem::forget(mem::replace(&mut self.name, name));
        *self.handles.get_mut() = 1;
        *self.flags.get_mut() = Flags::UNSTARTED.0 | named;
        self.local.get_mut().stack_size = stack_size;
        parent.and_then(|p| self.parent.get_mut().replace(p))
    }

    /// [`reuse`](Self::reuse) with no name and the parent it kept (main's):
    /// nothing replaced, nothing written over its name (`None` already; the
    /// flags' store clears [`Flags::is_named`] of a greenlet named after a
    /// task).
    #[inline(always)]
    pub(crate) fn reuse_unnamed(&mut self, id: u64, stack_size: usize) {
        self.id = id;
        debug_assert!(self.name.is_none(), "a spare record is reset");
        *self.handles.get_mut() = 1;
        *self.flags.get_mut() = Flags::UNSTARTED.0;
        self.local.get_mut().stack_size = stack_size;
    }

    /// [`reuse_unnamed`](Self::reuse_unnamed), then
    /// [`name_after_task`](Self::name_after_task): the record of the hub's
    /// unnamed green thread `task`.
    #[cfg(feature = "hub")]
    #[inline(always)]
    pub(crate) fn reuse_for_task(&mut self, id: u64, stack_size: usize, task: u64) {
        self.reuse_unnamed(id, stack_size);
        *self.task.get_mut() = task;
        *self.flags.get_mut() = Flags::NAMED;
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        if !*self.uncounted.get_mut() {
            count_records(-1);
        }
        if !*self.has_finalizers.get_mut() {
            // Never given a finalizer nor taken: the empty list it was made
            // (or reset) with, which owns nothing; forgotten instead of
            // going through its drop glue, a call and a loop over nothing.
            mem::forget(self.finalizers.get_mut().take());
        }
        let local = self.local.get_mut();
        if local.run.is_some() || local.fiber.is_some() {
            // Unreachable by the registry invariant (see the Send impl); if it
            // ever happens, leaking is the only sound choice on an unknown thread.
            std::mem::forget(local.run.take());
            std::mem::forget(local.fiber.take());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::thread_state;
    use super::Flags;
    use super::Greenlet;

    #[test]
    fn the_active_bit_is_started_and_not_dead() {
        assert!(!Flags::UNSTARTED.is_active());
        assert!(!Flags::BORN_DEAD.is_active());
        assert!(Flags::main(true).is_active());
        assert!(!Flags::main(false).is_active());
        let g = Greenlet::new(|v| {
            let me = super::super::handle::getcurrent();
            assert!(me.record.flags().is_active());
            Ok(v)
        });
        assert!(!g.record.flags().is_active());
        g.switch(()).unwrap();
        assert!(g.is_dead() && !g.record.flags().is_active());
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
            let count = || unsafe { (*ts).records.get() };
            let before = count();
            // What two other threads' drops of its last handle do (the
            // second with a handle a trace hook got meanwhile), with no
            // owner step between them to recount it.
            g.record.uncount();
            g.record.uncount();
            assert_eq!(count(), before - 1, "uncounted once");
            g.record.recount();
            assert_eq!(count(), before, "counted again once");
            drop(g);
            assert_eq!(count(), before - 1, "dropped (or kept for reuse)");
        })
        .join()
        .unwrap();
    }
}
