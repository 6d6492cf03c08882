//! Routing a wake: a woken green thread goes on its worker's ready queue,
//! directly when the waker runs on that worker, else through the worker's
//! remote queue (and an unpark of its poller, if it sleeps). A task's
//! [`Waker`](std::task::Waker) is the task itself ([`Wake`] for `Task`).
//!
//! Owns: [`push_ready`], the local queuing of a woken task, [`wake_task`]
//! and the task's `Wake` implementation. Uses the worker's state and its remote parts,
//! and the runtime's shared state (to find a task's worker from a thread
//! that is not one of its runtime's).

use std::sync::Arc;
use std::task::Wake;

use super::super::shared::Shared;
use super::super::task_header::Task;
use super::current::with_current;
use super::state::Worker;

/// Put a woken task on the ready queue of worker `owner`: directly when
/// called on that worker, else through its remote queue. Inlined into
/// the waker: a local wake is one frame.
#[inline(always)]
pub(crate) fn push_ready(task: Arc<Task>, owner: usize) {
    // The task back when it is not this worker's.
    let other = with_current(move |w| match w {
        Some(w) if w.index == owner && w.owns(&task) => {
            w.push_ready_local(task);
            None
        }
        _ => Some(task),
    });
    if let Some(task) = other {
        push_remote(task, owner);
    }
}

/// [`push_ready`] to another thread's worker. Out of line: the local wake
/// stays as small as it was. On a worker of the same runtime the remote
/// queue is reached through this worker's `shared`, so the task moves into
/// it without a reference count change.
#[inline(never)]
pub(super) fn push_remote(task: Arc<Task>, owner: usize) {
    let mut task = Some(task);
    with_current(|w| {
        let Some(w) = w else { return };
        if let Some(t) = task.take_if(|t| w.owns(t)) {
            if let Some(remote) = w.shared.workers.get(owner) {
                remote.push(t);
            }
        }
    });
    if let Some(task) = task {
        if let Some(remote) = Shared::of(&task).and_then(|s| s.workers.get(owner)) {
            remote.push(Arc::clone(&task));
        }
    }
}

impl Worker {
    /// Queue `task`, a task of this worker, on the ready queue.
    #[inline]
    pub(crate) fn push_ready_local(&self, task: Arc<Task>) {
        self.ready.push_back(task);
    }

    /// Queue `task`, a task of this worker woken on its thread (a timer
    /// that fired), unless it is queued already.
    #[inline]
    pub(crate) fn schedule_local(&self, task: &Arc<Task>) {
        if task.mark_ready() {
            self.push_ready_local(Arc::clone(task));
        }
    }
}

/// Wake `task` (see [`Wake`] for `Task`), inlined into its caller: a
/// wait list's notifier (a channel's or a lock's hand-over) wakes a green
/// thread of its own worker with no call (`mark_scheduled` and the local
/// queueing in its frame).
#[inline(always)]
pub(crate) fn wake_task(task: Arc<Task>) {
    if let Some(owner) = task.mark_scheduled() {
        push_ready(task, owner);
    }
}

impl Wake for Task {
    /// Inline: made in the crate of its caller, one call per wake.
    #[inline]
    fn wake(self: Arc<Self>) {
        wake_task(self);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        schedule(self);
    }
}

/// Queue `task` on its worker's ready queue unless it already is. A task
/// not started on a worker (queued, or a blocking call) has nothing to
/// queue. Left to the compiler to place: a cancellation's wake, rare in a
/// park, stays out of the park's code.
fn schedule(task: &Arc<Task>) {
    if let Some(owner) = task.mark_scheduled() {
        push_ready(Arc::clone(task), owner);
    }
}
