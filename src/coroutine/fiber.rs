//! [`Fiber`]: a greenlet coroutine ([`Co`]) together with the pooled stack
//! it runs on, the coroutine's state ([`Top`]) kept at the top of that
//! stack.
//!
//! A fiber outlives the greenlets that run on it: a greenlet's coroutine
//! does not return when its body ends but parks, waiting for the next body
//! (`switch::run_bodies`), and its fiber moves from the finished greenlet's
//! record to the thread's kept one (`kept.rs`) and on to the next
//! greenlet's record. With the coroutine's state on its stack, that move is
//! two words (the state's address and the stack), not the state itself.
//!
//! Owns [`Co`], [`Top`], [`StackRef`] (the stack bounds corosensei is
//! given) and the slot at the top of each stack that holds the [`Top`].
//! Uses the stack pool's [`PooledStack`], corosensei (to make the
//! coroutine and enter it the first time) and `context.rs` (every switch
//! after that); knows nothing of records or switching beyond what a parked
//! coroutine's frames hold (nothing to drop: see [`Fiber`]).

use std::convert::Infallible;
use std::mem::{self, ManuallyDrop};
use std::ptr::NonNull;

use corosensei::stack::{Stack, StackPointer};
use corosensei::{Coroutine, CoroutineResult, Yielder};

use super::context;
use super::payload::NOTHING;
use super::stack::PooledStack;

/// A greenlet's coroutine as corosensei sees it: entered once by
/// corosensei's resume (which it returns from at once, parked: see
/// [`context::prime`]), then switched by `context.rs` only. It never
/// returns and is never dropped (see [`Fiber`]).
pub(crate) type Co = Coroutine<usize, usize, Infallible, StackRef>;

/// Bytes at the top of a stack (just below its base) that hold the
/// coroutine's [`Top`]; the coroutine's own frames start below them. A whole
/// number of cache lines, so that the base the coroutine gets stays as
/// aligned as the stack's.
const SLOT: usize = 64;

/// A coroutine's state, in the top slot of its stack: where its context is
/// saved while suspended (`sp`), where its resumer's is saved while it runs
/// (`link`), and corosensei's coroutine (used only to make and first enter
/// it). Never moves, so that a switch can go through its address while the
/// fiber holding it moves (a finishing body keeps its own fiber).
#[repr(C)]
pub(crate) struct Top {
    /// The coroutine's saved context while it is suspended.
    pub(crate) sp: usize,
    /// Its resumer's saved context while it runs (corosensei's yielder
    /// where `context::hand_off` does not exist).
    pub(crate) link: usize,
    co: ManuallyDrop<Co>,
}

impl Top {
    /// corosensei's coroutine, for the fallback switch.
    #[cfg(not(all(target_arch = "x86_64", target_family = "unix")))]
    #[inline(always)]
    pub(crate) fn co(&mut self) -> &mut Co {
        &mut self.co
    }
}

/// The bounds a coroutine is given: below its state's slot at the top of
/// the stack, down to the stack's limit.
pub(crate) struct StackRef {
    base: StackPointer,
    limit: StackPointer,
}

// SAFETY: `base` is the start of the slot at the top of the fiber's stack,
// `SLOT` (a multiple of 64) below that stack's base, so it keeps the base's
// alignment, and `limit` is the stack's limit: the usable area minus the
// slot (`SLOT` is far smaller than any stack's usable area). The
// `PooledStack` is owned by the same `Fiber` as the coroutine, which is
// never resumed once the fiber is gone.
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

/// A coroutine and its stack.
///
/// Dropping a fiber releases its stack and forgets the coroutine where it
/// is: it must be parked between two bodies (or have its body unwound,
/// [`Fiber::force_unwind`], which leaves it parked). While parked, the
/// frames on its stack are corosensei's entry (whose closure was consumed
/// when it started) and `run_bodies`' loop, whose locals are plain words
/// (the thread state's and records' addresses, the `Top`'s, the yielder's
/// reference); the `Top` owns nothing (corosensei's coroutine in it holds the
/// stack's bounds and stack pointers, and is never dropped: its drop would
/// resume it with corosensei's own resume, which no longer knows where it
/// is). So nothing leaks. A fiber whose body is suspended mid-way is never
/// dropped: the lifecycle unwinds it first (`lifecycle::force_unwind`), and
/// a leaked greenlet's record forgets its fiber with the stack.
pub(crate) struct Fiber {
    /// The coroutine's state, in the slot at the top of `stack`.
    top: NonNull<Top>,
    stack: PooledStack,
}

impl Fiber {
    /// A new coroutine on `stack` that will run `entry` (handed its `Top`
    /// and corosensei's yielder; it must call [`context::prime`] first),
    /// its state stored at the top of `stack`, entered once so that it is
    /// parked in `entry`'s [`context::prime`] when this returns.
    #[inline]
    pub(crate) fn new<F>(stack: PooledStack, entry: F) -> Fiber
    where
        F: FnOnce(*mut Top, &Yielder<usize, usize>) -> Infallible + 'static,
    {
        const { assert!(mem::size_of::<Top>() <= SLOT && mem::align_of::<Top>() <= SLOT) };
        let slot = stack.base().get() - SLOT;
        let bounds = StackRef {
            base: StackPointer::new(slot).expect("a stack's top is far above 0"),
            limit: stack.limit(),
        };
        let top = slot as *mut Top;
        let co = Co::with_stack(bounds, move |yielder, _| entry(top, yielder));
        // SAFETY: the slot is inside the stack's usable area (its top
        // `SLOT` bytes), aligned for a `Top` (asserted above; the base is
        // 64-aligned), owned by whoever owns `stack` and used by nothing
        // else: the coroutine's frames start below it. The coroutine is
        // resumed in place, once, with corosensei's resume: its entry parks
        // at once through `context::prime`, returning here.
        unsafe {
            top.write(Top {
                sp: 0,
                link: 0,
                co: ManuallyDrop::new(co),
            });
            match (*top).co.resume(0) {
                CoroutineResult::Yield(_) => {}
                CoroutineResult::Return(never) => match never {},
            }
            assert!(
                context::primed(top) && (*top).co.started() && !(*top).co.done(),
                "a new greenlet coroutine did not park through `context::prime` \
                 (corosensei's stack protocol changed? it is pinned to 0.3.4)"
            );
            context::end_backtraces(top);
        }
        Fiber {
            // SAFETY: `slot` is not null (checked above).
            top: unsafe { NonNull::new_unchecked(top) },
            stack,
        }
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
