//! Network I/O for green threads: TCP, UDP and Unix-domain sockets that
//! read like `std::net` and **park** the calling green thread instead of
//! blocking its worker, and readiness for any other pollable descriptor.
//!
//! [`TcpListener`], [`TcpStream`] (with [`TcpStream::into_split`]'s owned
//! halves), [`UdpSocket`], [`UnixListener`], [`UnixStream`] and
//! [`UnixDatagram`] wrap non-blocking `mio` sockets; [`Fd`] wraps any
//! descriptor epoll can wait on (a [`pipe`], an eventfd, a pidfd).
//! Addresses are [`ToSocketAddrs`]: a host name is resolved on the
//! blocking pool while the green thread parks. An operation first tries the system call; when the socket is
//! not ready, the green thread registers for readiness and parks (a parking
//! point: [`JoinHandle::cancel`](super::JoinHandle::cancel), a
//! [`timeout`](super::timeout) and the runtime's shutdown unwind from it).
//! Since [`std::io::Read`] and [`std::io::Write`] are the std traits,
//! blocking-style code (a parser, `BufReader`, `io::copy`) works over them
//! unchanged.
//!
//! ```
//! use std::io::{Read, Write};
//! use greenlet::hub::{self, net::{TcpListener, TcpStream}};
//! let reply = hub::run(|| {
//!     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
//!     let addr = listener.local_addr().unwrap();
//!     let server = hub::spawn(move || {
//!         let (mut s, _) = listener.accept().unwrap();
//!         let mut buf = [0u8; 5];
//!         s.read_exact(&mut buf).unwrap();
//!         s.write_all(&buf).unwrap();
//!     });
//!     let mut c = TcpStream::connect(addr).unwrap();
//!     c.write_all(b"hello").unwrap();
//!     let mut back = String::new();
//!     c.read_to_string(&mut back).unwrap();
//!     server.join().unwrap();
//!     back
//! })
//! .unwrap();
//! assert_eq!(reply, "hello");
//! ```
//!
//! # Which poller, which thread
//! A socket registers with the `mio` poller of the worker whose green
//! thread first has to wait on it, lazily: a stream accepted on one worker
//! and moved into a [`spawn`](super::spawn)ed handler registers where the
//! handler runs. Green threads never migrate, so the socket's waits are
//! then served by that worker's poller. A socket may still be shared with
//! green threads of other workers (an `Arc<TcpStream>` read by one and
//! written by another): their waits are woken through the registering
//! worker's poller and the usual cross-worker wake, which works but costs
//! a hop; prefer [`spawn_local`](super::spawn_local) for a reader/writer
//! pair. On a plain thread (not a green thread) an operation blocks the
//! thread in `poll(2)`, honouring the same deadlines, as the hub's other
//! parking functions do.
//!
//! # An accept loop spreads its connections
//! On a runtime of several workers, the first green thread a green thread
//! spawns after an `accept` (of a [`TcpListener`] or a [`UnixListener`])
//! is dealt out over the workers in turn, passing over a worker that is
//! stalled (one of its green threads computes or blocks its thread) or
//! holds clearly more green threads and backlog than another, so the
//! accept loop written the `std` way spreads its handlers ([`serve()`] is
//! that loop): `loop { let (s, _) = l.accept()?; hub::spawn(move ||
//! handle(s)); }`. Other spawns start beside their spawner (see the hub's
//! module doc).
//!
//! # Deadlines
//! `set_read_timeout` / `set_write_timeout` bound each single operation
//! (one `read`, one `write`, one `accept`, one `recv`) like `std::net`'s:
//! the operation fails with [`std::io::ErrorKind::TimedOut`], carrying a
//! [`NetError::TimedOut`]. [`TcpStream::connect_timeout`] bounds a connect.
//!
//! # Resource exhaustion
//! [`TcpListener::accept`] meets `EMFILE`/`ENFILE`/`ENOBUFS`/`ENOMEM` by
//! parking with an exponential back-off (1 ms doubling to 128 ms) and
//! trying again, reporting the episode through the log facade, rather than
//! spinning on a listener that stays readable or failing the accept loop.
//!
//! Module map: `registration` (readiness, the per-worker table, the
//! dispatch called by the worker's poll), `tcp_listener`, `tcp_stream`,
//! `tcp_split` (a stream's owned halves), `udp`, `unix_listener`,
//! `unix_stream`, `unix_datagram`, `fd` (any descriptor, pipes),
//! `resolve` (addresses, host names looked up off the worker), `serve`
//! (an accept loop with one green thread per connection),
//! `sys` (a stream's `recvfrom`/`sendto` without libc's cancellation-point
//! wrappers), `error`.
//!
//! Uses the worker (its current task, its registry accessor), `park`,
//! `time` and `blocking` of the hub, and `mio`'s socket types.

mod error;
mod fd;
mod readiness;
mod registration;
mod resolve;
mod serve;
mod sys;
mod tcp_listener;
mod tcp_split;
mod tcp_stream;
mod udp;
mod unix_datagram;
mod unix_listener;
mod unix_stream;

pub use self::error::NetError;
pub(crate) use self::fd::set_nonblocking;
pub use self::fd::{pipe, Fd};
pub use self::readiness::Readiness;
pub(crate) use self::registration::dispatch;
#[cfg(target_os = "linux")]
pub(crate) use self::registration::dispatch_ring;
#[cfg(target_os = "linux")]
pub(crate) use self::registration::Deadline;
pub use self::resolve::ToSocketAddrs;
pub use self::serve::serve;
pub use self::tcp_listener::TcpListener;
pub use self::tcp_split::{OwnedReadHalf, OwnedWriteHalf, ReuniteError};
pub use self::tcp_stream::TcpStream;
pub use self::udp::UdpSocket;
pub use self::unix_datagram::UnixDatagram;
pub use self::unix_listener::UnixListener;
pub use self::unix_stream::UnixStream;

/// An accept succeeded on the calling green thread: its next spawn is
/// dealt out over the workers (see the module doc).
fn note_accepted() {
    super::worker::with_current(|w| {
        if let Some(w) = w {
            w.note_accepted();
        }
    });
}
