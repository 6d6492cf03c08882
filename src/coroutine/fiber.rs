//! [`Fiber`]: a greenlet coroutine ([`Co`]) together with the pooled stack
//! it runs on, the coroutine's own state kept at the top of that stack.
//!
//! A fiber outlives the greenlets that run on it: a greenlet's coroutine
//! does not return when its body ends but parks, waiting for the next body
//! (`switch::run_bodies`), and its fiber moves from the finished greenlet's
//! record to the thread's kept one (`kept.rs`) and on to the next
//! greenlet's record. With the coroutine's state on its stack, that move is
//! two words (the state's address and the stack), not the state itself.
//!
//! Owns [`Co`], [`StackRef`] (the stack bounds corosensei is given) and the
//! slot at the top of each stack that holds the coroutine. Uses the stack
//! pool's [`PooledStack`] and corosensei; knows nothing of records or
//! switching beyond what a parked coroutine's frames hold (nothing to
//! drop: [`Fiber::end`]).

use std::convert::Infallible;
use std::mem::{self, ManuallyDrop};
use std::ptr::{self, NonNull};

use corosensei::stack::{Stack, StackPointer};
use corosensei::{Coroutine, Yielder};

use super::stack::PooledStack;

/// A greenlet's coroutine: resumed with the word of the greenlet it runs
/// (its record's address), suspends with the next greenlet's word; when the
/// greenlet's body finished it waits, parked, for its next greenlet. It
/// never returns (an unwind out of a body ends it); a parked one is ended
/// by [`Fiber::end`]. See `switch::run_bodies`.
pub(crate) type Co = Coroutine<usize, usize, Infallible, StackRef>;

/// Bytes at the top of a stack (just below its base) that hold the
/// coroutine's state; the coroutine's own frames start below them. A whole
/// number of cache lines, so that the base the coroutine gets stays as
/// aligned as the stack's.
const SLOT: usize = 64;

/// The bounds a coroutine is given: below its state's slot at the top of
/// the stack, down to the stack's limit. Held by value (fixed for the
/// fiber's life), so that corosensei's resume, which asks for the base
/// every time, loads one field.
pub(crate) struct StackRef {
    base: StackPointer,
    limit: StackPointer,
}

// SAFETY: `base` is the start of the slot at the top of the fiber's stack,
// `SLOT` (a multiple of 64) below that stack's base, so it keeps the base's
// alignment, and `limit` is the stack's limit: the usable area minus the
// slot (`SLOT` is far smaller than any stack's usable area). The
// `PooledStack` is owned by the same `Fiber` as the coroutine and released
// only after the coroutine was dropped (`Drop for Fiber`, `Fiber::end`).
unsafe impl Stack for StackRef {
    #[inline]
    fn base(&self) -> StackPointer {
        self.base
    }
    #[inline]
    fn limit(&self) -> StackPointer {
        self.limit
    }
}

/// A coroutine and its stack; the coroutine is dropped first.
pub(crate) struct Fiber {
    /// The coroutine, in the slot at the top of `stack`.
    co: NonNull<Co>,
    stack: PooledStack,
}

impl Fiber {
    /// A new coroutine on `stack` that will run `entry`, its state stored
    /// at the top of `stack`.
    #[inline]
    pub(crate) fn new<F>(stack: PooledStack, entry: F) -> Fiber
    where
        F: FnOnce(&Yielder<usize, usize>, usize) -> Infallible + 'static,
    {
        const { assert!(mem::size_of::<Co>() <= SLOT && mem::align_of::<Co>() <= SLOT) };
        let slot = stack.base().get() - SLOT;
        let bounds = StackRef {
            base: StackPointer::new(slot).expect("a stack's top is far above 0"),
            limit: stack.limit(),
        };
        let co = slot as *mut Co;
        // SAFETY: the slot is inside the stack's usable area (its top
        // `SLOT` bytes), aligned for a `Co` (asserted above; the base is
        // 64-aligned), owned by whoever owns `stack` and used by nothing
        // else: the coroutine's frames start below it.
        unsafe { co.write(Co::with_stack(bounds, entry)) };
        Fiber {
            // SAFETY: `slot` is not null (checked above).
            co: unsafe { NonNull::new_unchecked(co) },
            stack,
        }
    }

    /// The coroutine, for an unwind.
    #[inline(always)]
    pub(crate) fn co(&mut self) -> &mut Co {
        // SAFETY: the slot holds the fiber's live coroutine (written in
        // `new`, dropped only with the fiber), reached only through its
        // fiber: exclusive while the fiber is borrowed so.
        unsafe { &mut *self.co.as_ptr() }
    }

    /// The coroutine's address, fixed for the fiber's life wherever the
    /// fiber moves (it is in its stack's top slot): a resume goes through
    /// it, since the body's end moves the fiber while the resume runs.
    #[inline(always)]
    pub(crate) fn co_ptr(&self) -> *mut Co {
        self.co.as_ptr()
    }

    /// The stack the coroutine runs on.
    #[inline(always)]
    pub(crate) fn stack(&self) -> &PooledStack {
        &self.stack
    }

    /// Whether the coroutine has not ended (it is suspended mid-body, or
    /// parked, or never ran).
    pub(crate) fn is_live(&self) -> bool {
        // SAFETY: a short shared read on the owner thread.
        !unsafe { self.co.as_ref() }.done()
    }

    /// End the coroutine and release the stack to the pool. A coroutine
    /// parked in its loop between two bodies is forgotten where it is, not
    /// dropped (corosensei's drop would force-unwind it: a resume into its
    /// stack and an unwind of its frames); an unstarted one is dropped (its
    /// closure, which holds only the thread state's address).
    ///
    /// Forgetting it leaks nothing: while parked, the frames on its stack
    /// are corosensei's entry (whose closure was consumed when it started)
    /// and [`run_bodies`](super::switch)'s loop, whose locals are plain
    /// words (the thread state's and records' addresses, the yielder's
    /// reference); the coroutine's own state is the stack's bounds and
    /// stack pointers, which own nothing. The stack is then free to reuse.
    ///
    /// # Safety
    /// The coroutine is unstarted or parked in its loop (its greenlet's
    /// body finished and nothing resumed it since): a coroutine suspended in
    /// a body holds the body's locals, which must be unwound.
    pub(crate) unsafe fn end(self) {
        let this = ManuallyDrop::new(self);
        let co = this.co.as_ptr();
        // SAFETY: the slot holds the live coroutine (caller: unstarted or
        // parked, so not running); dropped at most once, here, and the
        // fiber's own drop is skipped (`ManuallyDrop`). The stack is read
        // out once and released after the coroutine is done with.
        unsafe {
            if !(*co).started() {
                ptr::drop_in_place(co);
            }
            drop(ptr::read(&this.stack));
        }
    }
}

impl Drop for Fiber {
    fn drop(&mut self) {
        // SAFETY: the slot holds the fiber's live coroutine, dropped here
        // once, before `stack` (the field, dropped after this) is released;
        // a coroutine still suspended is unwound by its drop.
        unsafe { ptr::drop_in_place(self.co.as_ptr()) }
    }
}
