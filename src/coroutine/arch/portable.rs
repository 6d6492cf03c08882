//! The portable switch, for targets without the crate's own
//! (`x86_64.rs`): corosensei's asymmetric resume and suspend, through its
//! documented API only. Each coroutine is a corosensei `Coroutine` kept in
//! its [`Top`]; its entry suspends once at once (so that [`start`] leaves
//! it suspended before its entry closure runs, as the x86_64 backend does);
//! the pointer a switch carries besides its word goes through a
//! thread-local beside corosensei's one word. There is no `hand_off`: every
//! switch returns to the resumer, and the floating-point control state is
//! the thread's (corosensei does not switch it).

use std::cell::Cell;
use std::convert::Infallible;
use std::mem::ManuallyDrop;

use corosensei::stack::{Stack, StackPointer};
use corosensei::{Coroutine, CoroutineResult, Yielder};

use super::Carried;

thread_local! {
    /// The pointer carried through corosensei's switch, which carries one
    /// word only: set before each switch, read right after it, on the one
    /// thread that switches.
    static CARRIED: Cell<Carried> = const { Cell::new(std::ptr::null()) };
}

/// A greenlet's coroutine as corosensei sees it. It never returns, and is
/// never dropped (its drop would unwind it; see `fiber.rs`).
type Co = Coroutine<usize, usize, Infallible, StackRef>;

/// A coroutine's state, in the top slot of its stack: the address of its
/// yielder (which lives in its entry's frame for as long as the coroutine)
/// and corosensei's coroutine. Never moves while the coroutine lives.
pub(crate) struct Top {
    yielder: *const Yielder<usize, usize>,
    co: ManuallyDrop<Co>,
}

/// The bounds a coroutine is given: below its [`Top`] at the top of the
/// stack, down to the stack's limit.
struct StackRef {
    base: StackPointer,
    limit: StackPointer,
}

// SAFETY: `base` is the address of the `Top`, 16-aligned (`start`'s
// contract), and the usable stack lies below it down to `limit`, owned by
// the fiber that owns the coroutine, which is never resumed once the
// fiber's stack is released.
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

/// The running context's floating-point control state is not switched
/// here: nothing to give.
///
/// # Safety
/// None needed; as for the x86_64 backend's, `top` is a suspended
/// coroutine's.
#[inline(always)]
pub(crate) unsafe fn inherit_fp_control(top: *mut Top) {
    let _ = top;
}

/// The registers a suspended coroutine goes on with, for an unwinder that
/// reads its stack from another thread: never known here (corosensei keeps
/// its saved context its own way, behind its API), so `None`.
#[cfg(all(feature = "hub", target_os = "linux", target_arch = "x86_64"))]
pub(crate) fn saved_registers(
    _top: usize,
    _read: impl FnMut(usize) -> Option<u64>,
) -> Option<[u64; 3]> {
    None
}

/// Make a coroutine whose state is `top`, in the top slot of a stack whose
/// usable area reaches down to `limit`, and run it to its first suspend:
/// the first [`resume_with`] into it calls `entry` with the `Top` and that
/// switch's word and pointer.
///
/// # Safety
/// `top` is 16-aligned, writable, and above at least a page of usable
/// stack down to `limit`, which nothing else uses while the coroutine
/// lives; the coroutine is resumed only on this thread.
#[inline]
pub(crate) unsafe fn start<F>(top: *mut Top, limit: usize, entry: F)
where
    F: FnOnce(*mut Top, usize, Carried) -> Infallible + 'static,
{
    let bounds = StackRef {
        base: StackPointer::new(top as usize).expect("a stack's top is not null"),
        limit: StackPointer::new(limit).expect("a stack's limit is not null"),
    };
    let co = Co::with_stack(bounds, move |yielder: &Yielder<usize, usize>, _| {
        // SAFETY: `top` was written before the first resume; the yielder
        // lives as long as this frame, which never returns.
        unsafe { (*top).yielder = yielder };
        let word = yielder.suspend(0);
        entry(top, word, CARRIED.with(Cell::get))
    });
    // SAFETY: guaranteed by the caller: `top` is writable and owned by the
    // coroutine's owner. The coroutine runs to its first suspend, in its
    // entry above.
    unsafe {
        top.write(Top {
            yielder: std::ptr::null(),
            co: ManuallyDrop::new(co),
        });
        match (*top).co.resume(0) {
            CoroutineResult::Yield(_) => {}
            CoroutineResult::Return(never) => match never {},
        }
    }
}

/// Go on in the suspended coroutine whose top is `top`, with `word` and
/// `carried`; returns the word and pointer it suspends with.
///
/// # Safety
/// `top` is a live coroutine's, suspended and on this thread; its frames
/// stay valid until it suspends.
#[inline(always)]
pub(crate) unsafe fn resume_with(top: *mut Top, word: usize, carried: Carried) -> (usize, Carried) {
    CARRIED.with(|c| c.set(carried));
    // SAFETY: guaranteed by the caller; the coroutine never returns.
    match unsafe { (*top).co.resume(word) } {
        CoroutineResult::Yield(word) => (word, CARRIED.with(Cell::get)),
        CoroutineResult::Return(never) => match never {},
    }
}

/// Suspend the running coroutine (whose top is `top`) with `word` and
/// `carried`, back to whoever last resumed it; returns the word and pointer
/// it is resumed with.
///
/// # Safety
/// The caller runs on `top`'s coroutine.
#[inline(always)]
pub(crate) unsafe fn suspend(top: *mut Top, word: usize, carried: Carried) -> (usize, Carried) {
    CARRIED.with(|c| c.set(carried));
    // SAFETY: `yielder` is the running coroutine's (set by its entry, which
    // never returns, so it is alive), used on that coroutine.
    let word = unsafe { (*(*top).yielder).suspend(word) };
    (word, CARRIED.with(Cell::get))
}
