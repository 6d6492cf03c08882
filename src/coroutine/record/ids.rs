//! Greenlet ids: a process-wide counter and the block of ids a thread
//! takes from it at once ([`IdBlock`]).
//!
//! A leaf: uses nothing of the crate.

use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// How many ids a thread takes from [`NEXT_ID`] at once, so that creating a
/// greenlet costs no shared atomic operation for its id.
const ID_BLOCK: u64 = 1024;

/// A fresh process-unique id from the process-wide counter.
pub(crate) fn global_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// A thread's block of greenlet ids, refilled from the process-wide counter.
pub(crate) struct IdBlock {
    next: u64,
    end: u64,
}

impl IdBlock {
    /// An empty block (the first id refills it).
    pub(crate) const fn new() -> IdBlock {
        IdBlock { next: 0, end: 0 }
    }

    /// A process-unique id.
    #[inline]
    pub(crate) fn take(&mut self) -> u64 {
        if self.next == self.end {
            self.next = NEXT_ID.fetch_add(ID_BLOCK, Ordering::Relaxed);
            self.end = self.next + ID_BLOCK;
        }
        let id = self.next;
        self.next += 1;
        id
    }
}
