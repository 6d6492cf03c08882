//! [`TcpListener`]: a listening TCP socket whose `accept` parks the calling
//! green thread, and backs off when the process is out of descriptors.
//!
//! Owns the type and its methods. Uses [`Source`] for the waiting, the
//! hub's `sleep` for the back-off, and the log facade to report it.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::diag::diag_warn;

use super::super::time::sleep;
use super::error::NetError;
use super::note_accepted;
use super::readiness::Readiness;
use super::registration::{Direction, Source};
use super::resolve::{addrs_of, ToSocketAddrs};
use super::tcp_stream::TcpStream;

/// First back-off after an accept ran out of a resource.
const BACKOFF_MIN: Duration = Duration::from_millis(1);
/// Longest back-off.
const BACKOFF_MAX: Duration = Duration::from_millis(128);

/// A TCP listener for green threads (see the [module docs](super)).
///
/// # Example
/// ```
/// use greenlet::hub::{self, net::{TcpListener, TcpStream}};
/// hub::run(|| {
///     let l = TcpListener::bind("127.0.0.1:0").unwrap();
///     let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
///     let (s, peer) = l.accept().unwrap();
///     assert_eq!(peer, c.local_addr().unwrap());
///     assert_eq!(s.peer_addr().unwrap(), peer);
/// })
/// .unwrap();
/// ```
pub struct TcpListener {
    src: Source<mio::net::TcpListener>,
    backoffs: AtomicU64,
}

/// The accept queue's length [`TcpListener::bind`] asks for (the kernel
/// caps it at `net.core.somaxconn`).
const BACKLOG: libc::c_int = 1024;

/// Listen again with [`BACKLOG`]: `mio` (like std) listens with 128, and
/// 500 clients connecting at once then overflow the accept queue; the
/// kernel drops the overflow's handshakes, and those clients wait for a
/// retransmission (200 ms for a dropped first request, 1 s for a dropped
/// SYN). Listening again on a listening socket only changes its backlog.
fn deepen_backlog(l: mio::net::TcpListener) -> io::Result<mio::net::TcpListener> {
    // SAFETY: `l` owns the descriptor, which stays open for the call.
    if unsafe { libc::listen(l.as_raw_fd(), BACKLOG) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(l)
}

impl TcpListener {
    /// Its readiness to accept a connection, as an arm of [`select`](crate::hub::select)
    /// (see [`Readiness`]).
    ///
    /// ```
    /// use greenlet::hub::{self, net::TcpListener, Selectable};
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let now = Some(std::time::Instant::now());
    /// assert!(hub::select(&[&l.select_readable() as &dyn Selectable], now).is_err());
    /// let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// assert_eq!(hub::select(&[&l.select_readable() as &dyn Selectable], None), Ok(0));
    /// ```
    pub fn select_readable(&self) -> Readiness<'_> {
        Readiness::readable(&self.src)
    }

    /// Bind to `addr` (the first address it resolves to that binds), with
    /// `SO_REUSEADDR` and a backlog of 1024. A host name is resolved off
    /// the worker (see [`ToSocketAddrs`]).
    ///
    /// # Errors
    /// The OS's error for the last address tried (`AddrInUse`, ...), its
    /// message naming that address ([`NetError::Addr`]), or
    /// [`NetError::NoAddress`].
    ///
    /// ```
    /// let l = greenlet::hub::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// assert!(l.local_addr().unwrap().port() != 0);
    /// ```
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        let mut last = None;
        for a in addrs_of(&addr)? {
            match mio::net::TcpListener::bind(a).and_then(deepen_backlog) {
                Ok(l) => return Ok(TcpListener::from_mio(l)),
                Err(e) => last = Some(NetError::at("bind", a, e)),
            }
        }
        Err(last.unwrap_or_else(|| {
            NetError::NoAddress {
                addr: addr.describe(),
            }
            .into()
        }))
    }

    fn from_mio(l: mio::net::TcpListener) -> TcpListener {
        TcpListener {
            src: Source::new(l),
            backoffs: AtomicU64::new(0),
        }
    }

    /// Accept a connection: parks until one arrives (or the read timeout,
    /// if one is set, passes). When the process or system is out of
    /// descriptors or buffers (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`) it
    /// parks with an exponential back-off and tries again, reporting the
    /// episode through the log facade, until the resource frees up.
    ///
    /// # Errors
    /// `TimedOut` ([`NetError::TimedOut`]) after the read timeout; other
    /// OS errors.
    ///
    /// ```
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// let (s, _) = l.accept().unwrap();
    /// assert!(s.peer_addr().is_ok());
    /// # }).unwrap();
    /// ```
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let mut delay = BACKOFF_MIN;
        let mut episode = 0u64;
        loop {
            let deadline = self.src.read_deadline("accept");
            match self.src.io(Direction::Read, deadline, |l| l.accept()) {
                Ok((s, peer)) => {
                    if episode > 0 {
                        diag_warn!(
                            "hub::net: accept on {} recovered after {episode} back-offs",
                            self.addr_text()
                        );
                    }
                    note_accepted();
                    return Ok((TcpStream::from_mio(s), peer));
                }
                Err(e) if is_exhaustion(&e) => {
                    if episode == 0 {
                        diag_warn!(
                            "hub::net: accept on {} failed: {e}; backing off (from {BACKOFF_MIN:?} \
                             up to {BACKOFF_MAX:?} between tries) until descriptors free up \
                             (raise RLIMIT_NOFILE with ulimit -n if this persists)",
                            self.addr_text()
                        );
                    }
                    episode += 1;
                    self.backoffs.fetch_add(1, Ordering::Relaxed);
                    sleep(delay);
                    delay = (delay * 2).min(BACKOFF_MAX);
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn addr_text(&self) -> String {
        match self.local_addr() {
            Ok(a) => a.to_string(),
            Err(_) => format!("fd {}", self.as_raw_fd()),
        }
    }

    /// How many times [`accept`](Self::accept) has backed off for lack of
    /// descriptors or buffers, over the listener's life.
    ///
    /// ```
    /// let l = greenlet::hub::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// assert_eq!(l.backoffs(), 0);
    /// ```
    pub fn backoffs(&self) -> u64 {
        self.backoffs.load(Ordering::Relaxed)
    }

    /// The local address.
    ///
    /// # Errors
    /// As `std::net::TcpListener::local_addr`.
    ///
    /// ```
    /// let l = greenlet::hub::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// assert!(l.local_addr().unwrap().ip().is_loopback());
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.src.get().local_addr()
    }

    /// Bound each accept (`None`: wait without end).
    ///
    /// # Errors
    /// `InvalidInput` for a zero duration.
    ///
    /// ```
    /// use std::time::Duration;
    /// # greenlet::hub::run(|| {
    /// let l = greenlet::hub::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// l.set_accept_timeout(Some(Duration::from_millis(5))).unwrap();
    /// assert_eq!(l.accept().unwrap_err().kind(), std::io::ErrorKind::TimedOut);
    /// # }).unwrap();
    /// ```
    pub fn set_accept_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.src.read_timeout.set("accept", d)
    }

    /// Wrap a `std::net::TcpListener` (switched to non-blocking mode).
    ///
    /// # Errors
    /// If it cannot be made non-blocking.
    ///
    /// ```
    /// let std_l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let l = greenlet::hub::net::TcpListener::from_std(std_l).unwrap();
    /// let back: std::net::TcpListener = l.into_std().unwrap();
    /// # drop(back);
    /// ```
    pub fn from_std(l: std::net::TcpListener) -> io::Result<TcpListener> {
        l.set_nonblocking(true)?;
        Ok(TcpListener::from_mio(mio::net::TcpListener::from_std(l)))
    }

    /// Unwrap into a blocking `std::net::TcpListener` (deregistered).
    ///
    /// # Errors
    /// If it cannot be made blocking again.
    ///
    /// ```
    /// let l = greenlet::hub::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let std_l = l.into_std().unwrap();
    /// # drop(std_l);
    /// ```
    pub fn into_std(self) -> io::Result<std::net::TcpListener> {
        let l: std::net::TcpListener = self.src.into_inner().into();
        l.set_nonblocking(false)?;
        Ok(l)
    }
}

/// Whether an accept failed for lack of a resource that may free up.
fn is_exhaustion(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

impl TryFrom<std::net::TcpListener> for TcpListener {
    type Error = io::Error;
    fn try_from(l: std::net::TcpListener) -> io::Result<TcpListener> {
        TcpListener::from_std(l)
    }
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.src.get().as_raw_fd()
    }
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpListener")
            .field("addr", &self.local_addr().ok())
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}
