//! [`serve`]: the accept loop of a server, one green thread per
//! connection, that keeps serving when one connection's green thread cannot
//! start.
//!
//! Owns that loop and the guard that reports a connection whose green
//! thread never ran. Uses the listener, the hub's spawn, the worker (is the
//! runtime shutting down) and the log facade.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::diag::diag_warn;

use super::super::runtime::Handle;
use super::super::worker;
use super::tcp_listener::TcpListener;
use super::tcp_stream::TcpStream;

/// Accept connections on `listener` for ever, running `handler` on a new
/// green thread for each (it may start on any worker). A connection whose
/// green thread cannot start (no stack could be mapped: the
/// `vm.max_map_count` limit on guarded stacks, or memory) is closed and
/// reported through the log facade with its peer address; the loop goes
/// on. Out of descriptors, `accept` backs off (see
/// [`TcpListener::accept`]). Ends when the calling green thread is
/// cancelled (the runtime's shutdown cancels the handlers too, so their
/// destructors run).
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
pub fn serve<F>(listener: TcpListener, handler: F) -> io::Result<()>
where
    F: Fn(TcpStream) + Send + Sync + 'static,
{
    let handle = Handle::current().map_err(io::Error::other)?;
    let handler = Arc::new(handler);
    loop {
        let (stream, peer) = listener.accept()?;
        let conn = Unstarted {
            stream: Some(stream),
            peer,
        };
        let h = Arc::clone(&handler);
        drop(handle.spawn(move || {
            let mut conn = conn;
            if let Some(s) = conn.stream.take() {
                h(s);
            }
        }));
    }
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
