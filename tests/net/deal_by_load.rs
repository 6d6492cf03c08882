//! The dealing of accepted connections passes over a worker that is busy:
//! one of its green threads blocks its thread, so it cannot start a new
//! handler, and the connections accepted meanwhile start on the other
//! worker. Deterministic: the busy worker stays busy until the test
//! releases it, and the test waits well past the stall bound before it
//! connects. Loopback only; bounded by a watchdog.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::hub::{bounded, rt};
use greenlet::hub::net;

/// Set once to let the blocked handler go.
type Gate = Arc<(Mutex<bool>, Condvar)>;

fn thread_name() -> String {
    std::thread::current().name().unwrap_or("?").to_string()
}

/// A handler: reads one command byte. `B`: on a worker other than the
/// accept loop's, reply with the worker's name and block that worker's
/// thread until the gate opens (at most 30 s); on the accept loop's worker
/// reply `skip`. `N`: reply with the worker's name.
fn handle(mut s: net::TcpStream, accept_worker: &str, gate: &Gate) {
    let mut cmd = [0u8; 1];
    if std::io::Read::read_exact(&mut s, &mut cmd).is_err() {
        return;
    }
    let here = thread_name();
    if cmd[0] == b'B' && here == accept_worker {
        let _ = s.write_all(b"skip\n");
        return;
    }
    let _ = s.write_all(format!("{here}\n").as_bytes());
    if cmd[0] == b'B' {
        let (open, cv) = &**gate;
        let mut open = open.lock().unwrap();
        let end = Instant::now() + Duration::from_secs(30);
        while !*open && Instant::now() < end {
            open = cv.wait_timeout(open, Duration::from_millis(100)).unwrap().0;
        }
    }
}

/// Connect and send `cmd`.
fn open(addr: SocketAddr, cmd: u8) -> BufReader<TcpStream> {
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(&[cmd]).unwrap();
    BufReader::new(c)
}

/// The next line from `c`, waiting at most `wait` (None: nothing came).
fn line_within(c: &mut BufReader<TcpStream>, wait: Duration) -> Option<String> {
    c.get_ref().set_read_timeout(Some(wait)).unwrap();
    let mut line = String::new();
    match c.read_line(&mut line) {
        Ok(n) if n > 0 => Some(line.trim_end().to_string()),
        _ => None,
    }
}

#[test]
fn a_worker_blocked_by_its_green_thread_gets_no_new_connections() {
    const N: usize = 10;
    let (busy, names) = bounded(120, || {
        let rt = rt(2);
        let l = rt
            .block_on(|| net::TcpListener::bind("127.0.0.1:0").unwrap())
            .unwrap();
        let addr = l.local_addr().unwrap();
        let gate: Gate = Arc::new((Mutex::new(false), Condvar::new()));
        let g = Arc::clone(&gate);
        rt.handle().spawn(move || {
            let accept_worker = thread_name();
            net::serve(l, move |s| handle(s, &accept_worker, &g))
        });
        // Block the worker that does not accept: dealt in turn, one of
        // two connections in a row lands there.
        let mut blocker = None;
        for _ in 0..4 {
            let mut c = open(addr, b'B');
            let reply = line_within(&mut c, Duration::from_secs(20)).expect("a reply");
            if reply != "skip" {
                blocker = Some((c, reply));
                break;
            }
        }
        let (_blocker, busy) = blocker.expect("a handler on the worker that does not accept");
        // Two probes: at least one is dealt to the accepting worker, which
        // answers; by then the dealing has looked at the blocked worker.
        let mut probes = [open(addr, b'N'), open(addr, b'N')];
        let end = Instant::now() + Duration::from_secs(20);
        let mut answered = Vec::new();
        while answered.is_empty() {
            assert!(Instant::now() < end, "no probe answered");
            for (i, p) in probes.iter_mut().enumerate() {
                if let Some(name) = line_within(p, Duration::from_millis(10)) {
                    answered.push((i, name));
                }
            }
        }
        // Well past the stall bound (50 ms), with the blocked worker still
        // blocked.
        std::thread::sleep(Duration::from_millis(200));
        let mut conns: Vec<_> = (0..N).map(|_| open(addr, b'N')).collect();
        // Each answers with the blocked worker still blocked, unless it
        // was dealt there.
        let names: Vec<Option<String>> = conns
            .iter_mut()
            .map(|c| line_within(c, Duration::from_secs(10)))
            .collect();
        let (lock, cv) = &*gate;
        *lock.lock().unwrap() = true;
        cv.notify_all();
        drop(rt);
        (busy, names)
    });
    assert!(
        names.iter().all(|n| n.as_ref().is_some_and(|n| *n != busy)),
        "each connection answered from the worker that is not blocked ({busy} is): {names:?}"
    );
}
