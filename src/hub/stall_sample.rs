//! The registers of a worker thread that does not come back to its hub,
//! taken by a signal: the watchdog queues [`sample_signal`] to that thread
//! ([`sample`]) and the handler, running on it, copies the interrupted
//! instruction, stack and frame pointers from its `ucontext` into static
//! atomics, which the watchdog then reads. The stack itself is read and
//! unwound off that thread (`stall_unwind`).
//!
//! # Why this is sound
//! The handler does only async-signal-safe work (signal-safety(7)): it
//! reads the `siginfo_t` and `ucontext_t` the kernel passes to an
//! `SA_SIGINFO` handler (sigaction(2)), calls `getpid`, and loads and
//! stores lock-free atomics of a `static` (plain loads and stores on
//! x86_64: no lock, no allocation, nothing another thread could hold).
//! It runs on the thread's alternate signal stack where it has one
//! (`SA_ONSTACK`; every thread that runs greenlets gets one, see
//! `coroutine::stack`), so a green thread near the end of its stack is not
//! pushed over it by the signal frame. The slot is a `static`, so a late
//! delivery (after the watchdog stopped waiting) writes to live memory;
//! each request has a number of its own, carried in the signal's value, and
//! the handler writes only for the request being waited for, so a late or
//! foreign delivery changes nothing the watchdog reads. The signal is
//! queued with `rt_tgsigqueueinfo(2)` to the worker's kernel thread id
//! (recorded by the worker itself at its start, `Counters::note_thread`),
//! in this process only.
//!
//! # What it costs
//! Nothing until a stall is reported: the handler is installed at the first
//! sample. A sample interrupts the stalled thread once: a system call it is
//! blocked in is restarted (`SA_RESTART`), except those that never are
//! after a handler (`poll`, `epoll_wait`, `nanosleep` and others listed in
//! signal(7)), which return `EINTR` as for any other signal.
//!
//! The signal is taken only if the program left its disposition at the
//! default; otherwise nothing is sampled and the report says so.
//!
//! Owns: the signal, its handler, the static slot and [`sample`]. Uses
//! `libc` only.

use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The registers a stalled thread was interrupted at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Regs {
    /// Instruction pointer.
    pub(crate) pc: u64,
    /// Stack pointer.
    pub(crate) sp: u64,
    /// Frame pointer (`rbp`).
    pub(crate) bp: u64,
}

/// The signal queued to a stalled worker: the third-highest real-time
/// signal (`SIGRTMAX() - 2`), which neither Rust's runtime nor glibc uses.
pub(crate) fn sample_signal() -> libc::c_int {
    libc::SIGRTMAX() - 2
}

/// How long [`sample`] waits for the handler to run: a thread in an
/// uninterruptible sleep (a disk read) takes the signal only after it, and
/// on a loaded machine the stalled thread may wait that long for a CPU.
/// Longer delays the watchdog's other checks by as much at most, and only
/// when the signal is not taken.
pub(crate) const SAMPLE_WITHIN: Duration = Duration::from_secs(1);

/// The slot the handler fills: the request it is for (`want`), the
/// registers, and the request they answer (`done`, stored last).
struct Slot {
    want: AtomicU64,
    done: AtomicU64,
    pc: AtomicU64,
    sp: AtomicU64,
    bp: AtomicU64,
}

static SLOT: Slot = Slot {
    want: AtomicU64::new(0),
    done: AtomicU64::new(0),
    pc: AtomicU64::new(0),
    sp: AtomicU64::new(0),
    bp: AtomicU64::new(0),
};

/// One request at a time, process-wide (every runtime's watchdog), and the
/// number of the last one.
static REQUESTS: Mutex<u64> = Mutex::new(0);

/// Whether the handler is installed (`Err`: why it is not).
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();

/// The signal handler (see the module doc for why each step is
/// async-signal-safe).
extern "C" fn on_sample(
    _signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    if info.is_null() || context.is_null() {
        return;
    }
    // SAFETY: an `SA_SIGINFO` handler gets a valid `siginfo_t` (sigaction(2));
    // `si_pid` and `si_value` are the fields of a queued signal, which
    // `si_code == SI_QUEUE` says this is (and, for our own requests, what
    // `sample` wrote); getpid(2) is async-signal-safe.
    let (code, pid, value) = unsafe {
        (
            (*info).si_code,
            (*info).si_pid(),
            (*info).si_value().sival_ptr as usize as u64,
        )
    };
    // SAFETY: as above.
    if code != libc::SI_QUEUE || pid != unsafe { libc::getpid() } {
        return;
    }
    if value == 0 || value != SLOT.want.load(Ordering::Acquire) {
        return;
    }
    // SAFETY: the third argument of an `SA_SIGINFO` handler points at the
    // interrupted context, a `ucontext_t` (sigaction(2)); on x86_64 Linux
    // its `uc_mcontext.gregs` holds the general registers by `REG_*` index.
    let (pc, sp, bp) = unsafe {
        let gregs = &(*context.cast::<libc::ucontext_t>()).uc_mcontext.gregs;
        (
            gregs[libc::REG_RIP as usize] as u64,
            gregs[libc::REG_RSP as usize] as u64,
            gregs[libc::REG_RBP as usize] as u64,
        )
    };
    SLOT.pc.store(pc, Ordering::Relaxed);
    SLOT.sp.store(sp, Ordering::Relaxed);
    SLOT.bp.store(bp, Ordering::Relaxed);
    SLOT.done.store(value, Ordering::Release);
}

/// Install the handler if the signal's disposition is the default.
fn install() -> Result<(), String> {
    let signal = sample_signal();
    let mut old = MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: a query (null new action) into a writable `sigaction`.
    if unsafe { libc::sigaction(signal, ptr::null(), old.as_mut_ptr()) } != 0 {
        return Err(format!(
            "signal {signal} could not be queried: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: zero-initialised, and filled in by the successful query.
    let old = unsafe { old.assume_init() };
    if old.sa_sigaction != libc::SIG_DFL {
        return Err(format!(
            "signal {signal} (SIGRTMAX-2), which samples a stalled thread's registers, is used by \
             the program"
        ));
    }
    // SAFETY: zero is a valid `sigaction` (empty mask, no flags), filled in
    // below with a handler of the `SA_SIGINFO` signature.
    let mut new: libc::sigaction = unsafe { MaybeUninit::zeroed().assume_init() };
    new.sa_sigaction = on_sample as *const () as usize;
    new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
    // SAFETY: `sa_mask` is a `sigset_t` of our own.
    unsafe { libc::sigemptyset(&mut new.sa_mask) };
    // SAFETY: installs `on_sample`, which does only async-signal-safe work,
    // for a signal whose disposition was the default.
    if unsafe { libc::sigaction(signal, &new, ptr::null_mut()) } != 0 {
        return Err(format!(
            "signal {signal} could not be taken: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The kernel's `siginfo` of a queued signal (`SI_QUEUE`) on 64-bit Linux
/// (`include/uapi/asm-generic/siginfo.h`: four `int`s, then the sender's
/// pid and uid and the value; 128 bytes in all).
#[repr(C)]
struct QueuedInfo {
    signo: libc::c_int,
    errno: libc::c_int,
    code: libc::c_int,
    pad: libc::c_int,
    pid: libc::pid_t,
    uid: libc::uid_t,
    value: usize,
    rest: [u8; 96],
}

const _: () = assert!(std::mem::size_of::<QueuedInfo>() == 128);

/// The registers of kernel thread `tid` of this process, interrupted by
/// the signal; `Err` says why there are none.
pub(crate) fn sample(tid: i32) -> Result<Regs, String> {
    INSTALLED.get_or_init(install).clone()?;
    let signal = sample_signal();
    let mut last = REQUESTS.lock();
    *last += 1;
    let request = *last;
    SLOT.want.store(request, Ordering::Release);
    // SAFETY: getpid/getuid have no preconditions.
    let (pid, uid) = unsafe { (libc::getpid(), libc::getuid()) };
    let info = QueuedInfo {
        signo: signal,
        errno: 0,
        code: libc::SI_QUEUE,
        pad: 0,
        pid,
        uid,
        value: request as usize,
        rest: [0; 96],
    };
    // SAFETY: rt_tgsigqueueinfo(2) with this process's id, one of its
    // thread ids, a signal whose handler is installed above, and a
    // `siginfo` of the kernel's layout that lives across the call; a
    // thread that is gone makes it fail with ESRCH.
    let sent = unsafe {
        libc::syscall(
            libc::SYS_rt_tgsigqueueinfo,
            pid,
            tid,
            signal,
            ptr::addr_of!(info),
        )
    };
    if sent != 0 {
        return Err(format!(
            "its thread could not be signalled: {}",
            std::io::Error::last_os_error()
        ));
    }
    let until = Instant::now() + SAMPLE_WITHIN;
    while SLOT.done.load(Ordering::Acquire) != request {
        if Instant::now() >= until {
            SLOT.want.store(0, Ordering::Release);
            return Err(format!(
                "its thread did not take the signal within {} ms (in an uninterruptible wait?)",
                SAMPLE_WITHIN.as_millis()
            ));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    SLOT.want.store(0, Ordering::Release);
    Ok(Regs {
        pc: SLOT.pc.load(Ordering::Relaxed),
        sp: SLOT.sp.load(Ordering::Relaxed),
        bp: SLOT.bp.load(Ordering::Relaxed),
    })
}
