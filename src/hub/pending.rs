//! The hub's native pending-call slot, and the cleanup queue's scheduler on
//! it ([`HubScheduler`]).
//!
//! Owns: [`PendingCalls`] (the bounded slot, its flags and the drain) and
//! [`Handle::add_pending_call`]. Uses the worker (to start the drain as a
//! green thread at a scheduling point) and `cleanup`'s `Scheduler` trait.
//!
//! # The rules (a host for the explorer, beside CPython 3.11/3.12/3.13)
//! State, per runtime: `ring` (FIFO, at most `capacity` calls), `has_calls`
//! (a flag) and `busy` (a flag). All of `ring` and `has_calls` change under
//! one lock; `busy` is an atomic.
//! 1. **add(f)**, from any thread, with no other condition (CPython 3.12+'s
//!    `_PyEval_AddPendingCall` also needs no GIL): under the lock, if the
//!    ring holds `capacity` calls, fail with
//!    [`HubError::PendingCallsFull`] and change nothing; else push `f`
//!    at the back and set `has_calls`. After the lock: wake one idle worker.
//! 2. **Scheduling point**: the top of each round of a worker's loop (before
//!    any task is started or resumed, so also before a worker sleeps). If
//!    `has_calls` is set and a compare-and-swap of `busy` from false to true
//!    succeeds, the worker starts the **drain** as a green thread ahead of
//!    every other task; otherwise it goes on (a drain runs elsewhere or
//!    nothing waits). A worker about to sleep re-reads `has_calls` and does
//!    not sleep while it is set.
//! 3. **Drain**: up to `capacity` times: under the lock pop the front call;
//!    if there is none, clear `has_calls` (still under the lock) and stop;
//!    else run the call outside the lock (a panic is caught and reported).
//!    Then clear `busy`. A drain that ran `capacity` calls leaves
//!    `has_calls` set, so the next scheduling point starts a new drain:
//!    calls added while draining cannot keep one drain going forever.
//! 4. **Re-entry**: a call runs on the drain's green thread, so it may park;
//!    the worker then reaches scheduling points while `busy` is set, and by
//!    rule 2 starts no second drain: calls never nest, on any worker.
//! 5. **Failure to start**: if the drain's greenlet cannot get a stack, its
//!    closure is dropped unrun, which clears `busy` (the calls stay queued
//!    for the next point).
//! 6. **Shutdown**: calls still queued when the workers have exited run on
//!    the thread that shuts the runtime down, in order.
//!
//! Safety: no call is lost (only the drain pops, and it clears `has_calls`
//! only under the lock with the ring empty) and none runs twice; liveness:
//! with any worker alive, a queued call runs after at most one scheduling
//! point past the end of the running drain.
//!
//! The cleanup queue of [`Handle::cleanup_queue`] (policy `Robust`)
//! schedules its drains here: `schedule(queue)` adds a call that runs
//! `queue.drain()`, and a full slot is a failed schedule, retried by the
//! policy. Once the runtime is shutting down (or gone), `schedule` drains
//! on the calling thread instead, as the `Inline` scheduler does: a thread
//! that outlives the runtime (a blocking call still running at shutdown)
//! still has its state cleaned up.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::cleanup::{CleanupQueue, ScheduleError, Scheduler};
use crate::diag::diag_error;

use super::error::HubError;
use super::runtime::{Handle, Shared};
use super::spawn::{body, new_task};
use super::worker::Worker;

type Call = Box<dyn FnOnce() + Send>;

/// A runtime's pending-call slot (see the module doc for its rules).
pub(crate) struct PendingCalls {
    ring: Mutex<VecDeque<Call>>,
    capacity: usize,
    has_calls: AtomicBool,
    busy: AtomicBool,
}

impl PendingCalls {
    pub(crate) fn new(capacity: usize) -> PendingCalls {
        PendingCalls {
            ring: Mutex::new(VecDeque::with_capacity(capacity)),
            capacity,
            has_calls: AtomicBool::new(false),
            busy: AtomicBool::new(false),
        }
    }

    pub(crate) fn has_calls(&self) -> bool {
        self.has_calls.load(Ordering::SeqCst)
    }

    /// Rule 1.
    fn add(&self, call: Call) -> Result<(), HubError> {
        let mut ring = self.ring.lock();
        if ring.len() >= self.capacity {
            return Err(HubError::PendingCallsFull {
                capacity: self.capacity,
            });
        }
        ring.push_back(call);
        self.has_calls.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Rule 3: pop one call, or clear `has_calls` when there is none.
    fn pop(&self) -> Option<Call> {
        let mut ring = self.ring.lock();
        let call = ring.pop_front();
        if call.is_none() {
            self.has_calls.store(false, Ordering::SeqCst);
        }
        call
    }

    /// Rule 6: run what is left on this thread; how many ran.
    pub(crate) fn run_all_here(&self) -> usize {
        let mut n = 0;
        while let Some(call) = self.pop() {
            run_call(call);
            n += 1;
        }
        n
    }
}

fn run_call(call: Call) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(call)) {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-string payload".into());
        diag_error!("hub: a pending call panicked: {message}");
    }
}

/// Clears `busy` when the drain ends, or when its closure is dropped unrun
/// (rule 5).
struct Busy(Arc<Shared>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.pending.busy.store(false, Ordering::SeqCst);
        if self.0.pending.has_calls() {
            self.0.notify_idle();
        }
    }
}

/// Rule 2, at the top of each round of `w`'s loop.
pub(crate) fn scheduling_point(w: &Worker) {
    let pending = &w.shared.pending;
    if !pending.has_calls.load(Ordering::Acquire)
        || pending
            .busy
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
    {
        return;
    }
    let busy = Busy(Arc::clone(&w.shared));
    let (task, slot) = new_task::<()>(
        &w.shared,
        Some("pending-calls".into()),
        None,
        Location::caller(),
        w.index,
    );
    let drain = move || {
        let busy = busy;
        let pending = &busy.0.pending;
        for _ in 0..pending.capacity {
            match pending.pop() {
                Some(call) => run_call(call),
                None => break,
            }
        }
    };
    w.push_local_first(Arc::clone(&task), Box::new(body(task, slot, drain)));
}

impl Handle {
    /// Queue `f` to run on one of this runtime's hubs at its next
    /// scheduling point, on a green thread of its own (so it may park).
    /// Callable from any thread. Calls run one at a time, in order, never
    /// nested (see the module doc's rules).
    ///
    /// # Errors
    /// [`HubError::PendingCallsFull`] when the slot holds its capacity.
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::new().unwrap();
    /// let (tx, rx) = greenlet::hub::channel(1);
    /// rt.handle().add_pending_call(move || tx.send("ran").unwrap()).unwrap();
    /// assert_eq!(rx.recv().unwrap(), "ran");
    /// ```
    pub fn add_pending_call(&self, f: impl FnOnce() + Send + 'static) -> Result<(), HubError> {
        if self.shared.is_shutting_down() {
            return Err(HubError::ShuttingDown);
        }
        self.shared.pending.add(Box::new(f))?;
        self.shared.notify_idle();
        Ok(())
    }

    /// A cleanup-queue scheduler that drains on this runtime's pending-call
    /// slot (the one [`cleanup_queue`](Handle::cleanup_queue) uses).
    ///
    /// ```
    /// use greenlet::cleanup::{CleanupQueue, Policy};
    /// let rt = greenlet::hub::Runtime::new().unwrap();
    /// let q = CleanupQueue::new(Policy::Robust, std::sync::Arc::new(rt.handle().cleanup_scheduler()));
    /// assert_eq!(q.metrics().drains_run, 0);
    /// ```
    pub fn cleanup_scheduler(&self) -> HubScheduler {
        HubScheduler::new(&self.shared)
    }
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
        match (Handle { shared }).add_pending_call(move || q.drain()) {
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
