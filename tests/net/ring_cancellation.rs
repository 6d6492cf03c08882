//! Green threads killed in the middle of TCP reads and writes that are
//! io_uring operations (a cancellation, a `timeout` scope, a socket's
//! deadline, the runtime's shutdown), under load: the kernel must be done
//! with the buffer before the green thread unwinds past it.
//!
//! Valgrind's memcheck cannot show this: the kernel's copy into (or out
//! of) user memory at an operation's completion runs in the kernel, after
//! the `io_uring_enter` that submitted it, and memcheck instruments only
//! the process's own instructions (it would see a write into freed memory
//! only if user code made it). So these tests make their own check: every
//! buffer lives in an arena the test owns (or on a green thread's stack,
//! which the pool hands to the next green thread), and once the killed
//! green thread is gone, the buffer is filled with a canary and the peer
//! sends into the connection (readers) or drains it (writers). A read
//! still in flight would overwrite the canary; a write still in flight
//! would send canary bytes to the peer. Both are checked, and the data the
//! peer sent after the kill must all reach a fresh read (a cancelled read
//! took none of it).
//!
//! What this catches is an operation left in flight past its green
//! thread: made to happen (the wait in `driver::op` taken out), the tests
//! fail, a read's bytes landing in the canaries or in the stack of the
//! green thread that took the freed stack (which then hangs: the
//! watchdog fails the test). A cancellation
//! submitted but not waited for cannot be caught this way when it reaches
//! the kernel before the peer's bytes do (this driver submits it in the
//! same turn); the wait for its completion is what `driver::op` holds to
//! for that case, by construction.
//!
//! Under the epoll driver (`GREENLET_IO_DRIVER=epoll`) the same tests run
//! and must pass trivially: no operation outlives its system call there.

use std::cell::UnsafeCell;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use greenlet::hub::{self, net::TcpStream, IoDriver, JoinError, Runtime, TaskState, Wait};

use crate::common::hub::bounded;

/// Connections whose readers or writers are killed.
const N: usize = 24;
/// Bytes of one reader's buffer (and of what its peer sends after).
const SLOT: usize = 4096;
/// Bytes of one writer's buffer.
const WSLOT: usize = 64 * 1024;
const CANARY: u8 = 0xA5;

/// Memory the test owns, sliced into disjoint buffers handed to green
/// threads; read back by the test only after those green threads are gone.
struct Arena(UnsafeCell<Vec<u8>>);

// SAFETY: each green thread gets a disjoint slot (`slot`), and the test
// reads or fills a slot only after the green thread that had it finished;
// the kernel's accesses are what the test checks.
unsafe impl Sync for Arena {}

impl Arena {
    fn new(len: usize, fill: u8) -> Arc<Arena> {
        Arc::new(Arena(UnsafeCell::new(vec![fill; len])))
    }

    /// Slot `i` of `size` bytes.
    ///
    /// # Safety
    /// No other reference to that slot is alive while the result is.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slot(&self, i: usize, size: usize) -> &mut [u8] {
        // SAFETY: in bounds (the arena was made for these slots), and the
        // caller's contract makes the slice exclusive.
        unsafe {
            let base = (*self.0.get()).as_mut_ptr().add(i * size);
            std::slice::from_raw_parts_mut(base, size)
        }
    }
}

/// An io_uring runtime of one worker, or the forced driver's (the tests
/// hold under both).
fn runtime() -> Runtime {
    let b = Runtime::builder().worker_threads(1).watchdog(None);
    match b.clone().io_driver(IoDriver::IoUring).build() {
        Ok(rt) => rt,
        Err(_) => b.io_driver(IoDriver::Epoll).build().unwrap(),
    }
}

/// Connected pairs: the hub's stream (shared, so it outlives its killed
/// user) and a std peer.
fn pairs(n: usize) -> Vec<(Arc<TcpStream>, std::net::TcpStream)> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    (0..n)
        .map(|_| {
            let c = std::net::TcpStream::connect(addr).unwrap();
            let (p, _) = l.accept().unwrap();
            (Arc::new(TcpStream::from_std(c).unwrap()), p)
        })
        .collect()
}

/// Load beside the kills: `k` echo connections between green threads of
/// the same worker, each round trip a ring read and write, until `stop`.
fn echo_load(k: usize, stop: Arc<hub::Event>) -> Vec<hub::JoinHandle<u64>> {
    let l = hub::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let mut hs = Vec::new();
    for _ in 0..k {
        let c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        hs.push(hub::spawn(move || {
            let mut buf = [0u8; 64];
            while let Ok(n) = (&s).read(&mut buf) {
                if n == 0 || (&s).write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            0
        }));
        let stop = Arc::clone(&stop);
        hs.push(hub::spawn(move || {
            let mut rounds = 0;
            let mut buf = [7u8; 64];
            while !stop.is_set() {
                (&c).write_all(&buf).unwrap();
                let mut got = 0;
                while got < buf.len() {
                    got += (&c).read(&mut buf[got..]).unwrap();
                }
                rounds += 1;
            }
            rounds
        }));
    }
    hs
}

/// Yield until every handle is parked on I/O (its operation in flight).
fn until_all_in_io<T>(hs: &[hub::JoinHandle<T>]) {
    let start = Instant::now();
    while !hs.iter().all(|h| h.state() == TaskState::Parked(Wait::Io)) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "never all parked on I/O"
        );
        hub::sleep(Duration::from_millis(1));
    }
}

/// How reader or writer `i` is killed.
fn kill_kind(i: usize) -> usize {
    i % 3
}

/// Green threads `i` of kind 0 are cancelled through their handle; kind 1
/// run inside a `timeout` scope; kind 2 have a socket deadline.
fn with_kill<T>(i: usize, s: &TcpStream, op: impl FnOnce() -> std::io::Result<T>) -> bool {
    match kill_kind(i) {
        0 => op().is_ok(),
        1 => hub::timeout(Duration::from_millis(30), op).is_ok_and(|r| r.is_ok()),
        _ => {
            s.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
            s.set_write_timeout(Some(Duration::from_millis(30)))
                .unwrap();
            match op() {
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
                    false
                }
                Ok(_) => true,
            }
        }
    }
}

/// Fill `buf` with the canary, then check nothing changed it.
fn canary_intact(buf: &[u8]) -> bool {
    buf.iter().all(|&b| b == CANARY)
}

#[test]
fn readers_killed_mid_read_leave_their_buffers_alone() {
    bounded(120, || {
        let rt = runtime();
        let arena = Arena::new(N * SLOT, 0);
        let a = Arc::clone(&arena);
        rt.block_on(move || {
            let stop = Arc::new(hub::Event::new());
            let load = echo_load(8, Arc::clone(&stop));
            let conns = pairs(N);
            let mut readers = Vec::new();
            for (i, (s, _)) in conns.iter().enumerate() {
                let s = Arc::clone(s);
                let a = Arc::clone(&a);
                readers.push(hub::spawn(move || {
                    if i % 2 == 0 {
                        // SAFETY: slot `i` is this green thread's alone.
                        let buf = unsafe { a.slot(i, SLOT) };
                        with_kill(i, &s, || (&*s).read(buf))
                    } else {
                        // On its own stack, which the pool reuses.
                        let mut buf = [0u8; SLOT];
                        let done = with_kill(i, &s, || (&*s).read(&mut buf));
                        std::hint::black_box(&buf);
                        done
                    }
                }));
            }
            until_all_in_io(&readers);
            for (i, h) in readers.iter().enumerate() {
                if kill_kind(i) == 0 {
                    h.cancel();
                }
            }
            for (i, h) in readers.into_iter().enumerate() {
                match (kill_kind(i), h.join()) {
                    (0, Err(JoinError::Cancelled { .. })) | (_, Ok(false)) => {}
                    (k, other) => panic!("reader {i} (kind {k}): {other:?}"),
                }
            }
            // Released: the arena slots get the canary; green threads that
            // take the freed stacks put it on theirs.
            for i in (0..N).step_by(2) {
                // SAFETY: reader `i` is finished; nothing else has the slot.
                unsafe { a.slot(i, SLOT) }.fill(CANARY);
            }
            let stacks: Vec<_> = (0..N / 2)
                .map(|_| {
                    hub::spawn(|| {
                        let buf = [CANARY; 4 * SLOT];
                        hub::sleep(Duration::from_millis(100));
                        canary_intact(std::hint::black_box(&buf))
                    })
                })
                .collect();
            // The peers send after the kills; a read left in flight would
            // take these bytes into released memory.
            for (_, p) in &conns {
                (&*p).write_all(&[0x11; SLOT]).unwrap();
            }
            hub::sleep(Duration::from_millis(50));
            stop.set();
            for h in load {
                h.join().unwrap();
            }
            for i in (0..N).step_by(2) {
                // SAFETY: reader `i` is finished; nothing else has the slot.
                let slot = unsafe { a.slot(i, SLOT) };
                assert!(
                    canary_intact(slot),
                    "arena slot {i} overwritten after its reader was killed"
                );
            }
            for (i, h) in stacks.into_iter().enumerate() {
                assert!(h.join().unwrap(), "stack canary {i} overwritten");
            }
            // Every byte sent after the kills reaches a fresh read.
            for (i, (s, _)) in conns.iter().enumerate() {
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut got = vec![0u8; SLOT];
                (&**s).read_exact(&mut got).unwrap();
                assert!(got.iter().all(|&b| b == 0x11), "connection {i} lost bytes");
            }
        })
        .unwrap();
        drop(rt);
        for i in (0..N).step_by(2) {
            // SAFETY: every green thread is gone.
            let slot = unsafe { arena.slot(i, SLOT) };
            assert!(
                canary_intact(slot),
                "arena slot {i} overwritten after its reader was killed"
            );
        }
    });
}

/// Shrink a socket's kernel buffers so that a write blocks early.
fn small_buffers(fd: i32) {
    let size: libc::c_int = 8192;
    for opt in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
        // SAFETY: `size` is a valid c_int for the call's duration.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                std::ptr::from_ref(&size).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0);
    }
}

#[test]
fn writers_killed_mid_write_stop_reading_their_buffers() {
    bounded(120, || {
        let rt = runtime();
        let arena = Arena::new(N * WSLOT, 0x33);
        let a = Arc::clone(&arena);
        rt.block_on(move || {
            let stop = Arc::new(hub::Event::new());
            let load = echo_load(8, Arc::clone(&stop));
            let conns = pairs(N);
            for (s, p) in &conns {
                small_buffers(s.as_raw_fd());
                small_buffers(p.as_raw_fd());
            }
            let mut writers = Vec::new();
            for (i, (s, _)) in conns.iter().enumerate() {
                let s = Arc::clone(s);
                let a = Arc::clone(&a);
                writers.push(hub::spawn(move || {
                    // SAFETY: slot `i` is this green thread's alone.
                    let buf = unsafe { a.slot(i, WSLOT) };
                    // The peer does not read: a write blocks once the
                    // kernel's buffers are full.
                    with_kill(i, &s, || -> std::io::Result<()> {
                        loop {
                            (&*s).write_all(buf)?;
                        }
                    })
                }));
            }
            until_all_in_io(&writers);
            for (i, h) in writers.iter().enumerate() {
                if kill_kind(i) == 0 {
                    h.cancel();
                }
            }
            for (i, h) in writers.into_iter().enumerate() {
                match (kill_kind(i), h.join()) {
                    (0, Err(JoinError::Cancelled { .. })) | (_, Ok(false)) => {}
                    (k, other) => panic!("writer {i} (kind {k}): {other:?}"),
                }
            }
            // Released: the canary, then the peers drain their connections;
            // a write left in flight would now send canary bytes.
            for i in 0..N {
                // SAFETY: writer `i` is finished; nothing else has the slot.
                unsafe { a.slot(i, WSLOT) }.fill(CANARY);
            }
            let mut canaries_sent = Vec::new();
            for (i, (_, p)) in conns.iter().enumerate() {
                p.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
                let mut buf = [0u8; 8192];
                let mut total = 0;
                loop {
                    match (&*p).read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            if buf[..n].contains(&CANARY) {
                                canaries_sent.push(i);
                                break;
                            }
                            total += n;
                        }
                        Err(e)
                            if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                        {
                            break
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                assert!(total > 0, "connection {i}: the writer sent nothing");
            }
            stop.set();
            for h in load {
                h.join().unwrap();
            }
            assert!(
                canaries_sent.is_empty(),
                "connections {canaries_sent:?}: canary bytes sent after their writers were killed"
            );
        })
        .unwrap();
    });
}

#[test]
fn shutdown_with_reads_in_flight_leaves_their_buffers_alone() {
    bounded(120, || {
        let rt = runtime();
        let arena = Arena::new(N * SLOT, 0);
        let conns = pairs(N);
        let readers: Vec<_> = conns
            .iter()
            .enumerate()
            .map(|(i, (s, _))| {
                let s = Arc::clone(s);
                let a = Arc::clone(&arena);
                rt.handle().spawn(move || {
                    // SAFETY: slot `i` is this green thread's alone.
                    let buf = unsafe { a.slot(i, SLOT) };
                    (&*s).read(buf).map_err(drop)
                })
            })
            .collect();
        let start = Instant::now();
        while !readers
            .iter()
            .all(|h| h.state() == TaskState::Parked(Wait::Io))
        {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "never all parked on I/O"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let report = rt.shutdown_timeout(Duration::from_secs(5));
        assert!(report.refused.is_empty(), "{report:?}");
        for h in readers {
            assert!(matches!(h.join(), Err(JoinError::Cancelled { .. })));
        }
        for i in 0..N {
            // SAFETY: the runtime and its green threads are gone.
            unsafe { arena.slot(i, SLOT) }.fill(CANARY);
        }
        for (_, p) in &conns {
            (&*p).write_all(&[0x11; SLOT]).unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        for i in 0..N {
            // SAFETY: as above.
            let slot = unsafe { arena.slot(i, SLOT) };
            assert!(
                canary_intact(slot),
                "arena slot {i} overwritten after the shutdown"
            );
        }
        // The bytes are all still queued for a plain thread's read.
        for (i, (s, _)) in conns.iter().enumerate() {
            let mut got = vec![0u8; SLOT];
            (&**s).read_exact(&mut got).unwrap();
            assert!(got.iter().all(|&b| b == 0x11), "connection {i} lost bytes");
        }
    });
}
