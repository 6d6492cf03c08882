//! [`QuickMutex`]: a lock for the critical sections of a few instructions
//! that every spawn, join and wait passes through (a task's outcome, a
//! registry shard, a channel's or an `Event`'s, `Mutex`'s or `Semaphore`'s
//! state and wait lists), whose unlock is a plain store.
//!
//! `parking_lot`'s mutex unlocks with a `compare_exchange` (a locked
//! read-modify-write, tens of cycles) because a waiter
//! may have parked and must be told; a waiter of this lock never parks, it
//! spins and then yields its CPU (`crossbeam_utils::Backoff`), so the
//! holder has no one to tell and unlocks with a `Release` store. Use it
//! only where the holder never blocks, parks or runs foreign code while
//! holding it, so a waiter waits for a few instructions (or for the holder
//! to be scheduled again, yielding meanwhile). `lock_api` gives it the
//! usual `Mutex` and guard types.
//!
//! Owns: [`RawQuick`] and the [`QuickMutex`] alias. Uses `lock_api`,
//! `crossbeam_utils::Backoff`, and under `cfg(loom)` loom's atomic flag and
//! spin hint instead, where the unit tests check exclusion and the
//! hand-over of what a holder wrote, with two and with three threads, over
//! every interleaving, no preemption bound (`RUSTFLAGS="--cfg loom" cargo
//! test --release --lib hub::spin_lock`: about a second after the build).

#[cfg(not(loom))]
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

#[cfg(not(loom))]
use crossbeam_utils::Backoff;

/// The raw lock of a [`QuickMutex`]: one flag.
#[derive(Debug)]
pub(crate) struct RawQuick {
    #[cfg(not(loom))]
    locked: AtomicBool,
    #[cfg(loom)]
    locked: LoomFlag,
}

/// Under `cfg(loom)`, the flag: loom's `AtomicBool`, made on first use,
/// because loom's atomics are made at run time (inside the model execution
/// that uses them) and `lock_api` wants a `const` unlocked lock. The loom
/// tests make it before they share the lock.
#[cfg(loom)]
#[derive(Debug)]
struct LoomFlag(std::sync::OnceLock<loom::sync::atomic::AtomicBool>);

#[cfg(loom)]
impl std::ops::Deref for LoomFlag {
    type Target = loom::sync::atomic::AtomicBool;

    fn deref(&self) -> &Self::Target {
        self.0
            .get_or_init(|| loom::sync::atomic::AtomicBool::new(false))
    }
}

/// Under `cfg(loom)`, a waiter's turn is loom's spin hint, which lets the
/// model run the other threads (loom cannot end a spin it is not told of).
#[cfg(loom)]
struct Backoff;

#[cfg(loom)]
impl Backoff {
    fn new() -> Backoff {
        Backoff
    }

    fn snooze(&self) {
        loom::hint::spin_loop();
    }
}

// SAFETY: `lock` returns only once this thread's `compare_exchange` moved
// `locked` from false to true (`Acquire`), and only `unlock`, by the
// holder, stores false (`Release`): at most one holder at a time, and
// each holder sees everything its predecessor did under the lock.
unsafe impl lock_api::RawMutex for RawQuick {
    #[allow(clippy::declare_interior_mutable_const)] // lock_api's way of making one
    const INIT: RawQuick = RawQuick {
        #[cfg(not(loom))]
        locked: AtomicBool::new(false),
        #[cfg(loom)]
        locked: LoomFlag(std::sync::OnceLock::new()),
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

#[cfg(all(test, not(loom)))]
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

#[cfg(all(test, loom))]
mod loom_tests {
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::Arc;
    use loom::thread;

    use super::{QuickGuard, QuickMutex};

    /// A lock to share between the model's threads, its flag made first
    /// (see `LoomFlag`).
    fn shared<T>(value: T) -> Arc<QuickMutex<T>> {
        let lock = QuickMutex::new(value);
        assert!(!lock.is_locked());
        Arc::new(lock)
    }

    /// Reads the counter and writes it plus one, as two accesses, under
    /// `guard`.
    fn add_one(guard: QuickGuard<'_, UnsafeCell<usize>>) {
        // SAFETY: the cell is only touched under the lock, which is the
        // property checked: loom fails the test if two threads' accesses
        // to it are not ordered by happens-before.
        let now = guard.with(|n| unsafe { *n });
        // SAFETY: as above.
        guard.with_mut(|n| unsafe { *n = now + 1 });
    }

    /// The counter, once every other thread has ended.
    fn total(counter: &QuickMutex<UnsafeCell<usize>>) -> usize {
        let guard = counter.lock();
        // SAFETY: under the lock.
        guard.with(|n| unsafe { *n })
    }

    /// Two threads (the model's own and a spawned one) add one twice each
    /// to a counter that is not atomic, under the lock, so each takes it
    /// again after the other may have: no two accesses race (loom checks
    /// every pair) and no addition is lost.
    #[test]
    fn excludes_two_threads() {
        loom::model(|| {
            let counter = shared(UnsafeCell::new(0usize));
            let other = {
                let counter = Arc::clone(&counter);
                thread::spawn(move || (0..2).for_each(|_| add_one(counter.lock())))
            };
            (0..2).for_each(|_| add_one(counter.lock()));
            other.join().unwrap();
            assert_eq!(total(&counter), 4);
            assert!(!counter.is_locked());
        });
    }

    /// Three threads: the model's own waits for the lock and adds one, two
    /// others add one each if `try_lock` takes it. Nothing races and
    /// nothing is lost. (Only one waits: with two waiters spinning at once,
    /// loom reports a path longer than its branch limit even at a
    /// preemption bound of two, because a waiter's spin yields and loom may
    /// then switch from one waiter to the other, uncounted, without ever
    /// running the holder, which no real scheduler does.)
    #[test]
    fn excludes_three_threads_two_trying() {
        loom::model(|| {
            let counter = shared(UnsafeCell::new(0usize));
            let triers: Vec<_> = (0..2)
                .map(|_| {
                    let counter = Arc::clone(&counter);
                    thread::spawn(move || counter.try_lock().map(add_one).is_some())
                })
                .collect();
            add_one(counter.lock());
            let tried: usize = triers
                .into_iter()
                .map(|t| usize::from(t.join().unwrap()))
                .sum();
            assert_eq!(total(&counter), 1 + tried);
            assert!(!counter.is_locked());
        });
    }

    /// What a holder writes outside the lock's value (a cell of its own)
    /// is seen by the next holder: the unlock's `Release` store and the
    /// lock's `Acquire` exchange order it, nothing else does (the flags
    /// saying who held the lock first are `Relaxed`). Whichever of the
    /// writer and the reader holds it second sees the other's flag, and a
    /// reader that comes second reads the value.
    #[test]
    fn the_next_holder_sees_what_the_last_one_wrote() {
        loom::model(|| {
            let lock = shared(());
            let value = Arc::new(UnsafeCell::new(0u32));
            let written = Arc::new(AtomicBool::new(false));
            let read = Arc::new(AtomicBool::new(false));
            let writer = {
                let lock = Arc::clone(&lock);
                let (value, written, read) =
                    (Arc::clone(&value), Arc::clone(&written), Arc::clone(&read));
                thread::spawn(move || {
                    let _guard = lock.lock();
                    // SAFETY: written under the lock, read only under it.
                    value.with_mut(|v| unsafe { *v = 42 });
                    written.store(true, Ordering::Relaxed);
                    read.load(Ordering::Relaxed)
                })
            };
            let seen = {
                let _guard = lock.lock();
                read.store(true, Ordering::Relaxed);
                // SAFETY: read under the lock, after the flag says the
                // writer wrote it under the lock.
                written
                    .load(Ordering::Relaxed)
                    .then(|| value.with(|v| unsafe { *v }))
            };
            let reader_came_first = writer.join().unwrap();
            let expected = if reader_came_first { None } else { Some(42) };
            assert_eq!(seen, expected, "reader first: {reader_came_first}");
        });
    }
}
