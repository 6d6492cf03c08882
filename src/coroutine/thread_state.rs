//! The per-thread greenlet state: the main greenlet, the current greenlet,
//! the registry of this thread's live greenlets, the value slot, the trace
//! hook, the deferred work and the inbox of kills sent by other threads; and
//! its teardown when the thread exits.
//!
//! Owns [`ThreadState`] (heap-allocated, reached through a const-initialized
//! thread-local pointer that has no destructor, so it stays readable during
//! thread-local teardown) and [`ThreadLink`] (the part other threads may
//! touch). Uses the dispatcher to unwind greenlets at exit and
//! [`crate::cleanup`] to hand the main greenlet's finalizers to a queue.

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use slab::Slab;

use super::dispatch::{self, Kind};
use super::greenlet::{self as records, Core, Finalizer, Spare, DEAD};
use super::trace::TraceHook;
use crate::cleanup::{self, CleanupQueue, Remains};

/// How many times thread exit throws `GreenletExit` into survivors before it
/// falls back to corosensei's forced unwind.
const EXIT_KILL_ROUNDS: usize = 3;

/// The part of a thread's state that other threads may touch: identity,
/// liveness, and the inbox of greenlets whose last handle went elsewhere.
pub(crate) struct ThreadLink {
    /// `'name' (ThreadId(n))`, for messages.
    pub(crate) label: String,
    /// False once the thread has exited (or for detached greenlets).
    pub(crate) alive: AtomicBool,
    /// Set when `inbox` is non-empty; read without the lock on every
    /// greenlet operation of the owner.
    pub(crate) has_mail: AtomicBool,
    pub(crate) inbox: Mutex<Vec<Arc<Core>>>,
}

impl ThreadLink {
    fn for_current_thread(alive: bool) -> Arc<ThreadLink> {
        // `thread::current` may refuse late in thread-local teardown.
        let label = std::panic::catch_unwind(|| {
            let thread = std::thread::current();
            format!(
                "'{}' ({:?})",
                thread.name().unwrap_or("<unnamed>"),
                thread.id()
            )
        })
        .unwrap_or_else(|_| "'<unknown>'".into());
        Arc::new(ThreadLink {
            label,
            alive: AtomicBool::new(alive),
            has_mail: AtomicBool::new(false),
            inbox: Mutex::new(Vec::new()),
        })
    }

    /// A link for greenlets made on a thread whose state is already gone.
    pub(crate) fn exited() -> Arc<ThreadLink> {
        Arc::new(ThreadLink {
            label: "<a thread whose greenlet state was torn down>".into(),
            alive: AtomicBool::new(false),
            has_mail: AtomicBool::new(false),
            inbox: Mutex::new(Vec::new()),
        })
    }

    /// Queue a greenlet whose last handle was dropped on another thread.
    /// Returns it back if the owner has exited (nobody will read the inbox).
    pub(crate) fn post(&self, core: Arc<Core>) -> Result<(), Arc<Core>> {
        let mut inbox = self.inbox.lock();
        if !self.alive.load(Ordering::Acquire) {
            return Err(core);
        }
        inbox.push(core);
        self.has_mail.store(true, Ordering::Release);
        Ok(())
    }
}

/// One thread's greenlet state. Only its own thread touches it, always
/// through short-lived accesses of the raw pointer (user code and stack
/// switches happen between accesses, never during one).
pub(crate) struct ThreadState {
    pub(crate) link: Arc<ThreadLink>,
    /// The main greenlet (the thread's own stack).
    pub(crate) main: Arc<Core>,
    /// The running greenlet; kept alive by `main` or by `registry`.
    pub(crate) current: *const Core,
    /// The value (or error) in flight between two greenlets.
    pub(crate) slot: dispatch::Slot,
    /// Every greenlet of this thread that is not dead (started or not), the
    /// dead ones that still have handles, and the spare records (see
    /// `Core`). A record's key is in its `Local`; it leaves through
    /// `greenlet::unregister` only.
    pub(crate) registry: Slab<Arc<Core>>,
    /// A greenlet that just finished with no handle left; released in the
    /// next context.
    pub(crate) retiring: Option<Arc<Core>>,
    /// Records of dead greenlets kept for reuse (referred to by this list and
    /// the registry only; see `Core`), emptied when the thread exits.
    pub(crate) spare: Spare,
    /// This thread's part of `live_greenlets` (written only by this thread).
    pub(crate) records: Arc<AtomicIsize>,
    /// Greenlets whose last handle went while they could not be dealt with
    /// (running, or reported through the inbox).
    pub(crate) deferred: Vec<Arc<Core>>,
    /// A switch whose trace event the next context must fire.
    pub(crate) trace_pending: Option<(Kind, Arc<Core>)>,
    /// True when `retiring`, `deferred` or `trace_pending` needs attention.
    pub(crate) work: bool,
    /// The thread's trace hook; written only through
    /// [`ThreadState::replace_trace_hook`], which keeps `slow_switch` in step.
    trace_hook: Option<TraceHook>,
    /// A trace hook is running: no nested events.
    pub(crate) in_trace: bool,
    /// The greenlet being force-unwound, whose unwinding must not be caught
    /// and which cannot switch away meanwhile; written only through
    /// [`ThreadState::set_unwinding`].
    unwinding: *const Core,
    /// Nonzero when `trace_hook.is_some() || !unwinding.is_null()`, kept by
    /// their setters so that the sending side of a switch tests one word (a
    /// word, not a `bool`: the test compiles to one compare with memory).
    slow_switch: usize,
    /// The next greenlet id of this thread's block, and the end of the block.
    pub(crate) next_id: u64,
    pub(crate) ids_end: u64,
    /// Where the main greenlet's finalizers go when the thread exits,
    /// captured when the state was created.
    queue: Arc<CleanupQueue>,
}

impl ThreadState {
    /// The thread's trace hook.
    pub(crate) fn trace_hook(&self) -> Option<&TraceHook> {
        self.trace_hook.as_ref()
    }

    /// Install `hook` as the thread's trace hook and return the previous one
    /// (not dropped here, so no user code runs).
    pub(crate) fn replace_trace_hook(&mut self, hook: Option<TraceHook>) -> Option<TraceHook> {
        let old = std::mem::replace(&mut self.trace_hook, hook);
        self.refresh_slow_switch();
        old
    }

    /// The greenlet being force-unwound, or null.
    pub(crate) fn unwinding(&self) -> *const Core {
        self.unwinding
    }

    /// Whether the running greenlet is the one being force-unwound (a
    /// destructor run by the unwind is running): it cannot switch away.
    pub(crate) fn current_is_unwinding(&self) -> bool {
        !self.unwinding.is_null() && ptr::eq(self.unwinding, self.current)
    }

    /// Mark `core` (or nothing, with null) as the greenlet being force-unwound.
    pub(crate) fn set_unwinding(&mut self, core: *const Core) {
        self.unwinding = core;
        self.refresh_slow_switch();
    }

    /// Whether the sending side of a switch must take the slow path: a trace
    /// hook is set or a greenlet is being force-unwound.
    #[inline(always)]
    pub(crate) fn slow_switch(&self) -> bool {
        self.slow_switch != 0
    }

    fn refresh_slow_switch(&mut self) {
        self.slow_switch = usize::from(self.trace_hook.is_some() || !self.unwinding.is_null());
    }

    /// The thread's link, borrowed from the state.
    ///
    /// # Safety
    /// `ts` is a live state, and the result is not used after it is freed.
    #[inline]
    pub(crate) unsafe fn link<'a>(ts: *const ThreadState) -> &'a ThreadLink {
        // SAFETY: the caller guarantees `ts` is live; the link is owned by an
        // `Arc` in it, which does not move.
        unsafe { &*Arc::as_ptr(&(*ts).link) }
    }
}

thread_local! {
    /// This thread's state, or null. No destructor: readable at any time.
    static STATE: Cell<*mut ThreadState> = const { Cell::new(ptr::null_mut()) };
    /// Set once the state has been torn down: never create it again.
    static TORN_DOWN: Cell<bool> = const { Cell::new(false) };
    /// Its destructor tears the state down when the thread exits.
    static GUARD: StateGuard = const { StateGuard };
}

struct StateGuard;

impl Drop for StateGuard {
    fn drop(&mut self) {
        let ts = STATE.with(Cell::get);
        if !ts.is_null() {
            // SAFETY: `ts` came from `Box::into_raw` in `create` and is
            // released only here, once, on its own thread.
            unsafe { teardown(ts) };
        }
    }
}

/// This thread's state, created on first use; `None` once the thread's
/// thread-locals are being destroyed and the state is gone.
#[inline]
pub(crate) fn state() -> Option<*mut ThreadState> {
    let ts = STATE.with(Cell::get);
    if ts.is_null() {
        create()
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
fn create() -> Option<*mut ThreadState> {
    if TORN_DOWN.with(Cell::get) {
        return None;
    }
    // Registers the teardown; fails if thread-locals are being destroyed.
    GUARD.try_with(|_| ()).ok()?;
    let link = ThreadLink::for_current_thread(true);
    let main = Core::new_main(Arc::clone(&link));
    let current = Arc::as_ptr(&main);
    let ts = Box::new(ThreadState {
        link,
        main,
        current,
        slot: dispatch::Slot::empty(),
        registry: Slab::new(),
        retiring: None,
        spare: Spare::new(),
        records: records::register_record_count(),
        deferred: Vec::new(),
        trace_pending: None,
        work: false,
        trace_hook: None,
        in_trace: false,
        unwinding: ptr::null(),
        slow_switch: 0,
        next_id: 0,
        ids_end: 0,
        queue: cleanup::current_queue(),
    });
    let ts = Box::into_raw(ts);
    STATE.with(|s| s.set(ts));
    Some(ts)
}

/// The main greenlet of a thread whose state is gone (used by `getcurrent`
/// called from late thread-local destructors).
pub(crate) fn detached_main() -> Arc<Core> {
    Core::new_main(ThreadLink::exited())
}

/// What a thread leaves behind: the finalizers of its main greenlet and of
/// the greenlets that were finalized with it.
struct ThreadRemains {
    label: String,
    finalizers: Vec<Finalizer>,
}

impl Remains for ThreadRemains {
    fn destroy(self: Box<Self>) {
        // Every finalizer ran; re-raise the first panic so that the queue
        // counts it.
        if let Some(panic) = super::greenlet::run_finalizers(self.finalizers, &self.label) {
            std::panic::resume_unwind(panic);
        }
    }
    fn label(&self) -> String {
        self.label.clone()
    }
}

/// Thread exit: unwind the suspended greenlets in this thread, mark every
/// greenlet as belonging to an exited thread, hand the finalizers to the
/// cleanup queue, free the state.
///
/// # Safety
/// `ts` is this thread's live state, and the caller is its `StateGuard`.
unsafe fn teardown(ts: *mut ThreadState) {
    // SAFETY (whole function): `ts` is live until the `Box::from_raw` at the
    // end; every access below is a short-lived one through the pointer.
    unsafe {
        let mut finalized: Vec<Arc<Core>> = Vec::new();
        // `exit()` called from a greenlet runs this teardown on that
        // greenlet's stack, with main suspended in the middle of its code: a
        // victim that caught a thrown exit and switched to main would resume
        // main's code inside `exit()`. There the greenlets are only
        // force-unwound (their destructors run; a switch meanwhile fails).
        let first_round = if ptr::eq((*ts).current, Arc::as_ptr(&(*ts).main)) {
            0
        } else {
            EXIT_KILL_ROUNDS
        };
        for round in first_round..=EXIT_KILL_ROUNDS {
            dispatch::do_pending_work(ts);
            let victims = records::registered(ts, false);
            if victims.is_empty() {
                break;
            }
            for core in victims {
                if core.flags() & DEAD == 0 {
                    if round < EXIT_KILL_ROUNDS && !core.is_leaked() {
                        // The outcome is checked by the next round.
                        let _ = dispatch::kill(ts, &core);
                    } else {
                        dispatch::force_unwind(ts, &core);
                    }
                }
                finalized.push(core);
            }
        }
        // Survivors made during the last round: one last forced sweep.
        let late = records::registered(ts, false);
        for core in late {
            dispatch::force_unwind(ts, &core);
            finalized.push(core);
        }
        dispatch::do_pending_work(ts);
        // Dead greenlets whose handles outlive the thread now live by those
        // handles only; spare records go (records recycled later in this
        // teardown are dropped after the state is unreachable, below).
        records::drain_spare(ts);
        records::release_dead_registered(ts);

        // From now on, every greenlet of this thread is "of an exited thread".
        let mail = {
            let mut inbox = ThreadState::link(ts).inbox.lock();
            ThreadState::link(ts).alive.store(false, Ordering::Release);
            std::mem::take(&mut *inbox)
        };
        finalized.extend(mail);
        (*ts).main.mark(DEAD);

        let label = format!("main greenlet of thread {}", ThreadState::link(ts).label);
        let mut finalizers = (*ts).main.take_finalizers();
        for core in &finalized {
            finalizers.extend(core.take_finalizers());
        }
        drop(finalized);
        let queue = Arc::clone(&(*ts).queue);

        TORN_DOWN.with(|t| t.set(true));
        STATE.with(|s| s.set(ptr::null_mut()));
        // Their drop is counted globally now, the state being unreachable.
        records::drain_spare(ts);
        records::retire_record_count(&(*ts).records);
        // Fields may hold user values (trace hook, slot): dropped with the
        // state already unreachable.
        drop(Box::from_raw(ts));
        queue.push(Box::new(ThreadRemains { label, finalizers }));
    }
}
