//! [`Fd`]: readiness for any pollable file descriptor (a pipe, an
//! eventfd, a pidfd, a driver's socket), parking the calling green thread
//! until it is ready; and [`pipe`], a pipe whose two ends park.
//!
//! Owns the type, its methods and `pipe`. Uses [`Source`] for the
//! registration and the waiting (edge-triggered, on the poller of the
//! worker that first waits), and `libc` for `read`, `write`, `fcntl`,
//! `fstat` and `pipe2`.

use std::fmt;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use super::error::NetError;
use super::readiness::Readiness;
use super::registration::{Direction, Source};

/// A non-blocking file descriptor whose waits park the calling green
/// thread (a plain thread blocks in `poll(2)`), on the poller of the
/// worker that first waits on it.
///
/// [`read_with`](Self::read_with) and [`write_with`](Self::write_with) run
/// any non-blocking operation until it stops reporting `WouldBlock`,
/// waiting for readiness in between; `Read` and `Write` (for `Fd` and
/// `&Fd`) are `read(2)` and `write(2)` on the descriptor.
///
/// The poller is edge-triggered: an operation is tried first and waits
/// only after `WouldBlock`, so readiness that came before the wait is not
/// lost. Code that reads through its own calls must go on until
/// `WouldBlock` before it waits again, which `read_with` does.
///
/// # Example
/// ```
/// use std::io::{Read, Write};
/// use greenlet::hub::{self, net};
/// let got = hub::run(|| {
///     let (mut r, mut w) = net::pipe().unwrap();
///     let writer = hub::spawn(move || w.write_all(b"through the pipe").unwrap());
///     let mut s = String::new();
///     r.read_to_string(&mut s).unwrap(); // parks until the writer closes its end
///     writer.join().unwrap();
///     s
/// })
/// .unwrap();
/// assert_eq!(got, "through the pipe");
/// ```
pub struct Fd<T: AsRawFd> {
    src: Source<T>,
}

impl<T: AsRawFd> Fd<T> {
    /// Its readiness to read, as an arm of [`select`](crate::hub::select)
    /// (see [`Readiness`]).
    ///
    /// ```
    /// use std::io::Write;
    /// use greenlet::hub::{self, Selectable};
    /// let (r, mut w) = greenlet::hub::net::pipe().unwrap();
    /// let now = Some(std::time::Instant::now());
    /// assert!(hub::select(&[&r.select_readable() as &dyn Selectable], now).is_err());
    /// w.write_all(b"x").unwrap();
    /// assert_eq!(hub::select(&[&r.select_readable() as &dyn Selectable], now), Ok(0));
    /// ```
    pub fn select_readable(&self) -> Readiness<'_> {
        Readiness::readable(&self.src)
    }

    /// Its readiness to write, as an arm of [`select`](crate::hub::select)
    /// (see [`Readiness`] and [`select_readable`](Self::select_readable)).
    pub fn select_writable(&self) -> Readiness<'_> {
        Readiness::writable(&self.src)
    }

    /// Wrap `inner`, switching its descriptor to non-blocking mode (it
    /// stays so: [`into_inner`](Self::into_inner) gives it back
    /// non-blocking).
    ///
    /// # Errors
    /// [`NetError::FdNotOpen`] for a closed descriptor,
    /// [`NetError::NotPollable`] for a regular file or a directory (epoll
    /// refuses them; they are always ready), or `fcntl(2)`'s error.
    ///
    /// ```
    /// use greenlet::hub::net::{Fd, NetError};
    /// let file = std::fs::File::open("/proc/self/status").unwrap();
    /// let err = Fd::new(file).unwrap_err();
    /// let inner = err.get_ref().unwrap().downcast_ref::<NetError>().unwrap();
    /// assert!(matches!(inner, NetError::NotPollable { what: "regular file", .. }));
    /// ```
    pub fn new(inner: T) -> io::Result<Fd<T>> {
        let fd = inner.as_raw_fd();
        check_pollable(fd)?;
        set_nonblocking(fd)?;
        Ok(Fd {
            src: Source::new(inner),
        })
    }

    /// The wrapped value.
    ///
    /// ```
    /// use std::os::fd::AsRawFd;
    /// let (r, _w) = greenlet::hub::net::pipe().unwrap();
    /// assert_eq!(r.get_ref().as_raw_fd(), r.as_raw_fd());
    /// ```
    pub fn get_ref(&self) -> &T {
        self.src.get()
    }

    /// Deregister it from its poller and give the wrapped value back (its
    /// descriptor still non-blocking).
    ///
    /// ```
    /// let (r, _w) = greenlet::hub::net::pipe().unwrap();
    /// let owned: std::os::fd::OwnedFd = r.into_inner();
    /// # drop(owned);
    /// ```
    pub fn into_inner(self) -> T {
        self.src.into_inner()
    }

    /// Run `op` until it does not fail with `WouldBlock`, parking until
    /// the descriptor is readable between tries (and until the read
    /// timeout, if one is set). A parking point.
    ///
    /// # Errors
    /// `op`'s error, or `TimedOut` ([`NetError::TimedOut`]) after the read
    /// timeout.
    ///
    /// ```
    /// use std::os::fd::AsRawFd;
    /// use greenlet::hub::{self, net};
    /// hub::run(|| {
    ///     let (r, w) = net::pipe().unwrap();
    ///     hub::spawn(move || w.write_with(|fd| {
    ///         // SAFETY: the buffer is valid for its length.
    ///         let n = unsafe { libc::write(fd.as_raw_fd(), b"x".as_ptr().cast(), 1) };
    ///         if n < 0 { Err(std::io::Error::last_os_error()) } else { Ok(n) }
    ///     }).unwrap());
    ///     let mut byte = [0u8; 1];
    ///     let n = r.read_with(|fd| {
    ///         // SAFETY: the buffer is valid for its length.
    ///         let n = unsafe { libc::read(fd.as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
    ///         if n < 0 { Err(std::io::Error::last_os_error()) } else { Ok(n) }
    ///     }).unwrap();
    ///     assert_eq!((n, byte), (1, *b"x"));
    /// })
    /// .unwrap();
    /// ```
    pub fn read_with<R>(&self, op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        self.src
            .io(Direction::Read, self.src.read_deadline("read"), op)
    }

    /// Run `op` until it does not fail with `WouldBlock`, parking until
    /// the descriptor is writable between tries (and until the write
    /// timeout, if one is set). A parking point.
    ///
    /// # Errors
    /// `op`'s error, or `TimedOut` ([`NetError::TimedOut`]) after the
    /// write timeout.
    ///
    /// ```
    /// use std::io::Write;
    /// let (_r, w) = greenlet::hub::net::pipe().unwrap();
    /// let n = w.write_with(|fd| (&std::fs::File::from(fd.try_clone()?)).write(b"hi")).unwrap();
    /// assert_eq!(n, 2);
    /// ```
    pub fn write_with<R>(&self, op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        self.src
            .io(Direction::Write, self.src.write_deadline("write"), op)
    }

    /// Bound each read (`None`: no bound).
    ///
    /// # Errors
    /// `InvalidInput` for a zero duration.
    ///
    /// ```
    /// use std::io::Read;
    /// use std::time::Duration;
    /// greenlet::hub::run(|| {
    ///     let (mut r, _w) = greenlet::hub::net::pipe().unwrap();
    ///     r.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
    ///     assert_eq!(r.read(&mut [0u8; 1]).unwrap_err().kind(), std::io::ErrorKind::TimedOut);
    /// })
    /// .unwrap();
    /// ```
    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.src.read_timeout.set("read", d)
    }

    /// Bound each write (`None`: no bound).
    ///
    /// # Errors
    /// `InvalidInput` for a zero duration.
    ///
    /// ```
    /// let (_r, w) = greenlet::hub::net::pipe().unwrap();
    /// assert!(w.set_write_timeout(Some(std::time::Duration::ZERO)).is_err());
    /// ```
    pub fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.src.write_timeout.set("write", d)
    }

    fn read_fd(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_with(|t| {
            // SAFETY: `buf` is valid for writes of `buf.len()` bytes for
            // the call, and `t` keeps the descriptor open.
            let n = unsafe { libc::read(t.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            usize::try_from(n).map_err(|_| io::Error::last_os_error())
        })
    }

    fn write_fd(&self, buf: &[u8]) -> io::Result<usize> {
        self.write_with(|t| {
            // SAFETY: `buf` is valid for reads of `buf.len()` bytes for
            // the call, and `t` keeps the descriptor open.
            let n = unsafe { libc::write(t.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
            usize::try_from(n).map_err(|_| io::Error::last_os_error())
        })
    }
}

/// Refuse a closed descriptor, a regular file and a directory.
fn check_pollable(fd: RawFd) -> io::Result<()> {
    // SAFETY: an all-zero `stat` is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, exclusively borrowed `stat` for the call;
    // fstat on any integer is defined (EBADF for one that is not open).
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        let e = io::Error::last_os_error();
        return Err(if e.raw_os_error() == Some(libc::EBADF) {
            NetError::FdNotOpen { fd }.into()
        } else {
            e
        });
    }
    let what = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => "regular file",
        libc::S_IFDIR => "directory",
        _ => return Ok(()),
    };
    Err(NetError::NotPollable { fd, what }.into())
}

/// Set `O_NONBLOCK` on `fd`.
pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_GETFL takes no argument and reads no memory of ours.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    if flags & libc::O_NONBLOCK != 0 {
        return Ok(());
    }
    // SAFETY: F_SETFL takes an int of flags and reads no memory of ours.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A pipe: its read end and its write end, both non-blocking and
/// close-on-exec, whose reads and writes park.
///
/// # Errors
/// `pipe2(2)`'s (out of descriptors).
///
/// ```
/// use std::io::{Read, Write};
/// let (mut r, mut w) = greenlet::hub::net::pipe().unwrap();
/// w.write_all(b"ok").unwrap();
/// drop(w);
/// let mut s = String::new();
/// r.read_to_string(&mut s).unwrap();
/// assert_eq!(s, "ok");
/// ```
pub fn pipe() -> io::Result<(Fd<OwnedFd>, Fd<OwnedFd>)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both are open descriptors that nothing
    // else owns.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((
        Fd {
            src: Source::new(r),
        },
        Fd {
            src: Source::new(w),
        },
    ))
}

impl<T: AsRawFd> Read for Fd<T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_fd(buf)
    }
}

impl<T: AsRawFd> Read for &Fd<T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_fd(buf)
    }
}

impl<T: AsRawFd> Write for Fd<T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_fd(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<T: AsRawFd> Write for &Fd<T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_fd(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<T: AsRawFd> AsRawFd for Fd<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.src.get().as_raw_fd()
    }
}

impl<T: AsRawFd> fmt::Debug for Fd<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fd").field("fd", &self.as_raw_fd()).finish()
    }
}
