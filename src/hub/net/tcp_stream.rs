//! [`TcpStream`]: a TCP connection whose reads and writes park the calling
//! green thread.
//!
//! Owns the type and all its methods (connect, `Read`/`Write` for the
//! stream and for `&TcpStream`, shutdown, addresses, options, timeouts,
//! conversions). Uses [`Source`] for the waiting.

use std::fmt;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

#[cfg(target_os = "linux")]
use super::super::driver::op;
use super::error::NetError;
use super::readiness::Readiness;
use super::registration::{Deadline, Direction, Source};
use super::resolve::{addrs_of, ToSocketAddrs};
use super::sys;

/// A TCP connection for green threads: `std::net::TcpStream`'s interface,
/// parking instead of blocking (see the [module docs](super)).
///
/// `Read` and `Write` are implemented for `TcpStream` and for
/// `&TcpStream`, so one green thread may read while another writes.
///
/// # Example
/// ```
/// use std::io::{BufRead, BufReader, Write};
/// use greenlet::hub::{self, net::{TcpListener, TcpStream}};
/// hub::run(|| {
///     let l = TcpListener::bind("127.0.0.1:0").unwrap();
///     let addr = l.local_addr().unwrap();
///     hub::spawn(move || {
///         let (s, _) = l.accept().unwrap();
///         let mut line = String::new();
///         BufReader::new(&s).read_line(&mut line).unwrap();
///         (&s).write_all(line.to_uppercase().as_bytes()).unwrap();
///     });
///     let s = TcpStream::connect(addr).unwrap();
///     (&s).write_all(b"ping\n").unwrap();
///     let mut back = String::new();
///     BufReader::new(&s).read_line(&mut back).unwrap();
///     assert_eq!(back, "PING\n");
/// })
/// .unwrap();
/// ```
pub struct TcpStream {
    src: Source<mio::net::TcpStream>,
    /// Whether reads ask the kernel how much is left queued: [`INQ_OFF`]
    /// until a read first fills its whole buffer, then [`INQ_ON`] (or
    /// [`INQ_UNAVAILABLE`] if `TCP_INQ` cannot be set).
    inq: AtomicU8,
}

/// Reads use `recvfrom`: no read has filled its buffer yet.
const INQ_OFF: u8 = 0;
/// Reads use `recvmsg` and learn whether they left the queue empty.
const INQ_ON: u8 = 1;
/// `TCP_INQ` could not be set; reads use `recvfrom`.
const INQ_UNAVAILABLE: u8 = 2;

impl TcpStream {
    /// Its readiness to read, as an arm of [`select`](crate::hub::select)
    /// (see [`Readiness`]).
    ///
    /// ```
    /// use greenlet::hub::{self, net::TcpListener, Selectable};
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let s = greenlet::hub::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// let now = Some(std::time::Instant::now());
    /// // Nothing sent yet: not readable; an empty send buffer: writable.
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

    pub(crate) fn from_mio(s: mio::net::TcpStream) -> TcpStream {
        TcpStream {
            src: Source::new(s),
            inq: AtomicU8::new(INQ_OFF),
        }
    }

    /// Connect to `addr`, trying each address it resolves to in turn;
    /// parks until the connection is made. A host name is resolved off
    /// the worker (see [`ToSocketAddrs`]).
    ///
    /// # Errors
    /// The OS's error for the last address tried (`ConnectionRefused`,
    /// ...), its message naming that address ([`NetError::Addr`]), or
    /// [`NetError::NoAddress`] if `addr` resolves to none.
    ///
    /// ```
    /// use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// hub::run(|| {
    ///     let l = TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    ///     assert_eq!(s.peer_addr().unwrap(), l.local_addr().unwrap());
    /// })
    /// .unwrap();
    /// ```
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        let mut last = None;
        for a in addrs_of(&addr)? {
            match TcpStream::connect_deadline(a, None) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(NetError::at("connect to", a, e)),
            }
        }
        Err(last.unwrap_or_else(|| {
            NetError::NoAddress {
                addr: addr.describe(),
            }
            .into()
        }))
    }

    /// Connect to `addr`, giving up after `timeout`.
    ///
    /// # Errors
    /// `TimedOut` carrying [`NetError::ConnectTimedOut`]; a zero `timeout`
    /// is `InvalidInput`; else the OS's error.
    ///
    /// ```
    /// use std::time::Duration;
    /// use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// hub::run(|| {
    ///     let l = TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let addr = l.local_addr().unwrap();
    ///     assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(5)).is_ok());
    ///     assert!(TcpStream::connect_timeout(&addr, Duration::ZERO).is_err());
    /// })
    /// .unwrap();
    /// ```
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        if timeout.is_zero() {
            return Err(NetError::ZeroTimeout { op: "connect" }.into());
        }
        TcpStream::connect_deadline(*addr, Some(timeout)).map_err(|e| {
            if e.kind() == io::ErrorKind::TimedOut {
                NetError::ConnectTimedOut {
                    addr: *addr,
                    after: timeout,
                }
                .into()
            } else {
                e
            }
        })
    }

    fn connect_deadline(addr: SocketAddr, timeout: Option<Duration>) -> io::Result<TcpStream> {
        let s = TcpStream::from_mio(mio::net::TcpStream::connect(addr)?);
        s.src
            .io(Direction::Write, Deadline::after("connect", timeout), |m| {
                if let Some(e) = m.take_error()? {
                    return Err(e);
                }
                match m.peer_addr() {
                    Ok(_) => Ok(()),
                    Err(e)
                        if e.kind() == io::ErrorKind::NotConnected
                            || e.raw_os_error() == Some(libc::EINPROGRESS) =>
                    {
                        Err(io::ErrorKind::WouldBlock.into())
                    }
                    Err(e) => Err(e),
                }
            })?;
        Ok(s)
    }

    /// Wrap a `std::net::TcpStream` (switched to non-blocking mode).
    ///
    /// # Errors
    /// If the socket cannot be made non-blocking.
    ///
    /// ```
    /// use greenlet::hub::{self, net::TcpStream};
    /// hub::run(|| {
    ///     let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let std_stream = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    ///     let s = TcpStream::from_std(std_stream).unwrap();
    ///     let back: std::net::TcpStream = s.into_std().unwrap();
    ///     assert_eq!(back.peer_addr().unwrap(), l.local_addr().unwrap());
    /// })
    /// .unwrap();
    /// ```
    pub fn from_std(s: std::net::TcpStream) -> io::Result<TcpStream> {
        s.set_nonblocking(true)?;
        Ok(TcpStream::from_mio(mio::net::TcpStream::from_std(s)))
    }

    /// Unwrap into a blocking `std::net::TcpStream` (deregistered from its
    /// poller).
    ///
    /// # Errors
    /// If the socket cannot be made blocking again.
    ///
    /// ```
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// let std_stream = s.into_std().unwrap();
    /// # drop(std_stream);
    /// # }).unwrap();
    /// ```
    pub fn into_std(self) -> io::Result<std::net::TcpStream> {
        if self.inq.load(Ordering::Relaxed) == INQ_ON {
            // Its reads' control messages are no business of std's users.
            sys::set_inq(self.src.get(), false)?;
        }
        let s: std::net::TcpStream = self.src.into_inner().into();
        s.set_nonblocking(false)?;
        Ok(s)
    }

    /// A second handle to the same connection (a duplicated descriptor,
    /// registered with a poller on its own, so it may wait on another
    /// worker than the original). Timeouts are per handle: the clone starts
    /// with none.
    ///
    /// # Errors
    /// `dup(2)`'s (out of descriptors).
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// let (mut s, _) = l.accept().unwrap();
    /// let mut c2 = c.try_clone().unwrap();
    /// c2.write_all(b"via the clone").unwrap();
    /// drop((c, c2));
    /// let mut got = String::new();
    /// s.read_to_string(&mut got).unwrap();
    /// assert_eq!(got, "via the clone");
    /// # }).unwrap();
    /// ```
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        let fd = self.src.get().as_fd().try_clone_to_owned()?;
        Ok(TcpStream::from_mio(mio::net::TcpStream::from_std(
            std::net::TcpStream::from(fd),
        )))
    }

    /// The remote address.
    ///
    /// # Errors
    /// As `std::net::TcpStream::peer_addr` (not connected).
    ///
    /// ```
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// assert_eq!(s.peer_addr().unwrap(), l.local_addr().unwrap());
    /// # }).unwrap();
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.src.get().peer_addr()
    }

    /// The local address.
    ///
    /// # Errors
    /// As `std::net::TcpStream::local_addr`.
    ///
    /// ```
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// assert!(s.local_addr().unwrap().ip().is_loopback());
    /// # }).unwrap();
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.src.get().local_addr()
    }

    /// Shut down the read half, the write half, or both. After
    /// `Shutdown::Write` the peer reads end of file while this side may
    /// still read.
    ///
    /// # Errors
    /// As `std::net::TcpStream::shutdown`.
    ///
    /// ```
    /// use std::io::Read;
    /// use std::net::Shutdown;
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// let (mut s, _) = l.accept().unwrap();
    /// c.shutdown(Shutdown::Write).unwrap();
    /// assert_eq!(s.read(&mut [0u8; 8]).unwrap(), 0);
    /// # }).unwrap();
    /// ```
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.src.get().shutdown(how)
    }

    /// Set `TCP_NODELAY` (no Nagle delay for small writes).
    ///
    /// # Errors
    /// As `std::net::TcpStream::set_nodelay`.
    ///
    /// ```
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// s.set_nodelay(true).unwrap();
    /// assert!(s.nodelay().unwrap());
    /// # }).unwrap();
    /// ```
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.src.get().set_nodelay(on)
    }

    /// Whether `TCP_NODELAY` is set.
    ///
    /// # Errors
    /// As `std::net::TcpStream::nodelay`.
    ///
    /// ```
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// assert!(!s.nodelay().unwrap());
    /// # }).unwrap();
    /// ```
    pub fn nodelay(&self) -> io::Result<bool> {
        self.src.get().nodelay()
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
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let mut s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// s.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
    /// let err = s.read(&mut [0u8; 1]).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    /// # }).unwrap();
    /// ```
    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.src.read_timeout.set("read", d)
    }

    /// The read timeout.
    ///
    /// ```
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// # let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// # let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// assert_eq!(s.read_timeout(), None);
    /// # }).unwrap();
    /// ```
    pub fn read_timeout(&self) -> Option<Duration> {
        self.src.read_timeout.get()
    }

    /// Bound each write (`None`: no bound): a write that waits longer (the
    /// peer does not read) fails with `TimedOut` ([`NetError::TimedOut`]).
    ///
    /// # Errors
    /// `InvalidInput` for a zero duration.
    ///
    /// ```
    /// use std::time::Duration;
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// # let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// # let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// s.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
    /// assert_eq!(s.write_timeout(), Some(Duration::from_secs(1)));
    /// # }).unwrap();
    /// ```
    pub fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.src.write_timeout.set("write", d)
    }

    /// The write timeout.
    ///
    /// ```
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// # let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// # let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// assert_eq!(s.write_timeout(), None);
    /// # }).unwrap();
    /// ```
    pub fn write_timeout(&self) -> Option<Duration> {
        self.src.write_timeout.get()
    }

    /// Wait, without reading, until a read may find data (or end of file,
    /// or an error): a handler can park here holding no read buffer, so an
    /// idle connection costs no buffer memory (take the buffer after this
    /// returns, give it back once a read comes up short). Returns at once
    /// if data may be queued: nothing was read yet since readiness last
    /// came, or the last read filled its whole buffer without the kernel
    /// reporting the queue empty. It may return early (the data it saw
    /// was already read): the read then waits as usual.
    /// Honours the read timeout.
    ///
    /// # Errors
    /// `TimedOut` ([`NetError::TimedOut`]) when the read timeout passes
    /// first; on a plain thread, `poll(2)`'s error.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// let (mut s, _) = l.accept().unwrap();
    /// let writer = hub::spawn(move || c.write_all(b"hi").unwrap());
    /// s.readable().unwrap(); // parks until "hi" arrives
    /// let mut buf = vec![0u8; 4096];
    /// assert_eq!(s.read(&mut buf).unwrap(), 2);
    /// writer.join().unwrap();
    /// # }).unwrap();
    /// ```
    pub fn readable(&self) -> io::Result<()> {
        self.src.readable(self.src.read_deadline("readable"))
    }

    /// Take the socket's pending error (`SO_ERROR`).
    ///
    /// # Errors
    /// If the option cannot be read.
    ///
    /// ```
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// # let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// # let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// assert!(s.take_error().unwrap().is_none());
    /// # }).unwrap();
    /// ```
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.src.get().take_error()
    }

    /// One read. A read that comes up short shows the queue drained; one
    /// that fills the buffer does not, and the read after it would make a
    /// futile call to find out. So from the first full read on, reads go
    /// through `recvmsg` with `TCP_INQ` on, which says whether anything is
    /// left (a connection whose messages fit the buffer with room to spare
    /// never pays for the option).
    ///
    /// A read is tried at once while readiness came since the last read
    /// that drained the queue (the data is there). Otherwise, on a worker
    /// with an io_uring ring, it is an operation on the ring (see
    /// `driver::op`: no readiness round trip); elsewhere it waits for
    /// readiness.
    fn read_one(&self, buf: &mut [u8]) -> io::Result<usize> {
        let len = buf.len();
        let inq = self.inq.load(Ordering::Relaxed);
        let once = |s: &mio::net::TcpStream, buf: &mut [u8]| {
            if inq == INQ_ON {
                sys::recv_inq(s, buf)
            } else {
                sys::recv(s, buf).map(|n| (n, false))
            }
        };
        let n = match self.src.try_fresh(Direction::Read, len, |s| once(s, buf)) {
            Some(r) => r?,
            None => {
                let deadline = self.src.read_deadline("read");
                #[cfg(target_os = "linux")]
                if let Some(r) = op::recv(self.src.get().as_raw_fd(), buf, deadline) {
                    return r;
                }
                self.src
                    .io_stream(Direction::Read, deadline, len, |s| once(s, buf))?
            }
        };
        if inq == INQ_OFF && n == len && n > 0 {
            let state = match sys::set_inq(self.src.get(), true) {
                Ok(()) => INQ_ON,
                Err(_) => INQ_UNAVAILABLE,
            };
            let _ = self
                .inq
                .compare_exchange(INQ_OFF, state, Ordering::Relaxed, Ordering::Relaxed);
        }
        Ok(n)
    }

    fn read_many(&self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        let deadline = self.src.read_deadline("read");
        let len = bufs.iter().map(|b| b.len()).sum();
        self.src.io_stream(Direction::Read, deadline, len, |mut s| {
            s.read_vectored(bufs).map(|n| (n, false))
        })
    }

    /// One write. On a worker with an io_uring ring, the system call is
    /// tried first (a send that fits the socket's buffer is done at once,
    /// where a ring operation would park the green thread for a turn of
    /// the loop), and a send that would block is an operation on the ring
    /// (see `driver::op`): no readiness round trip.
    fn write_one(&self, buf: &[u8]) -> io::Result<usize> {
        let deadline = self.src.write_deadline("write");
        #[cfg(target_os = "linux")]
        if op::on_ring() {
            match sys::send(self.src.get(), buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
            if let Some(r) = op::send(self.src.get().as_raw_fd(), buf, deadline) {
                return r;
            }
        }
        self.src
            .io_stream(Direction::Write, deadline, buf.len(), |s| {
                sys::send(s, buf).map(|n| (n, false))
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

impl Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_one(buf)
    }
    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        self.read_many(bufs)
    }
}

impl Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_one(buf)
    }
    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        self.read_many(bufs)
    }
}

impl Write for TcpStream {
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

impl Write for &TcpStream {
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

impl TryFrom<std::net::TcpStream> for TcpStream {
    type Error = io::Error;
    fn try_from(s: std::net::TcpStream) -> io::Result<TcpStream> {
        TcpStream::from_std(s)
    }
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.src.get().as_raw_fd()
    }
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("TcpStream");
        if let Ok(a) = self.local_addr() {
            d.field("local", &a);
        }
        if let Ok(a) = self.peer_addr() {
            d.field("peer", &a);
        }
        d.field("fd", &self.as_raw_fd()).finish()
    }
}
