//! `serve` spreads its connections over the runtime's workers: with n
//! workers the k-th accepted connection's handler runs on worker k mod n
//! (counted by the worker thread each handler sees), whichever worker
//! accepts and whoever wakes first. Loopback only; bounded by a watchdog.

use crate::common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::hub::{bounded, rt};
use greenlet::hub;
use greenlet::hub::net::{serve, TcpListener, TcpStream};

/// Run `f` on a new runtime of `workers` workers, then shut it down; fail
/// the test if that has not finished within a minute (a hang).
fn on_runtime<T: Send + 'static>(workers: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    bounded(60, move || {
        let rt = rt(workers);
        let out = rt.block_on(f).unwrap();
        let report = rt.shutdown_timeout(Duration::from_secs(10));
        assert!(report.refused.is_empty(), "{report:?}");
        out
    })
}

/// Serve `conns` connections on a runtime of `workers` workers, each
/// handler recording the name of the worker thread it runs on and echoing
/// one byte; how many handlers ran on each worker thread.
fn handlers_per_worker(workers: usize, conns: usize) -> BTreeMap<String, usize> {
    on_runtime(workers, move || {
        let seen = Arc::new(Mutex::new(BTreeMap::<String, usize>::new()));
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let record = Arc::clone(&seen);
        let server = hub::spawn(move || {
            serve(l, move |mut s| {
                let name = std::thread::current().name().unwrap_or("?").to_string();
                *record.lock().unwrap().entry(name).or_default() += 1;
                let mut b = [0u8; 1];
                if s.read_exact(&mut b).is_ok() {
                    let _ = s.write_all(&b);
                }
            })
        });
        // All connections open at once: each handler has run (and
        // recorded) once its byte came back.
        let mut clients: Vec<TcpStream> = (0..conns)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        for (i, c) in clients.iter_mut().enumerate() {
            let byte = [i as u8];
            c.write_all(&byte).unwrap();
            let mut back = [0u8; 1];
            c.read_exact(&mut back).unwrap();
            assert_eq!(back, byte, "connection {i} echoed the wrong byte");
        }
        server.cancel();
        let seen = seen.lock().unwrap().clone();
        seen
    })
}

#[test]
fn two_workers_share_the_connections_evenly() {
    let seen = handlers_per_worker(2, 40);
    let want: BTreeMap<String, usize> = [
        ("hub-worker-0".to_string(), 20),
        ("hub-worker-1".to_string(), 20),
    ]
    .into();
    assert_eq!(seen, want, "handlers per worker thread");
}

#[test]
fn three_workers_share_the_connections_evenly() {
    let seen = handlers_per_worker(3, 30);
    let want: BTreeMap<String, usize> = (0..3).map(|i| (format!("hub-worker-{i}"), 10)).collect();
    assert_eq!(seen, want, "handlers per worker thread");
}

#[test]
fn one_worker_serves_every_connection() {
    let seen = handlers_per_worker(1, 10);
    let want: BTreeMap<String, usize> = [("hub-worker-0".to_string(), 10)].into();
    assert_eq!(seen, want, "handlers per worker thread");
}
