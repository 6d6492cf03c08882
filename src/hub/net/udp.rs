//! [`UdpSocket`]: a UDP socket whose sends and receives park the calling
//! green thread.
//!
//! Owns the type and its methods. Uses [`Source`] for the waiting.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use super::error::NetError;
use super::readiness::Readiness;
use super::registration::{Direction, Source};
use super::resolve::{addrs_of, ToSocketAddrs};

/// A UDP socket for green threads: `std::net::UdpSocket`'s interface,
/// parking instead of blocking (see the [module docs](super)).
///
/// # Example
/// ```
/// use greenlet::hub::{self, net::UdpSocket};
/// hub::run(|| {
///     let a = UdpSocket::bind("127.0.0.1:0").unwrap();
///     let b = UdpSocket::bind("127.0.0.1:0").unwrap();
///     let b_addr = b.local_addr().unwrap();
///     let echo = hub::spawn(move || {
///         let mut buf = [0u8; 16];
///         let (n, from) = b.recv_from(&mut buf).unwrap();
///         b.send_to(&buf[..n], from).unwrap();
///     });
///     a.send_to(b"hi", b_addr).unwrap();
///     let mut buf = [0u8; 16];
///     let (n, from) = a.recv_from(&mut buf).unwrap();
///     assert_eq!((&buf[..n], from), (&b"hi"[..], b_addr));
///     echo.join().unwrap();
/// })
/// .unwrap();
/// ```
pub struct UdpSocket {
    src: Source<mio::net::UdpSocket>,
}

/// The first address `addr` resolves to.
fn first_addr(addr: &(impl ToSocketAddrs + ?Sized)) -> io::Result<SocketAddr> {
    match addrs_of(addr)?.first() {
        Some(a) => Ok(*a),
        None => Err(NetError::NoAddress {
            addr: addr.describe(),
        }
        .into()),
    }
}

impl UdpSocket {
    /// Its readiness to read, as an arm of [`select`](crate::hub::select)
    /// (see [`Readiness`]).
    ///
    /// ```
    /// use greenlet::hub::{self, Selectable};
    /// let s = greenlet::hub::net::UdpSocket::bind("127.0.0.1:0").unwrap();
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

    /// Bind to `addr` (its first address).
    ///
    /// # Errors
    /// The OS's error, or [`NetError::NoAddress`].
    ///
    /// ```
    /// let s = greenlet::hub::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert!(s.local_addr().unwrap().port() != 0);
    /// ```
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        let a = first_addr(&addr)?;
        Ok(UdpSocket {
            src: Source::new(mio::net::UdpSocket::bind(a).map_err(|e| NetError::at("bind", a, e))?),
        })
    }

    /// Set the default peer for [`send`](Self::send) and
    /// [`recv`](Self::recv) (and receive only from it).
    ///
    /// # Errors
    /// The OS's error, or [`NetError::NoAddress`].
    ///
    /// ```
    /// # use greenlet::hub::{self, net::UdpSocket};
    /// # hub::run(|| {
    /// let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// a.connect(b.local_addr().unwrap()).unwrap();
    /// b.connect(a.local_addr().unwrap()).unwrap();
    /// a.send(b"x").unwrap();
    /// let mut buf = [0u8; 4];
    /// assert_eq!(b.recv(&mut buf).unwrap(), 1);
    /// assert_eq!(a.peer_addr().unwrap(), b.local_addr().unwrap());
    /// # }).unwrap();
    /// ```
    pub fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        let a = first_addr(&addr)?;
        self.src
            .get()
            .connect(a)
            .map_err(|e| NetError::at("connect", a, e))
    }

    /// Send `buf` to `target`; parks while the send buffer is full.
    ///
    /// # Errors
    /// The OS's error; `TimedOut` after the write timeout.
    ///
    /// ```
    /// # use greenlet::hub::{self, net::UdpSocket};
    /// # hub::run(|| {
    /// let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert_eq!(a.send_to(b"abc", b.local_addr().unwrap()).unwrap(), 3);
    /// # }).unwrap();
    /// ```
    pub fn send_to(&self, buf: &[u8], target: impl ToSocketAddrs) -> io::Result<usize> {
        let target = first_addr(&target)?;
        let deadline = self.src.write_deadline("send");
        self.src
            .io(Direction::Write, deadline, |s| s.send_to(buf, target))
    }

    /// Receive one datagram; parks until one arrives.
    ///
    /// # Errors
    /// The OS's error; `TimedOut` after the read timeout.
    ///
    /// ```
    /// use std::time::Duration;
    /// # use greenlet::hub::{self, net::UdpSocket};
    /// # hub::run(|| {
    /// let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// s.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
    /// let err = s.recv_from(&mut [0u8; 8]).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    /// # }).unwrap();
    /// ```
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let deadline = self.src.read_deadline("recv");
        self.src.io(Direction::Read, deadline, |s| s.recv_from(buf))
    }

    /// Send `buf` to the connected peer.
    ///
    /// # Errors
    /// The OS's error (not connected, refused); `TimedOut` after the write
    /// timeout.
    ///
    /// ```
    /// # use greenlet::hub::{self, net::UdpSocket};
    /// # hub::run(|| {
    /// let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert!(a.send(b"x").is_err()); // not connected
    /// # }).unwrap();
    /// ```
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        let deadline = self.src.write_deadline("send");
        self.src.io(Direction::Write, deadline, |s| s.send(buf))
    }

    /// Receive one datagram from the connected peer.
    ///
    /// # Errors
    /// The OS's error; `TimedOut` after the read timeout.
    ///
    /// ```
    /// # use greenlet::hub::{self, net::UdpSocket};
    /// # hub::run(|| {
    /// let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// b.connect(a.local_addr().unwrap()).unwrap();
    /// a.send_to(b"hey", b.local_addr().unwrap()).unwrap();
    /// let mut buf = [0u8; 8];
    /// assert_eq!(b.recv(&mut buf).unwrap(), 3);
    /// # }).unwrap();
    /// ```
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        let deadline = self.src.read_deadline("recv");
        self.src.io(Direction::Read, deadline, |s| s.recv(buf))
    }

    /// The local address.
    ///
    /// # Errors
    /// As `std::net::UdpSocket::local_addr`.
    ///
    /// ```
    /// let s = greenlet::hub::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert!(s.local_addr().unwrap().ip().is_loopback());
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.src.get().local_addr()
    }

    /// The connected peer's address.
    ///
    /// # Errors
    /// `NotConnected` before [`connect`](Self::connect).
    ///
    /// ```
    /// let s = greenlet::hub::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert!(s.peer_addr().is_err());
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.src.get().peer_addr()
    }

    /// Bound each receive (`None`: no bound).
    ///
    /// # Errors
    /// `InvalidInput` for a zero duration.
    ///
    /// ```
    /// let s = greenlet::hub::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert!(s.set_read_timeout(Some(std::time::Duration::ZERO)).is_err());
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
    /// let s = greenlet::hub::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// s.set_write_timeout(Some(std::time::Duration::from_secs(1))).unwrap();
    /// ```
    pub fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.src.write_timeout.set("send", d)
    }

    /// Wrap a `std::net::UdpSocket` (switched to non-blocking mode).
    ///
    /// # Errors
    /// If it cannot be made non-blocking.
    ///
    /// ```
    /// let std_s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let s = greenlet::hub::net::UdpSocket::from_std(std_s).unwrap();
    /// let back: std::net::UdpSocket = s.into_std().unwrap();
    /// # drop(back);
    /// ```
    pub fn from_std(s: std::net::UdpSocket) -> io::Result<UdpSocket> {
        s.set_nonblocking(true)?;
        Ok(UdpSocket {
            src: Source::new(mio::net::UdpSocket::from_std(s)),
        })
    }

    /// Unwrap into a blocking `std::net::UdpSocket` (deregistered).
    ///
    /// # Errors
    /// If it cannot be made blocking again.
    ///
    /// ```
    /// let s = greenlet::hub::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let std_s = s.into_std().unwrap();
    /// # drop(std_s);
    /// ```
    pub fn into_std(self) -> io::Result<std::net::UdpSocket> {
        let s: std::net::UdpSocket = self.src.into_inner().into();
        s.set_nonblocking(false)?;
        Ok(s)
    }
}

impl TryFrom<std::net::UdpSocket> for UdpSocket {
    type Error = io::Error;
    fn try_from(s: std::net::UdpSocket) -> io::Result<UdpSocket> {
        UdpSocket::from_std(s)
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.src.get().as_raw_fd()
    }
}

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdpSocket")
            .field("addr", &self.local_addr().ok())
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}
