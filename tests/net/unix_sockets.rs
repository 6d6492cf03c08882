//! Unix-domain sockets on the hub: a listener serving several green
//! clients at once, datagrams, errors that name the path, clones.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;

use common::hub::{bounded, rt, until_parked};
use greenlet::hub::net::{NetError, UnixDatagram, UnixListener, UnixStream};
use greenlet::hub::{self, Wait};

/// A fresh directory for one test's socket files, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("greenlet-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// 20 clients, each a green thread, echo 50 lines each through one
/// listener whose handlers are green threads too; every line comes back.
#[test]
fn echo_server_many_clients() {
    let dir = TempDir::new("unix-echo");
    let path = dir.path("echo.sock");
    let total = bounded(60, move || {
        rt(2)
            .block_on(move || {
                let l = UnixListener::bind(&path).unwrap();
                let server = hub::spawn(move || {
                    for _ in 0..20 {
                        let (s, _) = l.accept().unwrap();
                        hub::spawn(move || {
                            let mut r = BufReader::new(&s);
                            let mut line = String::new();
                            while r.read_line(&mut line).unwrap() > 0 {
                                (&s).write_all(line.as_bytes()).unwrap();
                                line.clear();
                            }
                        });
                    }
                });
                let clients: Vec<_> = (0..20)
                    .map(|c| {
                        let path = path.clone();
                        hub::spawn(move || {
                            let s = UnixStream::connect(&path).unwrap();
                            let mut r = BufReader::new(&s);
                            let mut ok = 0;
                            for i in 0..50 {
                                let msg = format!("client {c} line {i}\n");
                                (&s).write_all(msg.as_bytes()).unwrap();
                                let mut back = String::new();
                                r.read_line(&mut back).unwrap();
                                ok += usize::from(back == msg);
                            }
                            ok
                        })
                    })
                    .collect();
                let total: usize = clients.into_iter().map(|h| h.join().unwrap()).sum();
                server.join().unwrap();
                total
            })
            .unwrap()
    });
    assert_eq!(total, 20 * 50);
}

/// `accept` parks (its state says so) until a client connects.
#[test]
fn accept_parks_until_a_client_connects() {
    let dir = TempDir::new("unix-accept");
    let path = dir.path("a.sock");
    let got = bounded(30, move || {
        rt(1)
            .block_on(move || {
                let l = UnixListener::bind(&path).unwrap();
                let acceptor = hub::spawn(move || {
                    let (mut s, _) = l.accept().unwrap();
                    let mut v = String::new();
                    s.read_to_string(&mut v).unwrap();
                    v
                });
                until_parked(&acceptor, Wait::Io);
                let mut c = UnixStream::connect(&path).unwrap();
                c.write_all(b"late").unwrap();
                drop(c);
                acceptor.join().unwrap()
            })
            .unwrap()
    });
    assert_eq!(got, "late");
}

/// Binding a path in use, connecting to a missing one: the errors keep
/// the OS's kind and name the path.
#[test]
fn errors_name_the_path() {
    let dir = TempDir::new("unix-errors");
    let path = dir.path("busy.sock");
    let _l = UnixListener::bind(&path).unwrap();
    let err = UnixListener::bind(&path).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    let text = err.to_string();
    assert!(
        text.contains("bind") && text.contains("busy.sock"),
        "{text}"
    );
    assert!(matches!(
        err.get_ref().and_then(|e| e.downcast_ref::<NetError>()),
        Some(NetError::Addr { op: "bind", .. })
    ));

    let missing = dir.path("missing.sock");
    let err = bounded(30, move || {
        rt(1)
            .block_on(move || UnixStream::connect(&missing))
            .unwrap()
    })
    .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().contains("missing.sock"), "{err}");

    let err = UnixDatagram::bind(&path).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    assert!(err.to_string().contains("busy.sock"), "{err}");
}

/// Datagrams between two bound sockets: the receiver parks, and learns
/// the sender's path.
#[test]
fn datagrams_between_bound_sockets() {
    let dir = TempDir::new("unix-dgram");
    let a_path = dir.path("a.sock");
    let b_path = dir.path("b.sock");
    let (msg, from) = bounded(30, move || {
        rt(1)
            .block_on(move || {
                let a = UnixDatagram::bind(&a_path).unwrap();
                let b = UnixDatagram::bind(&b_path).unwrap();
                let receiver = hub::spawn(move || {
                    let mut buf = [0u8; 64];
                    let (n, from) = b.recv_from(&mut buf).unwrap();
                    (
                        String::from_utf8_lossy(&buf[..n]).into_owned(),
                        from.as_pathname().map(|p| p.to_path_buf()),
                    )
                });
                until_parked(&receiver, Wait::Io);
                a.send_to(b"over here", dir.path("b.sock")).unwrap();
                receiver.join().unwrap()
            })
            .unwrap()
    });
    assert_eq!(msg, "over here");
    assert!(from.unwrap().ends_with("a.sock"));
}

/// A clone reads what the original's peer wrote while the original
/// writes: two green threads, one connection.
#[test]
fn try_clone_reads_while_the_original_writes() {
    let got = bounded(30, || {
        rt(1)
            .block_on(|| {
                let (a, b) = UnixStream::pair().unwrap();
                let a2 = a.try_clone().unwrap();
                let reader = hub::spawn(move || {
                    let mut v = Vec::new();
                    (&a2).read_to_end(&mut v).unwrap();
                    v.len()
                });
                let echo = hub::spawn(move || {
                    let mut buf = vec![0u8; 100_000];
                    (&b).read_exact(&mut buf).unwrap();
                    (&b).write_all(&buf).unwrap();
                });
                (&a).write_all(&vec![7u8; 100_000]).unwrap();
                echo.join().unwrap();
                reader.join().unwrap()
            })
            .unwrap()
    });
    assert_eq!(got, 100_000);
}
