//! The x86_64 System V stack switch, the crate's own from a coroutine's
//! first frame to its last: stack initialisation ([`start`]), the root
//! trampoline every coroutine's frames hang from, and the switch
//! ([`resume_with`], [`suspend`], [`hand_off`]), which keeps the
//! floating-point control state (MXCSR and the x87 control word) per
//! coroutine.
//!
//! # A suspended context
//! A context (a coroutine's, or the thread's own stack where main runs) is
//! suspended by `switch`, which pushes three words on its own stack, writes
//! the floating-point control state just below them and stores the stack
//! pointer where the resumer will look for it (a [`Top`]'s `sp` or `link`):
//!
//! ```text
//!   higher addresses
//!   | saved rbp              |
//!   | saved rbx              |
//!   | address to go on at    |  <- saved stack pointer
//!   | MXCSR | x87 CW         |  x87 CW in bytes 0-1, MXCSR in bytes 2-5
//!   lower addresses
//! ```
//!
//! The control word lies in the System V red zone (the 128 bytes below the
//! stack pointer, which signal handlers leave alone): between its store and
//! the stack pointer's move to the other stack nothing else runs on this
//! stack, and a suspended stack is not run on at all, so it stays intact
//! until the context goes on; that saves moving the stack pointer for it.
//! The other callee-saved registers (`r12`-`r15`) are declared clobbered
//! by the inline assembly, so the compiler saves what it needs of them
//! around the switch. Going on in a context loads its stack pointer, pops
//! the address, loads the control state from below it where it differs
//! from the running one, and jumps; the code there pops the rest.
//!
//! The x86_64 System V ABI makes MXCSR's control bits and the x87 control
//! word callee-saved, so a switch, which looks like a call to each side,
//! keeps them: a rounding mode or flush-to-zero set in one greenlet (by
//! `fesetround` in C code it calls, say) is its own, not seen by others,
//! and there again when it is resumed. MXCSR's status flags are not kept
//! (the ABI does not keep them across a call either): the control state is
//! loaded only when its control bits differ from the running context's
//! (then the flags come with it), because `ldmxcsr` and `fldcw` cost more
//! than the compare (measured with the `hot_loops round-trip` driver in
//! paired runs against a switch without them; `benches/RESULTS.md`).
//!
//! # A new coroutine's stack
//! [`start`] writes the entry closure just below the [`Top`] (in the top
//! slot of the stack) and below it a suspended context whose address to go
//! on at is the root trampoline:
//!
//! ```text
//!   | Top (sp, link)            |  top slot of the stack (`fiber.rs`)
//!   | entry closure, 16-aligned |
//!   | (padding)                 |
//!   | enter::<F>                |  the entry function
//!   | closure's address         |
//!   | Top's address             |
//!   | root trampoline           |  <- Top.sp
//!   | MXCSR | x87 CW            |  the starter's, see `inherit_fp_control`
//! ```
//!
//! The first switch into it pops the trampoline's address, loads the
//! control state and jumps there, the stack pointer then 16-aligned on the
//! `Top`'s address. The trampoline clears `rbp` (frame-pointer walkers stop
//! there) and calls `enter::<F>` with the switch's word and pointer (already
//! in `rdi` and `rsi`), the `Top` and the closure; `enter` moves the closure
//! off the stack and runs it. It never returns (the trampoline traps if it
//! did). The trampoline's call-frame information marks its return address
//! undefined: every unwinder (`std::backtrace`, gdb, perf, a panic's) stops
//! there, at the coroutine's root, rather than reading on past the stack's
//! top. A forced unwind is a panic raised inside the coroutine and caught
//! by its body's root (`switch.rs`), never by the trampoline.
//!
//! # Contracts
//! - A context is resumed at most once per suspension, on the thread that
//!   suspended it, while its stack is mapped.
//! - A coroutine's entry never returns and lets no panic out (`enter` is
//!   `extern "sysv64"`: a panic reaching it aborts the process).
//! - A coroutine that is not needed any more is left suspended: its stack
//!   may be released then only if its frames own nothing (`fiber.rs`).

use std::convert::Infallible;
use std::mem;

use super::Carried;

/// A coroutine's state, in the top slot of its stack: where its context is
/// saved while it is suspended (`sp`), and where its resumer's is saved
/// while it runs (`link`). Never moves while the coroutine lives.
#[repr(C)]
pub(crate) struct Top {
    /// The coroutine's saved context while it is suspended.
    pub(crate) sp: usize,
    /// Its resumer's saved context while it runs.
    pub(crate) link: usize,
}

/// The root trampoline's symbol: the crate's version is part of it, so
/// that two semver-incompatible copies of the crate link into one program.
macro_rules! root_symbol {
    () => {
        concat!(
            "greenlet_coroutine_root_",
            env!("CARGO_PKG_VERSION_MAJOR"),
            "_",
            env!("CARGO_PKG_VERSION_MINOR"),
            "_",
            env!("CARGO_PKG_VERSION_PATCH")
        )
    };
}

// The root trampoline (see the module doc): entered by a switch, never by a
// call, with the stack pointer on the `Top`'s address, 16-aligned.
core::arch::global_asm!(
    ".pushsection .text.greenlet_coroutine_root,\"ax\",@progbits",
    ".p2align 4",
    concat!(".globl ", root_symbol!()),
    concat!(".hidden ", root_symbol!()),
    concat!(".type ", root_symbol!(), ",@function"),
    concat!(root_symbol!(), ":"),
    ".cfi_startproc",
    ".cfi_undefined rip",
    "xor ebp, ebp",
    "mov rdx, [rsp]",
    "mov rcx, [rsp + 8]",
    "call [rsp + 16]",
    "ud2",
    ".cfi_endproc",
    concat!(".size ", root_symbol!(), ", . - ", root_symbol!()),
    ".popsection",
);

/// The root trampoline's address.
#[inline(always)]
fn root() -> usize {
    let at: usize;
    // SAFETY: only computes an address (of the trampoline above).
    unsafe {
        core::arch::asm!(
            concat!("lea {at}, [rip + ", root_symbol!(), "]"),
            at = out(reg) at,
            options(pure, nomem, nostack, preserves_flags),
        );
    }
    at
}

/// The running context's floating-point control state as a suspended
/// context keeps it: the x87 control word in bits 0-15, MXCSR in 16-47.
#[inline(always)]
fn fp_control() -> u64 {
    let mut word = 0u64;
    // SAFETY: stores 6 bytes into `word`, a local of 8.
    unsafe {
        core::arch::asm!(
            "fnstcw [{at}]",
            "stmxcsr [{at} + 2]",
            at = in(reg) &mut word,
            options(nostack, preserves_flags),
        );
    }
    word
}

/// Give the suspended coroutine whose top is `top` the running context's
/// floating-point control state, to go on with when it is next resumed: a
/// greenlet starts with the modes of the context that starts it, as in
/// Python's greenlet (whose first run continues the starter's switch), also
/// when it runs on a coroutine a finished greenlet left parked.
///
/// # Safety
/// `top` is a live coroutine's, suspended, on this thread.
#[inline(always)]
pub(crate) unsafe fn inherit_fp_control(top: *mut Top) {
    // SAFETY: guaranteed by the caller: `sp` is its saved context, with
    // the control state in the word below (module doc).
    unsafe { ((*top).sp as *mut u64).sub(1).write(fp_control()) };
}

/// The registers a suspended coroutine goes on with, for an unwinder that
/// reads its stack from another thread: `[pc, sp, rbp]`, where `pc` is the
/// address its switch goes on at, `sp` the stack pointer once the switch
/// has popped its three words and `rbp` the frame pointer it restores (the
/// module doc's layout), which is the state the call-frame information of
/// the function around the switch describes at `pc`. `top` is the
/// coroutine's [`Top`]; `read` reads a word of memory and may fail (the
/// caller reads memory another thread may be changing: every value is
/// only as good as that read), and `None` is returned when one does.
#[cfg(all(feature = "hub", target_os = "linux", target_arch = "x86_64"))]
pub(crate) fn saved_registers(
    top: usize,
    mut read: impl FnMut(usize) -> Option<u64>,
) -> Option<[u64; 3]> {
    let sp = read(top + mem::offset_of!(Top, sp))?;
    let at = usize::try_from(sp).ok()?;
    let pc = read(at)?;
    let rbp = read(at.checked_add(16)?)?;
    Some([pc, sp.checked_add(24)?, rbp])
}

/// Make a coroutine whose state is `top`, in the top slot of a stack whose
/// usable area reaches down to `limit`: its entry closure and first context
/// are written below `top` and `top.sp` points at that context. Nothing
/// runs: the first [`resume_with`] or [`hand_off`] into it calls `entry`
/// with the `Top` and that switch's word and pointer.
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
    const { assert!(mem::size_of::<F>() < 2048 && mem::align_of::<F>() <= 64) };
    let data = (top as usize - mem::size_of::<F>()) & !(mem::align_of::<F>().max(16) - 1);
    // The control word and four words, 8 bytes of padding under the
    // closure, so that the trampoline's stack pointer (on the third word)
    // is 16-aligned.
    let at = data - 48;
    debug_assert!(
        at > limit + 4096,
        "a coroutine's stack is smaller than a page"
    );
    let frame = [
        fp_control() as usize,
        root(),
        top as usize,
        data,
        enter::<F> as unsafe extern "sysv64" fn(usize, Carried, *mut Top, *mut F) -> ! as usize,
    ];
    // SAFETY: guaranteed by the caller: `data` (aligned for `F`) and the
    // frame are below `top`, inside the usable stack, unused.
    unsafe {
        (data as *mut F).write(entry);
        (at as *mut [usize; 5]).write(frame);
        top.write(Top {
            sp: at + 8,
            link: 0,
        });
    }
}

/// A coroutine's first frame, called by the root trampoline with the word
/// and pointer of the first switch into it, its `Top` and its closure.
///
/// # Safety
/// `data` is the closure [`start`] wrote, read once.
unsafe extern "sysv64" fn enter<F>(word: usize, carried: Carried, top: *mut Top, data: *mut F) -> !
where
    F: FnOnce(*mut Top, usize, Carried) -> Infallible,
{
    // SAFETY: guaranteed by the caller (the trampoline, once per coroutine).
    let entry = unsafe { data.read() };
    match entry(top, word, carried) {}
}

/// Go on in the suspended coroutine whose top is `top`, with `word` and
/// `carried`; returns the word and pointer it (or a coroutine it handed off
/// to) suspends with.
///
/// # Safety
/// `top` is a live coroutine's, suspended and on this thread; its frames
/// stay valid until it suspends.
#[inline(always)]
pub(crate) unsafe fn resume_with(top: *mut Top, word: usize, carried: Carried) -> (usize, Carried) {
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
}

/// Suspend the running coroutine (whose top is `top`) with `word` and
/// `carried`, back to whoever last resumed it (or the one it inherited the
/// resumer from); returns the word and pointer it is resumed with.
///
/// # Safety
/// The caller runs on `top`'s coroutine.
#[inline(always)]
pub(crate) unsafe fn suspend(top: *mut Top, word: usize, carried: Carried) -> (usize, Carried) {
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
}

/// From the running coroutine (`from`) straight to the suspended `to`, with
/// `word` and `carried`: `to` inherits `from`'s resumer, so its next
/// [`suspend`] goes back there. Returns the word and pointer `from` is
/// resumed with later.
///
/// # Safety
/// The caller runs on `from`'s coroutine; `to` is another live coroutine of
/// this thread, suspended.
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
/// `to` is a context saved by this function or written by [`start`], not
/// resumed since, whose stack is alive; `save` is where whoever goes on
/// here later finds this one.
#[inline(always)]
unsafe fn switch(word: usize, carried: Carried, save: *mut usize, to: usize) -> (usize, Carried) {
    let out: usize;
    let carried_out: Carried;
    // SAFETY: guaranteed by the caller. The saved context is the module
    // doc's three words on this stack (pushed here, the rest popped at
    // label 2 when a switch goes on here) and the control word below them,
    // in the red zone; every other register is declared clobbered, so the
    // compiler saves what it needs around the switch. Without `nostack`,
    // `rsp` is 16-aligned and the compiler keeps nothing in the red zone
    // here; the flags are not preserved (no `preserves_flags`).
    unsafe {
        core::arch::asm!(
            "push rbp",
            "push rbx",
            "lea rax, [rip + 2f]",
            "push rax",
            "fnstcw [rsp - 8]",
            "stmxcsr [rsp - 6]",
            "mov [rdx], rsp",
            // Each read back as it was stored, which the store buffer
            // forwards (one read across both stores would wait for them).
            "movzx edx, word ptr [rsp - 8]",
            "mov r8d, [rsp - 6]",
            "mov rsp, rcx",
            "pop rax",
            // The bits a switch keeps: all of the x87 control word, and
            // MXCSR's control bits (6-15: denormals are zero, the exception
            // masks, rounding, flush to zero), not its status flags (0-5).
            "cmp dx, [rsp - 16]",
            "jne 3f",
            "xor r8d, [rsp - 14]",
            "test r8d, 0xFFC0",
            "jnz 3f",
            "jmp rax",
            "3:",
            "fldcw [rsp - 16]",
            "ldmxcsr [rsp - 14]",
            "jmp rax",
            "2:",
            "pop rbx",
            "pop rbp",
            inlateout("rdi") word => out,
            inlateout("rsi") carried => carried_out,
            inout("rdx") save => _,
            in("rcx") to,
            lateout("r12") _, lateout("r13") _, lateout("r14") _, lateout("r15") _,
            clobber_abi("sysv64"),
        );
    }
    (out, carried_out)
}
