//! Draining the pending-call slot on a hub: at a scheduling point a worker
//! claims the drain and runs the calls on a green thread of its own
//! (`scheduling_point`); [`add_call`] queues a call from any thread (for
//! `Handle::add_pending_call`); [`HubScheduler`] runs cleanup-queue drains as pending calls.
//! The slot's rules are `pending`'s.
//!
//! Owns: the drain's green thread, [`HubScheduler`]. Uses the slot, the
//! worker (its local line of new tasks) and the spawn path.

use std::panic::Location;
use std::sync::{Arc, Weak};

use crate::cleanup::{CleanupQueue, ScheduleError, Scheduler};

use super::error::HubError;
use super::pending::{drain_goes_on, run_call, Call};
use super::shared::Shared;
use super::spawning::NewTask;
use super::worker::Worker;

/// Clears `busy` when the drain ends, or when its closure is dropped unrun
/// (rule 5).
struct Busy(Arc<Shared>);

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0.pending.end_drain() {
            self.0.notify_idle();
        }
    }
}

/// Rule 2, at the top of each round of `w`'s loop.
pub(crate) fn scheduling_point(w: &Worker) {
    let pending = &w.shared.pending;
    if w.shared.is_shutting_down() || !pending.claim_drain() {
        return;
    }
    let busy = Busy(Arc::clone(&w.shared));
    let drain = move || {
        let busy = busy;
        let pending = &busy.0.pending;
        let capacity = pending.capacity();
        let mut ran = 0;
        while drain_goes_on(ran, capacity) {
            match pending.pop() {
                Some(call) => run_call(call),
                None => break,
            }
            ran += 1;
        }
    };
    let (u, handle) = NewTask {
        shared: &w.shared,
        name: Some("pending-calls".into()),
        stack_size: None,
        site: Location::caller(),
        shard: w.index,
    }
    .build_local(drain);
    drop(handle);
    w.push_local_first(u);
}

/// Queue `call` on `shared`'s slot (`cleanup`: the cleanup queue's drain,
/// rule 7) and wake an idle worker to drain it.
pub(crate) fn add_call(shared: &Shared, call: Call, cleanup: bool) -> Result<(), HubError> {
    if shared.is_shutting_down() {
        return Err(HubError::ShuttingDown);
    }
    shared.pending.add(call, cleanup)?;
    shared.notify_idle();
    Ok(())
}

/// Runs cleanup drains as hub pending calls (see the module doc).
///
/// ```
/// use std::sync::Arc;
/// use greenlet::cleanup::{CleanupQueue, Policy, Remains};
/// struct Note(std::sync::mpsc::Sender<String>);
/// impl Remains for Note {
///     fn destroy(self: Box<Self>) {
///         let name = std::thread::current().name().unwrap_or("").to_string();
///         self.0.send(name).unwrap();
///     }
///     fn label(&self) -> String { "a note".into() }
/// }
/// let rt = greenlet::hub::Runtime::new().unwrap();
/// let q = CleanupQueue::new(Policy::Robust, Arc::new(rt.handle().cleanup_scheduler()));
/// let (tx, rx) = std::sync::mpsc::channel();
/// q.push(Box::new(Note(tx)));
/// assert!(rx.recv().unwrap().starts_with("hub-worker")); // drained on a hub
/// ```
#[derive(Debug)]
pub struct HubScheduler {
    shared: Weak<Shared>,
}

impl HubScheduler {
    pub(crate) fn new(shared: &Arc<Shared>) -> HubScheduler {
        HubScheduler {
            shared: Arc::downgrade(shared),
        }
    }
}

impl Scheduler for HubScheduler {
    fn schedule(&self, queue: &Arc<CleanupQueue>) -> Result<(), ScheduleError> {
        let refuse = |reason: String| ScheduleError {
            scheduler: self.name().into(),
            reason,
        };
        let Some(shared) = self.shared.upgrade() else {
            // No hub will run it any more: drain here, as `Inline` does.
            queue.drain();
            return Ok(());
        };
        let q = Arc::clone(queue);
        match add_call(&shared, Box::new(move || q.drain()), true) {
            Ok(()) => Ok(()),
            Err(HubError::ShuttingDown) => {
                queue.drain();
                Ok(())
            }
            Err(e) => Err(refuse(e.to_string())),
        }
    }

    fn name(&self) -> &str {
        "hub"
    }
}
