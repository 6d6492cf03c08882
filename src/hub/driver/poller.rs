//! A worker's poller ([`Poller`]): what the worker loop waits on, under
//! either driver, and the dispatch of what the wait returns; and what a
//! worker thread is started with ([`PollerSeed`]).
//!
//! Owns: the epoll poller's event buffer, the registration of the
//! unparker with it, and the choice of the readiness dispatch per driver.
//! Uses `mio`, the ring and the network layer's readiness dispatch.

use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;
#[cfg(target_os = "linux")]
use std::rc::Rc;
use std::time::Duration;

use mio::unix::SourceFd;

use super::super::net;
use super::{IoDriver, Unparker};

#[cfg(target_os = "linux")]
use super::Ring;

/// The `mio` token of the worker's unparker.
const WAKE_TOKEN: mio::Token = mio::Token(usize::MAX);

/// A worker's poller as made by the runtime's builder (`Send`, moved to
/// the worker's thread, which makes its [`Poller`] of it: a ring is
/// enabled then, by the thread that is to be its only submitter).
#[derive(Debug)]
pub(crate) enum PollerSeed {
    Epoll(mio::Poll),
    #[cfg(target_os = "linux")]
    Uring(Box<Ring>),
}

impl PollerSeed {
    /// A poller for `driver` (resolved: not `Auto`), watching `unparker`.
    pub(crate) fn new(driver: IoDriver, unparker: &Unparker) -> io::Result<PollerSeed> {
        match driver {
            #[cfg(target_os = "linux")]
            IoDriver::IoUring => Ok(PollerSeed::Uring(Box::new(Ring::new(unparker)?))),
            _ => {
                let poll = mio::Poll::new()?;
                let fd: RawFd = unparker.raw();
                poll.registry().register(
                    &mut SourceFd(&fd),
                    WAKE_TOKEN,
                    mio::Interest::READABLE,
                )?;
                Ok(PollerSeed::Epoll(poll))
            }
        }
    }
}

/// A worker's poller, on its thread.
pub(crate) enum Poller {
    Epoll {
        poll: RefCell<mio::Poll>,
        events: RefCell<mio::Events>,
    },
    #[cfg(target_os = "linux")]
    Uring(Rc<Ring>),
}

impl From<PollerSeed> for Poller {
    fn from(seed: PollerSeed) -> Poller {
        match seed {
            PollerSeed::Epoll(poll) => Poller::Epoll {
                poll: RefCell::new(poll),
                events: RefCell::new(mio::Events::with_capacity(256)),
            },
            #[cfg(target_os = "linux")]
            PollerSeed::Uring(ring) => {
                if let Err(e) = ring.enable() {
                    crate::diag::diag_warn!("hub: could not enable a worker's io_uring ring: {e}");
                }
                Poller::Uring(Rc::from(ring))
            }
        }
    }
}

impl Poller {
    /// Wait up to `timeout` (`None`: without end; zero: not at all) for
    /// I/O or a wake, and wake the green threads the I/O is for.
    pub(crate) fn poll(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Poller::Epoll { poll, events } => {
                let mut events = events.borrow_mut();
                poll.borrow_mut().poll(&mut events, timeout)?;
                for event in events.iter() {
                    if event.token() != WAKE_TOKEN {
                        net::dispatch(event);
                    }
                }
                Ok(())
            }
            #[cfg(target_os = "linux")]
            Poller::Uring(ring) => ring.poll(timeout, net::dispatch_ring),
        }
    }

    /// Whether ring operations are in flight (never under epoll).
    pub(crate) fn has_ops_in_flight(&self) -> bool {
        match self {
            Poller::Epoll { .. } => false,
            #[cfg(target_os = "linux")]
            Poller::Uring(ring) => ring.has_ops_in_flight(),
        }
    }

    /// The `mio` registry, under epoll.
    pub(crate) fn registry(&self) -> Option<io::Result<mio::Registry>> {
        match self {
            Poller::Epoll { poll, .. } => Some(poll.borrow().registry().try_clone()),
            #[cfg(target_os = "linux")]
            Poller::Uring(_) => None,
        }
    }

    /// The ring, under io_uring.
    #[cfg(target_os = "linux")]
    pub(crate) fn ring(&self) -> Option<&Rc<Ring>> {
        match self {
            Poller::Uring(r) => Some(r),
            Poller::Epoll { .. } => None,
        }
    }
}
