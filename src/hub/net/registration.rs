//! Readiness glue between a socket and the hub's pollers.
//!
//! Owns: [`Source`] (a non-blocking socket with its lazy registration and
//! its read/write timeouts, and the try–register–park loop every socket
//! operation runs), the per-worker table of registered sockets (a
//! thread-local slab on each worker thread, keyed by the `mio` token), and
//! [`dispatch`], which the worker's poll calls for every event that is not
//! its waker's.
//!
//! Uses the worker (current task, [`Worker::poller`]), `park_green`,
//! `mio` (edge-triggered registration through `SourceFd`) and, under
//! io_uring, the worker's ring (a multishot poll per socket).
//!
//! # The readiness protocol
//! Each registered socket has, per direction (read, write), a readiness
//! sequence number, a list of waiting wakers and a `waiting` flag.
//! [`dispatch`] bumps the number, then, only if the flag is set, takes the
//! list under its lock (clearing the flag) and wakes it once the table is
//! no longer borrowed. An operation reads the number, tries its system
//! call, and on `WouldBlock` takes the list's lock, sets the flag, and
//! re-reads the number: if it moved, readiness came meanwhile and it tries
//! again; else it adds its waker and parks. The bump and the flag's read
//! (dispatch), and the flag's set and the number's re-read (the waiter),
//! are all `SeqCst`, so at least one side sees the other's write: either
//! the waiter sees the new number, or the dispatcher sees the flag and
//! takes the lock, which the waiter holds until its waker is in the list.
//! An edge that arrives between the try and the park is never lost, and a
//! readiness nobody waits for (the write side of an echo, mostly) costs
//! one atomic add and no lock.
//! `mio` registrations are edge-triggered and report the current readiness
//! when made, so registering after the first `WouldBlock` loses nothing
//! either.
//!
//! A stream transfer that moves fewer bytes than asked drained the receive
//! buffer (or filled the send buffer), and so did a read after which the
//! kernel reports nothing left queued (`TCP_INQ`, see [`TcpStream`]'s
//! reads): the next one in that direction waits for the number to move
//! instead of making a futile call first (tokio does the first half). The
//! number is read before the call, so readiness that comes during or after
//! it moves the number past the one the shortcut remembers, wherever the
//! poller runs: a wrong shortcut costs one futile call, never a lost wake.
//! The peer's close and socket errors are sticky per direction (an edge
//! for them may have been consumed with the data's), and turn the shortcut
//! off. `poll(2)` on a plain thread moves no number, so after it the call
//! is tried at once.
//!
//! [`TcpStream`]: super::TcpStream

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
#[cfg(target_os = "linux")]
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::Waker;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Interest, Token};
use parking_lot::Mutex;
use slab::Slab;

#[cfg(target_os = "linux")]
use super::super::driver::{Cqe, Ring, RingRemote, TAG_READY};
use super::super::park::park_green;
use super::super::task_state::Wait;
use super::super::worker::{self, Worker};
use super::error::NetError;

/// Which readiness an operation waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Read = 0,
    Write = 1,
}

/// Readiness state of one registered socket, shared by its waiters and the
/// worker that polls it.
#[derive(Default)]
struct ScheduledIo {
    seq: [AtomicU64; 2],
    /// Per direction: the peer closed that half, or the socket has an
    /// error. Sticky: a call in that direction returns at once from then
    /// on, so no short-transfer shortcut may skip it.
    closed: [AtomicBool; 2],
    /// Per direction: a waker may be in the list (set by a waiter under
    /// the lock, cleared by [`ScheduledIo::ready`] under the lock).
    waiting: [AtomicBool; 2],
    waiters: Mutex<[Waiters; 2]>,
}

/// The wakers waiting for one direction: the first in a slot of its own,
/// so the usual single waiter costs no allocation.
#[derive(Default)]
struct Waiters {
    first: Option<Waker>,
    more: Vec<Waker>,
}

impl Waiters {
    fn add(&mut self, waker: Waker) {
        match &self.first {
            None => self.first = Some(waker),
            Some(w) if w.will_wake(&waker) => {}
            Some(_) => {
                if !self.more.iter().any(|w| w.will_wake(&waker)) {
                    self.more.push(waker);
                }
            }
        }
    }
}

impl ScheduledIo {
    /// Mark `dir` ready (and closed, if `closed`); move its waiters, if
    /// any, into `woken` for the caller to wake.
    #[inline]
    fn ready(&self, dir: Direction, closed: bool, woken: &mut Woken) {
        let d = dir as usize;
        if closed {
            self.closed[d].store(true, Ordering::SeqCst);
        }
        self.seq[d].fetch_add(1, Ordering::SeqCst);
        if !self.waiting[d].load(Ordering::SeqCst) {
            return;
        }
        let mut w = self.waiters.lock();
        self.waiting[d].store(false, Ordering::Relaxed);
        let slot = &mut w[d];
        let first = slot.first.take();
        match dir {
            Direction::Read => woken.read = first,
            Direction::Write => woken.write = first,
        }
        if !slot.more.is_empty() {
            woken.more.append(&mut slot.more);
        }
    }
}

/// The wakers one event took out of a socket's lists, woken after the
/// socket table is no longer borrowed (a woken task's last reference may
/// drop a socket, which frees its slot in that table).
#[derive(Default)]
struct Woken {
    read: Option<Waker>,
    write: Option<Waker>,
    more: Vec<Waker>,
}

impl Woken {
    fn wake(self) {
        if let Some(w) = self.read {
            w.wake();
        }
        if let Some(w) = self.write {
            w.wake();
        }
        if !self.more.is_empty() {
            for w in self.more {
                w.wake();
            }
        }
    }
}

/// How a worker's poller is reached to stop watching a socket dropped on
/// another thread: its `mio` registry (epoll), or the ring's queue of
/// polls to remove (io_uring; only the worker's thread submits).
enum Backend {
    Epoll(mio::Registry),
    #[cfg(target_os = "linux")]
    Uring(Arc<RingRemote>),
}

/// The part of a worker's socket table that other threads reach: its
/// poller's backend (to stop watching a socket dropped elsewhere) and the
/// keys such drops released.
struct WorkerIo {
    backend: Backend,
    released: Mutex<Vec<usize>>,
    thread: ThreadId,
}

/// One registered socket in its worker's table: its state, the
/// generation of its key (io_uring: a completion of an earlier socket's
/// poll under a reused key is told apart by it) and its descriptor.
struct Entry {
    io: Arc<ScheduledIo>,
    gen: u32,
    fd: RawFd,
}

/// A worker's registered sockets, on its own thread.
struct Table {
    slab: Slab<Entry>,
    shared: Arc<WorkerIo>,
    /// The worker's ring, under io_uring: registrations and removals are
    /// submitted to it from this thread.
    #[cfg(target_os = "linux")]
    ring: Option<Rc<Ring>>,
    next_gen: u32,
}

thread_local! {
    static TABLE: RefCell<Option<Table>> = const { RefCell::new(None) };
}

/// Wake the waiters of the socket an event of this worker's poll is for.
/// Called by the worker for every event whose token is not its waker's.
pub(crate) fn dispatch(event: &mio::event::Event) {
    let mut woken = Woken::default();
    let _ = TABLE.try_with(|t| {
        let t = t.borrow();
        let Some(e) = t.as_ref().and_then(|t| t.slab.get(event.token().0)) else {
            return;
        };
        let read_closed = event.is_read_closed() || event.is_error();
        if event.is_readable() || read_closed {
            e.io.ready(Direction::Read, read_closed, &mut woken);
        }
        let write_closed = event.is_write_closed() || event.is_error();
        if event.is_writable() || write_closed {
            e.io.ready(Direction::Write, write_closed, &mut woken);
        }
    });
    woken.wake();
}

/// The ring's token of a registration: its key and its key's generation.
#[cfg(target_os = "linux")]
fn ring_token(key: usize, gen: u32) -> u64 {
    (u64::from(gen & GEN_MASK) << 32) | key as u64
}

/// Generations wrap within 30 bits (the ring's tag takes the top two).
const GEN_MASK: u32 = (1 << 30) - 1;

/// [`dispatch`] for a completion of a socket's multishot poll on the
/// worker's ring: its result is the poll mask (as epoll's, the readiness
/// at the wake-up). A poll that ended (no more completions coming: the
/// completion queue overflowed, or an error) is armed again.
#[cfg(target_os = "linux")]
pub(crate) fn dispatch_ring(c: Cqe) {
    let token = c.user_data & !TAG_READY;
    let key = (token & 0xFFFF_FFFF) as usize;
    let gen = ((token >> 32) as u32) & GEN_MASK;
    let mut woken = Woken::default();
    let _ = TABLE.try_with(|t| {
        let t = t.borrow();
        let Some(t) = t.as_ref() else { return };
        let Some(e) = t.slab.get(key).filter(|e| e.gen & GEN_MASK == gen) else {
            return;
        };
        if c.result == -libc::ECANCELED {
            return;
        }
        // An error (never seen in practice): both directions ready, so
        // their operations try their system calls and meet the error.
        let m = if c.result < 0 {
            (libc::POLLIN | libc::POLLOUT) as u32
        } else {
            c.result as u32
        };
        let has = |bits: i16| m & (bits as u32) != 0;
        let error = has(libc::POLLERR);
        let read_closed = has(libc::POLLHUP) || has(libc::POLLRDHUP) || error;
        if has(libc::POLLIN) || read_closed {
            e.io.ready(Direction::Read, read_closed, &mut woken);
        }
        let write_closed = has(libc::POLLHUP) || error;
        if has(libc::POLLOUT) || write_closed {
            e.io.ready(Direction::Write, write_closed, &mut woken);
        }
        if !c.more() {
            if let Some(ring) = &t.ring {
                ring.arm_poll(e.fd, token);
            }
        }
    });
    woken.wake();
}

/// A socket's registration with one worker's poller. Dropping it
/// deregisters the descriptor (so it must drop before the socket closes)
/// and frees its table slot: directly on the worker's thread, else by
/// queueing the key for the worker to free at its next registration.
struct Registration {
    io: Arc<ScheduledIo>,
    owner: Arc<WorkerIo>,
    key: usize,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    gen: u32,
    fd: RawFd,
}

impl Registration {
    /// Register `fd` with the poller of worker `w` (this thread's).
    fn new(w: &Worker, fd: RawFd) -> io::Result<Registration> {
        TABLE.with(|t| {
            let mut t = t.borrow_mut();
            if t.is_none() {
                *t = Some(new_table(w)?);
            }
            let Some(table) = t.as_mut() else {
                return Err(io::Error::other("the worker's socket table is gone"));
            };
            for key in std::mem::take(&mut *table.shared.released.lock()) {
                table.slab.try_remove(key);
            }
            let io = Arc::new(ScheduledIo::default());
            let gen = table.next_gen;
            table.next_gen = gen.wrapping_add(1) & GEN_MASK;
            let key = table.slab.insert(Entry {
                io: Arc::clone(&io),
                gen,
                fd,
            });
            match &table.shared.backend {
                Backend::Epoll(registry) => {
                    let interest = Interest::READABLE | Interest::WRITABLE;
                    if let Err(e) = registry.register(&mut SourceFd(&fd), Token(key), interest) {
                        table.slab.remove(key);
                        return Err(e);
                    }
                }
                #[cfg(target_os = "linux")]
                Backend::Uring(_) => {
                    if let Some(ring) = &table.ring {
                        ring.arm_poll(fd, ring_token(key, gen));
                    }
                }
            }
            Ok(Registration {
                io,
                owner: Arc::clone(&table.shared),
                key,
                gen,
                fd,
            })
        })
    }
}

/// This thread's socket table, for the poller of worker `w`.
fn new_table(w: &Worker) -> io::Result<Table> {
    let poller = w.poller();
    #[cfg(target_os = "linux")]
    let ring = poller.ring().cloned();
    let backend = match poller.registry() {
        Some(registry) => Backend::Epoll(registry?),
        #[cfg(target_os = "linux")]
        None => match &ring {
            Some(r) => Backend::Uring(Arc::clone(r.remote())),
            None => return Err(io::Error::other("the worker has no poller")),
        },
        #[cfg(not(target_os = "linux"))]
        None => return Err(io::Error::other("the worker has no poller")),
    };
    Ok(Table {
        slab: Slab::new(),
        shared: Arc::new(WorkerIo {
            backend,
            released: Mutex::new(Vec::new()),
            thread: std::thread::current().id(),
        }),
        #[cfg(target_os = "linux")]
        ring,
        next_gen: 0,
    })
}

impl Drop for Registration {
    fn drop(&mut self) {
        let key = self.key;
        let on_owner = std::thread::current().id() == self.owner.thread;
        match &self.owner.backend {
            // The descriptor is still open (the socket drops after this),
            // so this cannot remove another descriptor's registration.
            Backend::Epoll(registry) => {
                let _ = registry.deregister(&mut SourceFd(&self.fd));
            }
            // On the worker's thread the removal is submitted now; from
            // elsewhere the worker is asked (and woken) to submit it.
            #[cfg(target_os = "linux")]
            Backend::Uring(remote) => {
                let token = ring_token(key, self.gen);
                let removed = on_owner
                    && TABLE
                        .try_with(|t| match t.borrow().as_ref().and_then(|t| t.ring.clone()) {
                            Some(ring) => {
                                ring.remove_poll(token);
                                true
                            }
                            None => false,
                        })
                        .unwrap_or(false);
                if !removed {
                    remote.remove_poll(TAG_READY | token);
                }
            }
        }
        let local = on_owner
            && TABLE
                .try_with(|t| {
                    if let Some(t) = t.borrow_mut().as_mut() {
                        t.slab.try_remove(key);
                    }
                })
                .is_ok();
        if !local {
            self.owner.released.lock().push(key);
        }
    }
}

/// A per-operation timeout, settable through a shared reference.
#[derive(Default)]
pub(crate) struct Timeout(AtomicU64);

impl Timeout {
    /// Set it (`None`: wait without end); a zero duration is refused, as
    /// `std::net` refuses it.
    pub(crate) fn set(&self, op: &'static str, d: Option<Duration>) -> io::Result<()> {
        let nanos = match d {
            None => 0,
            Some(d) if d.is_zero() => return Err(NetError::ZeroTimeout { op }.into()),
            Some(d) => u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
        };
        self.0.store(nanos, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn get(&self) -> Option<Duration> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            n => Some(Duration::from_nanos(n)),
        }
    }
}

/// A deadline for one operation: when it passes, the operation fails with
/// [`NetError::TimedOut`] naming `op`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    at: Option<Instant>,
    op: &'static str,
    after: Duration,
}

impl Deadline {
    /// A deadline `after` from now (`None`: none).
    pub(crate) fn after(op: &'static str, after: Option<Duration>) -> Deadline {
        let at = after.and_then(|d| Instant::now().checked_add(d));
        Deadline {
            at,
            op,
            after: after.unwrap_or_default(),
        }
    }

    /// When it passes (`None`: never).
    #[cfg(target_os = "linux")]
    pub(crate) fn at(&self) -> Option<Instant> {
        self.at
    }

    /// The error of an operation whose deadline passed, naming the green
    /// thread that waited.
    pub(crate) fn timed_out(&self) -> io::Error {
        NetError::TimedOut {
            op: self.op,
            after: self.after,
            task: worker::with_current_task(|_, t| format!("'{}' (id {})", t.name(), t.id)),
        }
        .into()
    }

    fn check(&self) -> io::Result<()> {
        match self.at {
            Some(at) if Instant::now() >= at => Err(self.timed_out()),
            _ => Ok(()),
        }
    }
}

/// A non-blocking socket with its (lazy) registration. Field order
/// matters: the registration drops, and deregisters, before the socket
/// closes.
pub(crate) struct Source<S: AsRawFd> {
    reg: OnceLock<Registration>,
    sock: S,
    /// Per direction, 1 + the readiness number under which a stream
    /// transfer came up short (the kernel buffer was drained or filled):
    /// until the number moves, trying the system call again is futile.
    drained: [AtomicU64; 2],
    pub(crate) read_timeout: Timeout,
    pub(crate) write_timeout: Timeout,
}

impl<S: AsRawFd> Source<S> {
    pub(crate) fn new(sock: S) -> Source<S> {
        Source {
            reg: OnceLock::new(),
            sock,
            drained: Default::default(),
            read_timeout: Timeout::default(),
            write_timeout: Timeout::default(),
        }
    }

    /// The socket.
    pub(crate) fn get(&self) -> &S {
        &self.sock
    }

    /// Deregister and give the socket back.
    pub(crate) fn into_inner(self) -> S {
        let Source { reg, sock, .. } = self;
        drop(reg);
        sock
    }

    /// A deadline for a read-side operation `op`, from the read timeout.
    pub(crate) fn read_deadline(&self, op: &'static str) -> Deadline {
        Deadline::after(op, self.read_timeout.get())
    }

    /// A deadline for a write-side operation `op`, from the write timeout.
    pub(crate) fn write_deadline(&self, op: &'static str) -> Deadline {
        Deadline::after(op, self.write_timeout.get())
    }

    /// Run `op` until it does not report `WouldBlock`, waiting for `dir`
    /// readiness between tries (parking a green thread, blocking a plain
    /// one) until `deadline`.
    pub(crate) fn io<R>(
        &self,
        dir: Direction,
        deadline: Deadline,
        mut op: impl FnMut(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        loop {
            let seq = self
                .reg
                .get()
                .map(|r| r.io.seq[dir as usize].load(Ordering::SeqCst));
            match op(&self.sock) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r,
            }
            self.wait(dir, seq, deadline)?;
        }
    }

    /// [`io`](Self::io) for a stream transfer of `len` bytes. `op` returns
    /// the bytes moved and whether the kernel reported the receive queue
    /// empty after them (`TCP_INQ`; `false` when it was not asked). A
    /// transfer that moves some bytes but fewer than `len`, or that the
    /// kernel reports left nothing queued, drained the receive buffer (or
    /// filled the send buffer), so the next one in that direction waits for
    /// new readiness before it tries the system call (one futile
    /// `WouldBlock` call saved per message).
    ///
    /// On a plain thread the wait is `poll(2)`, which is level-triggered
    /// and moves no readiness number: after it the call is tried at once.
    pub(crate) fn io_stream(
        &self,
        dir: Direction,
        deadline: Deadline,
        len: usize,
        mut op: impl FnMut(&S) -> io::Result<(usize, bool)>,
    ) -> io::Result<usize> {
        let d = dir as usize;
        let mut polled = false;
        loop {
            let reg = self.reg.get();
            let seq = reg.map(|r| r.io.seq[d].load(Ordering::SeqCst));
            if let (false, Some(s), Some(r)) = (polled, seq, reg) {
                if self.is_drained(d, s) && !r.io.closed[d].load(Ordering::SeqCst) {
                    polled = self.wait(dir, seq, deadline)?;
                    continue;
                }
            }
            match op(&self.sock) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok((n, empty)) => {
                    if let Some(s) = seq {
                        self.note_transfer(d, s, n, len, empty);
                    }
                    return Ok(n);
                }
                Err(e) => return Err(e),
            }
            polled = self.wait(dir, seq, deadline)?;
        }
    }

    /// After a transfer of `n` of `len` bytes under readiness number `seq`
    /// in direction `d`: one that came up short, or after which the kernel
    /// reports nothing left (`empty`), drained the buffer, so the next one
    /// waits for the number to move.
    #[inline(always)]
    fn note_transfer(&self, d: usize, seq: u64, n: usize, len: usize, empty: bool) {
        if n > 0 && (n < len || empty) {
            self.mark_drained(d, seq);
        }
    }

    /// Direction `d`'s buffer is drained (or full) as of readiness number
    /// `seq`.
    #[inline(always)]
    fn mark_drained(&self, d: usize, seq: u64) {
        self.drained[d].store(seq.wrapping_add(1), Ordering::Relaxed);
    }

    /// Whether direction `d`'s buffer was drained (or filled) under
    /// readiness number `seq`: no readiness came since, and trying the
    /// system call again is futile.
    #[inline(always)]
    fn is_drained(&self, d: usize, seq: u64) -> bool {
        self.drained[d].load(Ordering::Relaxed) == seq.wrapping_add(1)
    }

    /// One try of a stream transfer of `len` bytes, made only if readiness
    /// in `dir` came since the last transfer that drained (or filled) the
    /// kernel buffer: `None` when it did not, or when the call would
    /// block (then the readiness counts as used). Keeps the drained mark
    /// as [`io_stream`](Self::io_stream) does. For a driver whose own
    /// operation would park the caller for a turn of the loop even when
    /// the data is already there.
    pub(crate) fn try_fresh(
        &self,
        dir: Direction,
        len: usize,
        op: impl FnOnce(&S) -> io::Result<(usize, bool)>,
    ) -> Option<io::Result<usize>> {
        let d = dir as usize;
        let r = self.reg.get()?;
        let seq = r.io.seq[d].load(Ordering::SeqCst);
        if seq == 0 || self.is_drained(d, seq) {
            return None;
        }
        match op(&self.sock) {
            Ok((n, empty)) => {
                self.note_transfer(d, seq, n, len, empty);
                Some(Ok(n))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.mark_drained(d, seq);
                None
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// Wait until a read may find data, end of file or an error, without
    /// reading: at once if readiness came since the last read that drained
    /// the queue (or the peer closed, or there was never such a read and
    /// an event came); else park (on a plain thread: `poll(2)`) until it
    /// comes, or `deadline` passes (an error). May return early, when the
    /// event that came was already consumed by a read that did not drain
    /// the queue: a read after it then waits as usual.
    pub(crate) fn readable(&self, deadline: Deadline) -> io::Result<()> {
        let d = Direction::Read as usize;
        loop {
            match self.reg.get() {
                Some(r) => {
                    let seq = r.io.seq[d].load(Ordering::SeqCst);
                    let fresh = seq != 0 && !self.is_drained(d, seq);
                    if fresh || r.io.closed[d].load(Ordering::SeqCst) {
                        return Ok(());
                    }
                    // `poll(2)` said readable (or timed out): the numbers
                    // of a registration made on a worker do not move for
                    // it, so asking them again would spin.
                    if self.wait(Direction::Read, Some(seq), deadline)? {
                        return deadline.check();
                    }
                }
                None if worker::with_current_task(|_, _| ()).is_none() => {
                    deadline.check()?;
                    poll_fd(self.sock.as_raw_fd(), Direction::Read, deadline.at)?;
                    return deadline.check();
                }
                // Registers, then returns: the registration reports the
                // socket's current readiness as an event.
                None => {
                    self.wait(Direction::Read, None, deadline)?;
                }
            }
        }
    }

    /// Wait until `dir` readiness may have changed since `seq` was read (or
    /// the deadline passes: an error). Returns whether it waited in
    /// `poll(2)` (a plain thread) rather than for the number to move.
    fn wait(&self, dir: Direction, seq: Option<u64>, deadline: Deadline) -> io::Result<bool> {
        deadline.check()?;
        // The worker and the task are lent, not cloned: a wait costs no
        // reference-count traffic but the waker's.
        let waited = worker::with_current_task(|w, task| {
            let reg = self.registration(w)?;
            {
                let d = dir as usize;
                let mut waiters = reg.io.waiters.lock();
                reg.io.waiting[d].store(true, Ordering::SeqCst);
                if seq != Some(reg.io.seq[d].load(Ordering::SeqCst)) {
                    return Ok(false);
                }
                waiters[d].add(Waker::from(Arc::clone(task)));
            }
            park_green(w, task, Wait::Io, deadline.at);
            Ok(false)
        });
        match waited {
            Some(result) => result,
            None => poll_fd(self.sock.as_raw_fd(), dir, deadline.at).map(|()| true),
        }
    }

    /// Whether an operation in `dir` would not block now (ready, closed or
    /// failed): asked of the kernel (`poll(2)` with no wait), since an
    /// edge's number says only that readiness came, not that it is still
    /// there. For `select`.
    pub(crate) fn is_ready_now(&self, dir: Direction) -> io::Result<bool> {
        poll_now(self.sock.as_raw_fd(), dir)
    }

    /// Register the calling green thread to be woken at the next `dir`
    /// readiness edge (registering the socket with its worker's poller
    /// first if it is not: that reports its current readiness as an
    /// edge). `Ok(false)` on a plain thread, which has no poller: nothing
    /// registered. A stale registration left after the caller stopped
    /// waiting costs one spurious wake. For `select`.
    pub(crate) fn watch(&self, dir: Direction) -> io::Result<bool> {
        let watched = worker::with_current_task(|w, task| {
            let reg = self.registration(w)?;
            let d = dir as usize;
            let mut waiters = reg.io.waiters.lock();
            reg.io.waiting[d].store(true, Ordering::SeqCst);
            waiters[d].add(Waker::from(Arc::clone(task)));
            Ok(true)
        });
        watched.unwrap_or(Ok(false))
    }

    /// Its registration, made now with `w`'s poller if it has none.
    fn registration(&self, w: &Worker) -> io::Result<&Registration> {
        if let Some(r) = self.reg.get() {
            return Ok(r);
        }
        let r = Registration::new(w, self.sock.as_raw_fd())?;
        // A green thread of another worker may have registered it first:
        // then ours is dropped (deregistered) and theirs is used.
        Ok(self.reg.get_or_init(|| r))
    }
}

/// Whether `fd` is ready for `dir` now (or has hung up or failed).
fn poll_now(fd: RawFd, dir: Direction) -> io::Result<bool> {
    let events = match dir {
        Direction::Read => libc::POLLIN,
        Direction::Write => libc::POLLOUT,
    };
    let mut pfd = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: `pfd` is a valid, exclusively borrowed pollfd array of length
    // 1 for the duration of the call, which does not wait (timeout 0).
    let rc = unsafe { libc::poll(&mut pfd, 1, 0) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::Interrupted => Ok(false),
            _ => Err(e),
        };
    }
    Ok(pfd.revents != 0)
}

/// Block the calling plain thread until `fd` is ready for `dir` or
/// `deadline` passes.
fn poll_fd(fd: RawFd, dir: Direction, deadline: Option<Instant>) -> io::Result<()> {
    let events = match dir {
        Direction::Read => libc::POLLIN,
        Direction::Write => libc::POLLOUT,
    };
    let mut pfd = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let timeout_ms = match deadline {
        None => -1,
        Some(at) => {
            let left = at.saturating_duration_since(Instant::now());
            i32::try_from(left.as_millis().saturating_add(1)).unwrap_or(i32::MAX)
        }
    };
    // SAFETY: `pfd` is a valid, exclusively borrowed pollfd array of length
    // 1 for the duration of the call.
    let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}
