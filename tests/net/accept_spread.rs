//! The accept loop written the `std` way (`loop { accept; spawn(handler) }`)
//! spreads its handlers over the workers, as `net::serve` does: each
//! handler says which worker thread it runs on.

use crate::common;

use std::io::{Read, Write};
use std::time::Duration;

use common::hub::{bounded, rt};
use greenlet::hub::{self, net};

/// Connect `n` times to `addr` from a plain thread, one at a time; each
/// reply is the handler's worker thread's name.
fn workers_of_handlers(addr: std::net::SocketAddr, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut name = String::new();
            c.read_to_string(&mut name).unwrap();
            name
        })
        .collect()
}

fn reply_with_worker(mut s: net::TcpStream) {
    let name = std::thread::current().name().unwrap_or("?").to_string();
    s.write_all(name.as_bytes()).unwrap();
}

#[test]
fn the_plain_accept_loop_deals_connections_over_two_workers() {
    const N: usize = 16;
    let names = bounded(60, || {
        let rt = rt(2);
        let l = rt
            .block_on(|| net::TcpListener::bind("127.0.0.1:0").unwrap())
            .unwrap();
        let addr = l.local_addr().unwrap();
        rt.handle().spawn(move || -> std::io::Result<()> {
            loop {
                let (s, _) = l.accept()?;
                hub::spawn(move || reply_with_worker(s));
            }
        });
        workers_of_handlers(addr, N)
    });
    let on = |w: &str| names.iter().filter(|n| *n == w).count();
    assert_eq!(
        (on("hub-worker-0"), on("hub-worker-1")),
        (N / 2, N / 2),
        "handlers by worker: {names:?}"
    );
}

/// Only the first spawn after an accept is dealt out: a green thread the
/// handler spawns starts beside it, as any spawn does.
#[test]
fn a_handlers_own_spawn_stays_beside_it() {
    let pairs = bounded(60, || {
        // Other workers leave the newest spawn alone for an hour: a worker
        // thread the OS preempts between the spawn and the join must not
        // let the other worker take the child by the slot's aging.
        let rt = hub::Runtime::builder()
            .worker_threads(2)
            .watchdog(None)
            .slot_age(Duration::from_secs(3600))
            .build()
            .unwrap();
        let l = rt
            .block_on(|| net::TcpListener::bind("127.0.0.1:0").unwrap())
            .unwrap();
        let addr = l.local_addr().unwrap();
        rt.handle().spawn(move || -> std::io::Result<()> {
            loop {
                let (mut s, _) = l.accept()?;
                hub::spawn(move || {
                    let here = std::thread::current().name().unwrap().to_string();
                    let child = hub::spawn(|| std::thread::current().name().unwrap().to_string());
                    let there = child.join().unwrap();
                    s.write_all(format!("{here} {there}").as_bytes()).unwrap();
                });
            }
        });
        workers_of_handlers(addr, 6)
    });
    for p in &pairs {
        let (here, there) = p.split_once(' ').unwrap();
        assert_eq!(here, there, "{pairs:?}");
    }
}
