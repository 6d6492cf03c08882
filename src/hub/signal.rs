//! Unix signals for green threads: [`Signals`] (a receiver for a set of
//! signals whose [`recv`](Signals::recv) parks) and [`ctrl_c`].
//!
//! Owns the process-wide signal handler, the per-signal delivery counts,
//! the self-pipe and the thread that turns its bytes into wakes, and the
//! two public items. Uses [`block_on`] to park (a `Future` whose waker is
//! the green thread's), `libc` for `sigaction`, `pipe2`, `read`, `write`
//! and the log facade.
//!
//! # How a signal reaches a green thread
//! The handler does only what is async-signal-safe (POSIX lists `write`;
//! atomic operations touch no lock): it adds one to the signal's count and
//! writes a byte to a non-blocking pipe, saving and restoring `errno`. A
//! thread, `hub-signal`, started with the first receiver, blocks reading
//! that pipe; after each read it takes the waiting receivers' wakers under
//! a lock and wakes them. A receiver compares the counts with the ones it
//! last saw under the same lock before it parks, and the count is raised
//! before the byte is written, so a delivery is either seen by that check
//! or followed by a wake: none is lost.
//!
//! The first receiver of a signal installs the handler for it, for the
//! rest of the process: the signal's default action (for `SIGINT`,
//! `SIGTERM`: ending the process) no longer happens, even after every
//! receiver is gone. Deliveries of one signal close together may merge
//! (the kernel merges them too).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

use super::future::block_on;
use crate::diag::diag_warn;

/// Signal numbers this module counts: 1 to 64 (Linux's `SIGRTMAX`).
const SLOTS: usize = 65;

/// Deliveries per signal number, raised by the handler.
static COUNTS: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];

/// The self-pipe's write end (-1 until it exists); the handler writes one
/// byte to it per delivery. Never closed once set.
static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);

/// Why [`Signals::new`] refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SignalError {
    /// No signal was given.
    #[error("Signals::new was given no signal: pass at least one (like libc::SIGTERM)")]
    Empty,
    /// Not a signal number of this system.
    #[error("{signal} is not a signal number (1 to {max})")]
    OutOfRange {
        /// The number given.
        signal: i32,
        /// The largest signal number.
        max: i32,
    },
    /// A signal that cannot be caught, or whose handler must not return.
    #[error("signal {signal} ({name}) cannot be received: {why}")]
    Forbidden {
        /// The number given.
        signal: i32,
        /// Its name.
        name: &'static str,
        /// Why.
        why: &'static str,
    },
    /// The OS refused (the pipe, the thread or `sigaction`).
    #[error("could not {what}: {source}")]
    Os {
        /// What was being done.
        what: &'static str,
        /// What the OS said.
        #[source]
        source: io::Error,
    },
}

impl From<SignalError> for io::Error {
    fn from(e: SignalError) -> io::Error {
        let kind = match &e {
            SignalError::Os { source, .. } => source.kind(),
            _ => io::ErrorKind::InvalidInput,
        };
        io::Error::new(kind, e)
    }
}

/// The receivers' wakers, woken by the `hub-signal` thread.
struct Dispatch {
    waiters: Mutex<HashMap<usize, Waker>>,
    next_id: AtomicUsize,
    /// Signals whose handler is installed.
    installed: Mutex<[bool; SLOTS]>,
}

fn dispatch() -> Result<&'static Dispatch, SignalError> {
    static DISPATCH: OnceLock<Result<Dispatch, String>> = OnceLock::new();
    let d = DISPATCH.get_or_init(|| start().map_err(|e| e.to_string()));
    d.as_ref().map_err(|reason| SignalError::Os {
        what: "start the signal thread",
        source: io::Error::other(reason.clone()),
    })
}

/// Make the self-pipe and start the thread that reads it.
fn start() -> Result<Dispatch, SignalError> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(SignalError::Os {
            what: "create the signal pipe",
            source: io::Error::last_os_error(),
        });
    }
    let [read_end, write_end] = fds;
    // The handler must never block: its end is non-blocking (a full pipe
    // already holds a byte that will wake the thread).
    if let Err(source) = super::net::set_nonblocking(write_end) {
        return Err(SignalError::Os {
            what: "make the signal pipe non-blocking",
            source,
        });
    }
    PIPE_WRITE.store(write_end, Ordering::SeqCst);
    std::thread::Builder::new()
        .name("hub-signal".into())
        .spawn(move || read_loop(read_end))
        .map_err(|source| SignalError::Os {
            what: "start the hub-signal thread",
            source,
        })?;
    Ok(Dispatch {
        waiters: Mutex::new(HashMap::new()),
        next_id: AtomicUsize::new(0),
        installed: Mutex::new([false; SLOTS]),
    })
}

/// The `hub-signal` thread: wake every waiting receiver after each read.
fn read_loop(fd: libc::c_int) {
    let mut buf = [0u8; 64];
    loop {
        // SAFETY: `buf` is valid for writes of its length; `fd` is the
        // pipe's read end, owned by this thread and never closed.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            diag_warn!(
                "hub::signal: reading the signal pipe failed: {e}; signals are no longer delivered"
            );
            return;
        }
        let Ok(d) = dispatch() else { return };
        let woken: Vec<Waker> = d.waiters.lock().drain().map(|(_, w)| w).collect();
        for w in woken {
            w.wake();
        }
    }
}

/// The handler: count the delivery and write a byte to the self-pipe.
extern "C" fn on_signal(signal: libc::c_int) {
    // SAFETY: __errno_location returns this thread's errno, valid for the
    // thread's life; reading and restoring it keeps the interrupted code's
    // value.
    let errno = unsafe { *libc::__errno_location() };
    if let Some(count) = usize::try_from(signal).ok().and_then(|s| COUNTS.get(s)) {
        count.fetch_add(1, Ordering::SeqCst);
    }
    let fd = PIPE_WRITE.load(Ordering::SeqCst);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: write(2) is async-signal-safe; `byte` is valid for one
        // byte; `fd` is the pipe's write end, never closed once stored.
        unsafe { libc::write(fd, std::ptr::from_ref(&byte).cast(), 1) };
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Install [`on_signal`] for `signal` (once per process).
fn install(d: &Dispatch, signal: i32) -> Result<(), SignalError> {
    let mut installed = d.installed.lock();
    let slot = usize::try_from(signal).unwrap_or(0);
    if installed[slot] {
        return Ok(());
    }
    // SAFETY: an all-zero sigaction is a valid value (no flags, empty
    // mask), filled in below.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
    action.sa_flags = libc::SA_RESTART;
    // SAFETY: `action.sa_mask` is a valid sigset_t to empty.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    // SAFETY: `action` is a valid sigaction whose handler only does
    // async-signal-safe work; a null old action is allowed.
    if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
        return Err(SignalError::Os {
            what: "install the signal handler",
            source: io::Error::last_os_error(),
        });
    }
    installed[slot] = true;
    Ok(())
}

/// Refuse what cannot be received.
fn check(signal: i32) -> Result<(), SignalError> {
    let max = libc::SIGRTMAX();
    if signal < 1 || signal > max || usize::try_from(signal).map_or(true, |s| s >= SLOTS) {
        return Err(SignalError::OutOfRange { signal, max });
    }
    let forbidden = |name, why| Err(SignalError::Forbidden { signal, name, why });
    match signal {
        libc::SIGKILL => forbidden("SIGKILL", "the kernel does not let it be caught"),
        libc::SIGSTOP => forbidden("SIGSTOP", "the kernel does not let it be caught"),
        libc::SIGSEGV => forbidden("SIGSEGV", "a fault signal: the faulting code cannot go on"),
        libc::SIGBUS => forbidden("SIGBUS", "a fault signal: the faulting code cannot go on"),
        libc::SIGILL => forbidden("SIGILL", "a fault signal: the faulting code cannot go on"),
        libc::SIGFPE => forbidden("SIGFPE", "a fault signal: the faulting code cannot go on"),
        _ => Ok(()),
    }
}

/// A receiver for a set of signals: [`recv`](Self::recv) parks the calling
/// green thread (blocks a plain thread) until one of them is delivered to
/// the process, and returns which. Every receiver sees every delivery
/// made after it was created. See the [module docs](self) for what
/// installing the handler changes.
///
/// ```
/// use greenlet::hub::{self, signal::Signals};
/// hub::run(|| {
///     let mut signals = Signals::new(&[libc::SIGUSR2]).unwrap();
///     let waiter = hub::spawn(move || signals.recv());
///     hub::sleep(std::time::Duration::from_millis(10));
///     // SAFETY: sending a signal to this process, whose handler is ours.
///     unsafe { libc::kill(libc::getpid(), libc::SIGUSR2) };
///     assert_eq!(waiter.join().unwrap(), libc::SIGUSR2);
/// })
/// .unwrap();
/// ```
pub struct Signals {
    signals: Vec<i32>,
    seen: Vec<u64>,
    id: usize,
    dispatch: &'static Dispatch,
}

impl Signals {
    /// A receiver for `signals` (installing the handler for each the
    /// first time). The numbers are the platform's, as the `libc` crate
    /// names them (`libc::SIGTERM`): a program that names signals adds
    /// `libc` to its own dependencies.
    ///
    /// # Errors
    /// [`SignalError`]: no signal given, a number out of range, a signal
    /// that cannot be caught or must not be (`SIGKILL`, `SIGSTOP`,
    /// `SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE`), or the OS's refusal.
    ///
    /// ```
    /// use greenlet::hub::signal::{SignalError, Signals};
    /// assert!(matches!(Signals::new(&[libc::SIGKILL]), Err(SignalError::Forbidden { .. })));
    /// assert!(matches!(Signals::new(&[0]), Err(SignalError::OutOfRange { .. })));
    /// assert!(matches!(Signals::new(&[]), Err(SignalError::Empty)));
    /// ```
    pub fn new(signals: &[i32]) -> Result<Signals, SignalError> {
        if signals.is_empty() {
            return Err(SignalError::Empty);
        }
        for &s in signals {
            check(s)?;
        }
        let d = dispatch()?;
        let mut set: Vec<i32> = signals.to_vec();
        set.sort_unstable();
        set.dedup();
        for &s in &set {
            install(d, s)?;
        }
        let seen = set.iter().map(|&s| count(s)).collect();
        Ok(Signals {
            signals: set,
            seen,
            id: d.next_id.fetch_add(1, Ordering::Relaxed),
            dispatch: d,
        })
    }

    /// The signals it receives, sorted.
    ///
    /// ```
    /// let s = greenlet::hub::signal::Signals::new(&[libc::SIGHUP, libc::SIGUSR1]).unwrap();
    /// assert_eq!(s.signals(), &[libc::SIGHUP, libc::SIGUSR1]);
    /// ```
    pub fn signals(&self) -> &[i32] {
        &self.signals
    }

    /// Park until one of its signals has been delivered since the last
    /// `recv` (or since the receiver was made), and return it. A parking
    /// point.
    ///
    /// ```
    /// let mut s = greenlet::hub::signal::Signals::new(&[libc::SIGUSR1]).unwrap();
    /// // SAFETY: raising a signal whose handler is ours.
    /// unsafe { libc::raise(libc::SIGUSR1) };
    /// assert_eq!(s.recv(), libc::SIGUSR1);
    /// ```
    pub fn recv(&mut self) -> i32 {
        block_on(Recv { signals: self })
    }

    /// The first of its signals delivered since the last look, if any
    /// (without waiting).
    ///
    /// ```
    /// let mut s = greenlet::hub::signal::Signals::new(&[libc::SIGUSR1]).unwrap();
    /// assert_eq!(s.try_recv(), None);
    /// ```
    pub fn try_recv(&mut self) -> Option<i32> {
        for (i, &s) in self.signals.iter().enumerate() {
            let now = count(s);
            if now != self.seen[i] {
                self.seen[i] = now;
                return Some(s);
            }
        }
        None
    }
}

impl Signals {
    /// Whether one of its signals came since the last look (what
    /// [`try_recv`](Self::try_recv) would return), without taking it.
    pub(crate) fn is_ready(&self) -> bool {
        self.signals
            .iter()
            .zip(&self.seen)
            .any(|(&s, &seen)| count(s) != seen)
    }

    /// Watch it for [`select`](crate::hub::select()): `waker` is woken
    /// when one of its signals comes, until the watch drops.
    pub(crate) fn watch(&self, waker: Waker) -> SignalWatch<'_> {
        self.dispatch.waiters.lock().insert(self.id, waker);
        SignalWatch { signals: self }
    }
}

/// A [`Signals`] watched by `select`; dropping it ends the watch.
pub(crate) struct SignalWatch<'a> {
    signals: &'a Signals,
}

impl Drop for SignalWatch<'_> {
    fn drop(&mut self) {
        let s = self.signals;
        s.dispatch.waiters.lock().remove(&s.id);
    }
}

fn count(signal: i32) -> u64 {
    usize::try_from(signal)
        .ok()
        .and_then(|s| COUNTS.get(s))
        .map_or(0, |c| c.load(Ordering::SeqCst))
}

/// [`Signals::recv`] as a future.
struct Recv<'a> {
    signals: &'a mut Signals,
}

impl Future for Recv<'_> {
    type Output = i32;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<i32> {
        let this = self.get_mut();
        let d = this.signals.dispatch;
        let mut waiters = d.waiters.lock();
        // Under the lock the `hub-signal` thread takes to wake: a count
        // raised after this look is followed by a wake of this waker.
        if let Some(s) = this.signals.try_recv() {
            waiters.remove(&this.signals.id);
            return Poll::Ready(s);
        }
        waiters.insert(this.signals.id, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        self.dispatch.waiters.lock().remove(&self.id);
    }
}

impl fmt::Debug for Signals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signals")
            .field("signals", &self.signals)
            .finish()
    }
}

/// Park until the process receives `SIGINT` (Ctrl-C in a terminal). From
/// the first call on, `SIGINT` no longer ends the process by itself.
///
/// # Errors
/// The OS's refusal to install the handler or start its thread.
///
/// ```
/// use greenlet::hub::{self, signal};
/// hub::run(|| {
///     let waiter = hub::spawn(|| signal::ctrl_c().unwrap());
///     while !matches!(waiter.state(), hub::TaskState::Parked(_)) {
///         hub::yield_now();
///     }
///     // SAFETY: raising SIGINT, whose handler ctrl_c installed.
///     unsafe { libc::kill(libc::getpid(), libc::SIGINT) };
///     waiter.join().unwrap();
/// })
/// .unwrap();
/// ```
pub fn ctrl_c() -> Result<(), SignalError> {
    Signals::new(&[libc::SIGINT])?.recv();
    Ok(())
}
