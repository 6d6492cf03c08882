//! A task's (or a plain thread's) stack of active `timeout` deadlines
//! ([`Scopes`]), outermost first.
//!
//! Owns: [`Scopes`]. Uses nothing of the hub.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

/// Active `timeout` deadlines of one task or plain thread, outermost first.
pub(crate) struct Scopes {
    depth: AtomicUsize,
    list: Mutex<Vec<(u64, Instant)>>,
}

impl Default for Scopes {
    fn default() -> Self {
        Scopes::new()
    }
}

impl Scopes {
    pub(crate) const fn new() -> Scopes {
        Scopes {
            depth: AtomicUsize::new(0),
            list: Mutex::new(Vec::new()),
        }
    }

    /// Whether any scope is active.
    #[inline]
    pub(crate) fn is_active(&self) -> bool {
        self.depth.load(Ordering::Relaxed) != 0
    }

    /// The earliest active deadline.
    pub(crate) fn earliest(&self) -> Option<Instant> {
        if self.depth.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.list.lock().iter().map(|(_, at)| *at).min()
    }

    /// The outermost scope whose deadline has passed. Inline: every park
    /// asks, and with no scope active the answer is one load.
    #[inline]
    pub(crate) fn expired(&self) -> Option<u64> {
        if self.depth.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let now = Instant::now();
        self.list
            .lock()
            .iter()
            .find(|(_, at)| *at <= now)
            .map(|(id, _)| *id)
    }

    pub(crate) fn push(&self, id: u64, at: Instant) {
        self.list.lock().push((id, at));
        self.depth.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn pop(&self, id: u64) {
        let mut list = self.list.lock();
        if let Some(pos) = list.iter().rposition(|(i, _)| *i == id) {
            list.remove(pos);
            self.depth.fetch_sub(1, Ordering::Relaxed);
        }
    }
}
