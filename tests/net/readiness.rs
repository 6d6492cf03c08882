//! The readiness rule of the hub's stream reads: a read that drains the
//! receive queue (it comes up short, or fills its buffer and the kernel
//! reports nothing left, `TCP_INQ`) makes the next read wait for new
//! readiness without trying the system call first. Each test would hang
//! (and its watchdog fail it) if the rule waited when data was queued or
//! lost a wake; loopback only.

use crate::common;

use std::io::{Read, Write};
use std::net::Shutdown;
use std::sync::Arc;
use std::time::Duration;

use common::hub::bounded;
use greenlet::hub::net::{TcpListener, TcpStream};
use greenlet::hub::{self, Runtime};

/// Run `f` on a new runtime of `workers` workers; fail the test if it has
/// not finished within a minute (a hang).
fn on_runtime<T: Send + 'static>(workers: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    bounded(60, move || {
        let rt = Runtime::builder().worker_threads(workers).build().unwrap();
        let out = rt.block_on(f).unwrap();
        let report = rt.shutdown_timeout(Duration::from_secs(10));
        assert!(report.refused.is_empty(), "{report:?}");
        out
    })
}

/// A connected pair: the hub's stream and a std stream as its peer.
fn pair() -> (TcpStream, std::net::TcpStream) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (peer, _) = l.accept().unwrap();
    peer.set_nodelay(true).unwrap();
    (s, peer)
}

/// Read into `buf` while a green thread spawned meanwhile writes `data` on
/// `peer`: on one worker the read finds nothing, so it registers the
/// stream with the poller and parks (the readiness rule applies only to a
/// registered stream), and the writer runs then. The bytes read and the
/// peer back.
fn read_after_parking(
    s: &TcpStream,
    mut peer: std::net::TcpStream,
    data: &'static [u8],
    buf: &mut [u8],
) -> (usize, std::net::TcpStream) {
    let writer = hub::spawn(move || {
        peer.write_all(data).unwrap();
        peer
    });
    let n = (&*s).read(buf).unwrap();
    (n, writer.join().unwrap())
}

/// Read exactly `buf.len()` bytes with reads of at most `chunk` bytes;
/// the sizes the reads returned.
fn read_in(s: &TcpStream, buf: &mut [u8], chunk: usize) -> Vec<usize> {
    let mut sizes = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let end = (at + chunk).min(buf.len());
        let n = (&*s).read(&mut buf[at..end]).unwrap();
        assert!(n > 0, "EOF after {at} of {} bytes", buf.len());
        sizes.push(n);
        at += n;
    }
    sizes
}

#[test]
fn a_short_read_parks_the_next_read_until_more_data_comes() {
    let got = on_runtime(1, || {
        let (s, peer) = pair();
        let mut buf = [0u8; 64];
        let (first, peer) = read_after_parking(&s, peer, b"abc", &mut buf);
        // Drained: this read parks, and the writer (which runs only once
        // the reader parks, on this one worker) wakes it.
        let (second, peer) = read_after_parking(&s, peer, b"defg", &mut buf);
        drop(peer);
        let eof = (&s).read(&mut buf).unwrap();
        (first, second, buf[..4].to_vec(), eof)
    });
    assert_eq!(got, (3, 4, b"defg".to_vec(), 0));
}

#[test]
fn a_read_that_fills_its_buffer_with_more_queued_reads_on_without_new_data() {
    let (sizes, data_ok, later) = on_runtime(1, || {
        let (s, peer) = pair();
        // The first full read (after a park: registered) turns the
        // kernel's report on; then 4 x 64 bytes arrive in one segment: each
        // 64-byte read fills its buffer, and the data after it brings no
        // new readiness, so a read that waited for readiness here would
        // never return.
        let (first, mut peer) = read_after_parking(&s, peer, &[7u8; 64], &mut [0u8; 64]);
        assert_eq!(first, 64);
        let data: Vec<u8> = (0..=255).collect();
        peer.write_all(&data).unwrap();
        let mut back = vec![0u8; 256];
        let sizes = read_in(&s, &mut back, 64);
        // Now the queue is empty (the kernel said so with the last one):
        // the next read parks until the writer sends.
        let writer = hub::spawn(move || {
            peer.write_all(b"later").unwrap();
            peer.shutdown(Shutdown::Write).unwrap();
            peer
        });
        let mut rest = Vec::new();
        (&s).read_to_end(&mut rest).unwrap();
        drop(writer.join().unwrap());
        (sizes, back == data, rest)
    });
    assert_eq!(sizes.iter().sum::<usize>(), 256, "{sizes:?}");
    assert!(data_ok);
    assert_eq!(later, b"later");
}

#[test]
fn messages_of_exactly_the_buffer_size_echo_in_order() {
    // A request-response exchange whose messages are exactly the read
    // buffer's size: every read fills its buffer, and whether the queue is
    // empty after it only the kernel's report tells.
    const SIZE: usize = 4096;
    const ROUNDS: usize = 300;
    let mismatched = on_runtime(1, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = hub::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut buf = vec![0u8; SIZE];
            loop {
                match (&s).read(&mut buf).unwrap() {
                    0 => return,
                    n => (&s).write_all(&buf[..n]).unwrap(),
                }
            }
        });
        let c = TcpStream::connect(addr).unwrap();
        c.set_nodelay(true).unwrap();
        let mut mismatched = 0;
        let mut back = vec![0u8; SIZE];
        for round in 0..ROUNDS {
            let msg = vec![round as u8; SIZE];
            (&c).write_all(&msg).unwrap();
            read_in(&c, &mut back, SIZE);
            mismatched += usize::from(back != msg);
        }
        c.shutdown(Shutdown::Write).unwrap();
        server.join().unwrap();
        mismatched
    });
    assert_eq!(mismatched, 0);
}

/// Write `rounds` messages of `size` bytes on `s` from one green thread
/// while another reads the echo with a buffer of exactly `size` bytes;
/// whether every byte came back in order.
fn reader_and_writer_on_one_stream(workers: usize, size: usize, rounds: usize) -> bool {
    on_runtime(workers, move || {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let echo = std::thread::spawn(move || {
            let (mut peer, _) = l.accept().unwrap();
            let (mut r, mut w) = (peer.try_clone().unwrap(), &mut peer);
            std::io::copy(&mut r, &mut w).unwrap();
        });
        let s = Arc::new(TcpStream::connect(addr).unwrap());
        let w = Arc::clone(&s);
        // Spawned (Send): with two workers they may run on either.
        let writer = hub::spawn(move || {
            for round in 0..rounds {
                (&*w).write_all(&vec![round as u8; size]).unwrap();
            }
            w.shutdown(Shutdown::Write).unwrap();
        });
        let r = Arc::clone(&s);
        let reader = hub::spawn(move || {
            let mut buf = vec![0u8; size];
            let mut ok = true;
            for round in 0..rounds {
                read_in(&r, &mut buf, size);
                ok &= buf.iter().all(|&b| b == round as u8);
            }
            ok && (&*r).read(&mut buf).unwrap() == 0
        });
        writer.join().unwrap();
        let ok = reader.join().unwrap();
        echo.join().unwrap();
        ok
    })
}

#[test]
fn a_reader_and_a_writer_green_thread_share_one_stream() {
    assert!(reader_and_writer_on_one_stream(1, 1024, 2_000));
}

#[test]
fn a_reader_and_a_writer_on_different_workers_share_one_stream() {
    assert!(reader_and_writer_on_one_stream(2, 1024, 2_000));
}

#[test]
fn a_stream_drained_on_a_green_thread_reads_on_a_plain_thread_after_its_runtime_ended() {
    // Its registration's readiness numbers stop moving with the runtime:
    // the plain thread's wait (poll(2)) must not be taken for a wait on
    // them, or read and readable() would spin forever.
    let (read, readable_then_read) = bounded(60, || {
        let (s, mut peer) = hub::run(|| {
            let (s, peer) = pair();
            let (n, peer) = read_after_parking(&s, peer, b"ab", &mut [0u8; 64]);
            assert_eq!(n, 2);
            (s, peer)
        })
        .unwrap();
        peer.write_all(b"cde").unwrap();
        let read = (&s).read(&mut [0u8; 64]).unwrap();
        peer.write_all(b"fghi").unwrap();
        s.readable().unwrap();
        let then = (&s).read(&mut [0u8; 64]).unwrap();
        (read, then)
    });
    assert_eq!((read, readable_then_read), (3, 4));
}

#[test]
#[cfg(target_os = "linux")]
fn the_kernel_report_is_asked_for_after_a_full_read_and_turned_off_for_std() {
    use std::os::fd::AsRawFd;
    fn inq(fd: std::os::fd::RawFd) -> libc::c_int {
        let mut v: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `v` and `len` are valid for writes for the call's
        // duration, `len` holding `v`'s size.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_INQ,
                std::ptr::from_mut(&mut v).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        v
    }
    let (short, full, back, driver) = on_runtime(1, || {
        let driver = greenlet::hub::Handle::current().unwrap().io_driver();
        let (s, mut peer) = pair();
        peer.write_all(b"xy").unwrap();
        assert_eq!((&s).read(&mut [0u8; 64]).unwrap(), 2);
        let short = inq(s.as_raw_fd());
        peer.write_all(&[1u8; 32]).unwrap();
        read_in(&s, &mut [0u8; 32], 32);
        let full = inq(s.as_raw_fd());
        let std_stream = s.into_std().unwrap();
        (short, full, inq(std_stream.as_raw_fd()), driver)
    });
    // Under io_uring a green thread's reads are ring operations, which
    // never ask for the report.
    let full_after = match driver {
        greenlet::hub::IoDriver::IoUring => 0,
        _ => 1,
    };
    assert_eq!((short, full, back), (0, full_after, 0));
}
