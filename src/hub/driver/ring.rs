//! A worker's io_uring ring ([`Ring`]): its submission and completion
//! queues, the wait of the worker loop on it, the multishot polls that
//! carry readiness, and the table of operations in flight.
//!
//! Owns: the ring (set up, probed, entered), the tags of `user_data` (what
//! a completion is for), the queue of polls that other threads ask to
//! remove ([`RingRemote`]) and the operations' slots (their results and
//! wakers). Uses the `io-uring` crate (the kernel's queue layout and SQE
//! builders) and the [`Unparker`] it watches.
//!
//! # Memory the kernel writes
//! An SQE may carry a pointer (a receive buffer); the kernel writes there
//! until the operation's completion is posted. Every such submission goes
//! through [`Ring::start_op`], an `unsafe fn` whose callers keep the
//! memory valid until the operation's slot reports it done (see `op`: the
//! green thread waits for it, through cancellations, and a guard waits for
//! it on any unwind). Dropping a ring with operations in flight cancels
//! them and waits for their completions first.

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;

use io_uring::{cqueue, opcode, squeue, types, IoUring, Probe};
use parking_lot::Mutex;
use slab::Slab;

use super::Unparker;

/// Submission queue entries per ring. Submissions are flushed when the
/// queue is full, so this bounds only how many wait for one `enter`; 1,024
/// covers a turn of the loop with a thousand connections each starting an
/// operation. Re-measure with `benches/net-peers` at 500 connections.
const RING_ENTRIES: u32 = 1024;
/// Completion queue entries: readiness polls post one completion per
/// wake-up of a socket, so the queue is larger than the submission queue.
/// Completions past it are kept by the kernel (`IORING_FEAT_NODROP`,
/// required by the probe) and flushed at the next wait.
const CQ_ENTRIES: u32 = 4096;

/// `IORING_ENTER_GETEVENTS` of the kernel's `io_uring.h`: an enter that
/// also reaps (runs the deferred completion work of a
/// `IORING_SETUP_DEFER_TASKRUN` ring).
const ENTER_GETEVENTS: u32 = 1;

const TAG_MASK: u64 = 3 << 62;
/// The worker's unparker's poll.
const TAG_WAKE: u64 = 0;
/// A socket's readiness poll: the low bits are the registration's.
pub(crate) const TAG_READY: u64 = 1 << 62;
/// An operation: the low bits are its slot.
const TAG_OP: u64 = 2 << 62;
/// A completion nobody waits for (a failed cancellation or removal).
const TAG_IGNORE: u64 = 3 << 62;

/// One completion, copied out of the queue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cqe {
    pub(crate) user_data: u64,
    pub(crate) result: i32,
    pub(crate) flags: u32,
}

impl Cqe {
    /// Whether more completions follow for the same multishot request.
    pub(crate) fn more(&self) -> bool {
        cqueue::more(self.flags)
    }
}

/// An operation's slot: its waiter until the completion comes, then the
/// completion until its owner takes it.
enum OpSlot {
    Waiting(Option<Waker>),
    Done(Cqe),
}

/// The part of a ring that other threads reach: polls to remove (a socket
/// dropped on another thread; only the ring's thread submits) and the
/// unparker that makes the ring's thread look.
#[derive(Debug)]
pub(crate) struct RingRemote {
    removes: Mutex<Vec<u64>>,
    pending: AtomicBool,
    unparker: Unparker,
}

impl RingRemote {
    /// Ask the ring's thread to remove the poll `user_data` (it holds the
    /// socket's file open until then) and wake it to do so.
    pub(crate) fn remove_poll(&self, user_data: u64) {
        self.removes.lock().push(user_data);
        self.pending.store(true, Ordering::SeqCst);
        if let Err(e) = self.unparker.wake() {
            crate::diag::diag_warn!("hub: could not wake a worker to remove a poll: {e}");
        }
    }
}

/// A worker's ring: used only on the worker's thread (not `Sync`).
pub(crate) struct Ring {
    uring: RefCell<IoUring>,
    remote: Arc<RingRemote>,
    ops: RefCell<Slab<OpSlot>>,
    /// Completions copied out of the queue, handled with no borrow held.
    batch: RefCell<Vec<Cqe>>,
    /// Submissions pushed and not yet entered.
    unsubmitted: Cell<bool>,
    /// Set up with `SINGLE_ISSUER | DEFER_TASKRUN` (Linux 6.1 and
    /// later): the kernel's completion work for this ring runs only when
    /// its thread enters to reap, in a batch, instead of interrupting the
    /// thread at each completion. Such a ring starts disabled and is
    /// enabled by its worker's thread ([`enable`](Self::enable)), its only
    /// submitter; every wait enters, even one that does not block.
    deferred: bool,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("ops_in_flight", &self.ops.borrow().len())
            .finish_non_exhaustive()
    }
}

impl Ring {
    /// Whether a ring can be set up here with what the driver needs: the
    /// extended wait argument (a timeout with the wait), completions kept
    /// on overflow, completions skipped on success, and the opcodes it
    /// submits (poll add, cancel, receive, send).
    pub(crate) fn probe() -> Result<(), String> {
        let ring = IoUring::new(8).map_err(|e| format!("io_uring_setup: {e}"))?;
        let p = ring.params();
        if !p.is_feature_ext_arg() || !p.is_feature_nodrop() || !p.is_feature_skip_cqe_on_success()
        {
            return Err("the kernel lacks EXT_ARG, NODROP or CQE_SKIP (before 5.17)".into());
        }
        let mut probe = Probe::new();
        ring.submitter()
            .register_probe(&mut probe)
            .map_err(|e| format!("IORING_REGISTER_PROBE: {e}"))?;
        let needed = [
            ("POLL_ADD", opcode::PollAdd::CODE),
            ("ASYNC_CANCEL", opcode::AsyncCancel::CODE),
            ("RECV", opcode::Recv::CODE),
            ("SEND", opcode::Send::CODE),
        ];
        for (name, code) in needed {
            if !probe.is_supported(code) {
                return Err(format!("the kernel lacks the {name} opcode"));
            }
        }
        Ok(())
    }

    /// A ring that watches `unparker`.
    pub(crate) fn new(unparker: &Unparker) -> io::Result<Ring> {
        let (uring, deferred) = match IoUring::builder()
            .setup_cqsize(CQ_ENTRIES)
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_r_disabled()
            .build(RING_ENTRIES)
        {
            Ok(u) => (u, true),
            Err(_) => (
                IoUring::builder()
                    .setup_cqsize(CQ_ENTRIES)
                    .build(RING_ENTRIES)?,
                false,
            ),
        };
        let ring = Ring {
            uring: RefCell::new(uring),
            remote: Arc::new(RingRemote {
                removes: Mutex::new(Vec::new()),
                pending: AtomicBool::new(false),
                unparker: unparker.clone(),
            }),
            ops: RefCell::new(Slab::new()),
            batch: RefCell::new(Vec::with_capacity(256)),
            unsubmitted: Cell::new(false),
            deferred,
        };
        ring.arm_wake();
        Ok(ring)
    }

    /// Make the calling thread the ring's only submitter (a ring set up
    /// disabled, for `DEFER_TASKRUN`); called once by the worker's thread
    /// before its first use.
    pub(crate) fn enable(&self) -> io::Result<()> {
        if self.deferred {
            self.uring.borrow().submitter().register_enable_rings()?;
        }
        Ok(())
    }

    /// The part other threads reach.
    pub(crate) fn remote(&self) -> &Arc<RingRemote> {
        &self.remote
    }

    fn arm_wake(&self) {
        let entry =
            opcode::PollAdd::new(types::Fd(self.remote.unparker.raw()), libc::POLLIN as u32)
                .multi(true)
                .build()
                .user_data(TAG_WAKE);
        // SAFETY: a poll points at no memory; the eventfd stays open as
        // long as the ring (the ring's `remote` holds it).
        unsafe { self.push(&entry) };
    }

    /// Queue `entry` for the next `enter` (entering now if the queue is
    /// full).
    ///
    /// # Safety
    /// Memory that `entry` points to must stay valid (and, for a receive,
    /// not be otherwise accessed) until its completion is posted: the
    /// `io-uring` crate's contract for `SubmissionQueue::push`.
    unsafe fn push(&self, entry: &squeue::Entry) {
        let mut uring = self.uring.borrow_mut();
        loop {
            // SAFETY: this function's own contract, passed on.
            if unsafe { uring.submission().push(entry) }.is_ok() {
                self.unsubmitted.set(true);
                return;
            }
            // Full: hand the queue to the kernel, then push again.
            if let Err(e) = uring.submit() {
                if e.raw_os_error() != Some(libc::EBUSY) && e.kind() != io::ErrorKind::Interrupted {
                    crate::diag::diag_warn!("hub: io_uring submit failed: {e}");
                }
            }
        }
    }

    /// Enter the ring now to submit what is queued, without waiting.
    pub(crate) fn submit_now(&self) {
        if !self.unsubmitted.replace(false) {
            return;
        }
        if let Err(e) = self.uring.borrow().submit() {
            if e.kind() != io::ErrorKind::Interrupted {
                crate::diag::diag_warn!("hub: io_uring submit failed: {e}");
            }
        }
    }

    /// Watch `fd` for readiness: a multishot poll (read, write, peer
    /// half-close) whose completions carry `TAG_READY | token`.
    pub(crate) fn arm_poll(&self, fd: RawFd, token: u64) {
        let events = (libc::POLLIN | libc::POLLOUT | libc::POLLRDHUP) as u32;
        let entry = opcode::PollAdd::new(types::Fd(fd), events)
            .multi(true)
            .build()
            .user_data(TAG_READY | token);
        // SAFETY: a poll points at no memory. The kernel holds its own
        // reference to `fd`'s file until the poll is removed.
        unsafe { self.push(&entry) };
    }

    /// Stop watching the poll of `token` and submit at once (the poll holds
    /// the socket's file open: a close of the descriptor takes effect
    /// only when it is gone).
    pub(crate) fn remove_poll(&self, token: u64) {
        self.push_remove(TAG_READY | token);
        self.submit_now();
    }

    /// Queue the end of the poll `user_data`. It is an `ASYNC_CANCEL`, not
    /// a `POLL_REMOVE`: a removal fails (`EALREADY`) while a wake-up of the
    /// poll is being handled — under `DEFER_TASKRUN`, from the wake-up
    /// until this thread next enters to reap — and leaves the poll armed,
    /// holding the file open for good (a pipe's reader never sees end of
    /// file); a cancellation marks the poll, and the pending handling of
    /// the wake-up ends it then.
    fn push_remove(&self, user_data: u64) {
        let entry = opcode::AsyncCancel::new(user_data)
            .build()
            .flags(squeue::Flags::SKIP_SUCCESS)
            .user_data(TAG_IGNORE);
        // SAFETY: a removal points at no memory.
        unsafe { self.push(&entry) };
    }

    /// Start an operation: `entry` gets the slot's tag; the completion is
    /// kept in the slot, and `waker` woken, when it comes.
    ///
    /// # Safety
    /// What `entry` points to stays valid until [`take_op`](Self::take_op)
    /// returns its completion (the contract of [`push`](Self::push)).
    pub(crate) unsafe fn start_op(&self, entry: squeue::Entry, waker: Waker) -> usize {
        let key = self.ops.borrow_mut().insert(OpSlot::Waiting(Some(waker)));
        let entry = entry.user_data(TAG_OP | key as u64);
        // SAFETY: the caller's contract.
        unsafe { self.push(&entry) };
        key
    }

    /// The completion of the operation in slot `key`, if it came (the slot
    /// is freed then).
    pub(crate) fn take_op(&self, key: usize) -> Option<Cqe> {
        let mut ops = self.ops.borrow_mut();
        match ops.get(key) {
            Some(OpSlot::Done(c)) => {
                let c = *c;
                ops.remove(key);
                Some(c)
            }
            _ => None,
        }
    }

    /// Ask the kernel to cancel the operation in slot `key` (its
    /// completion still comes: `-ECANCELED`, or its result if it won).
    pub(crate) fn cancel_op(&self, key: usize) {
        let entry = opcode::AsyncCancel::new(TAG_OP | key as u64)
            .build()
            .flags(squeue::Flags::SKIP_SUCCESS)
            .user_data(TAG_IGNORE);
        // SAFETY: a cancellation points at no memory.
        unsafe { self.push(&entry) };
    }

    /// Whether operations were started whose completion was not taken.
    pub(crate) fn has_ops_in_flight(&self) -> bool {
        !self.ops.borrow().is_empty()
    }

    /// Submit what is queued and wait up to `timeout` (`None`: without
    /// end; zero: not at all) for a completion; then hand every readiness
    /// completion to `ready` and record every operation's, waking its
    /// waiter.
    pub(crate) fn poll(&self, timeout: Option<Duration>, ready: impl FnMut(Cqe)) -> io::Result<()> {
        if self.remote.pending.load(Ordering::Relaxed) {
            self.remote.pending.store(false, Ordering::SeqCst);
            let removes = std::mem::take(&mut *self.remote.removes.lock());
            for user_data in removes {
                self.push_remove(user_data);
            }
        }
        let waited = self.enter(timeout);
        self.reap(ready);
        waited
    }

    fn enter(&self, timeout: Option<Duration>) -> io::Result<()> {
        let unsubmitted = self.unsubmitted.replace(false);
        let uring = self.uring.borrow();
        let r = match timeout {
            // With nothing to submit, the completions the kernel posted
            // meanwhile are read without a system call, unless some wait in
            // its overflow list.
            // A deferred ring's completions are posted only by an enter.
            Some(d) if d.is_zero() && self.deferred => {
                // SAFETY: the submission queue is only read here, with no
                // `SubmissionQueue` of this ring alive (`push` drops its
                // own before returning; this thread is the ring's only
                // user).
                let queued = unsafe { uring.submission_shared() }.len();
                let pending = u32::try_from(queued).unwrap_or(u32::MAX);
                // SAFETY: a plain enter: no argument pointer (`None`), the
                // count of queued submissions, no wait.
                unsafe {
                    uring
                        .submitter()
                        .enter::<libc::sigset_t>(pending, 0, ENTER_GETEVENTS, None)
                }
                .map(drop)
            }
            Some(d) if d.is_zero() => {
                // SAFETY: the submission queue is only read here, with no
                // `SubmissionQueue` of this ring alive (`push` drops its
                // own before returning; this thread is the ring's only
                // user).
                let overflow = unsafe { uring.submission_shared() }.cq_overflow();
                if unsubmitted || overflow {
                    uring.submit().map(drop)
                } else {
                    Ok(())
                }
            }
            Some(d) => {
                let ts = types::Timespec::from(d);
                let args = types::SubmitArgs::new().timespec(&ts);
                uring.submitter().submit_with_args(1, &args).map(drop)
            }
            None => uring.submit_and_wait(1).map(drop),
        };
        match r {
            Err(e)
                if e.raw_os_error() == Some(libc::ETIME)
                    || e.raw_os_error() == Some(libc::EBUSY)
                    || e.kind() == io::ErrorKind::Interrupted =>
            {
                Ok(())
            }
            r => r,
        }
    }

    /// Take every completion out of the queue and act on it.
    fn reap(&self, mut ready: impl FnMut(Cqe)) {
        let mut batch = std::mem::take(&mut *self.batch.borrow_mut());
        {
            let mut uring = self.uring.borrow_mut();
            batch.extend(uring.completion().map(|c| Cqe {
                user_data: c.user_data(),
                result: c.result(),
                flags: c.flags(),
            }));
        }
        let mut rearm_wake = false;
        for c in batch.drain(..) {
            match c.user_data & TAG_MASK {
                TAG_READY => ready(c),
                TAG_OP => self.complete_op(c),
                TAG_WAKE => rearm_wake |= !c.more(),
                _ => {}
            }
        }
        *self.batch.borrow_mut() = batch;
        if rearm_wake {
            self.arm_wake();
        }
    }

    fn complete_op(&self, c: Cqe) {
        let key = (c.user_data & !TAG_MASK) as usize;
        let waker = {
            let mut ops = self.ops.borrow_mut();
            match ops.get_mut(key) {
                Some(slot @ OpSlot::Waiting(_)) => match std::mem::replace(slot, OpSlot::Done(c)) {
                    OpSlot::Waiting(w) => w,
                    OpSlot::Done(_) => None,
                },
                _ => None,
            }
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Wait for the completion of the operation in slot `key` on this
    /// thread, not parking (the worker's loop is not running: a worker's
    /// teardown, an unwind that passes the operation's owner). Readiness
    /// completions met meanwhile go to `ready`.
    pub(crate) fn wait_op_here(&self, key: usize, mut ready: impl FnMut(Cqe)) -> Cqe {
        loop {
            if let Some(c) = self.take_op(key) {
                return c;
            }
            if let Err(e) = self.poll(None, &mut ready) {
                crate::diag::diag_warn!("hub: io_uring wait failed: {e}");
            }
        }
    }
}

impl Drop for Ring {
    /// Operations still in flight are cancelled and their completions
    /// awaited before the ring closes (their memory is their owners', who
    /// wait for them; this is the last line if one did not).
    fn drop(&mut self) {
        let waiting: Vec<usize> = self
            .ops
            .borrow()
            .iter()
            .filter(|(_, s)| matches!(s, OpSlot::Waiting(_)))
            .map(|(k, _)| k)
            .collect();
        if waiting.is_empty() {
            return;
        }
        crate::diag::diag_warn!(
            "hub: a worker's ring closes with {} operation(s) in flight: cancelling them",
            waiting.len()
        );
        for &k in &waiting {
            self.cancel_op(k);
        }
        for k in waiting {
            self.wait_op_here(k, |_| {});
        }
    }
}
