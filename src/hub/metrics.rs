//! Runtime metrics: [`Handle::metrics`] / [`metrics`] take a [`Metrics`]
//! snapshot of a runtime: its green threads (alive, spawned, running,
//! ready, parked by what they wait for), each worker's counters
//! ([`WorkerMetrics`]: queue depths, steals, poller calls, wakes from
//! other threads, resumes, busy time), its injector's depth and its
//! blocking pool. `docs/hub.md` maps each to what tokio's
//! `RuntimeMetrics` calls the same thing.
//!
//! # Cost
//! Always on. A worker writes its own counters (see `counters`) with a
//! relaxed load and store where the event happens, none of them on the
//! switch path; the spawn count is one add under the registry shard's lock
//! that a spawn takes anyway. A snapshot walks the registry under each
//! shard's lock (as [`dump`](super::dump) does, without allocating per
//! task) and locks the blocking pool once: O(green threads), so take one
//! every second or so, not in a hot loop.
//!
//! Owns: [`Metrics`], [`WorkerMetrics`] and their collection. Uses the
//! registry, the workers' remote parts (their counters, stealer,
//! newest-spawn slot and watchdog tick), the injector and the blocking
//! pool's state.

use std::fmt;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::error::HubError;
use super::runtime::Handle;
use super::shared::Shared;
use super::task_state::{TaskState, Wait};

/// A snapshot of a runtime's metrics (see [`Handle::metrics`]). Counters
/// (`spawned`, a worker's `steals`, `polls`, ...) only grow: the rate of
/// one is the difference of two snapshots over the time between them.
/// Its `Display` prints a few lines, as `examples/metrics.rs` shows.
///
/// ```
/// let rt = greenlet::hub::Runtime::builder().worker_threads(1).build().unwrap();
/// let before = rt.handle().metrics();
/// rt.block_on(|| greenlet::hub::spawn(|| ()).join().unwrap()).unwrap();
/// let after = rt.handle().metrics();
/// assert!(after.spawned >= before.spawned + 2); // the root and its child
/// assert!(after.to_string().contains("worker 0:"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Metrics {
    /// Green threads and blocking calls registered now: spawned, not yet
    /// finished (started or not).
    pub alive: usize,
    /// Green threads and blocking calls ever spawned on this runtime.
    pub spawned: u64,
    /// Green threads running on a worker now.
    pub running: usize,
    /// Green threads waiting for a worker: woken and queued, or spawned
    /// and not yet started (and blocking calls waiting for a pool thread,
    /// also in `blocking_queued`).
    pub ready: usize,
    /// Blocking calls running on the blocking pool.
    pub blocking: usize,
    /// Parked green threads by what they wait for, one entry per kind of
    /// wait (zero included), in [`Wait`]'s declaration order.
    pub parked: Vec<(Wait, usize)>,
    /// Tasks spawned from outside the runtime, waiting on its injector for
    /// a worker to take them.
    pub injector_depth: usize,
    /// Each worker's counters, by worker index.
    pub workers: Vec<WorkerMetrics>,
    /// OS threads of the blocking pool now.
    pub blocking_threads: usize,
    /// Those of them running a call now.
    pub blocking_busy: usize,
    /// Calls queued on the blocking pool, waiting for a thread.
    pub blocking_queued: usize,
}

/// One worker's counters in a [`Metrics`] snapshot.
///
/// ```
/// let rt = greenlet::hub::Runtime::builder().worker_threads(1).build().unwrap();
/// rt.block_on(|| greenlet::hub::yield_now()).unwrap();
/// let w = &rt.handle().metrics().workers[0];
/// assert!(w.resumes >= 1);
/// assert!(w.busy <= w.uptime);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerMetrics {
    /// The ready queue's length, as of the worker's last poll that did not
    /// wait (every 61 scheduling rounds) or 0 since it went idle.
    pub ready_depth: usize,
    /// Unstarted tasks on its deque, which other workers may steal (plus
    /// one if its newest-spawn slot holds a task).
    pub unstarted_depth: usize,
    /// Batches of unstarted tasks it took from other workers.
    pub steals: u64,
    /// Calls of its poller (the non-waiting ones every 61 rounds, and its
    /// sleeps).
    pub polls: u64,
    /// Wakes it received from other threads (other workers, blocking-pool
    /// threads, outside handles) through its remote queue.
    pub remote_wakes: u64,
    /// Resumes of green threads by its loop or a hand-off (a yield with
    /// nothing else ready, which runs on in place, is not one).
    pub resumes: u64,
    /// Time since the runtime was built.
    pub uptime: Duration,
    /// The part of `uptime` it was not idle (running green threads or its
    /// own loop, rather than spinning for work, yielding or asleep).
    pub busy: Duration,
}

impl Metrics {
    /// The parked green threads waiting for `wait`.
    ///
    /// ```
    /// use greenlet::hub::{self, Runtime, Wait};
    /// let rt = Runtime::builder().worker_threads(1).build().unwrap();
    /// let m = rt.block_on(|| {
    ///     let (_tx, rx) = hub::channel::<()>(1);
    ///     let h = hub::spawn(move || { let _ = rx.recv(); });
    ///     hub::yield_now(); // it starts and parks on the receive
    ///     let m = hub::metrics().unwrap();
    ///     h.cancel();
    ///     m
    /// }).unwrap();
    /// assert_eq!(m.parked_on(Wait::Recv), 1);
    /// ```
    pub fn parked_on(&self, wait: Wait) -> usize {
        self.parked
            .iter()
            .find(|(w, _)| *w == wait)
            .map_or(0, |(_, n)| *n)
    }

    /// All parked green threads.
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::builder().worker_threads(1).build().unwrap();
    /// assert_eq!(rt.handle().metrics().parked_total(), 0);
    /// ```
    pub fn parked_total(&self) -> usize {
        self.parked.iter().map(|(_, n)| n).sum()
    }

    fn collect(shared: &Shared) -> Metrics {
        let mut parked: Vec<(Wait, usize)> = Wait::ALL.iter().map(|w| (*w, 0)).collect();
        let (mut running, mut ready, mut blocking, mut alive) = (0, 0, 0, 0);
        shared.registry.for_each(|t| {
            alive += 1;
            match t.state() {
                TaskState::Running => running += 1,
                TaskState::Queued | TaskState::Ready => ready += 1,
                TaskState::Blocking => blocking += 1,
                TaskState::Parked(w) => {
                    if let Some(e) = parked.iter_mut().find(|(k, _)| *k == w) {
                        e.1 += 1;
                    }
                }
                TaskState::Finished => {}
            }
        });
        let workers = shared
            .workers
            .iter()
            .map(|r| {
                let c = &r.counters;
                let (uptime, busy) = c.uptime_and_busy();
                WorkerMetrics {
                    ready_depth: c.ready_depth.load(Ordering::Relaxed),
                    unstarted_depth: r.stealer.len() + usize::from(r.newest.is_occupied()),
                    steals: c.steals.load(Ordering::Relaxed),
                    polls: c.polls.load(Ordering::Relaxed),
                    remote_wakes: c.remote_wakes.load(Ordering::Relaxed),
                    resumes: r.tick.load(Ordering::Relaxed),
                    uptime,
                    busy,
                }
            })
            .collect();
        let pool = shared.blocking.state.lock();
        let (blocking_threads, blocking_busy, blocking_queued) = (
            pool.threads,
            pool.threads.saturating_sub(pool.idle),
            pool.jobs.len(),
        );
        drop(pool);
        Metrics {
            alive,
            spawned: shared.registry.joined(),
            running,
            ready,
            blocking,
            parked,
            injector_depth: shared.injector.len(),
            workers,
            blocking_threads,
            blocking_busy,
            blocking_queued,
        }
    }
}

impl fmt::Display for Metrics {
    /// A few lines: the green threads, the parked ones by wait (the kinds
    /// with any), each worker, the blocking pool.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "green threads: {} alive, {} spawned, {} running, {} ready, {} blocking, {} parked",
            self.alive,
            self.spawned,
            self.running,
            self.ready,
            self.blocking,
            self.parked_total()
        )?;
        if self.injector_depth > 0 {
            writeln!(f, "injector: {} waiting", self.injector_depth)?;
        }
        let waits: Vec<String> = self
            .parked
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(w, n)| format!("{w}: {n}"))
            .collect();
        if !waits.is_empty() {
            writeln!(f, "parked on: {}", waits.join(", "))?;
        }
        for (i, w) in self.workers.iter().enumerate() {
            let busy = if w.uptime.is_zero() {
                0.0
            } else {
                100.0 * w.busy.as_secs_f64() / w.uptime.as_secs_f64()
            };
            writeln!(
                f,
                "worker {i}: ready {}, unstarted {}, resumes {}, steals {}, polls {}, \
                 remote wakes {}, busy {busy:.1}%",
                w.ready_depth, w.unstarted_depth, w.resumes, w.steals, w.polls, w.remote_wakes
            )?;
        }
        write!(
            f,
            "blocking pool: {} threads, {} busy, {} queued",
            self.blocking_threads, self.blocking_busy, self.blocking_queued
        )
    }
}

impl Handle {
    /// A snapshot of this runtime's metrics (see [`Metrics`]; its cost is
    /// a walk of the runtime's green threads).
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::builder().worker_threads(2).build().unwrap();
    /// let handle = rt.handle();
    /// for _ in 0..10 {
    ///     handle.spawn(|| ()).join().unwrap();
    /// }
    /// let m = handle.metrics();
    /// assert!(m.spawned >= 10);
    /// assert_eq!(m.workers.len(), 2);
    /// ```
    pub fn metrics(&self) -> Metrics {
        Metrics::collect(&self.shared)
    }
}

/// [`Handle::metrics`] of the calling green thread's runtime.
///
/// # Errors
/// [`HubError::NoRuntime`] outside a runtime.
///
/// ```
/// let m = greenlet::hub::run(|| greenlet::hub::metrics().unwrap()).unwrap();
/// assert!(m.running >= 1); // the caller itself
/// ```
pub fn metrics() -> Result<Metrics, HubError> {
    Ok(Handle::current()?.metrics())
}
