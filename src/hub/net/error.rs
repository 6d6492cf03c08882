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
/// let e: std::io::Error = NetError::TimedOut {
///     op: "read",
///     after: Duration::from_millis(5),
///     task: Some("'reader' (id 7)".into()),
/// }
/// .into();
/// assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
/// assert!(e.to_string().contains("read timed out after 5ms in green thread 'reader' (id 7)"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// An operation's deadline passed before the socket was ready.
    #[error(
        "socket {op} timed out after {after:?}{} (the deadline set with set_read_timeout, \
         set_write_timeout or connect_timeout)",
        in_task(.task)
    )]
    TimedOut {
        /// The operation: `read`, `write`, `accept`, `connect`, `recv`, `send`.
        op: &'static str,
        /// The timeout it ran with.
        after: Duration,
        /// The green thread that waited, as `'name' (id N)`; `None` on a
        /// plain thread.
        task: Option<String>,
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
    /// A descriptor handed to [`Fd::new`](super::Fd::new) is not open.
    #[error("fd {fd} is not an open file descriptor")]
    FdNotOpen {
        /// The descriptor.
        fd: i32,
    },
    /// A descriptor handed to [`Fd::new`](super::Fd::new) is one the
    /// poller cannot wait on.
    #[error(
        "fd {fd} is a {what}, which epoll cannot wait on (it is always ready): read or write it \
         directly, or on spawn_blocking if it may be slow"
    )]
    NotPollable {
        /// The descriptor.
        fd: i32,
        /// What it is: "regular file", "directory".
        what: &'static str,
    },
    /// A system call on an address failed; the message names the address
    /// (the OS's own message does not).
    #[error("{op} {addr}: {message}")]
    Addr {
        /// The operation: `bind`, `connect`.
        op: &'static str,
        /// The address or path, as given.
        addr: String,
        /// The OS's error kind.
        kind: io::ErrorKind,
        /// The OS's message.
        message: String,
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
            NetError::ZeroTimeout { .. }
            | NetError::NoAddress { .. }
            | NetError::FdNotOpen { .. }
            | NetError::NotPollable { .. } => io::ErrorKind::InvalidInput,
            NetError::Addr { kind, .. } => *kind,
        }
    }
}

impl NetError {
    /// `e` (from `op` on `addr`) as an error whose message names the
    /// address, keeping its kind.
    pub(crate) fn at(op: &'static str, addr: impl std::fmt::Display, e: io::Error) -> io::Error {
        if e.get_ref().is_some_and(|inner| inner.is::<NetError>()) {
            return e;
        }
        NetError::Addr {
            op,
            addr: addr.to_string(),
            kind: e.kind(),
            message: e.to_string(),
        }
        .into()
    }
}

impl From<NetError> for io::Error {
    fn from(e: NetError) -> io::Error {
        io::Error::new(e.kind(), e)
    }
}

/// ` in green thread 'name' (id N)`, or nothing on a plain thread.
fn in_task(task: &Option<String>) -> String {
    task.as_ref()
        .map(|t| format!(" in green thread {t}"))
        .unwrap_or_default()
}
