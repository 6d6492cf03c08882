//! [`UnixListener`]: a listening Unix-domain socket whose `accept` parks
//! the calling green thread.
//!
//! Owns the type and its methods. Uses [`Source`] for the waiting.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::error::NetError;
use super::note_accepted;
use super::readiness::Readiness;
use super::registration::{Direction, Source};
use super::unix_stream::UnixStream;

/// A Unix-domain listener for green threads (see the [module
/// docs](super)). The socket file stays after the listener drops, as with
/// std's: remove it to bind the path again.
///
/// # Example
/// ```
/// use std::io::{Read, Write};
/// use greenlet::hub::{self, net::{UnixListener, UnixStream}};
/// hub::run(|| {
///     let dir = std::env::temp_dir().join(format!("greenlet-doc-listen-{}", std::process::id()));
///     std::fs::create_dir_all(&dir).unwrap();
///     let path = dir.join("echo.sock");
///     let _ = std::fs::remove_file(&path);
///     let l = UnixListener::bind(&path).unwrap();
///     let server = hub::spawn(move || {
///         let (mut s, _) = l.accept().unwrap();
///         let mut buf = [0u8; 2];
///         s.read_exact(&mut buf).unwrap();
///         s.write_all(&buf).unwrap();
///     });
///     let mut c = UnixStream::connect(&path).unwrap();
///     c.write_all(b"hi").unwrap();
///     let mut back = [0u8; 2];
///     c.read_exact(&mut back).unwrap();
///     assert_eq!(&back, b"hi");
///     server.join().unwrap();
///     std::fs::remove_dir_all(&dir).unwrap();
/// })
/// .unwrap();
/// ```
pub struct UnixListener {
    src: Source<mio::net::UnixListener>,
}

impl UnixListener {
    /// Its readiness to accept a connection, as an arm of [`select`](crate::hub::select)
    /// (see [`Readiness`]).
    ///
    /// ```
    /// use greenlet::hub::{self, net::UnixListener, Selectable};
    /// let dir = std::env::temp_dir().join(format!("greenlet-sel-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&dir);
    /// let l = UnixListener::bind(&dir).unwrap();
    /// let now = Some(std::time::Instant::now());
    /// assert!(hub::select(&[&l.select_readable() as &dyn Selectable], now).is_err());
    /// std::fs::remove_file(&dir).unwrap();
    /// ```
    pub fn select_readable(&self) -> Readiness<'_> {
        Readiness::readable(&self.src)
    }

    /// Bind to `path` and listen.
    ///
    /// # Errors
    /// The OS's error (`AddrInUse` when the path exists, ...), with a
    /// message naming the path ([`NetError::Addr`]).
    ///
    /// ```
    /// use greenlet::hub::net::UnixListener;
    /// let dir = std::env::temp_dir().join(format!("greenlet-doc-bind-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let path = dir.join("a.sock");
    /// let _ = std::fs::remove_file(&path);
    /// let l = UnixListener::bind(&path).unwrap();
    /// let err = UnixListener::bind(&path).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    /// assert!(err.to_string().contains("a.sock"));
    /// # drop(l);
    /// std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        let path = path.as_ref();
        match mio::net::UnixListener::bind(path) {
            Ok(l) => Ok(UnixListener {
                src: Source::new(l),
            }),
            Err(e) => Err(NetError::at("bind", path.display(), e)),
        }
    }

    /// Accept a connection: parks until one arrives (or the accept
    /// timeout, if one is set, passes).
    ///
    /// # Errors
    /// `TimedOut` ([`NetError::TimedOut`]) after the accept timeout; the
    /// OS's errors.
    ///
    /// ```
    /// use std::time::Duration;
    /// use greenlet::hub::{self, net::UnixListener};
    /// hub::run(|| {
    ///     let dir = std::env::temp_dir().join(format!("greenlet-doc-accept-{}", std::process::id()));
    ///     std::fs::create_dir_all(&dir).unwrap();
    ///     let l = UnixListener::bind(dir.join("t.sock")).unwrap();
    ///     l.set_accept_timeout(Some(Duration::from_millis(5))).unwrap();
    ///     assert_eq!(l.accept().unwrap_err().kind(), std::io::ErrorKind::TimedOut);
    ///     std::fs::remove_dir_all(&dir).unwrap();
    /// })
    /// .unwrap();
    /// ```
    pub fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let deadline = self.src.read_deadline("accept");
        let (s, peer) = self.src.io(Direction::Read, deadline, |l| l.accept())?;
        note_accepted();
        Ok((UnixStream::from_mio(s), peer))
    }

    /// Bound each accept (`None`: wait without end).
    ///
    /// # Errors
    /// `InvalidInput` for a zero duration.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("greenlet-doc-at-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let l = greenlet::hub::net::UnixListener::bind(dir.join("z.sock")).unwrap();
    /// assert!(l.set_accept_timeout(Some(std::time::Duration::ZERO)).is_err());
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn set_accept_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.src.read_timeout.set("accept", d)
    }

    /// The address it listens on.
    ///
    /// # Errors
    /// As `std::os::unix::net::UnixListener::local_addr`.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("greenlet-doc-la-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let l = greenlet::hub::net::UnixListener::bind(dir.join("l.sock")).unwrap();
    /// assert_eq!(l.local_addr().unwrap().as_pathname(), Some(dir.join("l.sock").as_path()));
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.src.get().local_addr()
    }

    /// Wrap a `std::os::unix::net::UnixListener` (switched to
    /// non-blocking mode).
    ///
    /// # Errors
    /// If it cannot be made non-blocking.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("greenlet-doc-fs-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let std_l = std::os::unix::net::UnixListener::bind(dir.join("f.sock")).unwrap();
    /// let l = greenlet::hub::net::UnixListener::from_std(std_l).unwrap();
    /// let back = l.into_std().unwrap();
    /// # drop(back);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn from_std(l: std::os::unix::net::UnixListener) -> io::Result<UnixListener> {
        l.set_nonblocking(true)?;
        Ok(UnixListener {
            src: Source::new(mio::net::UnixListener::from_std(l)),
        })
    }

    /// Unwrap into a blocking `std::os::unix::net::UnixListener`
    /// (deregistered).
    ///
    /// # Errors
    /// If it cannot be made blocking again.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("greenlet-doc-is-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let l = greenlet::hub::net::UnixListener::bind(dir.join("i.sock")).unwrap();
    /// let std_l = l.into_std().unwrap();
    /// # drop(std_l);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixListener> {
        let l = std::os::unix::net::UnixListener::from(std::os::fd::OwnedFd::from(
            self.src.into_inner(),
        ));
        l.set_nonblocking(false)?;
        Ok(l)
    }
}

impl AsRawFd for UnixListener {
    fn as_raw_fd(&self) -> RawFd {
        self.src.get().as_raw_fd()
    }
}

impl fmt::Debug for UnixListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixListener")
            .field("addr", &self.local_addr().ok())
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}
