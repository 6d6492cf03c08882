//! The record counts behind [`live_greenlets`]: a count per thread state
//! ([`RecordCount`]), written only by its thread, and a global count for the
//! rest.
//!
//! A leaf: uses nothing of the crate.

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// Records made minus records dropped on threads without a record count,
/// plus the final counts of the thread states that were torn down.
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// The record count of every live thread state (records made minus records
/// dropped or kept for reuse on that thread; written only by that thread,
/// so that creating a greenlet costs no shared atomic operation).
static THREAD_COUNTS: Mutex<Vec<Arc<AtomicIsize>>> = Mutex::new(Vec::new());

thread_local! {
    /// The calling thread's [`RecordCount`] while it is registered, else
    /// null. No destructor: readable during thread-local teardown.
    static THREAD_COUNT: Cell<*const AtomicIsize> = const { Cell::new(ptr::null()) };
}

/// How many greenlet records (main greenlets included) are in use in the
/// process: a record counts while a handle, a child, or its thread refers
/// to it, except the dead records a thread keeps for reuse, and a dead
/// greenlet whose last handle went on another thread (no longer counted,
/// though its owner may not have released it yet). For leak checks: exact
/// while no other thread makes or drops greenlets (each thread keeps its
/// own count, summed here).
///
/// # Example
/// ```
/// let g = greenlet::Greenlet::new(|v| Ok(v));
/// assert!(greenlet::live_greenlets() >= 1);
/// drop(g);
/// ```
pub fn live_greenlets() -> usize {
    let counts = THREAD_COUNTS.lock();
    let sum = counts
        .iter()
        .map(|count| count.load(Ordering::Relaxed))
        .fold(LIVE.load(Ordering::Relaxed), isize::wrapping_add);
    usize::try_from(sum).unwrap_or(0)
}

/// One thread's part of [`live_greenlets`], held by its thread state.
pub(crate) struct RecordCount(Arc<AtomicIsize>);

impl RecordCount {
    /// A new count for the calling thread, registered for
    /// [`live_greenlets`]; records made or dropped on this thread count in it
    /// until [`retire`](Self::retire).
    pub(crate) fn register() -> RecordCount {
        let count = Arc::new(AtomicIsize::new(0));
        THREAD_COUNTS.lock().push(Arc::clone(&count));
        THREAD_COUNT.with(|c| c.set(Arc::as_ptr(&count)));
        RecordCount(count)
    }

    /// Add `delta` (only this thread writes it).
    #[inline]
    pub(crate) fn add(&self, delta: isize) {
        add_to(&self.0, delta);
    }

    /// The count now.
    #[cfg(test)]
    pub(crate) fn get(&self) -> isize {
        self.0.load(Ordering::Relaxed)
    }

    /// The thread state goes: fold the count into the global one, in one
    /// step for [`live_greenlets`]; later records count there.
    pub(crate) fn retire(&self) {
        THREAD_COUNT.with(|c| c.set(ptr::null()));
        let mut counts = THREAD_COUNTS.lock();
        counts.retain(|c| !Arc::ptr_eq(c, &self.0));
        LIVE.fetch_add(self.0.swap(0, Ordering::Relaxed), Ordering::Relaxed);
    }
}

/// Add `delta` to a count only the calling thread writes.
#[inline]
fn add_to(count: &AtomicIsize, delta: isize) {
    count.store(
        count.load(Ordering::Relaxed).wrapping_add(delta),
        Ordering::Relaxed,
    );
}

/// Count records made (`delta > 0`) or gone: in the calling thread's count
/// if it has one, else in the global count.
pub(super) fn count_records(delta: isize) {
    let count = THREAD_COUNT.with(Cell::get);
    if count.is_null() {
        LIVE.fetch_add(delta, Ordering::Relaxed);
    } else {
        // SAFETY: a non-null pointer is the calling thread's registered
        // count, which `THREAD_COUNTS` keeps alive until `retire` clears the
        // pointer first.
        add_to(unsafe { &*count }, delta);
    }
}
