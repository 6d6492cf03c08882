//! The per-thread greenlet state: the main greenlet, the current greenlet,
//! the registry of this thread's greenlets, the value slot, the trace hook,
//! the deferred work and the thread's link; how a thread finds its state,
//! and which thread owns a greenlet.
//!
//! Owns [`ThreadState`] (heap-allocated, reached through a const-initialized
//! thread-local pointer that has no destructor, so it stays readable during
//! thread-local teardown) with its registry methods (unregister, recycle
//! into the spare list, the thread-exit sweeps), the ownership checks
//! ([`check_owner`], [`owner_state`]), and [`trim_stack_pool`] (the pool's
//! trim plus the fiber the state keeps for its next greenlet).
//!
//! Uses records, the thread link, the payload slot, the stack pool, the
//! kept fiber (`kept.rs`) and the cleanup queue (captured at creation).
//! Imports nothing above it: the thread-local guard's destructor and the
//! pending work ([`check_mail`], [`do_pending_work`]) call what the state's
//! creator gave ([`Upcalls`]: the teardown of `thread_exit.rs`, the
//! deferred work of `lifecycle.rs`).

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

use slab::Slab;

use super::error::{ErrorKind, GreenletError};
use super::kept::KeptFiber;
use super::payload::{Kind, Slot};
use super::record::{IdBlock, Record, RecordCount, Spare};
use super::stack;
use super::thread_link::ThreadLink;
use super::trace_event::ThreadTraceHook;
use crate::cleanup::{self, CleanupQueue};

/// What the thread state calls in the files above it, given by whoever
/// creates the state ([`state`], [`check_owner`]): one static for the
/// process (`thread_exit::UPCALLS`), so every thread's state holds the same.
pub(crate) struct Upcalls {
    /// Tear the state down when its thread exits (the thread-local guard's
    /// destructor calls it, once).
    pub(crate) teardown: unsafe fn(*mut ThreadState),
    /// Release the finished record and finalize or kill the deferred and
    /// mailed greenlets ([`do_pending_work`] when there is some).
    pub(crate) deferred_work: unsafe fn(*mut ThreadState),
}

/// One thread's greenlet state. Only its own thread touches it, always
/// through short-lived accesses of the raw pointer (user code and stack
/// switches happen between accesses, never during one).
pub(crate) struct ThreadState {
    /// What the state calls above it.
    upcalls: &'static Upcalls,
    /// What other threads may touch.
    pub(crate) link: Arc<ThreadLink<Arc<Record>>>,
    /// The main greenlet (the thread's own stack).
    pub(crate) main: Arc<Record>,
    /// `Arc::as_ptr(&main)`, kept so that a switch compares with it in one
    /// load; also the word a greenlet suspends with to hand control to main.
    pub(crate) main_ptr: *const Record,
    /// The running greenlet; kept alive by `main` or by `registry`.
    pub(crate) current: *const Record,
    /// The value (or error) in flight between two greenlets.
    pub(crate) slot: Slot,
    /// Every greenlet of this thread that is not dead (started or not), the
    /// dead ones that still have handles, and the spare records (see
    /// `Record`). A record's key is in its `Local`; it leaves through
    /// [`ThreadState::unregister`] only.
    pub(crate) registry: Slab<Arc<Record>>,
    /// A greenlet that just finished with no handle left; released in the
    /// next context.
    pub(crate) retiring: Option<Arc<Record>>,
    /// Records of dead greenlets kept for reuse (referred to by this list and
    /// the registry only; see `Record`), emptied when the thread exits.
    pub(crate) spare: Spare,
    /// This thread's part of `live_greenlets` (written only by this thread).
    pub(crate) records: RecordCount,
    /// Greenlets whose last handle went while they could not be dealt with
    /// (running, or reported through the inbox).
    pub(crate) deferred: Vec<Arc<Record>>,
    /// A switch whose trace event the next context must fire.
    pub(crate) trace_pending: Option<(Kind, Arc<Record>)>,
    /// True when `retiring`, `deferred` or `trace_pending` needs attention.
    pub(crate) work: bool,
    /// The thread's trace hook; written only through
    /// [`ThreadState::replace_trace_hook`], which keeps the link's switch
    /// byte in step (`ThreadLink::set_slow`).
    trace_hook: Option<ThreadTraceHook>,
    /// A trace hook is running: no nested events.
    pub(crate) in_trace: bool,
    /// The greenlet being force-unwound, whose unwinding must not be caught
    /// and which cannot switch away meanwhile; written only through
    /// [`ThreadState::set_unwinding`].
    unwinding: *const Record,
    /// 1 when `trace_hook.is_some() || !unwinding.is_null()`, else 0, kept
    /// by their setters with the link's switch byte (`ThreadLink::set_slow`):
    /// what the hub's `switch::switches_observed` tests, without the link's
    /// load.
    slow_switch: u8,
    /// This thread's block of greenlet ids.
    pub(crate) ids: IdBlock,
    /// The fiber (coroutine and stack) of the last greenlet that finished,
    /// kept for the next start (see `switch::keep_finished` and `switch::prepare`).
    pub(crate) kept: KeptFiber,
    /// Where the main greenlet's finalizers go when the thread exits,
    /// captured when the state was created.
    pub(crate) queue: Arc<CleanupQueue>,
}

impl ThreadState {
    /// The thread's trace hook.
    pub(crate) fn trace_hook(&self) -> Option<&ThreadTraceHook> {
        self.trace_hook.as_ref()
    }

    /// Install `hook` as the thread's trace hook and return the previous one
    /// (not dropped here, so no user code runs).
    pub(crate) fn replace_trace_hook(
        &mut self,
        hook: Option<ThreadTraceHook>,
    ) -> Option<ThreadTraceHook> {
        let old = std::mem::replace(&mut self.trace_hook, hook);
        self.refresh_slow_switch();
        old
    }

    /// The greenlet being force-unwound, or null.
    pub(crate) fn unwinding(&self) -> *const Record {
        self.unwinding
    }

    /// Whether the running greenlet is the one being force-unwound (a
    /// destructor run by the unwind is running): it cannot switch away.
    pub(crate) fn current_is_unwinding(&self) -> bool {
        !self.unwinding.is_null() && ptr::eq(self.unwinding, self.current)
    }

    /// Mark `record` (or nothing, with null) as the greenlet being force-unwound.
    pub(crate) fn set_unwinding(&mut self, record: *const Record) {
        self.unwinding = record;
        self.refresh_slow_switch();
    }

    /// 1 when a trace hook is set or a greenlet is being force-unwound,
    /// else 0 (read by the hub's lean switch).
    #[cfg(feature = "hub")]
    #[inline(always)]
    pub(crate) fn slow_switch(&self) -> u8 {
        self.slow_switch
    }

    /// Keep `slow_switch` and the link's switch byte in step with
    /// `trace_hook` and `unwinding`, so that the sending side of a switch
    /// tests one byte for them and for mail (or-ed with the process-wide
    /// hook's, `trace::global_on`).
    fn refresh_slow_switch(&mut self) {
        let slow = self.trace_hook.is_some() || !self.unwinding.is_null();
        self.slow_switch = u8::from(slow);
        self.link.set_slow(slow);
    }

    /// The thread's link, borrowed from the state.
    ///
    /// # Safety
    /// `ts` is a live state, and the result is not used after it is freed.
    #[inline]
    pub(crate) unsafe fn link<'a>(ts: *const ThreadState) -> &'a ThreadLink<Arc<Record>> {
        // SAFETY: the caller guarantees `ts` is live; the link is owned by an
        // `Arc` in it, which does not move.
        unsafe { &*Arc::as_ptr(&(*ts).link) }
    }

    /// A new reference to the current greenlet's record.
    ///
    /// # Safety
    /// `self.current` points to a live record (kept by `main` or the registry).
    pub(crate) unsafe fn current_arc(&self) -> Arc<Record> {
        // SAFETY: `current` came from `Arc::as_ptr` of a record that the
        // state keeps alive (main or registry), per the invariant above.
        unsafe {
            Arc::increment_strong_count(self.current);
            Arc::from_raw(self.current)
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
            while let Some(record) = (*ts).spare.pop() {
                (*ts).records.add(1);
                drop(ThreadState::unregister(ts, &record));
                drop(record);
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
            for record in ThreadState::registered(ts, true) {
                drop(ThreadState::unregister(ts, &record));
            }
        }
    }

    /// The registered greenlets of `ts` that are dead (`dead`) or not (dead
    /// ones stay registered while they have handles: see [`Record`]).
    ///
    /// # Safety
    /// `ts` is the calling thread's state, not yet freed.
    pub(crate) unsafe fn registered(ts: *mut ThreadState, dead: bool) -> Vec<Arc<Record>> {
        // SAFETY: guaranteed by the caller; short access.
        unsafe {
            (*ts)
                .registry
                .iter()
                .filter(|(_, record)| record.flags().is_dead() == dead)
                .map(|(_, record)| Arc::clone(record))
                .collect()
        }
    }

    /// Take `record` out of its thread's registry, if it is still there, and
    /// return the registry's reference. Each record leaves the registry once:
    /// its key is cleared, so that a later call (which could otherwise remove
    /// another greenlet that got the key since) finds nothing.
    ///
    /// # Safety
    /// `ts` is the calling thread's live state, which owns `record`.
    #[inline]
    pub(crate) unsafe fn unregister(ts: *mut ThreadState, record: &Record) -> Option<Arc<Record>> {
        // SAFETY: guaranteed by the caller; short accesses to `local`.
        unsafe {
            let local = record.local();
            let key = std::mem::replace(&mut (*local).key, usize::MAX);
            if key == usize::MAX {
                return None;
            }
            record.clear_reusable();
            let entry = (*ts).registry.try_remove(key);
            debug_assert!(entry
                .as_ref()
                .is_some_and(|e| std::ptr::eq(Arc::as_ptr(e), record)));
            entry
        }
    }

    /// The common case of an only handle's drop on the owner thread
    /// (`lifecycle::drop_only_handle`): a greenlet whose record was ready
    /// for reuse when its body ended and still is (`Flags::is_reusable`:
    /// registered, not current, its owner-only part empty, no name, main's
    /// parent), with no weak handle, no other reference and no finalizer
    /// ever registered (nor its list taken: `has_finalizers`), goes
    /// straight to the spare list (there is room).
    /// Nobody can register a finalizer or see whether it was finalized, so
    /// there is nothing to finalize (see `Record::finalize_unreachable`);
    /// its name (none) and parent (main's) stay as they are, so nothing is
    /// dropped here and the caller's path stays a leaf. Otherwise `record`
    /// comes back, nothing changed, for the general path.
    ///
    /// # Safety
    /// `ts` is the calling thread's live state, which owns `record`, and
    /// `record` is the greenlet's only handle's reference (its handle count
    /// is 1 and no other handle can be made meanwhile: see
    /// `lifecycle::drop_only_handle`).
    #[inline(always)]
    pub(crate) unsafe fn recycle_finished(
        ts: *mut ThreadState,
        record: Arc<Record>,
    ) -> Option<Arc<Record>> {
        // SAFETY: guaranteed by the caller; short reads of the owner-only part.
        let simple = record.flags().is_reusable()
            && Arc::strong_count(&record) == 2
            && Arc::weak_count(&record) == 0
            && !record.has_finalizers()
            // SAFETY: guaranteed by the caller; a short read.
            && unsafe { (*ts).spare.has_room() };
        if !simple {
            return Some(record);
        }
        // SAFETY: guaranteed by the caller; short reads of the owner-only
        // part. What `is_reusable` stands for (see `Flags`).
        debug_assert!(unsafe {
            let local = &*record.local();
            !ptr::eq(Arc::as_ptr(&record), (*ts).current)
                && local.key != usize::MAX
                && !local.run.is_some()
                && local.fiber.is_none()
                && local.return_to.is_none()
                && record.resets_in_place((*ts).main_ptr)
        });
        record.clear_only_handle();
        // As in `recycle`: other threads' last uses happen before the reuse.
        fence(Ordering::Acquire);
        // SAFETY: as in `recycle`: `record` and the registry's entry are the
        // only references (tested above), so nothing else reads or writes
        // the record during the reset.
        let counted = unsafe { (*Arc::as_ptr(&record).cast_mut()).reset_kept() };
        // SAFETY: `ts` is live and owns the reset, registered record.
        unsafe {
            if counted {
                (*ts).records.add(-1);
            }
            (*ts).spare.push(record);
        }
        None
    }

    /// `record`'s last handle went on its owner thread: keep the record in the
    /// thread's spare records if it is a dead greenlet that nothing but `record`
    /// and the registry refers to; else drop `record`, and the registry's
    /// reference too if it is dead.
    ///
    /// # Safety
    /// `ts` is the calling thread's live state, which owns `record`.
    #[inline(always)]
    pub(crate) unsafe fn recycle(ts: *mut ThreadState, record: Arc<Record>) {
        // SAFETY: guaranteed by the caller; short reads of the owner-only part.
        let (registered, room, empty) = unsafe {
            let local = &*record.local();
            (
                local.key != usize::MAX,
                (*ts).spare.has_room(),
                !local.run.is_some() && local.fiber.is_none() && local.return_to.is_none(),
            )
        };
        let flags = record.flags();
        if !room
            || !empty
            || !flags.is_finished()
            || Arc::strong_count(&record) != 1 + usize::from(registered)
            || Arc::weak_count(&record) != 0
        {
            if flags.is_finished() {
                // SAFETY: guaranteed by the caller.
                drop(unsafe { ThreadState::unregister(ts, &record) });
            }
            return;
        }
        // Other threads' last uses of the record happen before its reuse (their
        // reference drops were Release decrements).
        fence(Ordering::Acquire);
        // SAFETY: `record` and the registry's entry are the only references to the
        // record (the strong count says so, and there are no weak ones); the
        // entry is not used during the reset, so nothing else can read or write
        // the record meanwhile: no other thread can reach it, and this thread's
        // state refers to records only through `Arc`s (its raw `current` is a
        // live greenlet). The record's allocation came from `Arc::new`, so it is
        // writable. `main` is another record (this one is not a main greenlet's).
        let reset = unsafe { (*Arc::as_ptr(&record).cast_mut()).reset_for_reuse(&(*ts).main) };
        let Some((counted, old_parent)) = reset else {
            // Finalizers that did not run: a greenlet leaked (it ignored the
            // kill of its last handle's drop) that finished later, which
            // `finalize_or_kill` leaves alone. Not reused: released, and its
            // finalizers dropped with it, as before records were reused.
            // SAFETY: guaranteed by the caller; the reset's borrow has ended.
            drop(unsafe { ThreadState::unregister(ts, &record) });
            return;
        };
        // SAFETY: `ts` is live and owns the reset record; short accesses.
        unsafe {
            if !registered {
                // Left the registry already (it was killed by this drop, or its
                // handle count raced): back in, as every spare record is.
                let key = (*ts).registry.insert(Arc::clone(&record));
                (*record.local()).key = key;
            }
            if counted {
                (*ts).records.add(-1);
            }
            (*ts).spare.push(record);
        }
        // Dropping another parent's handle may kill it (user code), after the
        // record was put away.
        drop(old_parent);
    }
}

/// Gives every free stack in the global pool and in the calling thread's
/// cache back to its region, returning its memory to the system, and
/// returns how many it gave back; the stack the calling thread keeps for
/// its next greenlet (the last finished greenlet's, with the coroutine
/// parked on it, which ends) goes too. Regions left
/// with no live or pooled stack are unmapped.
///
/// A pooled stack keeps the pages it touched while it was in use, so after a
/// burst of greenlets (or of greenlets that used deep stacks) the pool can
/// hold on to memory (at most 1,024 stacks per size in the global pool, 64
/// per size in each thread's cache, and one kept by each thread for its next
/// greenlet). Call this after such a burst to give it back now. Other
/// threads' caches are theirs and stay as they are.
///
/// ```
/// use greenlet::coroutine::{acquire_stack, stack_stats, trim_stack_pool};
///
/// drop(acquire_stack(96 * 1024)?);
/// let g = greenlet::Greenlet::new(Ok);
/// g.switch(())?;
/// assert!(trim_stack_pool() >= 2, "the free stack and the finished greenlet's");
/// assert_eq!(stack_stats().pooled, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn trim_stack_pool() -> usize {
    let kept = existing_state().is_some_and(|ts| {
        // SAFETY: `ts` is this thread's live state; short access, and
        // ending a parked coroutine and releasing its stack run no user
        // code.
        unsafe { (*ts).kept.clear() }
    });
    usize::from(kept) + stack::trim_pool()
}

/// Check that the calling thread owns `target`; returns its state (created
/// with `upcalls` if the thread has none, for the error's message).
#[inline]
pub(crate) fn check_owner(
    target: &Record,
    upcalls: &'static Upcalls,
) -> Result<*mut ThreadState, GreenletError> {
    let ts = state(upcalls);
    if let Some(ts) = ts {
        // SAFETY: `ts` is this thread's live state; short read.
        let link = unsafe { Arc::as_ptr(&(*ts).link) };
        if ptr::eq(Arc::as_ptr(&target.thread), link) {
            return Ok(ts);
        }
    }
    Err(thread_error(ts, target))
}

#[cold]
fn thread_error(ts: Option<*mut ThreadState>, target: &Record) -> GreenletError {
    match ts {
        Some(ts) if target.thread.alive.load(Ordering::Acquire) => {
            // SAFETY: `ts` is this thread's live state; `current` is live.
            let (current, current_thread) = unsafe {
                (
                    (*(*ts).current).label(),
                    ThreadState::link(ts).label.clone(),
                )
            };
            GreenletError::from(ErrorKind::WrongThread {
                current,
                current_thread,
                target: target.label(),
                target_thread: target.thread.label.clone(),
            })
        }
        _ => GreenletError::from(ErrorKind::ThreadExited {
            target: target.label(),
            target_thread: target.thread.label.clone(),
        }),
    }
}

/// The calling thread's state, if the thread owns `record`.
#[inline]
pub(crate) fn owner_state(record: &Record) -> Option<*mut ThreadState> {
    let ts = existing_state()?;
    // SAFETY: `ts` is this thread's live state; short read.
    let link = unsafe { Arc::as_ptr(&(*ts).link) };
    std::ptr::eq(Arc::as_ptr(&record.thread), link).then_some(ts)
}

/// Run the kills other threads sent, if any (greenlet's "deleteme" list).
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline]
pub(crate) unsafe fn check_mail(ts: *mut ThreadState) {
    // SAFETY: guaranteed by the caller.
    if unsafe { ThreadState::link(ts).has_mail(Ordering::Relaxed) } {
        // SAFETY: guaranteed by the caller.
        unsafe { do_pending_work(ts) }
    }
}

/// Release the finished record, and finalize or kill every greenlet whose
/// last handle went while that was not possible (and those other threads
/// sent). The running greenlet stays deferred until it switches away.
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline]
pub(crate) unsafe fn do_pending_work(ts: *mut ThreadState) {
    // SAFETY: the caller's `ts` is live; short accesses.
    unsafe {
        if (*ts).retiring.is_none()
            && (*ts).deferred.is_empty()
            && !ThreadState::link(ts).has_mail(Ordering::Acquire)
        {
            // The common case after a greenlet finished (`settle` released
            // it already): nothing deferred.
            (*ts).work = (*ts).trace_pending.is_some();
            return;
        }
        ((*ts).upcalls.deferred_work)(ts);
    }
}

thread_local! {
    /// This thread's state, or null. No destructor: readable at any time.
    static STATE: Cell<*mut ThreadState> = const { Cell::new(ptr::null_mut()) };
    /// Set once the state has been torn down: never create it again.
    static TORN_DOWN: Cell<bool> = const { Cell::new(false) };
    /// The stack a teardown run from a greenlet (`exit()`) leaves the thread
    /// on: that greenlet's, leaked with it (never unmapped), what
    /// [`running_stack`] reports once the state is gone.
    static DETACHED_ON: Cell<stack::Running> = const { Cell::new(stack::Running::NONE) };
    /// Its destructor tears the state down when the thread exits.
    static GUARD: StateGuard = const { StateGuard };
}

struct StateGuard;

impl Drop for StateGuard {
    fn drop(&mut self) {
        let ts = STATE.with(Cell::get);
        if !ts.is_null() {
            // SAFETY: `ts` came from `Box::into_raw` in `create` and is
            // released only here, once, on its own thread, by the teardown
            // its creator gave (`thread_exit::teardown`, whose contract
            // this is).
            unsafe { ((*ts).upcalls.teardown)(ts) };
        }
    }
}

/// This thread's state, created on first use (holding `upcalls`); `None`
/// once the thread's thread-locals are being destroyed and the state is
/// gone.
#[inline]
pub(crate) fn state(upcalls: &'static Upcalls) -> Option<*mut ThreadState> {
    let ts = STATE.with(Cell::get);
    if ts.is_null() {
        create(upcalls)
    } else {
        Some(ts)
    }
}

/// This thread's state if it exists, without creating it.
#[inline]
pub(crate) fn existing_state() -> Option<*mut ThreadState> {
    let ts = STATE.with(Cell::get);
    (!ts.is_null()).then_some(ts)
}

#[cold]
fn create(upcalls: &'static Upcalls) -> Option<*mut ThreadState> {
    if TORN_DOWN.with(Cell::get) {
        return None;
    }
    // Registers the teardown; fails if thread-locals are being destroyed.
    GUARD.try_with(|_| ()).ok()?;
    let link = ThreadLink::for_current_thread(true);
    // Counted globally: made before the thread's count (as a detached
    // main greenlet is).
    let main = Record::new_main(Arc::clone(&link));
    let current = Arc::as_ptr(&main);
    let ts = Box::new(ThreadState {
        upcalls,
        link,
        main,
        main_ptr: current,
        current,
        slot: Slot::empty(),
        registry: Slab::new(),
        retiring: None,
        spare: Spare::new(),
        records: RecordCount::register(),
        deferred: Vec::new(),
        trace_pending: None,
        work: false,
        trace_hook: None,
        in_trace: false,
        unwinding: ptr::null(),
        slow_switch: 0,
        ids: IdBlock::new(),
        kept: KeptFiber::new(),
        queue: cleanup::current_queue(),
    });
    let ts = Box::into_raw(ts);
    STATE.with(|s| s.set(ts));
    stack::find_running_with(running_stack);
    Some(ts)
}

/// The stack of this thread's current greenlet, as the overflow handler
/// asks for it (`stack::find_running_with`); none for main, on a thread
/// that never had a state, or while a finished body's coroutine parks (its
/// fiber already left the record, `keep_finished`); after the teardown,
/// the stack it left the thread on. Runs in the signal handler:
/// reads only this thread's state, which the interrupted code left as it
/// was (every switch sets `current` before the stack switch, which the
/// compiler does not move stores across).
pub(crate) fn running_stack() -> stack::Running {
    let ts = STATE.with(Cell::get);
    if ts.is_null() {
        return DETACHED_ON.with(Cell::get);
    }
    // SAFETY: a non-null `STATE` is this thread's live state (`detach`
    // clears it before the state is freed); its current greenlet is alive
    // (kept by the registry, `retiring` or `main`), and a fiber in its
    // record owns the stack it names.
    unsafe {
        let current = (*ts).current;
        if current.is_null() {
            return stack::Running::NONE;
        }
        match (*(*current).local()).fiber.as_ref() {
            Some(fiber) => fiber.stack().as_running(),
            None => stack::Running::NONE,
        }
    }
}

/// The main greenlet of a thread whose state is gone (used by `getcurrent`
/// called from late thread-local destructors).
pub(crate) fn detached_main() -> Arc<Record> {
    Record::new_main(ThreadLink::exited())
}

/// Teardown: the state is unreachable from now on, and never made again on
/// this thread, which runs on `running_on` (see [`running_stack`]).
pub(crate) fn detach(running_on: stack::Running) {
    TORN_DOWN.with(|t| t.set(true));
    DETACHED_ON.with(|d| d.set(running_on));
    STATE.with(|s| s.set(ptr::null_mut()));
}
