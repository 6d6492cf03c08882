//! The watchdog (like gevent's `max_blocking_time`): a thread that reports,
//! through the log facade, a worker that has not come back to its hub for
//! longer than a threshold, naming the green thread holding it and where it
//! was spawned, with its stack where it is stuck and the stacks of the
//! other green threads of that worker (one of them may hold the lock it
//! waits for: a std lock held across a park), read off the worker's thread
//! (`stall_stacks`; on x86_64 Linux). Once per stall; when that worker
//! comes back, a second line (also at `warn`) says after how long, so a log
//! reader sees how long the stall lasted (to within a quarter of the
//! threshold: the watchdog's period).
//!
//! # Cost
//! The thread wakes every quarter of the threshold (at least every
//! millisecond) and reads two relaxed counters per worker. Measured with
//! `examples/metrics.rs --idle --seconds 10 --watchdog-ms MS` (the
//! watchdog thread's line of `/proc/self/task/TID/schedstat`) on an idle
//! two-worker runtime, a 2-vCPU virtual machine: at 1000 ms, 3.9 wakeups/s
//! and 0.14 ms of CPU per second (0.014 % of one CPU); at 100 ms, the
//! default ([`DEFAULT_THRESHOLD`]), 39.6 wakeups/s and 1.36 ms/s (0.14 %);
//! at 20 ms, 190 wakeups/s and 4.3 ms/s (0.43 %): about 35 µs per wakeup
//! on that machine, the timed wait's sleep and wakeup included. Re-measure
//! the same way after changing the threshold or the check. A report costs
//! more, once per stall: a signal to the stalled thread, a copy of every
//! loaded object's unwind tables, the walks and the symbolisation (the
//! first in a process loads the debug information: tens to hundreds of
//! milliseconds of the watchdog's thread).
//!
//! Owns: [`Watchdog`]. Uses the workers' `tick` and `running` counters
//! (written by each worker at every resume), the registry and
//! `stall_stacks`.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::diag::diag_warn;

use super::shared::Shared;

/// The watchdog thread of one runtime.
pub(crate) struct Watchdog {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: thread::JoinHandle<()>,
}

/// The default threshold of [`Builder::watchdog`](super::Builder::watchdog):
/// a worker held this long without coming back to its hub is reported. It
/// trades how short a stall is seen against the watchdog's wakeups (four
/// per threshold) and against reports of long but legitimate computations;
/// see the module doc for how its cost is measured.
pub(crate) const DEFAULT_THRESHOLD: Duration = Duration::from_millis(100);

/// What the watchdog last saw of one worker.
struct Seen {
    tick: u64,
    running: u64,
    since: Instant,
    /// The green thread named in this stall's report, once reported.
    reported: Option<String>,
}

impl Watchdog {
    pub(crate) fn start(shared: &Arc<Shared>, threshold: Duration) -> std::io::Result<Watchdog> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let s = Arc::downgrade(shared);
        let st = Arc::clone(&stop);
        let period = (threshold / 4).max(Duration::from_millis(1));
        let thread = thread::Builder::new()
            .name("hub-watchdog".into())
            .spawn(move || {
                let mut seen: Vec<Option<Seen>> = Vec::new();
                loop {
                    {
                        let mut stopped = st.0.lock();
                        if !*stopped {
                            st.1.wait_for(&mut stopped, period);
                        }
                        if *stopped {
                            return;
                        }
                    }
                    let Some(shared) = s.upgrade() else { return };
                    check(&shared, threshold, &mut seen);
                }
            })?;
        Ok(Watchdog { stop, thread })
    }

    pub(crate) fn stop(self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        let _ = self.thread.join();
    }
}

fn check(shared: &Shared, threshold: Duration, seen: &mut Vec<Option<Seen>>) {
    seen.resize_with(shared.workers.len(), || None);
    let now = Instant::now();
    for (i, remote) in shared.workers.iter().enumerate() {
        let tick = remote.tick.load(std::sync::atomic::Ordering::Relaxed);
        let running = remote.running.load(std::sync::atomic::Ordering::Relaxed);
        let same = matches!(&seen[i], Some(s) if s.tick == tick && s.running == running);
        if running == 0 || !same {
            if let Some(Seen {
                since,
                reported: Some(who),
                ..
            }) = seen[i].take()
            {
                diag_warn!(
                    "hub worker {i} came back to its hub after {} ms: {who} recovered",
                    now.duration_since(since).as_millis()
                );
            }
            seen[i] = Some(Seen {
                tick,
                running,
                since: now,
                reported: None,
            });
            continue;
        }
        let Some(s) = seen[i].as_mut() else { continue };
        if s.reported.is_some() || now.duration_since(s.since) < threshold {
            continue;
        }
        let who = shared
            .registry
            .find(running, |t| {
                format!(
                    "green thread '{}' (id {}, spawned at {})",
                    t.name(),
                    t.id,
                    t.site
                )
            })
            .unwrap_or_else(|| format!("green thread id {running}"));
        diag_warn!(
            "hub worker {i} has not come back to its hub for over {} ms: {who} is running without \
             parking (a blocking call? move it to spawn_blocking){}",
            threshold.as_millis(),
            stacks(shared, i, running)
        );
        s.reported = Some(who);
    }
}

/// The stacks of worker `worker`'s green threads, `running` holding it, for
/// its report.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn stacks(shared: &Shared, worker: usize, running: u64) -> String {
    let dump = super::stall_stacks::stalled_worker(shared, worker, running);
    format!(
        ". Its stack, then those of the other green threads of worker {worker}, which cannot run \
         until it comes back (one may hold a lock it waits for):\n{dump}"
    )
}

/// The stacks of a stalled worker's green threads: not read on this
/// platform.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn stacks(_shared: &Shared, _worker: usize, _running: u64) -> String {
    String::new()
}
