//! Helpers shared by the hub's integration tests.

use std::time::{Duration, Instant};

use greenlet::hub::{self, Runtime, TaskState, Wait};

/// A bound for waits that should end quickly: far longer than any of them
/// takes, so only a hang reaches it.
pub(crate) const HANG: Duration = Duration::from_secs(30);

/// A runtime with `workers` worker threads and no watchdog.
pub(crate) fn rt(workers: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .watchdog(None)
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
