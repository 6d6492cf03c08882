//! [`UnixDatagram`]: a Unix-domain datagram socket whose sends and
//! receives park the calling green thread.
//!
//! Owns the type and its methods. Uses [`Source`] for the waiting.

use std::fmt;
use std::io;
use std::net::Shutdown;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::error::NetError;
use super::readiness::Readiness;
use super::registration::{Direction, Source};

/// A Unix-domain datagram socket for green threads:
/// `std::os::unix::net::UnixDatagram`'s interface, parking instead of
/// blocking (see the [module docs](super)).
///
/// # Example
/// ```
/// use greenlet::hub::{self, net::UnixDatagram};
/// hub::run(|| {
///     let (a, b) = UnixDatagram::pair().unwrap();
///     let echo = hub::spawn(move || {
///         let mut buf = [0u8; 16];
///         let n = b.recv(&mut buf).unwrap();
///         b.send(&buf[..n]).unwrap();
///     });
///     a.send(b"dgram").unwrap();
///     let mut buf = [0u8; 16];
///     let n = a.recv(&mut buf).unwrap();
///     assert_eq!(&buf[..n], b"dgram");
///     echo.join().unwrap();
/// })
/// .unwrap();
/// ```
pub struct UnixDatagram {
    src: Source<mio::net::UnixDatagram>,
}

impl UnixDatagram {
    /// Its readiness to read, as an arm of [`select`](crate::hub::select)
    /// (see [`Readiness`]).
    ///
    /// ```
    /// use greenlet::hub::{self, Selectable};
    /// let (s, _peer) = greenlet::hub::net::UnixDatagram::pair().unwrap();
    /// let now = Some(std::time::Instant::now());
    /// assert!(hub::select(&[&s.select_readable() as &dyn Selectable], now).is_err());
    /// assert_eq!(hub::select(&[&s.select_writable() as &dyn Selectable], now), Ok(0));
    /// ```
    pub fn select_readable(&self) -> Readiness<'_> {
        Readiness::readable(&self.src)
    }

    /// Its readiness to write, as an arm of [`select`](crate::hub::select)
    /// (see [`Readiness`] and [`select_readable`](Self::select_readable)).
    pub fn select_writable(&self) -> Readiness<'_> {
        Readiness::writable(&self.src)
    }

    fn from_mio(s: mio::net::UnixDatagram) -> UnixDatagram {
        UnixDatagram {
            src: Source::new(s),
        }
    }

    /// A socket bound to `path`.
    ///
    /// # Errors
    /// The OS's error (`AddrInUse`, ...), naming the path
    /// ([`NetError::Addr`]).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("greenlet-doc-db-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let s = greenlet::hub::net::UnixDatagram::bind(dir.join("d.sock")).unwrap();
    /// assert!(s.local_addr().unwrap().as_pathname().is_some());
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixDatagram> {
        let path = path.as_ref();
        mio::net::UnixDatagram::bind(path)
            .map(UnixDatagram::from_mio)
            .map_err(|e| NetError::at("bind", path.display(), e))
    }

    /// A socket bound to no address.
    ///
    /// # Errors
    /// `socket(2)`'s (out of descriptors).
    ///
    /// ```
    /// let s = greenlet::hub::net::UnixDatagram::unbound().unwrap();
    /// assert!(s.local_addr().unwrap().is_unnamed());
    /// ```
    pub fn unbound() -> io::Result<UnixDatagram> {
        mio::net::UnixDatagram::unbound().map(UnixDatagram::from_mio)
    }

    /// A connected pair of sockets.
    ///
    /// # Errors
    /// `socketpair(2)`'s (out of descriptors).
    ///
    /// ```
    /// let (a, b) = greenlet::hub::net::UnixDatagram::pair().unwrap();
    /// # drop((a, b));
    /// ```
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        let (a, b) = mio::net::UnixDatagram::pair()?;
        Ok((UnixDatagram::from_mio(a), UnixDatagram::from_mio(b)))
    }

    /// Set the default peer for [`send`](Self::send) and
    /// [`recv`](Self::recv).
    ///
    /// # Errors
    /// The OS's error, naming the path ([`NetError::Addr`]).
    ///
    /// ```
    /// let s = greenlet::hub::net::UnixDatagram::unbound().unwrap();
    /// let err = s.connect("/nonexistent/peer.sock").unwrap_err();
    /// assert!(err.to_string().contains("/nonexistent/peer.sock"));
    /// ```
    pub fn connect(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let path = path.as_ref();
        self.src
            .get()
            .connect(path)
            .map_err(|e| NetError::at("connect", path.display(), e))
    }

    /// Send `buf` to `path`, parking while the socket's buffer is full.
    ///
    /// # Errors
    /// The OS's error, naming the path ([`NetError::Addr`]); `TimedOut`
    /// after the write timeout.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("greenlet-doc-st-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// use greenlet::hub::net::UnixDatagram;
    /// let r = UnixDatagram::bind(dir.join("r.sock")).unwrap();
    /// let s = UnixDatagram::unbound().unwrap();
    /// assert_eq!(s.send_to(b"to", dir.join("r.sock")).unwrap(), 2);
    /// let mut buf = [0u8; 4];
    /// assert_eq!(r.recv(&mut buf).unwrap(), 2);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn send_to(&self, buf: &[u8], path: impl AsRef<Path>) -> io::Result<usize> {
        let path = path.as_ref();
        self.src
            .io(Direction::Write, self.src.write_deadline("send"), |s| {
                s.send_to(buf, path)
            })
            .map_err(|e| NetError::at("send to", path.display(), e))
    }

    /// Send `buf` to the connected peer, parking while the buffer is full.
    ///
    /// # Errors
    /// The OS's error (`NotConnected`, ...); `TimedOut` after the write
    /// timeout.
    ///
    /// ```
    /// let (a, _b) = greenlet::hub::net::UnixDatagram::pair().unwrap();
    /// assert_eq!(a.send(b"x").unwrap(), 1);
    /// ```
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.src
            .io(Direction::Write, self.src.write_deadline("send"), |s| {
                s.send(buf)
            })
    }

    /// Receive one datagram and its sender's address, parking until one
    /// comes.
    ///
    /// # Errors
    /// The OS's error; `TimedOut` after the read timeout.
    ///
    /// ```
    /// let (a, b) = greenlet::hub::net::UnixDatagram::pair().unwrap();
    /// a.send(b"hey").unwrap();
    /// let mut buf = [0u8; 8];
    /// let (n, _from) = b.recv_from(&mut buf).unwrap();
    /// assert_eq!(&buf[..n], b"hey");
    /// ```
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.src
            .io(Direction::Read, self.src.read_deadline("recv"), |s| {
                s.recv_from(buf)
            })
    }

    /// Receive one datagram from the connected peer, parking until one
    /// comes.
    ///
    /// # Errors
    /// The OS's error; `TimedOut` after the read timeout.
    ///
    /// ```
    /// let (a, b) = greenlet::hub::net::UnixDatagram::pair().unwrap();
    /// a.send(b"yo").unwrap();
    /// assert_eq!(b.recv(&mut [0u8; 8]).unwrap(), 2);
    /// ```
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.src
            .io(Direction::Read, self.src.read_deadline("recv"), |s| {
                s.recv(buf)
            })
    }

    /// The local address.
    ///
    /// # Errors
    /// As `std::os::unix::net::UnixDatagram::local_addr`.
    ///
    /// ```
    /// let (a, _b) = greenlet::hub::net::UnixDatagram::pair().unwrap();
    /// assert!(a.local_addr().unwrap().is_unnamed());
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.src.get().local_addr()
    }

    /// The connected peer's address.
    ///
    /// # Errors
    /// `NotConnected` if it has none.
    ///
    /// ```
    /// let s = greenlet::hub::net::UnixDatagram::unbound().unwrap();
    /// assert!(s.peer_addr().is_err());
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.src.get().peer_addr()
    }

    /// Shut down the read half, the write half, or both.
    ///
    /// # Errors
    /// As `std::os::unix::net::UnixDatagram::shutdown`.
    ///
    /// ```
    /// let (a, _b) = greenlet::hub::net::UnixDatagram::pair().unwrap();
    /// a.shutdown(std::net::Shutdown::Both).unwrap();
    /// ```
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.src.get().shutdown(how)
    }

    /// Bound each receive (`None`: no bound).
    ///
    /// # Errors
    /// `InvalidInput` for a zero duration.
    ///
    /// ```
    /// greenlet::hub::run(|| {
    ///     let (a, _b) = greenlet::hub::net::UnixDatagram::pair().unwrap();
    ///     a.set_read_timeout(Some(std::time::Duration::from_millis(5))).unwrap();
    ///     assert_eq!(a.recv(&mut [0u8; 1]).unwrap_err().kind(), std::io::ErrorKind::TimedOut);
    /// })
    /// .unwrap();
    /// ```
    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.src.read_timeout.set("recv", d)
    }

    /// Bound each send (`None`: no bound).
    ///
    /// # Errors
    /// `InvalidInput` for a zero duration.
    ///
    /// ```
    /// let (a, _b) = greenlet::hub::net::UnixDatagram::pair().unwrap();
    /// assert!(a.set_write_timeout(Some(std::time::Duration::ZERO)).is_err());
    /// ```
    pub fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.src.write_timeout.set("send", d)
    }

    /// Wrap a `std::os::unix::net::UnixDatagram` (switched to
    /// non-blocking mode).
    ///
    /// # Errors
    /// If it cannot be made non-blocking.
    ///
    /// ```
    /// let (a, _b) = std::os::unix::net::UnixDatagram::pair().unwrap();
    /// let s = greenlet::hub::net::UnixDatagram::from_std(a).unwrap();
    /// # drop(s);
    /// ```
    pub fn from_std(s: std::os::unix::net::UnixDatagram) -> io::Result<UnixDatagram> {
        s.set_nonblocking(true)?;
        Ok(UnixDatagram::from_mio(mio::net::UnixDatagram::from_std(s)))
    }
}

impl AsRawFd for UnixDatagram {
    fn as_raw_fd(&self) -> RawFd {
        self.src.get().as_raw_fd()
    }
}

impl fmt::Debug for UnixDatagram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixDatagram")
            .field("local", &self.local_addr().ok())
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}
