//! [`KeptFiber`]: the fiber (coroutine and stack) of the last greenlet that
//! finished on a thread, kept by the thread's state for the thread's next
//! greenlet start.
//!
//! A greenlet's coroutine does not return when the greenlet's body ends: it
//! parks in a loop (`switch::run_bodies`) waiting for the next body, so that
//! a start takes a coroutine that is already made instead of making its
//! first frames and tearing them down per greenlet. The finished body's
//! coroutine moves its own fiber here just before it parks
//! (`switch::keep_finished`), and `switch::prepare` takes it for the next
//! start of the same stack size. A dead greenlet holds none.
//!
//! Uses [`Fiber`] and the stack pool's flag for it ([`KeptCount`]).

use super::fiber::Fiber;
use super::stack::KeptCount;

/// At most one fiber whose coroutine is parked (or never ran, or parks
/// before anything else runs), with the stack size its greenlet asked for.
/// Its stack counts as pooled in [`stack_stats`](super::stack_stats) while
/// kept (its [`KeptCount`] set); given back to the pool by
/// [`clear`](KeptFiber::clear) (the public
/// [`trim_stack_pool`](crate::coroutine::trim_stack_pool) calls it) or when
/// it is dropped with its thread's state.
pub(crate) struct KeptFiber {
    kept: Option<Kept>,
    /// Set while `kept` holds a fiber.
    count: KeptCount,
}

struct Kept {
    size: usize,
    fiber: Fiber,
}

impl KeptFiber {
    /// Nothing kept.
    pub(crate) fn new() -> KeptFiber {
        KeptFiber {
            kept: None,
            count: KeptCount::register(),
        }
    }

    /// Keep `fiber` for the next start of a greenlet asking for `size`
    /// bytes; the fiber kept before, if any, is ended (its stack goes to
    /// the pool).
    ///
    /// # Safety
    /// `fiber`'s coroutine is parked in its loop between two bodies, or is
    /// the caller's own, whose body finished and which parks before
    /// anything else runs (a kept fiber is dropped parked: see [`Fiber`]).
    #[inline]
    pub(crate) unsafe fn keep(&mut self, size: usize, fiber: Fiber) {
        let old = self.kept.replace(Kept { size, fiber });
        self.count.set(true);
        if let Some(old) = old {
            // Kept before, so parked (this contract), and not the caller's
            // (it is `fiber`): dropped, it is forgotten where it is, and its
            // stack is released (counted live until then, as the flag
            // stands for the new one).
            drop(old.fiber);
        }
    }

    /// The kept fiber, if it was kept for `size` bytes.
    #[inline]
    pub(crate) fn take(&mut self, size: usize) -> Option<Fiber> {
        match &self.kept {
            Some(kept) if kept.size == size => {
                self.count.set(false);
                Some(self.kept.take()?.fiber)
            }
            _ => None,
        }
    }

    /// End the kept fiber's coroutine and release its stack to the pool;
    /// returns whether there was one.
    pub(crate) fn clear(&mut self) -> bool {
        match self.kept.take() {
            Some(kept) => {
                self.count.set(false);
                // Only parked coroutines are kept when code other than a
                // parking coroutine runs (`keep`): dropped, it is forgotten.
                drop(kept.fiber);
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
