//! Which worker the calling thread is, and which green thread runs on it:
//! the thread-local `RUNNING`, set while a worker's loop and teardown run
//! (the only time green threads run on it).
//!
//! Owns: that thread-local and its accessors ([`with_current`],
//! [`current`], [`current_task`], [`with_current_task`],
//! [`current_runtime`], [`hub_ended`]). Uses the worker's state (its `current` task) and
//! the blocking-pool thread's runtime (`shared::CONTEXT`).

use std::cell::Cell;
use std::mem::ManuallyDrop;
use std::ptr;
use std::rc::Rc;
use std::sync::Arc;

use super::super::shared::{Shared, CONTEXT};
use super::super::task_header::Task;
use super::state::Worker;

thread_local! {
    /// `Rc::as_ptr` of this thread's worker while its loop and teardown
    /// run (the only time green threads run on it), else null. No
    /// destructor, so a park reads it in one load.
    static RUNNING: Cell<*const Worker> = const { Cell::new(ptr::null()) };
    /// Set when this thread's worker loop has ended (its teardown kills
    /// what is left, and the thread exits): a park here cannot wait.
    static ENDED: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is a worker whose loop has ended: a green
/// thread that parks there is being killed (by the teardown, or by the
/// thread's exit), and nothing would wake it.
#[cold]
pub(crate) fn hub_ended() -> bool {
    ENDED.with(Cell::get)
}

/// Mark this worker thread's loop as ended, for good.
pub(super) fn mark_ended() {
    ENDED.with(|e| e.set(true));
}

/// Run `f` with this thread's worker, borrowed, while its loop or teardown
/// runs; `None` elsewhere (a plain thread). `f` may park.
#[inline]
pub(super) fn with_worker<R>(f: impl FnOnce(&Worker) -> R) -> Option<R> {
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

/// Keeps `RUNNING` pointing at a worker while it lives, and clears it when
/// dropped, also when the loop unwinds: made after the worker's `Rc` in
/// `main`, so dropped before it.
pub(super) struct MarkRunning;

impl MarkRunning {
    pub(super) fn new(w: &Rc<Worker>) -> MarkRunning {
        RUNNING.with(|r| r.set(Rc::as_ptr(w)));
        MarkRunning
    }
}

impl Drop for MarkRunning {
    fn drop(&mut self) {
        RUNNING.with(|r| r.set(ptr::null()));
    }
}

/// The runtime of the calling thread: its worker's, else (a blocking-pool
/// thread) the one it was entered into; `None` elsewhere.
pub(crate) fn current_runtime() -> Option<Arc<Shared>> {
    if let Some(shared) = with_current(|w| w.map(|w| Arc::clone(&w.shared))) {
        return Some(shared);
    }
    CONTEXT.try_with(|c| c.borrow().clone()).ok().flatten()
}
