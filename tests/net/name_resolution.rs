//! Name resolution on the hub: a host name is looked up on the blocking
//! pool (a literal address never is), and errors name the address.
//! One test function: it watches the process's thread names, which other
//! tests' runtimes would disturb.

use crate::common;

use common::hub::{bounded, rt};
use greenlet::hub::net::{NetError, TcpListener, TcpStream, ToSocketAddrs, UdpSocket};

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

                // A refused connect names the peer.
                drop(l);
                let err = TcpStream::connect(addr).unwrap_err();
                assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
                assert!(err.to_string().contains(&addr.to_string()), "{err}");

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
