//! Completion-based operations on a worker's ring.
