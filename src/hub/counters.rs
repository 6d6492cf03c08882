//! A worker's metric counters ([`Counters`]): written by that worker only
//! (but `placed`), read by [`Handle::metrics`](super::Handle::metrics) and
//! by the dealing of accepted connections (`worker::deal`) from any thread.
//!
//! Each write is a relaxed load and store of the worker's own atomic (no
//! locked instruction: one writer), done where the event happens and off
//! the switch path: a poll of the poller, a steal, the wakes taken from
//! the remote queue, an idle spell, and the ready queue's depth sampled at
//! the poll cadence. A reader sums them up at a snapshot.
//!
//! Owns: [`Counters`]. Uses nothing of the hub.

use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// One worker's counters (see the module doc).
pub(crate) struct Counters {
    /// When the worker's runtime was built.
    pub(crate) start: Instant,
    /// Calls of the poller (waiting or not).
    pub(crate) polls: AtomicU64,
    /// Batches of unstarted tasks taken from another worker (its deque or
    /// its aged newest-spawn slot).
    pub(crate) steals: AtomicU64,
    /// Woken tasks taken from the remote queue: wakes from another thread.
    pub(crate) remote_wakes: AtomicU64,
    /// Nanoseconds spent idle (spinning, yielding or asleep in the poller)
    /// in finished idle spells.
    pub(crate) idle_ns: AtomicU64,
    /// When the idle spell under way began, in nanoseconds since `start`
    /// plus one; 0 while not idle.
    pub(crate) idle_from: AtomicU64,
    /// The ready queue's length at the last poll that did not wait (0
    /// while idle).
    pub(crate) ready_depth: AtomicUsize,
    /// The worker thread's kernel thread id (0 before it starts): where
    /// the watchdog sends the signal that samples a stalled worker's
    /// registers (`stall_sample`).
    #[cfg_attr(
        not(all(target_os = "linux", target_arch = "x86_64")),
        allow(dead_code)
    )]
    pub(crate) thread_id: AtomicI32,
    /// Green threads started and not finished plus tasks queued to start,
    /// at the last poll that did not wait, idle spell or take of placed
    /// tasks.
    pub(crate) tasks: AtomicUsize,
    /// Accepted connections' handlers other workers dealt to this one
    /// that it has not taken yet: added to by those workers, counted down
    /// by this one (read-modify-writes, off the switch path).
    pub(crate) placed: AtomicUsize,
}

impl Counters {
    pub(crate) fn new() -> Counters {
        Counters {
            start: Instant::now(),
            polls: AtomicU64::new(0),
            steals: AtomicU64::new(0),
            remote_wakes: AtomicU64::new(0),
            idle_ns: AtomicU64::new(0),
            idle_from: AtomicU64::new(0),
            ready_depth: AtomicUsize::new(0),
            thread_id: AtomicI32::new(0),
            tasks: AtomicUsize::new(0),
            placed: AtomicUsize::new(0),
        }
    }

    /// Record the calling thread (the worker's, at its start) as this
    /// worker's (`thread_id`; left 0 where there is no kernel thread id).
    pub(crate) fn note_thread(&self) {
        #[cfg(target_os = "linux")]
        // SAFETY: gettid(2) has no preconditions and cannot fail.
        self.thread_id
            .store(unsafe { libc::gettid() }, Ordering::Relaxed);
    }

    /// Add `n` to `counter` (the owning worker only: a plain load and
    /// store, no read-modify-write).
    #[inline]
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.store(
            counter.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    /// An idle spell begins at `now`.
    #[inline]
    pub(crate) fn idle_begin(&self, now: Instant) {
        let at = nanos(now.saturating_duration_since(self.start));
        self.idle_from
            .store(at.saturating_add(1), Ordering::Relaxed);
    }

    /// The idle spell that began at `from` ends now: count it.
    #[inline]
    pub(crate) fn idle_end(&self, from: Instant) {
        Self::add(&self.idle_ns, nanos(from.elapsed()));
        self.idle_from.store(0, Ordering::Relaxed);
    }

    /// Time since the runtime was built, and how much of it the worker
    /// was not idle (an idle spell under way counts as idle up to now).
    /// The two counters are read apart, so a spell that ends between the
    /// reads may be missed or counted twice by this one snapshot.
    pub(crate) fn uptime_and_busy(&self) -> (Duration, Duration) {
        let uptime = self.start.elapsed();
        let mut idle = Duration::from_nanos(self.idle_ns.load(Ordering::Relaxed));
        let from = self.idle_from.load(Ordering::Relaxed);
        if from != 0 {
            idle += uptime.saturating_sub(Duration::from_nanos(from - 1));
        }
        (uptime, uptime.saturating_sub(idle))
    }
}

/// `d` in nanoseconds, saturated.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
