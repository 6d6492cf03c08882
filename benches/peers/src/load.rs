//! The machine's load during a run: `/proc/loadavg`'s one-minute figure,
//! sampled by a background thread every half second.
//!
//! Uses `std::thread` and `std::sync::atomic` only.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

fn one_minute() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Samples the load until [`Sampler::finish`].
pub(crate) struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<f64>>>,
    thread: JoinHandle<()>,
}

impl Sampler {
    /// Starts sampling.
    pub(crate) fn start() -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(one_minute().into_iter().collect::<Vec<_>>()));
        let thread = {
            let (stop, samples) = (Arc::clone(&stop), Arc::clone(&samples));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(500));
                    if let Some(load) = one_minute() {
                        samples.lock().expect("load samples").push(load);
                    }
                }
            })
        };
        Sampler {
            stop,
            samples,
            thread,
        }
    }

    /// Stops sampling: (first, last, highest) one-minute load average.
    pub(crate) fn finish(self) -> (f64, f64, f64) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        let samples = self.samples.lock().expect("load samples");
        let first = samples.first().copied().unwrap_or(f64::NAN);
        let last = samples.last().copied().unwrap_or(f64::NAN);
        let max = samples.iter().copied().fold(f64::NAN, f64::max);
        (first, last, max)
    }
}
