//! The reference to the running green thread that its worker holds (see
//! `Worker::held`): the ready queue's reference of the task a hand-off
//! resumed, kept rather than dropped, so that the task's next queuing of
//! itself or registration as a waiter moves it instead of cloning one.
//!
//! Owns: taking, replacing and dropping that reference. Uses the worker's
//! state only.

use std::ptr;
use std::sync::Arc;

use super::super::task_header::Task;
use super::state::Worker;

impl Worker {
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
    pub(super) fn hold(&self, next: Arc<Task>) {
        self.replace_held(Arc::into_raw(next));
    }

    /// Drop the held reference, if any (see `held`).
    #[inline(always)]
    pub(super) fn release_held(&self) {
        self.replace_held(ptr::null());
    }

    /// Put `new` (`Arc::into_raw` of an owned reference, or null) in
    /// `held`, dropping the reference held before, if any.
    #[inline(always)]
    pub(super) fn replace_held(&self, new: *const Task) {
        let old = self.held.replace(new);
        if !old.is_null() {
            Self::drop_ref(old);
        }
    }

    /// Drop a reference that was held (out of line: a hand-off's park
    /// usually gave its own away, to the ready queue or a wait list).
    #[cold]
    #[inline(never)]
    pub(super) fn drop_ref(held: *const Task) {
        // SAFETY: `held` came from `Arc::into_raw` of an owned reference,
        // no longer in `held`: dropped once.
        drop(unsafe { Arc::from_raw(held) });
    }
}
