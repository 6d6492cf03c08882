//! The stack switch as the switch protocol sees it: save the running
//! context, go on in another, with two words in registers: the word (a
//! record's address, or [`FORCE`]) and a [`Carried`] pointer (where the
//! switch protocol left the payload; opaque here).
//!
//! Owns [`FORCE`] (the word a forced unwind carries) with [`unwind_now`]
//! and [`ForcedUnwind`]; passes on the machine's switch from `arch/`:
//! [`resume_with`] (call-like: the target will come back here when it
//! suspends), [`suspend`] (back to whoever last resumed the target) and,
//! on x86_64 Unix, [`hand_off`] (from one greenlet's stack straight to
//! another's: the second inherits the first's resumer, so one stack switch
//! instead of two through the dispatcher). Where there is no [`hand_off`],
//! a greenlet hands control to another through the dispatcher on main's
//! stack (`switch::dispatch_loop`).

#[cfg(all(
    target_arch = "x86_64",
    target_family = "unix",
    not(target_vendor = "apple"),
    not(greenlet_portable_switch)
))]
pub(crate) use super::arch::hand_off;
pub(crate) use super::arch::{resume_with, suspend, Carried};

/// The word a forced unwind resumes a suspended coroutine with (never a
/// record's address: records are aligned). Its suspend point does not test
/// it: the thread state marks the greenlet as being unwound and has work
/// to settle, and the settle raises [`ForcedUnwind`] (`switch::settle`), so
/// an ordinary switch pays for no test of its own.
pub(crate) const FORCE: usize = 1;

/// The panic payload a suspended coroutine resumed by a forced unwind
/// unwinds its frames with, caught by `switch::run_bodies`.
#[derive(Debug)]
pub(crate) struct ForcedUnwind;

/// Unwind the running coroutine's frames (a forced unwind resumed it).
#[cold]
#[inline(never)]
pub(crate) fn unwind_now() -> ! {
    std::panic::resume_unwind(Box::new(ForcedUnwind))
}

#[cfg(test)]
mod tests {
    //! The switch on fibers whose entries are these tests' own loops (never
    //! returning, never letting a panic out: see `switch::run_bodies`).

    use std::cell::Cell;
    use std::convert::Infallible;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::ptr;

    use super::*;
    use crate::coroutine::arch::Top;
    use crate::coroutine::fiber::Fiber;
    use crate::coroutine::stack;

    fn fiber(entry: impl FnOnce(*mut Top, usize, Carried) -> Infallible + 'static) -> Fiber {
        let stack = stack::acquire(64 * 1024).expect("a 64 KiB stack");
        Fiber::new(stack, entry)
    }

    /// Adds `step` to each word it is resumed with and suspends with it,
    /// and with the pointer it was resumed with one byte on.
    fn adder(step: usize) -> Fiber {
        fiber(move |top, mut word, mut carried| {
            loop {
                // SAFETY: running on the coroutine.
                (word, carried) = unsafe {
                    suspend(
                        top,
                        word + step,
                        carried.cast::<u8>().wrapping_add(1).cast(),
                    )
                };
            }
        })
    }

    #[test]
    fn a_fiber_resumes_and_suspends_with_words() {
        let a = adder(2);
        let b = adder(5);
        let base = [0u8; 16];
        let at = |offset: usize| base[offset..].as_ptr().cast::<()>();
        for round in 0..1000usize {
            // SAFETY: both are suspended on this thread.
            unsafe {
                assert_eq!(
                    resume_with(a.top(), round * 8, at(3)),
                    (round * 8 + 2, at(4))
                );
                assert_eq!(
                    resume_with(b.top(), round * 8, at(7)),
                    (round * 8 + 5, at(8))
                );
            }
        }
    }

    /// The own switch's root ends a backtrace (corosensei's, on the
    /// portable path, goes on into the resumer's frames).
    #[cfg(all(
        target_arch = "x86_64",
        target_family = "unix",
        not(target_vendor = "apple"),
        not(greenlet_portable_switch)
    ))]
    #[test]
    fn a_backtrace_on_a_fiber_ends_at_its_root() {
        let traced = fiber(|top, mut word, _| loop {
            let trace = std::backtrace::Backtrace::force_capture().to_string();
            let frames = trace
                .lines()
                .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
                .count();
            // SAFETY: running on the coroutine.
            (word, _) = unsafe { suspend(top, word + frames, ptr::null()) };
        });
        // SAFETY: suspended on this thread.
        let frames = unsafe { resume_with(traced.top(), 0, ptr::null()).0 };
        // The capture, this closure, the entry; a few more for std's own.
        assert!((2..=12).contains(&frames), "{frames} frames on a fiber");
    }

    #[cfg(all(
        target_arch = "x86_64",
        target_family = "unix",
        not(target_vendor = "apple"),
        not(greenlet_portable_switch)
    ))]
    #[test]
    fn a_hand_off_passes_the_resumer_on() {
        // `to` adds one and suspends back to whoever resumed `from`.
        let to = adder(1);
        let to_top = to.top();
        let from = fiber(move |top, mut word, mut carried| {
            // `to` is suspended whenever `from` runs.
            loop {
                // SAFETY: running on `from`; `to` is suspended.
                (word, carried) = unsafe { hand_off(top, to_top, word * 10, carried) };
            }
        });
        let base = [0u8; 4];
        let at = |offset: usize| base[offset..].as_ptr().cast::<()>();
        for round in 1..1000usize {
            // SAFETY: `from` is suspended (handed off from, or new).
            let back = unsafe { resume_with(from.top(), round * 8, at(1)) };
            assert_eq!(back, (round * 80 + 1, at(2)));
        }
        drop(to);
    }

    #[test]
    fn force_unwinds_the_frames_of_a_suspended_fiber() {
        // Leaked, so that the entry owns nothing to drop (`Fiber::new`).
        let dropped: &'static Cell<usize> = Box::leak(Box::new(Cell::new(0)));
        let unwound: &'static Cell<usize> = Box::leak(Box::new(Cell::new(0)));
        struct Guard(&'static Cell<usize>);
        impl Drop for Guard {
            fn drop(&mut self) {
                self.0.set(self.0.get() + 1);
            }
        }
        let f = fiber(move |top, mut word, _| {
            loop {
                let body = catch_unwind(AssertUnwindSafe(|| {
                    let _guard = Guard(dropped);
                    loop {
                        // SAFETY: running on the coroutine.
                        (word, _) = unsafe { suspend(top, word + 1, ptr::null()) };
                        if word == FORCE {
                            unwind_now();
                        }
                    }
                }));
                let payload = body.expect_err("the body only ends by unwinding");
                assert!(payload.is::<ForcedUnwind>());
                unwound.set(unwound.get() + 1);
                // SAFETY: running on the coroutine.
                (word, _) = unsafe { suspend(top, 0, ptr::null()) };
            }
        });
        // SAFETY: suspended on this thread throughout.
        let resume = |word| unsafe { resume_with(f.top(), word, ptr::null()).0 };
        {
            assert_eq!(resume(10), 11);
            assert_eq!(resume(20), 21);
            assert_eq!(dropped.get(), 0);
            assert_eq!(resume(FORCE), 0);
            assert_eq!((dropped.get(), unwound.get()), (1, 1));
            // It runs a new body after the unwind, as a parked greenlet
            // coroutine does.
            assert_eq!(resume(30), 31);
            assert_eq!(resume(FORCE), 0);
            assert_eq!((dropped.get(), unwound.get()), (2, 2));
        }
    }
}
