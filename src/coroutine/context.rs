//! The stack switch itself: save the running context's registers and stack
//! pointer, load another's, go on there, with two words in registers: the
//! word (a record's address, or [`FORCE`]) and a [`Carried`] pointer
//! (where the switch protocol left the payload; opaque here).
//!
//! Owns [`resume_with`] (call-like: the target will come back here when it
//! suspends), [`suspend`] (back to whoever last resumed the target),
//! [`hand_off`] (from one greenlet's stack straight to another's: the
//! second inherits the first's resumer, so one stack switch instead of two
//! through the dispatcher), [`prime`] (a new coroutine's first park) and
//! [`FORCE`] (the word a forced unwind carries) with [`unwind_now`].
//!
//! A coroutine's two saved words live in its [`Top`] (the top slot of its
//! stack, `fiber.rs`): `sp`, where its own context is saved while it is
//! suspended, and `link`, where its resumer's context is saved while it
//! runs. Uses corosensei for the stack's first frames only: `Fiber::new`
//! makes the coroutine with corosensei and resumes it once with corosensei's
//! own resume; its entry parks at once ([`prime`]), and from then on only
//! this file switches it.
//!
//! On x86_64 Unix the switch is inline assembly: a suspended context is
//! three words on its own stack (the address to go on at, then `rbx` and
//! `rbp`), the other callee-saved registers being saved by the compiler
//! around the switch (they are declared clobbered), and its stack pointer
//! in `sp` or `link`; the word travels in `rdi`, the pointer in `rsi`.
//! [`prime`]'s exit is corosensei 0.3.4's suspend
//! (its `switch_yield`): it goes through the parent link corosensei's
//! entry trampoline wrote (the address of the `Yielder` it hands the entry
//! closure) and leaves the coroutine's stack pointer in `rsi` for
//! corosensei's resume, which is why Cargo.toml pins corosensei exactly;
//! this file's unit tests and the check in `Fiber::new` fail loudly if
//! that stops holding. Elsewhere every switch is corosensei's asymmetric
//! pair, the pointer going through a thread-local beside it, and there is
//! no [`hand_off`]: a greenlet hands control to another through the
//! dispatcher on main's stack (`switch::dispatch_loop`).

use corosensei::Yielder;

use super::fiber::Top;

/// The pointer a switch carries besides its word: the switch protocol's
/// (where the payload in flight lies, `switch.rs`); only passed on here.
pub(crate) type Carried = *const ();

#[cfg(not(all(target_arch = "x86_64", target_family = "unix")))]
thread_local! {
    /// The pointer carried through corosensei's switch, which carries one
    /// word only (the fallback): set before each switch, read right after
    /// it, on the one thread that switches.
    static CARRIED: std::cell::Cell<Carried> = const { std::cell::Cell::new(std::ptr::null()) };
}

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

/// A new coroutine's first park, from its entry (resumed by corosensei's
/// resume in `Fiber::new`): record where its context is saved and return to
/// that resume; returns the word and pointer of its first real
/// [`resume_with`] or [`hand_off`].
///
/// # Safety
/// Called once, first thing, by the entry closure of the coroutine whose
/// top is `top`, with the yielder corosensei handed it.
#[inline(always)]
pub(crate) unsafe fn prime(top: *mut Top, yielder: &Yielder<usize, usize>) -> (usize, Carried) {
    #[cfg(all(target_arch = "x86_64", target_family = "unix"))]
    // SAFETY: the parent link (the yielder's address) holds the stack
    // pointer of corosensei's resume in `Fiber::new`, which waits in its
    // `switch_and_link`: its frame there is the saved `rbp` at that address,
    // then the address to return to, then the saved `rbx`, and it takes the
    // coroutine's stack pointer in `rsi` and the yielded word in `rdi`
    // (corosensei 0.3.4's x86_64 protocol, pinned). This coroutine's own
    // context is saved as `switch` saves it, so the next `switch` into it
    // goes on at label 2, with its word in `rdi` and pointer in `rsi`.
    unsafe {
        (*top).link = yielder as *const Yielder<usize, usize> as usize;
        let word: usize;
        let carried: Carried;
        core::arch::asm!(
            "push rbp",
            "push rbx",
            "lea rax, [rip + 2f]",
            "push rax",
            "mov [rcx], rsp",
            "mov rsi, rsp",
            "mov rsp, [rdx]",
            "pop rbp",
            "ret",
            "2:",
            "pop rbx",
            "pop rbp",
            inlateout("rdi") 0usize => word,
            in("rcx") std::ptr::addr_of_mut!((*top).sp),
            in("rdx") yielder as *const Yielder<usize, usize>,
            lateout("rsi") carried,
            lateout("r12") _, lateout("r13") _, lateout("r14") _, lateout("r15") _,
            clobber_abi("sysv64"),
        );
        (word, carried)
    }
    #[cfg(not(all(target_arch = "x86_64", target_family = "unix")))]
    // SAFETY: `top` is this coroutine's (caller); the yielder lives as long
    // as the coroutine (it is its parent link) and is used only from it.
    unsafe {
        (*top).link = yielder as *const Yielder<usize, usize> as usize;
        let word = yielder.suspend(0);
        (word, CARRIED.with(std::cell::Cell::get))
    }
}

/// The frame a primed coroutine's parent link points to from then on
/// ([`end_backtraces`]): the saved `rbp`, return address and `rbx` that
/// corosensei's entry trampoline tells an unwinder to read there, all zero,
/// so that a backtrace taken on the coroutine ends at its entry.
#[cfg(all(target_arch = "x86_64", target_family = "unix"))]
static END_FRAME: [usize; 3] = [0; 3];

/// Point the parent link of `top`'s coroutine, just primed, at
/// [`END_FRAME`]. corosensei's entry trampoline describes its caller to
/// unwinders (a backtrace, a debugger) as the frame the parent link points
/// to; corosensei updates the link at every resume, but after the priming
/// only this file switches the coroutine, and the link would point forever
/// into the stack of whoever made it, a frame long gone (or a stack since
/// unmapped). A backtrace taken in a greenlet ends at its entry instead.
///
/// # Safety
/// `top`'s coroutine was just primed ([`prime`] saved the link's address).
#[inline(always)]
pub(crate) unsafe fn end_backtraces(top: *mut Top) {
    #[cfg(all(target_arch = "x86_64", target_family = "unix"))]
    // SAFETY: `link` holds the parent link's address (written by `prime`,
    // not yet overwritten: the coroutine was not resumed since), a word on
    // the coroutine's stack that nothing reads but an unwinder.
    unsafe {
        *((*top).link as *mut usize) = END_FRAME.as_ptr() as usize;
    }
    #[cfg(not(all(target_arch = "x86_64", target_family = "unix")))]
    // corosensei keeps the link current at every resume there.
    let _ = top;
}

/// Whether [`prime`] ran on `top`'s coroutine (it saved what a switch into
/// it needs).
///
/// # Safety
/// `top` is a fiber's, written by `Fiber::new`.
#[inline(always)]
pub(crate) unsafe fn primed(top: *mut Top) -> bool {
    // SAFETY: guaranteed by the caller; a short read.
    unsafe {
        #[cfg(all(target_arch = "x86_64", target_family = "unix"))]
        let saved = (*top).sp;
        #[cfg(not(all(target_arch = "x86_64", target_family = "unix")))]
        let saved = (*top).link;
        saved != 0
    }
}

/// Go on in the suspended coroutine whose top is `top`, with `word` and
/// `carried`; returns the word and pointer it (or a coroutine it handed off
/// to) suspends with.
///
/// # Safety
/// `top` is a live coroutine's, suspended (by [`suspend`], [`hand_off`] or
/// [`prime`]) and on this thread; its frames stay valid until it suspends.
#[inline(always)]
pub(crate) unsafe fn resume_with(top: *mut Top, word: usize, carried: Carried) -> (usize, Carried) {
    #[cfg(all(target_arch = "x86_64", target_family = "unix"))]
    // SAFETY: guaranteed by the caller: `sp` is the coroutine's saved
    // context; ours is saved in its `link`, where its suspend finds it.
    unsafe {
        switch(
            word,
            carried,
            std::ptr::addr_of_mut!((*top).link),
            (*top).sp,
        )
    }
    #[cfg(not(all(target_arch = "x86_64", target_family = "unix")))]
    // SAFETY: guaranteed by the caller; the coroutine never returns.
    unsafe {
        CARRIED.with(|c| c.set(carried));
        match (*top).co().resume(word) {
            corosensei::CoroutineResult::Yield(word) => (word, CARRIED.with(std::cell::Cell::get)),
            corosensei::CoroutineResult::Return(never) => match never {},
        }
    }
}

/// Suspend the running coroutine (whose top is `top`) with `word` and
/// `carried`, back to whoever last resumed it (or the one it inherited the
/// resumer from); returns the word and pointer it is resumed with.
///
/// # Safety
/// The caller runs on `top`'s coroutine.
#[inline(always)]
pub(crate) unsafe fn suspend(top: *mut Top, word: usize, carried: Carried) -> (usize, Carried) {
    #[cfg(all(target_arch = "x86_64", target_family = "unix"))]
    // SAFETY: we run on `top`'s coroutine, so `link` is the context that
    // resumed it (or handed its resumer on), suspended in `switch`.
    unsafe {
        switch(
            word,
            carried,
            std::ptr::addr_of_mut!((*top).sp),
            (*top).link,
        )
    }
    #[cfg(not(all(target_arch = "x86_64", target_family = "unix")))]
    // SAFETY: `link` is the coroutine's yielder (set by `prime`), and we run
    // on that coroutine.
    unsafe {
        CARRIED.with(|c| c.set(carried));
        let word = (*((*top).link as *const Yielder<usize, usize>)).suspend(word);
        (word, CARRIED.with(std::cell::Cell::get))
    }
}

/// From the running coroutine (`from`) straight to the suspended `to`, with
/// `word` and `carried`: `to` inherits `from`'s resumer, so its next
/// [`suspend`] goes back there. Returns the word and pointer `from` is
/// resumed with later.
///
/// # Safety
/// The caller runs on `from`'s coroutine; `to` is another live coroutine of
/// this thread, suspended.
#[cfg(all(target_arch = "x86_64", target_family = "unix"))]
#[inline(always)]
pub(crate) unsafe fn hand_off(
    from: *mut Top,
    to: *mut Top,
    word: usize,
    carried: Carried,
) -> (usize, Carried) {
    // SAFETY: guaranteed by the caller: `from.link` is the resumer's saved
    // context, moved to `to`, and `to.sp` its saved one.
    unsafe {
        (*to).link = (*from).link;
        switch(word, carried, std::ptr::addr_of_mut!((*from).sp), (*to).sp)
    }
}

/// Save the running context at `*save` and go on in the one saved at `to`,
/// handing it `word` and `carried`; returns the two handed back when some
/// context goes on here.
///
/// # Safety
/// `to` is a context saved by this function or by [`prime`], not resumed
/// since, whose stack is alive; `save` is where whoever goes on here later
/// finds this one.
#[cfg(all(target_arch = "x86_64", target_family = "unix"))]
#[inline(always)]
unsafe fn switch(word: usize, carried: Carried, save: *mut usize, to: usize) -> (usize, Carried) {
    let out: usize;
    let carried_out: Carried;
    // SAFETY: guaranteed by the caller. The saved context is the address of
    // label 2, `rbx` and `rbp` on this stack (pushed here, popped at label 2
    // when a switch goes on here); every other register is declared
    // clobbered, so the compiler saves what it needs around the switch.
    // Without `nostack`, `rsp` is aligned and no red zone is in use.
    unsafe {
        core::arch::asm!(
            "push rbp",
            "push rbx",
            "lea rax, [rip + 2f]",
            "push rax",
            "mov [rdx], rsp",
            "mov rsp, rcx",
            "pop rax",
            "jmp rax",
            "2:",
            "pop rbx",
            "pop rbp",
            inlateout("rdi") word => out,
            inlateout("rsi") carried => carried_out,
            in("rdx") save,
            in("rcx") to,
            lateout("r12") _, lateout("r13") _, lateout("r14") _, lateout("r15") _,
            clobber_abi("sysv64"),
        );
    }
    (out, carried_out)
}

#[cfg(test)]
mod tests {
    //! The protocol against corosensei 0.3.4's first entry, on fibers whose
    //! entries are these tests' own loops (never returning, never letting a
    //! panic out: see `switch::run_bodies`).

    use std::cell::Cell;
    use std::convert::Infallible;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::ptr;
    use std::rc::Rc;

    use super::*;
    use crate::coroutine::fiber::Fiber;
    use crate::coroutine::stack;

    fn fiber(
        entry: impl FnOnce(*mut Top, &Yielder<usize, usize>) -> Infallible + 'static,
    ) -> Fiber {
        let stack = stack::acquire(64 * 1024).expect("a 64 KiB stack");
        Fiber::new(stack, entry)
    }

    /// Adds `step` to each word it is resumed with and suspends with it,
    /// and with the pointer it was resumed with one byte on.
    fn adder(step: usize) -> Fiber {
        fiber(move |top, yielder| {
            // SAFETY: first thing on the coroutine; then running on it.
            let (mut word, mut carried) = unsafe { prime(top, yielder) };
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
    fn a_primed_fiber_resumes_and_suspends_with_words() {
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

    #[cfg(all(target_arch = "x86_64", target_family = "unix"))]
    #[test]
    fn a_backtrace_on_a_primed_fiber_ends_at_its_entry() {
        let traced = fiber(|top, yielder| {
            // SAFETY: first thing on the coroutine; then running on it.
            let (mut word, _) = unsafe { prime(top, yielder) };
            loop {
                let trace = std::backtrace::Backtrace::force_capture().to_string();
                // SAFETY: running on the coroutine.
                (word, _) = unsafe { suspend(top, word + trace.lines().count(), ptr::null()) };
            }
        });
        // SAFETY: just primed, not resumed: `link` still holds the parent
        // link's address, a word on the fiber's stack.
        let link = unsafe { *((*traced.top()).link as *const usize) };
        assert_eq!(link, END_FRAME.as_ptr() as usize);
        // SAFETY: suspended on this thread.
        let lines = unsafe { resume_with(traced.top(), 0, ptr::null()).0 };
        assert!(lines > 0, "a backtrace with frames");
    }

    #[cfg(all(target_arch = "x86_64", target_family = "unix"))]
    #[test]
    fn a_hand_off_passes_the_resumer_on() {
        // `to` adds one and suspends back to whoever resumed `from`.
        let to = adder(1);
        let to_top = to.top();
        let from = fiber(move |top, yielder| {
            // SAFETY: first thing on the coroutine; then running on it, and
            // `to` is suspended whenever `from` runs.
            let (mut word, mut carried) = unsafe { prime(top, yielder) };
            loop {
                // SAFETY: running on `from`; `to` is suspended.
                (word, carried) = unsafe { hand_off(top, to_top, word * 10, carried) };
            }
        });
        let base = [0u8; 4];
        let at = |offset: usize| base[offset..].as_ptr().cast::<()>();
        for round in 1..1000usize {
            // SAFETY: `from` is suspended (handed off from, or primed).
            let back = unsafe { resume_with(from.top(), round * 8, at(1)) };
            assert_eq!(back, (round * 80 + 1, at(2)));
        }
        drop(to);
    }

    #[test]
    fn force_unwinds_the_frames_of_a_suspended_fiber() {
        let dropped = Rc::new(Cell::new(0));
        let unwound = Rc::new(Cell::new(0));
        struct Guard(Rc<Cell<usize>>);
        impl Drop for Guard {
            fn drop(&mut self) {
                self.0.set(self.0.get() + 1);
            }
        }
        let (d, u) = (Rc::clone(&dropped), Rc::clone(&unwound));
        let f = fiber(move |top, yielder| {
            // SAFETY: first thing on the coroutine; then running on it.
            let (mut word, _) = unsafe { prime(top, yielder) };
            loop {
                let body = catch_unwind(AssertUnwindSafe(|| {
                    let _guard = Guard(Rc::clone(&d));
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
                u.set(u.get() + 1);
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
