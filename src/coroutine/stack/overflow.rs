//! Stack-overflow reporting for greenlet stacks.
//!
//! Owns: the process-wide SIGSEGV/SIGBUS handler (installed once, lazily),
//! the handlers it displaced (to which it chains), the per-thread alternate
//! signal stack it runs on when the thread has none, and the overflow message.
//!
//! Uses: `libc` (sigaction, sigaltstack, mmap, write, abort), nothing
//! architecture-specific, and from the parent module the [`Header`] of the
//! stack its finder names for the faulting thread (`running_header`).
//!
//! The handler only does async-signal-safe work: it asks the finder (which
//! reads the thread's own memory) and reads the header, formats into a buffer on
//! its own (alternate) stack, calls write(2) and abort(3). The guard page is
//! the lowest page of the stack's slot, whichever way it was made (a guard
//! region or a `PROT_NONE` page, see `guard`), and its bounds are in the
//! header, so a slot in the middle of a region is recognised like any other.
//! A fault outside the marked stack's guard page is handed to the previous
//! handler (Rust's runtime installs one that reports overflows of thread
//! stacks), or, when there was none, the default action is restored and the
//! handler returns, so that the faulting instruction runs again and the
//! fault kills the process as usual.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use super::{decimal, page_size, running_header, Header};

/// The signals a guard-page hit raises (SIGBUS on some kernels and mappings).
const SIGNALS: [libc::c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];

/// Usable size of an alternate signal stack this module installs. Generous
/// because a chained handler (Rust's) formats its own message on it.
const ALT_STACK_SIZE: usize = 64 * 1024;

/// The action that was installed for one of [`SIGNALS`] before ours.
struct Previous {
    action: UnsafeCell<MaybeUninit<libc::sigaction>>,
    saved: AtomicBool,
}

// SAFETY: `action` is written exactly once, inside `INSTALL.call_once`, before
// `saved` is set with Release ordering and before our handler is installed;
// afterwards it is only read (after an Acquire load of `saved`).
unsafe impl Sync for Previous {}

static PREVIOUS: [Previous; 2] = [
    Previous {
        action: UnsafeCell::new(MaybeUninit::uninit()),
        saved: AtomicBool::new(false),
    },
    Previous {
        action: UnsafeCell::new(MaybeUninit::uninit()),
        saved: AtomicBool::new(false),
    },
];

static INSTALL: Once = Once::new();

/// Installs the fault handler for the whole process, once. Later calls return
/// at once. Installation failures leave the default behaviour (a bare
/// SIGSEGV), which is what the process had before; there is nothing better to
/// fall back to, so they are not reported.
pub(super) fn install_handler() {
    INSTALL.call_once(|| {
        for (slot, &signal) in PREVIOUS.iter().zip(SIGNALS.iter()) {
            let mut old = MaybeUninit::<libc::sigaction>::zeroed();
            // SAFETY: querying (null new action) the current action of a valid
            // signal into a properly sized, writable sigaction.
            if unsafe { libc::sigaction(signal, ptr::null(), old.as_mut_ptr()) } != 0 {
                continue;
            }
            // SAFETY: see `unsafe impl Sync for Previous`: this is the only
            // write, it happens before `saved` is published and before the
            // handler that reads it is installed.
            unsafe { (*slot.action.get()).write(old.assume_init()) };
            slot.saved.store(true, Ordering::Release);

            // SAFETY: an all-zero sigaction is a valid value (empty mask, no
            // flags); the fields we need are filled in below.
            let mut new: libc::sigaction = unsafe { MaybeUninit::zeroed().assume_init() };
            let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                on_fault;
            new.sa_sigaction = handler as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            // SAFETY: `new.sa_mask` is a valid sigset_t we own; `new` is a
            // fully initialised action whose handler has the SA_SIGINFO
            // signature.
            unsafe {
                libc::sigemptyset(&mut new.sa_mask);
                libc::sigaction(signal, &new, ptr::null_mut());
            }
        }
    });
}

/// The SIGSEGV/SIGBUS handler.
extern "C" fn on_fault(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo_t for a SA_SIGINFO handler,
    // and si_addr is meaningful for SIGSEGV and SIGBUS.
    let fault = unsafe { (*info).si_addr() } as usize;
    let header = running_header();
    if !header.is_null() {
        // SAFETY: the finder returns null or the header of a stack that
        // stays mapped while the thread runs on it (`find_running_with`'s
        // contract). Headers are written before a stack is handed out and
        // only the label changes afterwards.
        let header = unsafe { &*header };
        if fault >= header.map_start && fault < header.guard_end {
            let mut message = Message::new();
            compose(&mut message, header, fault);
            message.write_to_stderr();
            // SAFETY: abort(3) is async-signal-safe and does not return.
            unsafe { libc::abort() };
        }
    }
    chain(signal, info, context);
}

/// Hands a fault that is not ours to the handler that was installed before,
/// or restores the default action so that the fault, re-raised when the
/// handler returns, terminates the process.
fn chain(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let index = SIGNALS.iter().position(|&s| s == signal);
    let previous = index
        .map(|i| &PREVIOUS[i])
        .filter(|slot| slot.saved.load(Ordering::Acquire))
        // SAFETY: `saved` was observed true, so the action was initialised
        // and is never written again.
        .map(|slot| unsafe { (*slot.action.get()).assume_init_ref() });
    match previous {
        Some(old) if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN => {
            if old.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: with SA_SIGINFO the stored address is a
                // three-argument handler; we pass the arguments we received.
                let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(old.sa_sigaction) };
                handler(signal, info, context);
            } else {
                // SAFETY: without SA_SIGINFO the stored address is a
                // one-argument handler.
                let handler: extern "C" fn(libc::c_int) =
                    unsafe { std::mem::transmute(old.sa_sigaction) };
                handler(signal);
            }
        }
        _ => restore_default(signal),
    }
}

/// Re-installs SIG_DFL for `signal` (sigaction is async-signal-safe).
fn restore_default(signal: libc::c_int) {
    // SAFETY: an all-zero sigaction with SIG_DFL (0) as handler is the default
    // action; installing it for a valid signal has no other effect.
    unsafe {
        let mut default: libc::sigaction = MaybeUninit::zeroed().assume_init();
        default.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(signal, &default, ptr::null_mut());
    }
}

/// Writes the overflow report for a fault at `fault` in `header`'s guard page.
pub(super) fn compose(out: &mut Message, header: &Header, fault: usize) {
    let size = header.usable_size();
    out.push(b"\ngreenlet ");
    let mut label = [0u8; super::LABEL_CAPACITY];
    let len = header.read_label(&mut label);
    if len == 0 {
        out.push(b"<unnamed>");
    } else {
        out.push(&label[..len]);
    }
    out.push(b" has overflowed its stack (stack size ");
    out.push_decimal(size as u64);
    out.push(b" bytes = ");
    out.push_decimal((size / 1024) as u64);
    out.push(b" KiB; fault at 0x");
    out.push_hex(fault as u64);
    out.push(b" in the guard page)\nfatal runtime error: stack overflow in a greenlet, aborting\n");
}

/// A fixed-size message buffer that formats without allocating.
pub(super) struct Message {
    bytes: [u8; 512],
    len: usize,
}

impl Message {
    pub(super) fn new() -> Self {
        Message {
            bytes: [0; 512],
            len: 0,
        }
    }

    /// Appends `text`, truncating at the end of the buffer.
    pub(super) fn push(&mut self, text: &[u8]) {
        let room = self.bytes.len() - self.len;
        let take = text.len().min(room);
        self.bytes[self.len..self.len + take].copy_from_slice(&text[..take]);
        self.len += take;
    }

    pub(super) fn push_decimal(&mut self, value: u64) {
        let mut buf = [0u8; 20];
        self.push(decimal(value, &mut buf));
    }

    pub(super) fn push_hex(&mut self, value: u64) {
        let mut digits = [0u8; 16];
        let mut at = digits.len();
        let mut rest = value;
        loop {
            at -= 1;
            digits[at] = b"0123456789abcdef"[(rest & 0xf) as usize];
            rest >>= 4;
            if rest == 0 {
                break;
            }
        }
        self.push(&digits[at..]);
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// write(2)s the message to fd 2, retrying on partial writes and EINTR.
    fn write_to_stderr(&self) {
        let mut rest = self.as_bytes();
        while !rest.is_empty() {
            // SAFETY: `rest` is a valid readable buffer of `rest.len()` bytes;
            // write(2) is async-signal-safe.
            let written = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
            if written > 0 {
                rest = &rest[written as usize..];
            } else if written < 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
            {
                continue;
            } else {
                return;
            }
        }
    }
}

/// An alternate signal stack this module installed on the current thread;
/// dropping it uninstalls and unmaps it. `None` inside when the thread
/// already had one (Rust's runtime gives one to the main thread and to the
/// threads it spawns), which is then left alone.
pub(super) struct AltStack {
    mapping: Option<(usize, usize)>,
}

impl AltStack {
    /// Makes sure the calling thread has an alternate signal stack, so that
    /// the handler can run when the faulting stack is exhausted.
    pub(super) fn ensure() -> AltStack {
        let mut current = MaybeUninit::<libc::stack_t>::zeroed();
        // SAFETY: querying (null new stack) into a writable stack_t.
        let queried = unsafe { libc::sigaltstack(ptr::null(), current.as_mut_ptr()) } == 0;
        // SAFETY: zero-initialised and, when the query succeeded, filled in.
        let current = unsafe { current.assume_init() };
        if !queried || current.ss_flags & libc::SS_DISABLE == 0 {
            return AltStack { mapping: None };
        }
        let page = page_size();
        let size = ALT_STACK_SIZE.max(libc::SIGSTKSZ).next_multiple_of(page);
        let len = size + page;
        // SAFETY: a fresh anonymous private mapping; no existing memory is
        // affected.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return AltStack { mapping: None };
        }
        let start = base as usize;
        // SAFETY: the lowest page of our own mapping becomes a guard page;
        // the rest of the mapping is the signal stack handed to the kernel.
        let installed = unsafe {
            libc::mprotect(base, page, libc::PROT_NONE);
            let stack = libc::stack_t {
                ss_sp: (start + page) as *mut libc::c_void,
                ss_flags: 0,
                ss_size: size,
            };
            libc::sigaltstack(&stack, ptr::null_mut()) == 0
        };
        if !installed {
            // SAFETY: the mapping is ours and was not handed to the kernel.
            unsafe { libc::munmap(base, len) };
            return AltStack { mapping: None };
        }
        AltStack {
            mapping: Some((start, len)),
        }
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        let Some((start, len)) = self.mapping else {
            return;
        };
        let page = page_size();
        let mut current = MaybeUninit::<libc::stack_t>::zeroed();
        // SAFETY: querying into a writable stack_t.
        let queried = unsafe { libc::sigaltstack(ptr::null(), current.as_mut_ptr()) } == 0;
        // SAFETY: zero-initialised and, when the query succeeded, filled in.
        let current = unsafe { current.assume_init() };
        if !queried {
            // Cannot tell whether the kernel still uses it: leak it.
            return;
        }
        if current.ss_sp as usize == start + page {
            if current.ss_flags & libc::SS_ONSTACK != 0 {
                return;
            }
            let disable = libc::stack_t {
                ss_sp: ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: disabling the alternate stack of this thread, which
            // is not executing on it (checked above).
            if unsafe { libc::sigaltstack(&disable, ptr::null_mut()) } != 0 {
                return;
            }
        }
        // SAFETY: the kernel no longer refers to the mapping (it was never
        // installed or was just disabled) and nothing else does.
        unsafe { libc::munmap(start as *mut libc::c_void, len) };
    }
}
