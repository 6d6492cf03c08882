//! Completion-based operations of a green thread on its worker's ring:
//! a TCP receive or send is submitted as an SQE that points into the
//! caller's buffer, and the green thread parks until its completion.
//!
//! Owns: the wait for one operation ([`run`]) and its cancellation rules;
//! [`recv`] and [`send`]. Uses the ring, the worker's current task, the
//! shielded park and the network layer's deadlines and readiness dispatch.
//!
//! # Cancellation
//! The kernel writes into (or reads from) the buffer until the operation's
//! completion is posted, so the green thread does not leave [`run`] before
//! that, whatever happens meanwhile:
//! - a cancellation thrown into its park (`Handle::cancel`, a dropped
//!   handle's kill, the shutdown) is caught by the shielded park; the
//!   operation is cancelled (`ASYNC_CANCEL`) and the green thread keeps
//!   waiting, ignoring further throws, until the completion comes; then
//!   the cancellation is raised;
//! - an elapsed `timeout` scope or the socket's read or write deadline
//!   cancels the operation the same way; once the completion comes, the
//!   scope's unwind (or `TimedOut`) follows, unless the operation won the
//!   race and moved bytes: then those are returned (no byte is lost);
//! - on a worker whose loop has ended (its teardown kills what is left)
//!   nothing would wake the park, so the wait is made in place, on the
//!   ring;
//! - any other unwind through [`run`] (a forced unwind of the stack) passes
//!   a guard that cancels the operation and waits for its completion on
//!   the ring before the frame goes.

use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;

use io_uring::{opcode, squeue, types};

use super::super::net::{self, Deadline};
use super::super::park::{check_scopes, park_shielded, raise_cancel};
use super::super::task_header::Task;
use super::super::task_state::Wait;
use super::super::worker::{self, Worker};
use super::ring::{Cqe, Ring};

/// Waits for the operation in `key` on the ring on any unwind that passes
/// [`run`] before its completion was taken (cancelling it first).
struct InFlight<'a> {
    ring: &'a Ring,
    key: usize,
    done: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.ring.cancel_op(self.key);
            self.ring.wait_op_here(self.key, net::dispatch_ring);
        }
    }
}

/// Whether the caller is a green thread on a worker with a ring.
pub(crate) fn on_ring() -> bool {
    worker::with_current_task(|w, _| w.poller().ring().is_some()).unwrap_or(false)
}

/// Receive into `buf` from the socket `fd` on the calling green thread's
/// ring: `None` off a worker with a ring (the caller uses readiness).
pub(crate) fn recv(fd: RawFd, buf: &mut [u8], deadline: Deadline) -> Option<io::Result<usize>> {
    let len = u32::try_from(buf.len()).unwrap_or(u32::MAX);
    let entry = opcode::Recv::new(types::Fd(fd), buf.as_mut_ptr(), len).build();
    // SAFETY: `buf` is borrowed mutably for this call, and `run` returns
    // only once the operation's completion was taken.
    unsafe { run(entry, deadline) }
}

/// Send `buf` on the socket `fd` from the calling green thread's ring:
/// `None` off a worker with a ring.
pub(crate) fn send(fd: RawFd, buf: &[u8], deadline: Deadline) -> Option<io::Result<usize>> {
    let len = u32::try_from(buf.len()).unwrap_or(u32::MAX);
    let entry = opcode::Send::new(types::Fd(fd), buf.as_ptr(), len)
        .flags(libc::MSG_NOSIGNAL)
        .build();
    // SAFETY: `buf` is borrowed for this call, and `run` returns only once
    // the operation's completion was taken.
    unsafe { run(entry, deadline) }
}

/// Run `entry` on the calling green thread's ring and wait for its
/// completion: its result as bytes moved, or the error it reports.
///
/// # Safety
/// What `entry` points to stays valid, and unaccessed by anything but the
/// operation, until this returns or unwinds (it does neither before the
/// completion was taken).
unsafe fn run(entry: squeue::Entry, deadline: Deadline) -> Option<io::Result<usize>> {
    worker::with_current_task(|w, task| {
        let ring = w.poller().ring()?;
        // SAFETY: the caller's contract, passed on.
        Some(unsafe { wait(w, task, ring, entry, deadline) })
    })
    .flatten()
}

/// [`run`] on worker `w` for its green thread `task`.
///
/// # Safety
/// [`run`]'s contract.
unsafe fn wait(
    w: &Worker,
    task: &Arc<Task>,
    ring: &Ring,
    entry: squeue::Entry,
    deadline: Deadline,
) -> io::Result<usize> {
    // SAFETY: the caller keeps the memory valid until this returns, and
    // this returns (or unwinds past `guard`, which waits) only after the
    // completion of `key` was taken.
    let key = unsafe { ring.start_op(entry, Waker::from(Arc::clone(task))) };
    let mut guard = InFlight {
        ring,
        key,
        done: false,
    };
    let mut killed = false;
    let mut cancelled = false;
    let mut timed_out = false;
    let c: Cqe = loop {
        if let Some(c) = ring.take_op(key) {
            break c;
        }
        if worker::hub_ended() {
            if !cancelled {
                ring.cancel_op(key);
            }
            break ring.wait_op_here(key, net::dispatch_ring);
        }
        if !cancelled {
            timed_out = deadline.at().is_some_and(|at| Instant::now() >= at);
            let scope = task.scopes.is_active() && task.scopes.expired().is_some();
            if killed || timed_out || scope {
                ring.cancel_op(key);
                cancelled = true;
            }
        }
        let at = if cancelled {
            None
        } else {
            match (deadline.at(), task.scopes.earliest()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        };
        killed |= park_shielded(w, task, Wait::Io, at);
    };
    guard.done = true;
    drop(guard);
    if killed {
        raise_cancel();
    }
    if c.result >= 0 {
        return Ok(c.result as usize);
    }
    check_scopes(&task.scopes);
    if c.result == -libc::ECANCELED && timed_out {
        return Err(deadline.timed_out());
    }
    Err(io::Error::from_raw_os_error(-c.result))
}
