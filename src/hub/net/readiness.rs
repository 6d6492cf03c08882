//! A socket's (or descriptor's) readiness as an arm of
//! [`select`](crate::hub::select): [`Readiness`].
//!
//! Owns: [`Readiness`] and the crate-private [`WatchReady`] it reaches a
//! socket's [`Source`] through. Uses the source's readiness hooks
//! (`registration`); `selecting` implements the select arm.

use std::io;
use std::os::fd::AsRawFd;

use super::registration::{Direction, Source};

/// What a select arm needs of a socket's [`Source`], whatever its type.
pub(crate) trait WatchReady {
    /// See [`Source::is_ready_now`].
    fn is_ready_now(&self, dir: Direction) -> io::Result<bool>;
    /// See [`Source::watch`].
    fn watch(&self, dir: Direction) -> io::Result<bool>;
}

impl<S: AsRawFd> WatchReady for Source<S> {
    fn is_ready_now(&self, dir: Direction) -> io::Result<bool> {
        Source::is_ready_now(self, dir)
    }
    fn watch(&self, dir: Direction) -> io::Result<bool> {
        Source::watch(self, dir)
    }
}

/// A socket's or descriptor's readiness to read (or accept) or to write,
/// as an arm of [`select`](crate::hub::select): made by the
/// `select_readable` / `select_writable` methods of the [`net`](super)
/// types. The arm wins when an operation in that direction would not
/// block (data or a connection is waiting, there is room to write, the
/// peer closed, or the socket has an error); nothing is read or written:
/// do the operation after `select` returns. Another green thread using the
/// same socket may take the data first; the operation then parks as usual.
///
/// On a green thread a readiness edge of the worker's poller wakes the
/// select. A plain thread has no poller: there, a select with a readiness
/// arm looks again every [`PLAIN_THREAD_POLL`](Readiness::PLAIN_THREAD_POLL).
///
/// ```
/// use std::io::{Read, Write};
/// use greenlet::hub::{self, net, Selectable};
/// hub::run(|| {
///     let listener = net::TcpListener::bind("127.0.0.1:0").unwrap();
///     let addr = listener.local_addr().unwrap();
///     let client = hub::spawn(move || {
///         let mut s = net::TcpStream::connect(addr).unwrap();
///         s.write_all(b"hi").unwrap();
///         hub::sleep(std::time::Duration::from_millis(50));
///     });
///     let (mut conn, _) = listener.accept().unwrap();
///     let ready = hub::select(&[&conn.select_readable() as &dyn Selectable], None).unwrap();
///     assert_eq!(ready, 0);
///     let mut buf = [0; 2];
///     conn.read_exact(&mut buf).unwrap();
///     assert_eq!(&buf, b"hi");
///     client.join().unwrap();
/// })
/// .unwrap();
/// ```
pub struct Readiness<'a> {
    src: &'a dyn WatchReady,
    dir: Direction,
    /// Registering failed: the arm counts as ready, and the operation
    /// reports the error.
    failed: std::cell::Cell<bool>,
}

impl<'a> Readiness<'a> {
    /// How often a select on a plain thread looks at a readiness arm again
    /// (it cannot be woken by a poller). Shorter reacts sooner and costs a
    /// `poll(2)` per arm each time.
    pub const PLAIN_THREAD_POLL: std::time::Duration = std::time::Duration::from_millis(10);

    pub(crate) fn readable(src: &'a dyn WatchReady) -> Readiness<'a> {
        Readiness {
            src,
            dir: Direction::Read,
            failed: std::cell::Cell::new(false),
        }
    }

    pub(crate) fn writable(src: &'a dyn WatchReady) -> Readiness<'a> {
        Readiness {
            src,
            dir: Direction::Write,
            failed: std::cell::Cell::new(false),
        }
    }

    /// Whether an operation in its direction would not block now; an
    /// error asking, or registering, counts as ready (the operation
    /// reports it).
    pub(crate) fn is_ready(&self) -> bool {
        self.failed.get() || self.src.is_ready_now(self.dir).unwrap_or(true)
    }

    /// Register the caller for the next readiness edge: whether it could
    /// (a green thread; a failure counts, and makes the arm ready).
    pub(crate) fn watch(&self) -> bool {
        self.src.watch(self.dir).unwrap_or_else(|_| {
            self.failed.set(true);
            true
        })
    }
}

impl std::fmt::Debug for Readiness<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readiness").field("dir", &self.dir).finish()
    }
}
