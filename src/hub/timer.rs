//! A worker's timers: a binary min-heap of (deadline, task) entries.
//!
//! A heap rather than a hashed wheel: insertion and expiry are O(log n)
//! with no tuning (a wheel needs a tick and a slot count, and its win, O(1)
//! cancel, matters for timers that are cancelled before they fire; here a
//! cancelled timer costs nothing extra: it is left in the heap and ignored
//! when it fires, because its task's `park_seq` has moved on). The heap is
//! per worker, touched only by its own thread, so it needs no lock.
//!
//! Owns: [`Timers`]. Uses the task's `park_seq` and `schedule`.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::task::Task;

struct Entry {
    at: Instant,
    /// Insertion order: equal deadlines fire first in, first out.
    seq: u64,
    /// The task's `park_seq` when armed.
    park_seq: u64,
    task: Arc<Task>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed, so the std max-heap pops the earliest deadline.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        other.at.cmp(&self.at).then(other.seq.cmp(&self.seq))
    }
}

/// One worker's pending deadlines.
#[derive(Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl Timers {
    /// Wake `task` at `at`, unless it has been resumed meanwhile.
    pub(crate) fn arm(&mut self, at: Instant, task: Arc<Task>) {
        self.seq += 1;
        let park_seq = task.park_seq.load(Ordering::Relaxed);
        self.heap.push(Entry {
            at,
            seq: self.seq,
            park_seq,
            task,
        });
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// The earliest deadline, if any.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.heap.peek().map(|e| e.at)
    }

    /// Pop every entry due at `now` and return the tasks still parked in
    /// the park that armed them (the caller wakes them once it has released
    /// the heap).
    pub(crate) fn expire(&mut self, now: Instant, due: &mut Vec<Arc<Task>>) {
        while let Some(top) = self.heap.peek() {
            if top.at > now {
                break;
            }
            let Some(e) = self.heap.pop() else { break };
            if e.task.park_seq.load(Ordering::Relaxed) == e.park_seq {
                due.push(e.task);
            }
        }
    }

    /// Drop every entry (at shutdown).
    pub(crate) fn clear(&mut self) {
        self.heap.clear();
    }
}
