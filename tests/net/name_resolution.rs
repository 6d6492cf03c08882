//! Name resolution on the hub: a host name is looked up on the blocking
//! pool (a literal address never is), and errors name the address.
//! One test function: it watches the process's thread names, which other
//! tests' runtimes would disturb.

use crate::common;

use common::hub::{bounded, rt};
use greenlet::hub::net::{NetError, TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Names of this process's threads that belong to a blocking pool.
fn blocking_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("hub-blocking"))
        .count()
}

#[test]
fn host_names_resolve_on_the_blocking_pool_and_errors_name_the_address() {
    bounded(60, || {
        rt(1)
            .block_on(|| {
                // Literal addresses: no lookup, no blocking thread.
                let l = TcpListener::bind("127.0.0.1:0").unwrap();
                let port = l.local_addr().unwrap().port();
                let _c = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
                let _c = TcpStream::connect(("127.0.0.1", port)).unwrap();
                assert_eq!(blocking_threads(), 0, "a literal address went to the pool");

                // A host name: looked up on a blocking-pool thread.
                let c = TcpStream::connect(format!("localhost:{port}")).unwrap();
                assert!(c.peer_addr().unwrap().ip().is_loopback());
                assert_eq!(blocking_threads(), 1, "the lookup ran on the worker");
                let addrs = ("localhost", port).resolve().unwrap();
                assert!(addrs.iter().all(|a| a.port() == port));

                // `Address already in use` names the address.
                let addr = l.local_addr().unwrap();
                let err = TcpListener::bind(addr).unwrap_err();
                assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
                let text = err.to_string();
                assert!(
                    text.contains(&addr.to_string()) && text.contains("bind"),
                    "{text}"
                );
                assert!(matches!(
                    err.get_ref().and_then(|e| e.downcast_ref::<NetError>()),
                    Some(NetError::Addr { op: "bind", .. })
                ));
                let u = UdpSocket::bind("127.0.0.1:0").unwrap();
                let err = UdpSocket::bind(u.local_addr().unwrap()).unwrap_err();
                assert!(
                    err.to_string()
                        .contains(&u.local_addr().unwrap().to_string()),
                    "{err}"
                );

                // A refused connect names the peer. The port is held by a bound socket
                // that does not listen, so no other test can take it meanwhile.
                let (_held, refused) = bound_not_listening();
                let err = TcpStream::connect(refused).unwrap_err();
                assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
                assert!(err.to_string().contains(&refused.to_string()), "{err}");

                // A malformed address says what was expected.
                let err = TcpStream::connect("no-port-here").unwrap_err();
                assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
                assert!(err.to_string().contains("no-port-here"), "{err}");
                assert!(err.to_string().contains("host:port"), "{err}");

                // An empty list of addresses.
                let none: &[std::net::SocketAddr] = &[];
                let err = TcpListener::bind(none).unwrap_err();
                assert!(matches!(
                    err.get_ref().and_then(|e| e.downcast_ref::<NetError>()),
                    Some(NetError::NoAddress { .. })
                ));
            })
            .unwrap()
    });
}

/// A TCP socket bound to a free port on 127.0.0.1 that never listens: connecting to its
/// address is refused, and the port stays taken while the returned descriptor lives.
fn bound_not_listening() -> (OwnedFd, SocketAddr) {
    // SAFETY: `socket` has no memory preconditions; a non-negative result is a new
    // descriptor that nothing else owns, so `OwnedFd` may take it.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    // SAFETY: as above, `fd` is a fresh descriptor owned by no one else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `sockaddr_in` is plain integers, for which all zero bytes are a valid value.
    let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sin.sin_family = libc::AF_INET as libc::sa_family_t;
    sin.sin_addr.s_addr = u32::from(Ipv4Addr::LOCALHOST).to_be();
    let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `sin` is a valid `sockaddr_in` of `len` bytes that outlives the call.
    let rc = unsafe { libc::bind(fd.as_raw_fd(), (&raw const sin).cast(), len) };
    assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
    // SAFETY: `sin` has room for `len` bytes and `len` is a valid in/out length; the
    // kernel writes back the address with the port it chose.
    let rc = unsafe { libc::getsockname(fd.as_raw_fd(), (&raw mut sin).cast(), &mut len) };
    assert_eq!(rc, 0, "getsockname: {}", std::io::Error::last_os_error());
    let port = u16::from_be(sin.sin_port);
    (fd, SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
}
