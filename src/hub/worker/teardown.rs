//! The end of a worker: at the shutdown every started green thread is
//! cancelled and every unstarted task dropped; past the shutdown deadline
//! the ones still alive are reported; after the loop what is left is
//! killed (its stack unwinds) and the worker's queues are emptied. Also
//! what a worker drops when its loop unwinds.
//!
//! Owns: those steps. Uses the worker's state, `switch::drop_entry` and
//! the runtime's record of refusals.

use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossbeam_deque::Steal;

use crate::coroutine::Greenlet;
use crate::diag::diag_warn;

use super::super::error::JoinError;
use super::super::task_header::Task;
use super::state::Worker;
use super::switch::drop_entry;

/// The held reference and the `live` entries go with the worker also when
/// its loop unwinds (no teardown then); the entries greenlet first, as
/// everywhere (see [`drop_entry`]).
impl Drop for Worker {
    fn drop(&mut self) {
        self.release_held();
        drop(self.remote().newest.take());
        self.live.get_mut().drain().for_each(drop_entry);
    }
}

impl Worker {
    /// Shutdown began: cancel every started task, drop every unstarted one.
    pub(super) fn cancel_all(&self) {
        self.cancelled_all.set(true);
        let tasks: Vec<Arc<Task>> = self
            .live
            .borrow()
            .iter()
            .map(|(_, (t, _))| Arc::clone(t))
            .collect();
        for t in tasks {
            t.request_cancel();
        }
        // Taken out first: a closure's destructor may spawn.
        drop(self.local_new.take());
        drop(self.spawned.take());
        drop(self.remote().newest.take());
        while let Some(u) = self.deque.pop() {
            drop(u);
        }
        loop {
            match self.shared.injector.steal() {
                Steal::Success(u) => drop(u),
                Steal::Retry => continue,
                Steal::Empty => break,
            }
        }
    }

    /// The shutdown deadline passed with green threads still alive.
    pub(super) fn report_refusals(&self) {
        let live = self.live.borrow();
        for (_, (t, _)) in live.iter() {
            diag_warn!(
                "hub worker {}: green thread '{}' (id {}, spawned at {}) did not finish within the \
                 shutdown timeout after it was cancelled ({}); it is killed now and force-unwound if \
                 it refuses again",
                self.index,
                t.name(),
                t.id,
                t.site,
                t.state()
            );
            self.shared.record_refusal(t);
        }
    }

    /// After the loop: kill what is left (their stacks unwind), drop the
    /// rest.
    pub(super) fn teardown(&self) {
        let entries: Vec<(Arc<Task>, Greenlet)> = self.live.borrow_mut().drain().collect();
        // Out of the table: no hand-off goes to them now (a green thread
        // that parks while it is killed parks to the hub, in `kill`).
        for (task, _) in &entries {
            task.greenlet.store(ptr::null_mut(), Ordering::Relaxed);
        }
        for (task, g) in &entries {
            if g.is_dead() {
                continue;
            }
            self.current.set(Arc::as_ptr(task));
            let result = g.kill();
            self.current.set(ptr::null());
            if let Err(e) = result {
                diag_warn!(
                    "hub worker {}: green thread '{}' (id {}, spawned at {}) refused to die at \
                     shutdown: {e}",
                    self.index,
                    task.name(),
                    task.id,
                    task.site
                );
            }
            task.finish(Some(JoinError::Cancelled { name: task.name() }));
        }
        self.release_held();
        drop(self.spawned.take());
        drop(self.remote().newest.take());
        self.pool.clear();
        self.clear_timers();
        self.ready.clear();
        entries.into_iter().for_each(drop_entry);
    }
}
