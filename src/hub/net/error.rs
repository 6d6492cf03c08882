//! The network layer's error type, [`NetError`]: what went wrong, carried
//! inside the [`std::io::Error`] that `Read`/`Write` must return.
//!
//! Owns only the type, its messages and its conversion to `io::Error`.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// Why a socket operation of [`net`](super) failed, when it is this layer's
/// own reason rather than the OS's. Reaches the caller as the inner error
/// of an [`io::Error`] (`err.get_ref()` downcasts to it).
///
/// ```
/// use std::time::Duration;
/// use greenlet::hub::net::NetError;
/// let e: std::io::Error = NetError::TimedOut { op: "read", after: Duration::from_millis(5) }.into();
/// assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
/// assert!(e.to_string().contains("read timed out after 5ms"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// An operation's deadline passed before the socket was ready.
    #[error(
        "socket {op} timed out after {after:?} (the deadline set with set_read_timeout, \
         set_write_timeout or connect_timeout)"
    )]
    TimedOut {
        /// The operation: `read`, `write`, `accept`, `connect`, `recv`, `send`.
        op: &'static str,
        /// The timeout it ran with.
        after: Duration,
    },
    /// A zero timeout was given where `None` means "no timeout".
    #[error("a zero {op} timeout is not allowed: pass None for no timeout")]
    ZeroTimeout {
        /// Which timeout.
        op: &'static str,
    },
    /// The address given resolved to no socket address.
    #[error("'{addr}' resolved to no socket address")]
    NoAddress {
        /// The address as given.
        addr: String,
    },
    /// A connect's deadline passed.
    #[error("connecting to {addr} timed out after {after:?}")]
    ConnectTimedOut {
        /// The peer.
        addr: SocketAddr,
        /// The timeout.
        after: Duration,
    },
}

impl NetError {
    fn kind(&self) -> io::ErrorKind {
        match self {
            NetError::TimedOut { .. } | NetError::ConnectTimedOut { .. } => io::ErrorKind::TimedOut,
            NetError::ZeroTimeout { .. } | NetError::NoAddress { .. } => {
                io::ErrorKind::InvalidInput
            }
        }
    }
}

impl From<NetError> for io::Error {
    fn from(e: NetError) -> io::Error {
        io::Error::new(e.kind(), e)
    }
}
