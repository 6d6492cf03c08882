//! The kernel interface a worker waits on for I/O: epoll (through `mio`)
//! or, on Linux, an io_uring ring per worker; which one a runtime uses is
//! decided once, when it is built ([`IoDriver`], the
//! [`IO_DRIVER_ENV`] variable, the start-up probe).
//!
//! Owns: [`IoDriver`] and its choice, the probe, the worker's poller
//! ([`Poller`]: the wait of the worker loop and the dispatch of what it
//! returns), the cross-thread wake of a poller ([`Unparker`]), the ring
//! ([`Ring`]) and the completion-based operations on it (`op`). Uses the
//! network layer's readiness dispatch, `mio`, the `io-uring` crate and the
//! worker's current task (an operation parks its green thread).
//!
//! Under epoll a socket is registered edge-triggered with the worker's
//! `mio::Poll`; under io_uring the same registration is a multishot
//! `POLL_ADD` on the worker's ring, whose completions drive the same
//! readiness protocol (see `net::registration`), and TCP reads and writes
//! of a green thread are submitted to the ring as operations instead (see
//! `op`). A worker's wake from another thread is a write to an eventfd
//! that the poller watches (epoll: registered with `mio`; io_uring: a
//! multishot `POLL_ADD`).

mod choice;
mod poller;
mod unparker;

#[cfg(target_os = "linux")]
pub(crate) mod op;
#[cfg(target_os = "linux")]
mod ring;

pub(crate) use self::choice::resolve;
pub use self::choice::{IoDriver, IO_DRIVER_ENV};
pub(crate) use self::poller::{Poller, PollerSeed};
pub(crate) use self::unparker::Unparker;

#[cfg(target_os = "linux")]
pub(crate) use self::ring::{Cqe, Ring, RingRemote, TAG_READY};
