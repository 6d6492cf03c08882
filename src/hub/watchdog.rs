//! The watchdog (like gevent's `max_blocking_time`): a thread that reports,
//! through the log facade, a worker that has not come back to its hub for
//! longer than a threshold, naming the green thread holding it and where it
//! was spawned. Once per stall.
//!
//! Owns: [`Watchdog`]. Uses the workers' `tick` and `running` counters
//! (written by each worker at every resume) and the registry.

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

/// What the watchdog last saw of one worker.
#[derive(Clone, Copy)]
struct Seen {
    tick: u64,
    running: u64,
    since: Instant,
    reported: bool,
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
    seen.resize(shared.workers.len(), None);
    let now = Instant::now();
    for (i, remote) in shared.workers.iter().enumerate() {
        let tick = remote.tick.load(std::sync::atomic::Ordering::Relaxed);
        let running = remote.running.load(std::sync::atomic::Ordering::Relaxed);
        let same = matches!(seen[i], Some(s) if s.tick == tick && s.running == running);
        if running == 0 || !same {
            seen[i] = Some(Seen {
                tick,
                running,
                since: now,
                reported: false,
            });
            continue;
        }
        let Some(s) = seen[i].as_mut() else { continue };
        if s.reported || now.duration_since(s.since) < threshold {
            continue;
        }
        s.reported = true;
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
             parking (a blocking call? move it to spawn_blocking)",
            threshold.as_millis()
        );
    }
}
