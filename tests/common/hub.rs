//! Helpers shared by the hub's integration tests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use greenlet::hub::{self, Runtime, TaskState, Wait};

/// A bound for waits that should end quickly: far longer than any of them
/// takes, so only a hang reaches it.
pub(crate) const HANG: Duration = Duration::from_secs(30);

/// Run `f` on a thread of its own; fail the test if it does not return
/// within `secs` (a hang, or a wait that spins).
pub(crate) fn bounded<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let out = f();
        let _ = tx.send(());
        out
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(secs)).is_ok(),
        "watchdog: not finished within {secs} s"
    );
    t.join().unwrap()
}

/// Bounds a test: fails it (the process exits) if it has not finished in
/// `secs`; drop the sender it returns to stand it down.
pub(crate) fn watchdog(secs: u64) -> mpsc::Sender<()> {
    let (tx, rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(Duration::from_secs(secs)) {
            eprintln!("test hung for {secs} s");
            std::process::exit(101);
        }
    });
    tx
}

/// A runtime with `workers` worker threads and no watchdog.
pub(crate) fn rt(workers: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .watchdog(None)
        .build()
        .expect("runtime")
}

/// A runtime of one worker whose watchdog reports a stall after 20 ms,
/// for the tests that read its reports.
pub(crate) fn watched_rt() -> Runtime {
    Runtime::builder()
        .worker_threads(1)
        .watchdog(Some(Duration::from_millis(20)))
        .build()
        .expect("runtime")
}

/// Yield until `h` is parked on `wait` (bounded by [`HANG`]).
pub(crate) fn until_parked<T>(h: &hub::JoinHandle<T>, wait: Wait) {
    let start = Instant::now();
    while h.state() != TaskState::Parked(wait) {
        assert!(
            start.elapsed() < HANG,
            "never parked on {wait}: {}",
            h.state()
        );
        hub::yield_now();
    }
}

/// Counts its drops (a closure's or a stack's destructors, run once).
pub(crate) struct Dropped(pub(crate) Arc<AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
