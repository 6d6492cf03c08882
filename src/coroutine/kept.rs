//! [`KeptFiber`]: the fiber (coroutine and stack) of the last greenlet that
//! finished on a thread, kept by the thread's state for the thread's next
//! greenlet start.
//!
//! A greenlet's coroutine does not return when the greenlet's body ends: it
//! parks in a loop (`switch::run_bodies`) waiting for the next body, so that
//! a start takes a coroutine that is already made instead of making a
//! corosensei frame and tearing it down per greenlet. The dispatcher moves a
//! finished greenlet's fiber here (`switch::park_finished`), and
//! `switch::prepare` takes it for the next start of the same stack size. A
//! dead greenlet holds none.
//!
//! Uses [`Fiber`] and the stack pool's counts ([`stack::count_kept`]).

use super::fiber::Fiber;
use super::stack;

/// At most one fiber whose coroutine is parked (or never ran), and the
/// stack size its greenlet asked for. Its stack counts as pooled in
/// [`stack_stats`](super::stack_stats) while kept (moved from `live` to
/// `pooled` in its thread's cache counts and back); given back to the pool
/// by [`clear`](KeptFiber::clear) (the public
/// [`trim_stack_pool`](crate::coroutine::trim_stack_pool) calls it) or when
/// it is dropped with its thread's state.
pub(crate) struct KeptFiber {
    kept: Option<(usize, Fiber)>,
}

impl KeptFiber {
    /// Nothing kept.
    pub(crate) const fn new() -> KeptFiber {
        KeptFiber { kept: None }
    }

    /// Keep `fiber` for the next start of a greenlet asking for `size`
    /// bytes, if nothing is kept yet and this thread's stack cache (which
    /// counts the stack) exists; else end it (its stack goes to the pool).
    ///
    /// # Safety
    /// `fiber`'s coroutine is unstarted or parked in its loop between two
    /// bodies (see [`Fiber::end`]).
    #[inline]
    pub(crate) unsafe fn keep(&mut self, size: usize, fiber: Fiber) {
        if self.kept.is_none() && stack::count_kept() {
            self.kept = Some((size, fiber));
            return;
        }
        // SAFETY: guaranteed by the caller.
        unsafe { fiber.end() };
    }

    /// The kept fiber, if it was kept for `size` bytes.
    #[inline]
    pub(crate) fn take(&mut self, size: usize) -> Option<Fiber> {
        match &self.kept {
            Some((kept_size, _)) if *kept_size == size => {
                let (_, fiber) = self.kept.take()?;
                stack::uncount_kept();
                Some(fiber)
            }
            _ => None,
        }
    }

    /// End the kept fiber's coroutine and release its stack to the pool;
    /// returns whether there was one.
    pub(crate) fn clear(&mut self) -> bool {
        match self.kept.take() {
            Some((_, fiber)) => {
                stack::uncount_kept();
                // SAFETY: only unstarted or parked coroutines are kept
                // (`keep`'s contract).
                unsafe { fiber.end() };
                true
            }
            None => false,
        }
    }
}

impl Drop for KeptFiber {
    fn drop(&mut self) {
        self.clear();
    }
}
