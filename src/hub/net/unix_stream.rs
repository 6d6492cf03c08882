//! [`UnixStream`]: a Unix-domain stream socket whose reads and writes
//! park the calling green thread.
//!
//! Owns the type and all its methods (connect with a back-off while the
//! listener's backlog is full, `Read`/`Write` for the stream and for
//! `&UnixStream`, shutdown, addresses, timeouts, cloning, conversions).
//! Uses [`Source`] for the waiting and the hub's `sleep` for the back-off.

use std::fmt;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::super::time::sleep;
use super::error::NetError;
use super::readiness::Readiness;
use super::registration::{Direction, Source};

/// First pause when a listener's backlog is full at connect.
const CONNECT_BACKOFF_MIN: Duration = Duration::from_millis(1);
/// Longest pause between connect attempts.
const CONNECT_BACKOFF_MAX: Duration = Duration::from_millis(128);

/// A Unix-domain stream socket for green threads:
/// `std::os::unix::net::UnixStream`'s interface, parking instead of
/// blocking (see the [module docs](super)).
///
/// # Example
/// ```
/// use std::io::{Read, Write};
/// use greenlet::hub::{self, net::UnixStream};
/// hub::run(|| {
///     let (mut a, mut b) = UnixStream::pair().unwrap();
///     let echo = hub::spawn(move || {
///         let mut buf = [0u8; 4];
///         b.read_exact(&mut buf).unwrap();
///         b.write_all(&buf).unwrap();
///     });
///     a.write_all(b"ping").unwrap();
///     let mut back = [0u8; 4];
///     a.read_exact(&mut back).unwrap();
///     assert_eq!(&back, b"ping");
///     echo.join().unwrap();
/// })
/// .unwrap();
/// ```
pub struct UnixStream {
    src: Source<mio::net::UnixStream>,
}

impl UnixStream {
    /// Its readiness to read, as an arm of [`select`](crate::hub::select)
    /// (see [`Readiness`]).
    ///
    /// ```
    /// use greenlet::hub::{self, Selectable};
    /// let (s, _peer) = greenlet::hub::net::UnixStream::pair().unwrap();
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

    pub(crate) fn from_mio(s: mio::net::UnixStream) -> UnixStream {
        UnixStream {
            src: Source::new(s),
        }
    }

    /// Connect to the socket at `path`. While the listener's backlog is
    /// full the attempt is repeated after a pause (1 ms doubling to
    /// 128 ms), parking.
    ///
    /// # Errors
    /// The OS's error (`NotFound`, `ConnectionRefused`, ...), with a
    /// message naming the path ([`NetError::Addr`]).
    ///
    /// ```
    /// use greenlet::hub::{self, net::{UnixListener, UnixStream}};
    /// hub::run(|| {
    ///     let dir = std::env::temp_dir().join(format!("greenlet-doc-connect-{}", std::process::id()));
    ///     std::fs::create_dir_all(&dir).unwrap();
    ///     let path = dir.join("s.sock");
    ///     let _ = std::fs::remove_file(&path);
    ///     let l = UnixListener::bind(&path).unwrap();
    ///     let c = UnixStream::connect(&path).unwrap();
    ///     let (s, _) = l.accept().unwrap();
    ///     assert!(c.peer_addr().unwrap().as_pathname().is_some());
    ///     drop((c, s, l));
    ///     std::fs::remove_dir_all(&dir).unwrap();
    ///     let err = UnixStream::connect(&path).unwrap_err();
    ///     assert!(err.to_string().contains("s.sock"));
    /// })
    /// .unwrap();
    /// ```
    pub fn connect(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        let path = path.as_ref();
        let mut delay = CONNECT_BACKOFF_MIN;
        loop {
            match mio::net::UnixStream::connect(path) {
                Ok(s) => {
                    let s = UnixStream::from_mio(s);
                    // A connect that did not complete at once completes
                    // (or fails) when the socket becomes writable.
                    s.src.io(
                        Direction::Write,
                        s.src.write_deadline("connect"),
                        |m| match m.take_error()? {
                            Some(e) => Err(e),
                            None => Ok(()),
                        },
                    )?;
                    return Ok(s);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    sleep(delay);
                    delay = (delay * 2).min(CONNECT_BACKOFF_MAX);
                }
                Err(e) => return Err(NetError::at("connect", path.display(), e)),
            }
        }
    }

    /// A connected pair of sockets.
    ///
    /// # Errors
    /// `socketpair(2)`'s (out of descriptors).
    ///
    /// ```
    /// let (a, b) = greenlet::hub::net::UnixStream::pair().unwrap();
    /// # drop((a, b));
    /// ```
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = mio::net::UnixStream::pair()?;
        Ok((UnixStream::from_mio(a), UnixStream::from_mio(b)))
    }

    /// Wrap a `std::os::unix::net::UnixStream` (switched to non-blocking
    /// mode).
    ///
    /// # Errors
    /// If it cannot be made non-blocking.
    ///
    /// ```
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// let s = greenlet::hub::net::UnixStream::from_std(a).unwrap();
    /// let back: std::os::unix::net::UnixStream = s.into_std().unwrap();
    /// # drop(back);
    /// ```
    pub fn from_std(s: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        s.set_nonblocking(true)?;
        Ok(UnixStream::from_mio(mio::net::UnixStream::from_std(s)))
    }

    /// Unwrap into a blocking `std::os::unix::net::UnixStream`
    /// (deregistered from its poller).
    ///
    /// # Errors
    /// If it cannot be made blocking again.
    ///
    /// ```
    /// let (a, _b) = greenlet::hub::net::UnixStream::pair().unwrap();
    /// let std_stream = a.into_std().unwrap();
    /// # drop(std_stream);
    /// ```
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixStream> {
        let s =
            std::os::unix::net::UnixStream::from(std::os::fd::OwnedFd::from(self.src.into_inner()));
        s.set_nonblocking(false)?;
        Ok(s)
    }

    /// A second handle to the same connection (a duplicated descriptor,
    /// registered on its own). Timeouts are per handle: the clone starts
    /// with none.
    ///
    /// # Errors
    /// `dup(2)`'s (out of descriptors).
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// let (a, mut b) = greenlet::hub::net::UnixStream::pair().unwrap();
    /// let mut a2 = a.try_clone().unwrap();
    /// a2.write_all(b"x").unwrap();
    /// let mut buf = [0u8; 1];
    /// b.read_exact(&mut buf).unwrap();
    /// assert_eq!(&buf, b"x");
    /// ```
    pub fn try_clone(&self) -> io::Result<UnixStream> {
        let fd = self.src.get().as_fd().try_clone_to_owned()?;
        let s = std::os::unix::net::UnixStream::from(fd);
        Ok(UnixStream::from_mio(mio::net::UnixStream::from_std(s)))
    }

    /// The local address.
    ///
    /// # Errors
    /// As `std::os::unix::net::UnixStream::local_addr`.
    ///
    /// ```
    /// let (a, _b) = greenlet::hub::net::UnixStream::pair().unwrap();
    /// assert!(a.local_addr().unwrap().is_unnamed());
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.src.get().local_addr()
    }

    /// The peer's address.
    ///
    /// # Errors
    /// As `std::os::unix::net::UnixStream::peer_addr`.
    ///
    /// ```
    /// let (a, _b) = greenlet::hub::net::UnixStream::pair().unwrap();
    /// assert!(a.peer_addr().unwrap().is_unnamed());
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.src.get().peer_addr()
    }

    /// Shut down the read half, the write half, or both.
    ///
    /// # Errors
    /// As `std::os::unix::net::UnixStream::shutdown`.
    ///
    /// ```
    /// use std::io::Read;
    /// let (a, mut b) = greenlet::hub::net::UnixStream::pair().unwrap();
    /// a.shutdown(std::net::Shutdown::Write).unwrap();
    /// assert_eq!(b.read(&mut [0u8; 1]).unwrap(), 0);
    /// ```
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.src.get().shutdown(how)
    }

    /// Take the socket's pending error (`SO_ERROR`).
    ///
    /// # Errors
    /// If the option cannot be read.
    ///
    /// ```
    /// let (a, _b) = greenlet::hub::net::UnixStream::pair().unwrap();
    /// assert!(a.take_error().unwrap().is_none());
    /// ```
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.src.get().take_error()
    }

    /// Bound each read (`None`: no bound): a read that waits longer fails
    /// with `TimedOut` ([`NetError::TimedOut`]).
    ///
    /// # Errors
    /// `InvalidInput` for a zero duration.
    ///
    /// ```
    /// use std::io::Read;
    /// use std::time::Duration;
    /// greenlet::hub::run(|| {
    ///     let (mut a, _b) = greenlet::hub::net::UnixStream::pair().unwrap();
    ///     a.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
    ///     assert_eq!(a.read(&mut [0u8; 1]).unwrap_err().kind(), std::io::ErrorKind::TimedOut);
    /// })
    /// .unwrap();
    /// ```
    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.src.read_timeout.set("read", d)
    }

    /// The read timeout.
    ///
    /// ```
    /// let (a, _b) = greenlet::hub::net::UnixStream::pair().unwrap();
    /// assert_eq!(a.read_timeout(), None);
    /// ```
    pub fn read_timeout(&self) -> Option<Duration> {
        self.src.read_timeout.get()
    }

    /// Bound each write (`None`: no bound).
    ///
    /// # Errors
    /// `InvalidInput` for a zero duration.
    ///
    /// ```
    /// let (a, _b) = greenlet::hub::net::UnixStream::pair().unwrap();
    /// a.set_write_timeout(Some(std::time::Duration::from_secs(1))).unwrap();
    /// assert_eq!(a.write_timeout(), Some(std::time::Duration::from_secs(1)));
    /// ```
    pub fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.src.write_timeout.set("write", d)
    }

    /// The write timeout.
    ///
    /// ```
    /// let (a, _b) = greenlet::hub::net::UnixStream::pair().unwrap();
    /// assert_eq!(a.write_timeout(), None);
    /// ```
    pub fn write_timeout(&self) -> Option<Duration> {
        self.src.write_timeout.get()
    }

    fn read_one(&self, buf: &mut [u8]) -> io::Result<usize> {
        let deadline = self.src.read_deadline("read");
        self.src
            .io_stream(Direction::Read, deadline, buf.len(), |mut s| {
                s.read(buf).map(|n| (n, false))
            })
    }

    fn read_many(&self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        let deadline = self.src.read_deadline("read");
        let len = bufs.iter().map(|b| b.len()).sum();
        self.src.io_stream(Direction::Read, deadline, len, |mut s| {
            s.read_vectored(bufs).map(|n| (n, false))
        })
    }

    fn write_one(&self, buf: &[u8]) -> io::Result<usize> {
        let deadline = self.src.write_deadline("write");
        self.src
            .io_stream(Direction::Write, deadline, buf.len(), |mut s| {
                s.write(buf).map(|n| (n, false))
            })
    }

    fn write_many(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let deadline = self.src.write_deadline("write");
        let len = bufs.iter().map(|b| b.len()).sum();
        self.src
            .io_stream(Direction::Write, deadline, len, |mut s| {
                s.write_vectored(bufs).map(|n| (n, false))
            })
    }
}

impl Read for UnixStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_one(buf)
    }
    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        self.read_many(bufs)
    }
}

impl Read for &UnixStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_one(buf)
    }
    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        self.read_many(bufs)
    }
}

impl Write for UnixStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_one(buf)
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.write_many(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for &UnixStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_one(buf)
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.write_many(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsRawFd for UnixStream {
    fn as_raw_fd(&self) -> RawFd {
        self.src.get().as_raw_fd()
    }
}

impl fmt::Debug for UnixStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixStream")
            .field("local", &self.local_addr().ok())
            .field("peer", &self.peer_addr().ok())
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}
