//! [`QuickMutex`]: a lock for the critical sections of a few instructions
//! that every spawn, join and wait passes through (a task's outcome, a
//! registry shard, a channel's or an `Event`'s, `Mutex`'s or `Semaphore`'s
//! state and wait lists), whose unlock is a plain store.
//!
//! `parking_lot`'s mutex unlocks with a `compare_exchange` (a locked
//! read-modify-write, ~20 cycles on this machine's Xeon) because a waiter
//! may have parked and must be told; a waiter of this lock never parks, it
//! spins and then yields its CPU (`crossbeam_utils::Backoff`), so the
//! holder has no one to tell and unlocks with a `Release` store. Use it
//! only where the holder never blocks, parks or runs foreign code while
//! holding it, so a waiter waits for a few instructions (or for the holder
//! to be scheduled again, yielding meanwhile). `lock_api` gives it the
//! usual `Mutex` and guard types.
//!
//! Owns: [`RawQuick`] and the [`QuickMutex`] alias. Uses `lock_api`,
//! `crossbeam_utils::Backoff`.

use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_utils::Backoff;

/// The raw lock of a [`QuickMutex`]: one flag.
#[derive(Debug)]
pub(crate) struct RawQuick {
    locked: AtomicBool,
}

// SAFETY: `lock` returns only once this thread's `compare_exchange` moved
// `locked` from false to true (`Acquire`), and only `unlock`, by the
// holder, stores false (`Release`): at most one holder at a time, and
// each holder sees everything its predecessor did under the lock.
unsafe impl lock_api::RawMutex for RawQuick {
    #[allow(clippy::declare_interior_mutable_const)] // lock_api's way of making one
    const INIT: RawQuick = RawQuick {
        locked: AtomicBool::new(false),
    };

    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        if !self.try_lock() {
            self.lock_contended();
        }
    }

    #[inline]
    fn try_lock(&self) -> bool {
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    unsafe fn unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed)
    }
}

impl RawQuick {
    /// Wait for the holder (spinning, then yielding the CPU), then take it.
    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let backoff = Backoff::new();
        loop {
            while self.locked.load(Ordering::Relaxed) {
                backoff.snooze();
            }
            if lock_api::RawMutex::try_lock(self) {
                return;
            }
        }
    }
}

/// A mutex over [`RawQuick`] (see the module doc for where it fits).
pub(crate) type QuickMutex<T> = lock_api::Mutex<RawQuick, T>;

/// The guard of a [`QuickMutex`].
pub(crate) type QuickGuard<'a, T> = lock_api::MutexGuard<'a, RawQuick, T>;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::QuickMutex;

    #[test]
    fn excludes_between_threads() {
        let m = Arc::new(QuickMutex::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let mut g = m.lock();
                        let v = *g;
                        std::hint::black_box(&mut *g);
                        *g = v + 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*m.lock(), 80_000);
        assert!(!m.is_locked());
        assert!(m.try_lock().is_some());
    }
}
