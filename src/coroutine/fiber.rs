//! [`Fiber`]: a greenlet coroutine together with the pooled stack it runs
//! on, the coroutine's state (the machine's [`Top`], `arch/`) kept at the
//! top of that stack.
//!
//! A fiber outlives the greenlets that run on it: a greenlet's coroutine
//! does not return when its body ends but parks, waiting for the next body
//! (`switch::run_bodies`), and its fiber moves from the finished greenlet's
//! record to the thread's kept one (`kept.rs`) and on to the next
//! greenlet's record. With the coroutine's state on its stack, that move is
//! two words (the state's address and the stack), not the state itself.
//!
//! Owns the slot at the top of each stack that holds the [`Top`]. Uses the
//! stack pool's [`PooledStack`] and `arch/` (to make the coroutine) and
//! `context.rs` (to unwind it); knows nothing of records or switching
//! beyond what a parked coroutine's frames hold (nothing to drop: see
//! [`Fiber`]).

use std::convert::Infallible;
use std::mem;
use std::ptr::NonNull;

use super::arch::{self, Carried, Top};
use super::context;
use super::payload::NOTHING;
use super::stack::PooledStack;

/// Bytes at the top of a stack (just below its base) that hold the
/// coroutine's [`Top`]; the coroutine's own frames start below them. A whole
/// number of cache lines, so that the frames below stay as aligned as the
/// stack's base.
const SLOT: usize = 64;

/// A coroutine and its stack.
///
/// Dropping a fiber releases its stack and forgets the coroutine where it
/// is: it must be new (its entry not yet run, which owns nothing to drop),
/// parked between two bodies, or have its body
/// unwound ([`Fiber::force_unwind`], which leaves it parked). While parked,
/// the frames on its stack are its root's and `run_bodies`' loop, whose
/// locals are plain words (the thread state's and records' addresses, the
/// `Top`'s); the `Top` owns nothing that needs a drop (on the portable path
/// corosensei's coroutine in it is never dropped: its drop would unwind a
/// coroutine that never returns). So nothing leaks. A fiber whose body is
/// suspended mid-way is never dropped: the lifecycle unwinds it first
/// (`lifecycle::force_unwind`), and a leaked greenlet's record forgets its
/// fiber with the stack.
pub(crate) struct Fiber {
    /// The coroutine's state, in the slot at the top of `stack`.
    top: NonNull<Top>,
    stack: PooledStack,
}

impl Fiber {
    /// A new coroutine on `stack` that will run `entry` (handed its `Top`
    /// and the word and pointer of the first switch into it), its state
    /// stored at the top of `stack`. Nothing runs until that first switch,
    /// which goes on with the floating-point control state of the context
    /// that made the fiber. The entry owns nothing that needs a drop (checked when this
    /// compiles): a fiber dropped before its first switch forgets it.
    #[inline]
    pub(crate) fn new<F>(stack: PooledStack, entry: F) -> Fiber
    where
        F: FnOnce(*mut Top, usize, Carried) -> Infallible + 'static,
    {
        const { assert!(mem::size_of::<Top>() <= SLOT && mem::align_of::<Top>() <= SLOT) };
        // A fiber dropped before its first switch forgets its entry.
        const { assert!(!mem::needs_drop::<F>()) };
        let slot = stack.base() - SLOT;
        let top = slot as *mut Top;
        // SAFETY: the slot is inside the stack's usable area (its top
        // `SLOT` bytes), aligned for a `Top` (asserted above; the base is
        // 64-aligned, so the slot is 16-aligned), owned by whoever owns
        // `stack` and used by nothing else: the coroutine's frames start
        // below it, down to the stack's limit. It is resumed only on this
        // thread (a `Fiber` is not `Send`: `NonNull`).
        unsafe { arch::start(top, stack.limit(), entry) };
        Fiber {
            // SAFETY: `slot` is far above 0 (a mapped stack's top).
            top: unsafe { NonNull::new_unchecked(top) },
            stack,
        }
    }

    /// Give the suspended coroutine the running context's floating-point
    /// control state for its next body (a greenlet starts with its
    /// starter's: see `arch`); called by the greenlet that starts a body on
    /// it.
    #[inline(always)]
    pub(crate) fn inherit_fp_control(&self) {
        // SAFETY: a fiber's coroutine is suspended whenever it is not the
        // running one, and the running one never starts a body on itself.
        unsafe { arch::inherit_fp_control(self.top()) };
    }

    /// The coroutine's state, at a fixed address for the fiber's life
    /// wherever the fiber moves (it is in its stack's top slot): a switch
    /// goes through it, since the body's end moves the fiber while the
    /// resume that runs it is still on the resumer's stack.
    #[inline(always)]
    pub(crate) fn top(&self) -> *mut Top {
        self.top.as_ptr()
    }

    /// The stack the coroutine runs on.
    #[inline(always)]
    pub(crate) fn stack(&self) -> &PooledStack {
        &self.stack
    }

    /// Unwind the body suspended on this coroutine: resume it with
    /// [`context::FORCE`] and no payload ([`NOTHING`]); the thread state's
    /// marks (its greenlet being unwound, work to settle) make the receive
    /// at its suspend point raise [`context::ForcedUnwind`], which
    /// `run_bodies` catches once the body's frames are unwound (their
    /// destructors run); the coroutine then parks, back here. A body that
    /// catches the unwind runs on; it cannot switch away (a switch during a
    /// forced unwind fails), so it returns here too, parked, when it ends.
    ///
    /// # Safety
    /// The coroutine is suspended mid-body on this thread, not the running
    /// one, and the thread state marks its greenlet as being unwound and
    /// has work to settle (so that the receive unwinds, `run_bodies` takes
    /// the unwind quietly and nothing keeps the fiber).
    pub(crate) unsafe fn force_unwind(&mut self) {
        // SAFETY: guaranteed by the caller: suspended, so resumable.
        unsafe { context::resume_with(self.top(), context::FORCE, (&raw const NOTHING).cast()) };
    }
}
