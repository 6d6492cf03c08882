//! What every worker, handle and task of one runtime shares ([`Shared`]):
//! the workers' remote parts, the injector, the registry, the pending-call
//! slot, the blocking pool, the cleanup queue and the shutdown state; and
//! the runtime of a blocking-pool thread (a thread-local).
//!
//! It sits above the task's data: a task holds its `Shared` through its
//! [`RuntimeLink`] (made by [`Shared::link`]), which does not name this
//! type, so that the header, the registry and the tokens stay below the
//! state that lists and queues them. Everything that acts on them sits
//! above.
//!
//! Owns: [`Shared`], a task's link to it and a task's runtime
//! ([`Shared::of`]; a worker tests it with `Worker::owns`), the idle-worker notification and
//! the record of refusals. Uses the worker's remote parts,
//! `crossbeam-deque`'s injector, the registry, the task header and its
//! token, the pending-call slot, the blocking pool, the cleanup queue and
//! the task info of a refusal.

use std::cell::RefCell;
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_deque::Injector;
use parking_lot::Mutex;

use crate::cleanup::CleanupQueue;

use super::blocking_pool::BlockingPool;
use super::deadlock_latch::DeadlockLatch;
use super::driver::IoDriver;
use super::pending::PendingCalls;
use super::registry::Registry;
use super::task_header::{RuntimeLink, Task};
use super::task_info::TaskInfo;
use super::unstarted::Unstarted;
use super::worker::Remote;

/// What every worker, handle and task of one runtime shares.
pub(crate) struct Shared {
    pub(crate) workers: Box<[Remote]>,
    pub(crate) injector: Injector<Unstarted>,
    /// Workers in (or entering) their idle poll.
    pub(crate) idle: AtomicUsize,
    pub(super) shutdown: AtomicBool,
    pub(super) deadline: Mutex<Option<Instant>>,
    pub(crate) stack_size: usize,
    pub(crate) registry: Registry<Task>,
    pub(crate) pending: PendingCalls,
    pub(crate) blocking: BlockingPool<Unstarted>,
    pub(crate) cleanup: OnceLock<Arc<CleanupQueue>>,
    pub(super) refused: Mutex<Vec<TaskInfo>>,
    pub(super) next_notify: AtomicUsize,
    /// How long other workers leave a worker's newest spawn alone
    /// (`worker::SLOT_AGE`; longer in unit tests that need it never to
    /// move).
    pub(crate) slot_age: Duration,
    /// Deadlocks reported, and the root calls a deadlock may fail.
    pub(crate) deadlock: DeadlockLatch,
    /// The I/O driver the workers' pollers use (resolved: not `Auto`).
    pub(crate) io_driver: IoDriver,
}

impl Shared {
    #[inline]
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    pub(crate) fn shutdown_deadline(&self) -> Option<Instant> {
        *self.deadline.lock()
    }

    /// New unstarted work was queued: wake one idle worker to take it.
    pub(crate) fn notify_idle(&self) {
        fence(Ordering::SeqCst);
        if self.idle.load(Ordering::SeqCst) == 0 {
            return;
        }
        let n = self.workers.len();
        let start = self.next_notify.fetch_add(1, Ordering::Relaxed);
        for k in 0..n {
            if self.workers[(start + k) % n].unpark_if_sleeping() {
                return;
            }
        }
    }

    pub(crate) fn record_refusal(&self, task: &Task) {
        self.refused.lock().push(task.info());
    }

    /// A new task's link to this runtime.
    pub(crate) fn link(self: &Arc<Self>) -> RuntimeLink {
        RuntimeLink::new(Arc::clone(self), |shared| &shared.registry)
    }

    /// The runtime `task` belongs to (always found: every link is made by
    /// [`link`](Self::link)).
    pub(crate) fn of(task: &Task) -> Option<&Shared> {
        task.runtime.owner().downcast_ref()
    }
}

thread_local! {
    /// The runtime of a blocking-pool thread (workers find theirs through
    /// the worker thread-local).
    pub(super) static CONTEXT: RefCell<Option<Arc<Shared>>> = const { RefCell::new(None) };
}

/// Make `shared` the calling (blocking-pool) thread's runtime.
pub(crate) fn enter(shared: &Arc<Shared>) {
    CONTEXT.with(|c| *c.borrow_mut() = Some(Arc::clone(shared)));
}
