//! The wait list every hub primitive parks on ([`WaitList`]), and
//! [`wait_on`], which parks the caller on one without losing a
//! notification when the waiter is cancelled or times out.
//!
//! Owns: those two. Uses `park` and `current_waker`.
//!
//! A notification is handed to one waiter at a time (`notify_one`). A
//! waiter that unwinds (cancellation, timeout) after it was notified but
//! before it could use the notification passes it on to the next waiter,
//! so a cancelled receiver or lock waiter never strands the others.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;

use parking_lot::{Mutex, MutexGuard};

use super::park::{current_waker, park};
use super::task::Wait;

/// One parked waiter.
pub(crate) struct Waiter {
    waker: Waker,
    notified: AtomicBool,
}

/// Parked waiters, first come first notified. Lives inside the state it
/// guards (under the same lock).
#[derive(Default)]
pub(crate) struct WaitList {
    queue: VecDeque<Arc<Waiter>>,
}

impl WaitList {
    /// Register the caller.
    pub(crate) fn push(&mut self) -> Arc<Waiter> {
        let w = Arc::new(Waiter {
            waker: current_waker(),
            notified: AtomicBool::new(false),
        });
        self.queue.push_back(Arc::clone(&w));
        w
    }

    /// Take the first waiter and mark it notified; the caller wakes the
    /// returned waker after releasing its lock.
    pub(crate) fn notify_one(&mut self) -> Option<Waker> {
        let w = self.queue.pop_front()?;
        w.notified.store(true, Ordering::Release);
        Some(w.waker.clone())
    }

    /// Take every waiter (see [`notify_one`](Self::notify_one)).
    pub(crate) fn notify_all(&mut self) -> Vec<Waker> {
        self.queue
            .drain(..)
            .map(|w| {
                w.notified.store(true, Ordering::Release);
                w.waker.clone()
            })
            .collect()
    }

    /// Remove `w` if it is still waiting; whether it was.
    pub(crate) fn remove(&mut self, w: &Arc<Waiter>) -> bool {
        match self.queue.iter().position(|x| Arc::ptr_eq(x, w)) {
            Some(i) => {
                self.queue.remove(i);
                true
            }
            None => false,
        }
    }
}

/// Wake every waker of `wakers`.
pub(crate) fn wake_all(wakers: Vec<Waker>) {
    for w in wakers {
        w.wake();
    }
}

/// Park the caller on the wait list `list(&mut state)`, releasing `guard`
/// meanwhile. Returns after a notification, a spurious wake, or `deadline`;
/// the caller re-checks its condition. If the caller unwinds from the park
/// (cancelled, or a `timeout` elapsed) after being notified, the
/// notification goes to the next waiter.
pub(crate) fn wait_on<S>(
    lock: &Mutex<S>,
    mut guard: MutexGuard<'_, S>,
    list: fn(&mut S) -> &mut WaitList,
    wait: Wait,
    deadline: Option<Instant>,
) {
    let me = list(&mut guard).push();
    drop(guard);
    let leave = Leave {
        lock,
        list,
        me,
        unwinding: true,
    };
    park(wait, deadline);
    let mut leave = leave;
    leave.unwinding = false;
}

/// Takes the waiter off the list when the park ends; when it ends by an
/// unwind, hands on a notification it received.
struct Leave<'a, S> {
    lock: &'a Mutex<S>,
    list: fn(&mut S) -> &mut WaitList,
    me: Arc<Waiter>,
    unwinding: bool,
}

impl<S> Drop for Leave<'_, S> {
    fn drop(&mut self) {
        let mut state = self.lock.lock();
        let list = (self.list)(&mut state);
        let was_waiting = list.remove(&self.me);
        let forward = if !was_waiting && self.unwinding && self.me.notified.load(Ordering::Acquire)
        {
            list.notify_one()
        } else {
            None
        };
        drop(state);
        if let Some(w) = forward {
            w.wake();
        }
    }
}
