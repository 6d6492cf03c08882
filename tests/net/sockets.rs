//! The hub's sockets: echo, deadlines, half-close, a reader and a writer
//! green thread on one socket, plain threads, conversions, UDP. Loopback
//! only; every wait bounded by a watchdog.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use greenlet::hub::net::{serve, NetError, TcpListener, TcpStream, UdpSocket};
use greenlet::hub::{self, Runtime};

/// Run `f` on a new runtime of `workers` workers; fail the test if it has
/// not finished within a minute (a hang).
fn on_runtime<T: Send + 'static>(workers: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let rt = Runtime::builder().worker_threads(workers).build().unwrap();
        let out = rt.block_on(f);
        let report = rt.shutdown_timeout(Duration::from_secs(10));
        assert!(report.refused.is_empty(), "{report:?}");
        let _ = tx.send(());
        out
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(60)).is_ok(),
        "watchdog: the test did not finish within 60 s"
    );
    t.join().unwrap().unwrap()
}

/// An echo server on a new listener; returns its address.
fn echo_server() -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    hub::spawn(move || {
        serve(l, |s| {
            let _ = io::copy(&mut &s, &mut &s);
            let _ = s.shutdown(Shutdown::Write);
        })
    });
    addr
}

/// The byte stream of seed `seed`, generated as it is consumed (xorshift),
/// so a test can check gigabytes without holding them.
struct Pattern(u64);

impl Pattern {
    fn new(seed: u64) -> Pattern {
        Pattern(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            *b = self.0 as u8;
        }
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    Pattern::new(seed).fill(&mut v);
    v
}

/// Connect, send `len` bytes of pattern `seed` from one green thread
/// while another reads the echo and checks it against the same pattern;
/// the bytes that came back, and how many of them differed.
fn echo_checked(addr: std::net::SocketAddr, seed: u64, len: usize) -> (usize, usize) {
    const CHUNK: usize = 16 * 1024;
    let s = Rc::new(TcpStream::connect(addr).unwrap());
    let w = Rc::clone(&s);
    let writer = hub::spawn_local(move || {
        let mut gen = Pattern::new(seed);
        let mut buf = vec![0u8; CHUNK];
        let mut left = len;
        while left > 0 {
            let n = left.min(CHUNK);
            gen.fill(&mut buf[..n]);
            (&*w).write_all(&buf[..n]).unwrap();
            left -= n;
        }
        w.shutdown(Shutdown::Write).unwrap();
    });
    let mut gen = Pattern::new(seed);
    let (mut got, mut want) = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
    let (mut back, mut differed) = (0, 0);
    loop {
        let n = (&*s).read(&mut got).unwrap();
        if n == 0 {
            break;
        }
        gen.fill(&mut want[..n]);
        differed += got[..n]
            .iter()
            .zip(&want[..n])
            .filter(|(a, b)| a != b)
            .count();
        back += n;
    }
    writer.join().unwrap();
    (back, differed)
}

/// Connect, write `data` from one green thread while another reads the
/// echo, and return what came back.
fn echo_through(addr: std::net::SocketAddr, data: Vec<u8>) -> Vec<u8> {
    let s = Rc::new(TcpStream::connect(addr).unwrap());
    let w = Rc::clone(&s);
    let writer = hub::spawn_local(move || {
        (&*w).write_all(&data).unwrap();
        w.shutdown(Shutdown::Write).unwrap();
    });
    let mut back = Vec::new();
    (&*s).read_to_end(&mut back).unwrap();
    writer.join().unwrap();
    back
}

#[test]
fn many_connections_echo_every_byte() {
    // 1,000 concurrent connections x 1 MiB each way (2 GiB over loopback),
    // every byte checked against its pattern as it arrives.
    const CONNS: u64 = 1000;
    const SIZE: usize = 1 << 20;
    let results = on_runtime(2, || {
        let addr = echo_server();
        let hs: Vec<_> = (0..CONNS)
            .map(|i| hub::spawn(move || echo_checked(addr, i, SIZE)))
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    let short = results.iter().filter(|(back, _)| *back != SIZE).count();
    let differed: usize = results.iter().map(|(_, d)| d).sum();
    assert_eq!(
        short, 0,
        "connections that got back fewer or more bytes than sent"
    );
    assert_eq!(differed, 0, "bytes that came back different");
}

#[test]
fn read_deadline_fires() {
    let err = on_runtime(1, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, _) = l.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        assert_eq!(c.read_timeout(), Some(Duration::from_millis(20)));
        hub::task()
            .name("reader")
            .spawn(move || c.read(&mut [0u8; 8]).unwrap_err())
            .unwrap()
            .join()
            .unwrap()
    });
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    let inner = err.get_ref().and_then(|e| e.downcast_ref::<NetError>());
    assert!(
        matches!(inner, Some(NetError::TimedOut { op: "read", task: Some(t), .. }) if t.starts_with("'reader' (id ")),
        "{err}"
    );
    assert!(
        err.to_string().contains("in green thread 'reader' (id "),
        "{err}"
    );
}

#[test]
fn a_served_connection_is_named_after_its_peer() {
    let (names, err, peer) = on_runtime(1, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = hub::unbounded();
        let server = hub::spawn(move || {
            serve(l, move |mut s| {
                s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
                let _ = tx.send(s.read(&mut [0u8; 8]).unwrap_err());
            })
        });
        let c = TcpStream::connect(addr).unwrap();
        let peer = c.local_addr().unwrap();
        // The handler waits in its read until the timeout: list it there.
        let names = loop {
            let names: Vec<String> = hub::tasks().unwrap().into_iter().map(|t| t.name).collect();
            if names.iter().any(|n| n.starts_with("conn ")) {
                break names;
            }
            hub::sleep(Duration::from_millis(1));
        };
        let err = rx.recv().unwrap();
        server.cancel();
        (names, err, peer)
    });
    let wanted = format!("conn {peer}");
    assert!(names.contains(&wanted), "{wanted} among {names:?}");
    assert!(
        err.to_string()
            .contains(&format!("in green thread '{wanted}' (id ")),
        "{err}"
    );
}

#[test]
fn write_deadline_fires_when_the_peer_does_not_read() {
    let (err, written) = on_runtime(1, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, _) = l.accept().unwrap();
        c.set_write_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let chunk = vec![7u8; 64 * 1024];
        let mut written = 0usize;
        // Bounded: the socket buffers hold a few MiB at most.
        for _ in 0..100_000 {
            match c.write(&chunk) {
                Ok(n) => written += n,
                Err(e) => return (e, written),
            }
        }
        panic!("the write never timed out after {written} bytes");
    });
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert!(written > 0);
    let inner = err.get_ref().and_then(|e| e.downcast_ref::<NetError>());
    assert!(
        matches!(inner, Some(NetError::TimedOut { op: "write", .. })),
        "{err}"
    );
}

#[test]
fn zero_timeouts_are_refused() {
    on_runtime(1, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let c = TcpStream::connect(addr).unwrap();
        for e in [
            c.set_read_timeout(Some(Duration::ZERO)).unwrap_err(),
            c.set_write_timeout(Some(Duration::ZERO)).unwrap_err(),
            TcpStream::connect_timeout(&addr, Duration::ZERO).unwrap_err(),
        ] {
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            assert!(e.to_string().contains("pass None"), "{e}");
        }
    });
}

#[test]
fn half_closed_connection_reads_eof_and_still_writes() {
    let got = on_runtime(1, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let server = hub::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut req = Vec::new();
            s.read_to_end(&mut req).unwrap(); // EOF: the client shut down its write half
            s.write_all(b"got ").unwrap();
            s.write_all(&req).unwrap();
        });
        c.write_all(b"question").unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut back = String::new();
        c.read_to_string(&mut back).unwrap();
        server.join().unwrap();
        back
    });
    assert_eq!(got, "got question");
}

#[test]
fn a_reader_and_a_writer_green_thread_share_one_socket() {
    let (n, back) = on_runtime(1, || {
        let addr = echo_server();
        let data = pattern(99, 300_000);
        let back = echo_through(addr, data.clone());
        (data.len(), back == data)
    });
    assert_eq!(n, 300_000);
    assert!(back);
}

#[test]
fn green_threads_of_different_workers_share_one_socket() {
    let ok = on_runtime(2, || {
        let addr = echo_server();
        let s = std::sync::Arc::new(TcpStream::connect(addr).unwrap());
        let data = pattern(5, 500_000);
        let (w, d) = (std::sync::Arc::clone(&s), data.clone());
        // Spawned (Send): it may start on either worker.
        let writer = hub::spawn(move || {
            (&*w).write_all(&d).unwrap();
            w.shutdown(Shutdown::Write).unwrap();
        });
        let r = std::sync::Arc::clone(&s);
        let reader = hub::spawn(move || {
            let mut back = Vec::new();
            (&*r).read_to_end(&mut back).unwrap();
            back
        });
        writer.join().unwrap();
        reader.join().unwrap() == data
    });
    assert!(ok);
}

#[test]
fn plain_threads_block_on_the_same_sockets() {
    // No runtime on these threads: operations block in poll(2).
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut b = [0u8; 4];
        s.read_exact(&mut b).unwrap();
        s.write_all(&b).unwrap();
    });
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(b"abcd").unwrap();
    let mut b = [0u8; 4];
    c.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"abcd");
    server.join().unwrap();
    c.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
    let mut rest = Vec::new();
    assert_eq!(
        c.read_to_end(&mut rest).unwrap(),
        0,
        "EOF after the server closed"
    );
}

#[test]
fn conversions_to_and_from_std() {
    on_runtime(1, || {
        let std_l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let l = TcpListener::try_from(std_l).unwrap();
        let addr = l.local_addr().unwrap();
        let std_c = std::net::TcpStream::connect(addr).unwrap();
        let mut c = TcpStream::from_std(std_c).unwrap();
        let (s, _) = l.accept().unwrap();
        let mut std_s = s.into_std().unwrap();
        c.write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        std_s.read_exact(&mut b).unwrap(); // blocking std socket again
        assert_eq!(&b, b"x");
        let std_l = l.into_std().unwrap();
        assert_eq!(std_l.local_addr().unwrap(), addr);
    });
}

#[test]
fn connect_errors_and_timeouts() {
    on_runtime(1, || {
        // A port nobody listens on: refused, not a hang.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let e = TcpStream::connect(addr).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
        let e = TcpStream::connect("no.such.host.invalid:1").unwrap_err();
        assert!(!e.to_string().is_empty());
    });
}

#[test]
fn nodelay_and_addresses() {
    on_runtime(1, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, peer) = l.accept().unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        assert_eq!(s.peer_addr().unwrap(), c.local_addr().unwrap());
        assert_eq!(s.local_addr().unwrap(), c.peer_addr().unwrap());
        c.set_nodelay(true).unwrap();
        assert!(c.nodelay().unwrap());
        assert!(format!("{c:?}").contains("TcpStream"));
    });
}

#[test]
fn udp_echo_and_receive_deadline() {
    let (ok, err) = on_runtime(2, || {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let saddr = server.local_addr().unwrap();
        hub::spawn(move || {
            let mut buf = [0u8; 1500];
            for _ in 0..100 {
                let (n, from) = server.recv_from(&mut buf).unwrap();
                server.send_to(&buf[..n], from).unwrap();
            }
        });
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.connect(saddr).unwrap();
        let mut ok = 0;
        for i in 0..100u32 {
            c.send(&i.to_le_bytes()).unwrap();
            let mut b = [0u8; 8];
            let n = c.recv(&mut b).unwrap();
            if b[..n] == i.to_le_bytes() {
                ok += 1;
            }
        }
        c.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        (ok, c.recv(&mut [0u8; 8]).unwrap_err())
    });
    assert_eq!(ok, 100);
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
}

#[test]
fn the_accept_queue_holds_600_unaccepted_connections() {
    // mio listens with a backlog of 128; bind deepens it to 1,024. With
    // 128, the 130th handshake is dropped and its connect times out.
    const N: usize = 600;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let conns: io::Result<Vec<_>> = (0..N)
            .map(|_| std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(20)))
            .collect();
        let _ = tx.send(conns);
    });
    let conns = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("watchdog: the connects did not finish within 60 s")
        .expect("a connect failed: the accept queue overflowed");
    assert_eq!(conns.len(), N);
    for _ in 0..N {
        l.accept().unwrap();
    }
}

/// Read until `want` bytes came, with a buffer larger than that (so the
/// last read comes up short and the next wait really parks).
fn read_some(s: &TcpStream, want: usize) -> usize {
    let mut got = 0;
    while got < want {
        match (&*s).read(&mut [0u8; 64]).unwrap() {
            0 => break,
            n => got += n,
        }
    }
    got
}

#[test]
fn readable_waits_for_data_then_eof_and_honours_the_read_timeout() {
    let (timed_out, got, eof) = on_runtime(1, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let timed_out = s.readable().unwrap_err();
        s.set_read_timeout(None).unwrap();
        let writer = hub::spawn(move || {
            c.write_all(b"abc").unwrap();
            c
        });
        s.readable().unwrap();
        let got = read_some(&s, 3);
        drop(writer.join().unwrap());
        s.readable().unwrap();
        let eof = (&s).read(&mut [0u8; 8]).unwrap();
        (timed_out, got, eof)
    });
    assert_eq!(timed_out.kind(), io::ErrorKind::TimedOut);
    let inner = timed_out
        .get_ref()
        .and_then(|e| e.downcast_ref::<NetError>());
    assert!(
        matches!(inner, Some(NetError::TimedOut { op: "readable", .. })),
        "{timed_out}"
    );
    assert_eq!((got, eof), (3, 0));
}

#[test]
fn readable_on_a_plain_thread_polls() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (mut peer, _) = l.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    assert_eq!(s.readable().unwrap_err().kind(), io::ErrorKind::TimedOut);
    peer.write_all(b"xy").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.readable().unwrap();
    assert_eq!(read_some(&s, 2), 2);
}
