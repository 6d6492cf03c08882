//! `net::Fd` and `net::pipe`: readiness for any descriptor parks the green
//! thread (and only it: its worker runs others meanwhile), on plain
//! threads too; bad descriptors are refused with a message naming them.

use crate::common;

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::hub::{bounded, rt, until_parked};
use greenlet::hub::net::{pipe, Fd, NetError};
use greenlet::hub::{self, Wait};

fn net_error(e: &std::io::Error) -> &NetError {
    e.get_ref()
        .and_then(|i| i.downcast_ref::<NetError>())
        .unwrap_or_else(|| panic!("not a NetError: {e:?}"))
}

/// A reader parks on an empty pipe (its state says so), another green
/// thread of the same worker runs and writes, and the reader gets the
/// bytes.
#[test]
fn pipe_reader_parks_until_written() {
    let got = bounded(30, || {
        rt(1)
            .block_on(|| {
                let (r, mut w) = pipe().unwrap();
                let reader = hub::spawn(move || {
                    let mut buf = [0u8; 5];
                    (&r).read_exact(&mut buf).unwrap();
                    buf
                });
                until_parked(&reader, Wait::Io);
                w.write_all(b"hello").unwrap();
                reader.join().unwrap()
            })
            .unwrap()
    });
    assert_eq!(&got, b"hello");
}

/// A writer that fills the pipe parks until the reader drains it; every
/// byte arrives, in order.
#[test]
fn pipe_writer_parks_when_full() {
    const TOTAL: usize = 1 << 20;
    let sum = bounded(60, || {
        rt(1)
            .block_on(|| {
                let (mut r, mut w) = pipe().unwrap();
                let writer = hub::spawn(move || {
                    let chunk: Vec<u8> = (0..=255u8).collect();
                    for _ in 0..TOTAL / chunk.len() {
                        w.write_all(&chunk).unwrap();
                    }
                });
                until_parked(&writer, Wait::Io);
                let mut all = Vec::new();
                r.read_to_end(&mut all).unwrap();
                writer.join().unwrap();
                all
            })
            .unwrap()
    });
    assert_eq!(sum.len(), TOTAL);
    assert!(sum
        .chunks(256)
        .all(|c| c.iter().enumerate().all(|(i, &b)| b == i as u8)));
}

/// An eventfd through `read_with`: the green thread parks until another
/// adds to the counter, and reads the sum.
#[test]
fn eventfd_through_read_with() {
    let value = bounded(30, || {
        rt(1)
            .block_on(|| {
                // SAFETY: eventfd takes an initial value and flags; it reads
                // no memory of ours.
                let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
                assert!(raw >= 0);
                // SAFETY: a fresh descriptor nothing else owns.
                let efd = Arc::new(Fd::new(unsafe { OwnedFd::from_raw_fd(raw) }).unwrap());
                let e = Arc::clone(&efd);
                let reader = hub::spawn(move || {
                    e.read_with(|fd| {
                        let mut v = 0u64;
                        // SAFETY: `v` is valid for writes of 8 bytes.
                        let n = unsafe {
                            libc::read(fd.as_raw_fd(), std::ptr::addr_of_mut!(v).cast(), 8)
                        };
                        if n < 0 {
                            Err(std::io::Error::last_os_error())
                        } else {
                            Ok(v)
                        }
                    })
                    .unwrap()
                });
                until_parked(&reader, Wait::Io);
                (&*efd).write_all(&5u64.to_ne_bytes()).unwrap();
                reader.join().unwrap()
            })
            .unwrap()
    });
    assert_eq!(value, 5);
}

/// While one green thread waits on a pipe, the others of its worker run.
#[test]
fn waiting_on_a_pipe_does_not_hold_the_worker() {
    let ran = bounded(30, || {
        rt(1)
            .block_on(|| {
                let (r, w) = pipe().unwrap();
                let reader = hub::spawn(move || (&r).read(&mut [0u8; 1]).unwrap());
                let ran = Arc::new(AtomicUsize::new(0));
                let busy: Vec<_> = (0..10)
                    .map(|_| {
                        let ran = Arc::clone(&ran);
                        hub::spawn(move || {
                            hub::sleep(Duration::from_millis(1));
                            ran.fetch_add(1, Ordering::SeqCst);
                        })
                    })
                    .collect();
                for b in busy {
                    b.join().unwrap();
                }
                let ran = ran.load(Ordering::SeqCst);
                (&w).write_all(b"x").unwrap();
                assert_eq!(reader.join().unwrap(), 1);
                ran
            })
            .unwrap()
    });
    assert_eq!(ran, 10);
}

/// On a plain thread (no runtime) the same calls block in `poll(2)`.
#[test]
fn plain_thread_blocks_in_poll() {
    let got = bounded(30, || {
        let (mut r, w) = pipe().unwrap();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            (&w).write_all(b"plain").unwrap();
        });
        let mut s = String::new();
        r.read_to_string(&mut s).unwrap();
        t.join().unwrap();
        s
    });
    assert_eq!(got, "plain");
}

/// A read timeout ends the wait with `TimedOut` naming the operation.
#[test]
fn read_timeout_names_the_operation() {
    let err = bounded(30, || {
        rt(1)
            .block_on(|| {
                let (mut r, _w) = pipe().unwrap();
                r.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
                r.read(&mut [0u8; 1]).unwrap_err()
            })
            .unwrap()
    });
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    assert!(matches!(
        net_error(&err),
        NetError::TimedOut { op: "read", .. }
    ));
}

/// A regular file, a directory and a closed descriptor are refused with
/// messages that name the descriptor and say what to do.
#[test]
fn unpollable_descriptors_are_refused() {
    let file = std::fs::File::open("/proc/self/status").unwrap();
    let fd = file.as_raw_fd();
    let err = Fd::new(file).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(matches!(
        net_error(&err),
        NetError::NotPollable {
            what: "regular file",
            ..
        }
    ));
    assert!(err.to_string().contains(&format!("fd {fd}")), "{err}");
    assert!(err.to_string().contains("spawn_blocking"), "{err}");

    let dir = std::fs::File::open("/").unwrap();
    let err = Fd::new(dir).unwrap_err();
    assert!(matches!(
        net_error(&err),
        NetError::NotPollable {
            what: "directory",
            ..
        }
    ));

    struct Closed;
    impl AsRawFd for Closed {
        fn as_raw_fd(&self) -> RawFd {
            // Far above any descriptor this test process opens.
            1_000_000
        }
    }
    let err = Fd::new(Closed).unwrap_err();
    assert!(matches!(
        net_error(&err),
        NetError::FdNotOpen { fd: 1_000_000 }
    ));
    assert!(
        err.to_string().contains("fd 1000000 is not an open"),
        "{err}"
    );
}

/// `Fd::new` switches a blocking descriptor to non-blocking mode, so the
/// wait parks instead of the read blocking the worker.
#[test]
fn fd_new_makes_the_descriptor_non_blocking() {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe to fill.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: fresh descriptors nothing else owns.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let r = Fd::new(r).unwrap();
    // SAFETY: F_GETFL reads no memory of ours.
    let flags = unsafe { libc::fcntl(r.as_raw_fd(), libc::F_GETFL) };
    assert_ne!(flags & libc::O_NONBLOCK, 0);
    let got = bounded(30, move || {
        rt(1)
            .block_on(move || {
                let reader = hub::spawn(move || {
                    let mut b = [0u8; 2];
                    (&r).read_exact(&mut b).unwrap();
                    b
                });
                until_parked(&reader, Wait::Io);
                std::fs::File::from(w).write_all(b"nb").unwrap();
                reader.join().unwrap()
            })
            .unwrap()
    });
    assert_eq!(&got, b"nb");
}

/// A runtime of one worker on io_uring where the kernel has it (else
/// epoll; the environment variable overrides both).
fn ring_rt() -> hub::Runtime {
    let b = hub::Runtime::builder().worker_threads(1).watchdog(None);
    match b.clone().io_driver(hub::IoDriver::IoUring).build() {
        Ok(rt) => rt,
        Err(_) => b.io_driver(hub::IoDriver::Epoll).build().unwrap(),
    }
}

/// A pipe's read end dropped on its worker while a wake-up of its
/// readiness watch is still to be handled closes all the same: the
/// writer then gets `EPIPE`. The wake-up comes from a write made on a
/// plain thread while the worker is held (under io_uring it is handled
/// only when the worker next reaps its ring, and the watch, which keeps
/// the file open, must end anyway).
#[test]
fn a_pipe_end_dropped_with_a_wake_up_pending_closes() {
    let write_result = bounded(30, || {
        ring_rt()
            .block_on(|| {
                let (mut r, w) = pipe().unwrap();
                // A read that times out registers the read end.
                r.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
                let e = r.read(&mut [0u8; 1]).unwrap_err();
                assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
                let wfd = w.as_raw_fd();
                // The worker waits for this thread (a blocking join), so
                // the wake-up of its write is not handled before the drop.
                std::thread::spawn(move || {
                    // SAFETY: writes 1 byte from a live buffer; `w` keeps
                    // the descriptor open until after the join.
                    assert_eq!(unsafe { libc::write(wfd, b"x".as_ptr().cast(), 1) }, 1);
                })
                .join()
                .unwrap();
                drop(r);
                // The read end closes once the worker has reaped; a write
                // then fails with EPIPE (Rust ignores SIGPIPE).
                let start = std::time::Instant::now();
                loop {
                    // SAFETY: as above.
                    let n = unsafe { libc::write(wfd, b"y".as_ptr().cast(), 1) };
                    let got = match n {
                        -1 => std::io::Error::last_os_error(),
                        n => std::io::Error::other(format!("{n} byte(s) written")),
                    };
                    if got.raw_os_error() == Some(libc::EPIPE) {
                        return Ok(());
                    }
                    if start.elapsed() > Duration::from_secs(5) {
                        return Err(format!("after 5 s a write still gives: {got}"));
                    }
                    hub::sleep(Duration::from_millis(1));
                }
            })
            .unwrap()
    });
    assert_eq!(write_result, Ok(()), "the dropped read end stayed open");
}
