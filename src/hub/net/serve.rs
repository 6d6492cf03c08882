//! [`serve`]: the accept loop of a server, one green thread per
//! connection, spread over the runtime's workers, that keeps serving when
//! one connection's green thread cannot start.
//!
//! Owns that loop and the guard that reports a connection whose green
//! thread never ran. Uses the listener, the cancellation payload, the
//! runtime's spawn (`Shared::spawn_at`, with the caller's site), the
//! worker (is the runtime shutting down) and the log facade.
//!
//! # Placement
//! The loop is the plain accept-then-spawn loop: with several workers, a
//! green thread's first spawn after an accept is dealt out over the
//! workers in turn, passing over a stalled or clearly more loaded worker
//! (`Worker::push_unstarted`, see `hub::net`'s module doc), so the
//! connections are spread evenly and exactly while the workers are alike. Spawned onto
//! the accepting worker's deque instead, nearly all of them started there:
//! that worker accepts a burst and starts each new task before a sleeping
//! worker has woken to steal it, and a socket's waits stay with the poller
//! of the worker its green thread runs on (green threads never migrate),
//! so one worker served the whole server.

use std::any::Any;
use std::io;
use std::net::SocketAddr;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe, Location};
use std::sync::Arc;

use crate::diag::diag_warn;

use super::super::runtime::Handle;
use super::super::shared::Shared;
use super::super::unwind::CancelUnwind;
use super::super::worker;
use super::tcp_listener::TcpListener;
use super::tcp_stream::TcpStream;

/// Accept connections on `listener` for ever, running `handler` on a new
/// green thread for each, named `conn <peer address>` (as `dump()`, the
/// watchdog and a timed-out socket's error show it). With several workers the connections are dealt
/// out over the workers in turn, passing over a worker that is stalled or
/// clearly more loaded than another (each stays on the worker it starts
/// on).
/// A connection whose
/// green thread cannot start (no stack could be mapped: the
/// `vm.max_map_count` limit on guarded stacks, or memory) is closed and
/// reported through the log facade with its peer address; the loop goes
/// on. Out of descriptors, `accept` backs off (see
/// [`TcpListener::accept`]). Returns `Ok(())` when the runtime shuts down
/// ([`Handle::shutdown`], [`Runtime::shutdown_timeout`](super::super::Runtime::shutdown_timeout),
/// the runtime dropped): a stop on purpose; the calling green thread is
/// still cancelled at its next parking point, and the handlers are
/// cancelled too, so their destructors run. Cancelled otherwise
/// ([`JoinHandle::cancel`](super::super::JoinHandle::cancel)), it unwinds
/// as any parking point does.
///
/// # Errors
/// An `accept` error that is not transient, or [`HubError::NoRuntime`](super::super::HubError::NoRuntime)
/// (as `Other`) outside a runtime.
///
/// ```
/// use std::io::{Read, Write};
/// use greenlet::hub::{self, net::{serve, TcpListener, TcpStream}};
/// hub::run(|| {
///     let l = TcpListener::bind("127.0.0.1:0").unwrap();
///     let addr = l.local_addr().unwrap();
///     let server = hub::spawn(move || serve(l, |mut s| {
///         let mut b = [0u8; 3];
///         s.read_exact(&mut b).unwrap();
///         s.write_all(&b).unwrap();
///     }));
///     let mut c = TcpStream::connect(addr).unwrap();
///     c.write_all(b"abc").unwrap();
///     let mut back = [0u8; 3];
///     c.read_exact(&mut back).unwrap();
///     assert_eq!(&back, b"abc");
///     server.cancel();
/// })
/// .unwrap();
/// ```
#[track_caller]
pub fn serve<F>(listener: TcpListener, handler: F) -> io::Result<()>
where
    F: Fn(TcpStream) + Send + Sync + 'static,
{
    let site = Location::caller();
    let handle = Handle::current().map_err(io::Error::other)?;
    let handler = Arc::new(handler);
    loop {
        let (stream, peer) = match catch_unwind(AssertUnwindSafe(|| listener.accept())) {
            Ok(accepted) => accepted?,
            Err(payload) => return stopped(&handle.shared, payload),
        };
        let conn = Unstarted {
            stream: Some(stream),
            peer,
        };
        let h = Arc::clone(&handler);
        let run = move || {
            let mut conn = conn;
            if let Some(s) = conn.stream.take() {
                h(s);
            }
        };
        let name = format!("conn {peer}");
        drop(handle.shared.spawn_at(run, Some(name), None, site));
    }
}

/// The accept loop was unwound by `payload`: a cancellation during the
/// runtime's shutdown is a stop on purpose, `Ok(())` (asked for again, so
/// the caller's next parking point goes on with the shutdown); anything
/// else unwinds on.
#[cold]
fn stopped(shared: &Shared, payload: Box<dyn Any + Send>) -> io::Result<()> {
    if payload.is::<CancelUnwind>() && shared.is_shutting_down() {
        if let Some((_, task)) = worker::current_task() {
            task.request_cancel();
        }
        return Ok(());
    }
    resume_unwind(payload)
}

/// A connection not yet handed to its handler. Dropped with the stream
/// still in it, its green thread never ran: say so.
struct Unstarted {
    stream: Option<TcpStream>,
    peer: SocketAddr,
}

impl Drop for Unstarted {
    fn drop(&mut self) {
        if self.stream.is_none() {
            return;
        }
        let shutting_down = worker::current().is_some_and(|w| w.shared.is_shutting_down());
        if !shutting_down {
            diag_warn!(
                "hub::net::serve: rejected the connection from {}: its green thread could not \
                 start (no stack could be mapped: the vm.max_map_count limit on guarded stacks, or \
                 memory); the connection is closed and the server keeps serving",
                self.peer
            );
        }
    }
}
