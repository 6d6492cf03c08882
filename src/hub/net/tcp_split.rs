//! The owned halves of a [`TcpStream`]: [`OwnedReadHalf`] and
//! [`OwnedWriteHalf`], made by [`TcpStream::into_split`], each `Send`, so
//! one green thread reads while another writes (on any worker), and
//! [`ReuniteError`] for halves of two different streams.
//!
//! Owns the three types and their methods, and [`TcpStream::into_split`],
//! the one method of the stream that makes them (kept here so that the
//! stream's file knows nothing of its halves). Uses [`TcpStream`]'s `Read`
//! and `Write` for `&TcpStream` and its readiness ([`Readiness`]), shared
//! through an `Arc`.

use std::fmt;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use super::readiness::Readiness;
use super::tcp_stream::TcpStream;

impl TcpStream {
    /// Split into a read half and a write half that are each `Send` and
    /// owned, for a reader and a writer green thread (on any workers).
    /// Dropping the write half shuts the write direction down;
    /// [`OwnedReadHalf::reunite`] puts the two back together.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// hub::run(|| {
    ///     let l = TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    ///     let (s, _) = l.accept().unwrap();
    ///     let (mut r, mut w) = s.into_split();
    ///     // Echo: one green thread copies what the other reads.
    ///     let copier = hub::spawn(move || std::io::copy(&mut r, &mut w).unwrap());
    ///     (&c).write_all(b"split").unwrap();
    ///     c.shutdown(std::net::Shutdown::Write).unwrap();
    ///     let mut back = String::new();
    ///     (&c).read_to_string(&mut back).unwrap();
    ///     assert_eq!(back, "split");
    ///     assert_eq!(copier.join().unwrap(), 5);
    /// })
    /// .unwrap();
    /// ```
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        let stream = Arc::new(self);
        (
            OwnedReadHalf {
                stream: Arc::clone(&stream),
            },
            OwnedWriteHalf {
                stream,
                shutdown_on_drop: true,
            },
        )
    }
}

/// The read half of a [`TcpStream`] (see [`TcpStream::into_split`]).
pub struct OwnedReadHalf {
    pub(crate) stream: Arc<TcpStream>,
}

/// The write half of a [`TcpStream`] (see [`TcpStream::into_split`]).
/// Dropping it shuts the connection's write direction down, so the peer
/// reads end of file while the read half may still read.
pub struct OwnedWriteHalf {
    pub(crate) stream: Arc<TcpStream>,
    pub(crate) shutdown_on_drop: bool,
}

/// [`OwnedReadHalf::reunite`] was handed halves of two different streams;
/// it gives both back.
pub struct ReuniteError(pub OwnedReadHalf, pub OwnedWriteHalf);

impl OwnedReadHalf {
    /// Put the two halves of one stream back together.
    ///
    /// # Errors
    /// [`ReuniteError`] (holding both halves) if they come from different
    /// streams.
    ///
    /// ```
    /// use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// hub::run(|| {
    ///     let l = TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    ///     let b = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    ///     let (ar, aw) = a.into_split();
    ///     let (br, bw) = b.into_split();
    ///     let back = ar.reunite(bw).unwrap_err();
    ///     assert!(back.to_string().contains("different"));
    ///     assert!(back.0.reunite(aw).is_ok());
    ///     # drop(br);
    /// })
    /// .unwrap();
    /// ```
    pub fn reunite(self, write: OwnedWriteHalf) -> Result<TcpStream, ReuniteError> {
        if !Arc::ptr_eq(&self.stream, &write.stream) {
            return Err(ReuniteError(self, write));
        }
        let mut write = write;
        write.shutdown_on_drop = false;
        drop(write);
        Arc::try_unwrap(self.stream).map_err(|stream| {
            // Only the two halves held it, and the write half is gone.
            ReuniteError(
                OwnedReadHalf {
                    stream: Arc::clone(&stream),
                },
                OwnedWriteHalf {
                    stream,
                    shutdown_on_drop: true,
                },
            )
        })
    }

    /// The remote address.
    ///
    /// # Errors
    /// As [`TcpStream::peer_addr`].
    ///
    /// ```
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let (r, _w) = TcpStream::connect(l.local_addr().unwrap()).unwrap().into_split();
    /// assert_eq!(r.peer_addr().unwrap(), l.local_addr().unwrap());
    /// # }).unwrap();
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    /// Bound each read (see [`TcpStream::set_read_timeout`]).
    ///
    /// # Errors
    /// `InvalidInput` for a zero duration.
    ///
    /// ```
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let (r, _w) = TcpStream::connect(l.local_addr().unwrap()).unwrap().into_split();
    /// assert!(r.set_read_timeout(Some(std::time::Duration::ZERO)).is_err());
    /// # }).unwrap();
    /// ```
    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.stream.set_read_timeout(d)
    }

    /// Wait, without reading, until a read may find data (see
    /// [`TcpStream::readable`]). Data already taken into a `BufReader`
    /// around the half is not the socket's: look at its buffer first.
    ///
    /// # Errors
    /// As [`TcpStream::readable`].
    ///
    /// ```
    /// # use std::io::{Read, Write};
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// let (mut r, _w) = l.accept().unwrap().0.into_split();
    /// (&c).write_all(b"hi").unwrap();
    /// r.readable().unwrap(); // returns once "hi" is queued
    /// assert_eq!(r.read(&mut [0u8; 8]).unwrap(), 2);
    /// # }).unwrap();
    /// ```
    pub fn readable(&self) -> io::Result<()> {
        self.stream.readable()
    }

    /// Its readiness to read, as an arm of [`select`](crate::hub::select)
    /// (see [`Readiness`]): a reader green thread waits for data or for
    /// another source (a shutdown [`Event`](crate::hub::Event), a
    /// channel) at once. Behind a `BufReader`, select only when its
    /// buffer is empty: what it holds is no longer the socket's.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use greenlet::hub::{self, net::{TcpListener, TcpStream}, Event, Selectable};
    /// hub::run(|| {
    ///     let l = TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    ///     let (r, _w) = l.accept().unwrap().0.into_split();
    ///     let stop = Arc::new(Event::new());
    ///     let stopper = Arc::clone(&stop);
    ///     hub::spawn(move || stopper.set());
    ///     // Nothing to read: the stop wins.
    ///     let arms: [&dyn Selectable; 2] = [&r.select_readable(), &*stop];
    ///     assert_eq!(hub::select(&arms, None), Ok(1));
    /// })
    /// .unwrap();
    /// ```
    pub fn select_readable(&self) -> Readiness<'_> {
        self.stream.select_readable()
    }
}

impl OwnedWriteHalf {
    /// Shut the write direction down now (the peer reads end of file).
    ///
    /// # Errors
    /// As [`TcpStream::shutdown`].
    ///
    /// ```
    /// use std::io::Read;
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let (_r, w) = TcpStream::connect(l.local_addr().unwrap()).unwrap().into_split();
    /// let (mut s, _) = l.accept().unwrap();
    /// w.shutdown().unwrap();
    /// assert_eq!(s.read(&mut [0u8; 4]).unwrap(), 0);
    /// # }).unwrap();
    /// ```
    pub fn shutdown(&self) -> io::Result<()> {
        self.stream.shutdown(Shutdown::Write)
    }

    /// The remote address.
    ///
    /// # Errors
    /// As [`TcpStream::peer_addr`].
    ///
    /// ```
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let (_r, w) = TcpStream::connect(l.local_addr().unwrap()).unwrap().into_split();
    /// assert_eq!(w.peer_addr().unwrap(), l.local_addr().unwrap());
    /// # }).unwrap();
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    /// Bound each write (see [`TcpStream::set_write_timeout`]).
    ///
    /// # Errors
    /// `InvalidInput` for a zero duration.
    ///
    /// ```
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}};
    /// # hub::run(|| {
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let (_r, w) = TcpStream::connect(l.local_addr().unwrap()).unwrap().into_split();
    /// w.set_write_timeout(Some(std::time::Duration::from_secs(1))).unwrap();
    /// # }).unwrap();
    /// ```
    pub fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.stream.set_write_timeout(d)
    }

    /// Its readiness to write, as an arm of [`select`](crate::hub::select)
    /// (see [`Readiness`]).
    ///
    /// ```
    /// # use greenlet::hub::{self, net::{TcpListener, TcpStream}, Selectable};
    /// # hub::run(|| {
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let (_r, w) = TcpStream::connect(l.local_addr().unwrap()).unwrap().into_split();
    /// let now = Some(std::time::Instant::now());
    /// assert_eq!(hub::select(&[&w.select_writable() as &dyn Selectable], now), Ok(0));
    /// # }).unwrap();
    /// ```
    pub fn select_writable(&self) -> Readiness<'_> {
        self.stream.select_writable()
    }
}

impl Drop for OwnedWriteHalf {
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            // The peer may have closed already (ENOTCONN): nothing to do.
            let _ = self.stream.shutdown(Shutdown::Write);
        }
    }
}

impl Read for OwnedReadHalf {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self.stream).read(buf)
    }
    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        (&*self.stream).read_vectored(bufs)
    }
}

impl Write for OwnedWriteHalf {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self.stream).write(buf)
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        (&*self.stream).write_vectored(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl fmt::Debug for OwnedReadHalf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OwnedReadHalf").field(&*self.stream).finish()
    }
}

impl fmt::Debug for OwnedWriteHalf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OwnedWriteHalf")
            .field(&*self.stream)
            .finish()
    }
}

impl fmt::Debug for ReuniteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReuniteError(..)")
    }
}

impl fmt::Display for ReuniteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "the read half and the write half come from different TcpStreams: reunite each with \
             its own",
        )
    }
}

impl std::error::Error for ReuniteError {}
