//! The cleanup queue's scheduler in the CPython model: greenlet's
//! `Py_AddPendingCall(PendingCallback_DestroyQueue)`.
//!
//! Owns: [`PendingCallScheduler`]. Uses the [`Interpreter`]'s public operations
//! and [`crate::cleanup`]'s `Scheduler` trait (the shim plugs into cleanup,
//! never the other way round).

use std::sync::{Arc, Weak};

use crate::cleanup::{CleanupQueue, ScheduleError, Scheduler};

use super::runtime::{Interpreter, Py, Shared};

/// Schedules a drain as a pending call of an [`Interpreter`], added as the
/// calling model thread (read from the runtime's thread-local, so it works
/// from a dying thread's thread-local destructors, without the GIL).
/// Destructions under [`Policy::Shielded`](crate::cleanup::Policy::Shielded)
/// run between `PyThreadState_EnterTracing` and `PyThreadState_LeaveTracing`
/// on the draining thread.
///
/// # Example
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use greenlet::cleanup::{CleanupQueue, Policy, Remains};
/// use greenlet::interp_shim::{Outcome, PendingCallScheduler, PyVersion, Interpreter, Watchdog};
///
/// struct State;
/// impl Remains for State {
///     fn destroy(self: Box<Self>) {}
///     fn label(&self) -> String { "a state".into() }
/// }
///
/// let rt = Interpreter::new(PyVersion::V3_11);
/// let queue = CleanupQueue::new(Policy::Shielded, Arc::new(PendingCallScheduler::new(&rt)));
/// let q = Arc::clone(&queue);
/// let outcome = rt
///     .run(Watchdog::Report(Duration::from_secs(20)), move |py| {
///         q.push(Box::new(State)); // schedules a pending call
///         py.sleep(Duration::from_millis(1)) // the main thread runs it here
///     })
///     .unwrap();
/// assert!(matches!(outcome, Outcome::Finished(Ok(()))));
/// assert_eq!(queue.metrics().states_destroyed, 1);
/// ```
#[derive(Debug, Clone)]
pub struct PendingCallScheduler {
    runtime: Weak<Shared>,
}

impl PendingCallScheduler {
    /// A scheduler adding its pending calls to `runtime` (held weakly: the
    /// queue does not keep the interpreter alive).
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use greenlet::cleanup::{CleanupQueue, Policy, Scheduler};
    /// use greenlet::interp_shim::{PendingCallScheduler, PyVersion, Interpreter};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// let scheduler = Arc::new(PendingCallScheduler::new(&rt));
    /// let queue = CleanupQueue::new(Policy::Scheduled, scheduler.clone());
    /// scheduler.schedule(&queue).unwrap(); // one pending call added
    /// assert_eq!(rt.stats().pending_calls_added, 1);
    /// drop(rt); // held weakly: the interpreter is gone now
    /// assert!(scheduler.schedule(&queue).unwrap_err().to_string().contains("gone"));
    /// ```
    pub fn new(runtime: &Interpreter) -> Self {
        PendingCallScheduler {
            runtime: runtime.downgrade(),
        }
    }

    fn error(&self, reason: String) -> ScheduleError {
        ScheduleError {
            scheduler: self.name().into(),
            reason,
        }
    }
}

impl Scheduler for PendingCallScheduler {
    fn schedule(&self, queue: &Arc<CleanupQueue>) -> Result<(), ScheduleError> {
        let Some(runtime) = self.runtime.upgrade().map(Interpreter::from_shared) else {
            return Err(
                self.error("the simulated interpreter is gone; the thread state is leaked".into())
            );
        };
        // greenlet's AddToCleanupQueue: `if (!Py_IsFinalizing())` around the add
        if runtime.is_finalizing() {
            return Err(self.error(format!(
                "the Python {} interpreter is finalizing: Py_AddPendingCall is skipped and the \
                 thread state is leaked on purpose",
                runtime.version()
            )));
        }
        let queue = Arc::clone(queue);
        // Py_AddPendingCall(PendingCallback_DestroyQueue, NULL)
        runtime
            .add_pending_call(move |_py| {
                queue.drain();
                Ok(())
            })
            .map_err(|full| {
                self.error(format!(
                    "{full}; the Python {} ring has no room for the drain",
                    runtime.version()
                ))
            })
    }

    fn shield(&self, destroy: &mut dyn FnMut()) {
        let own = self.runtime.upgrade().map(Interpreter::from_shared);
        match (Py::current(), own) {
            (Some(py), Some(runtime)) if runtime.owns(&py) => py.with_tracing_suspended(destroy),
            _ => destroy(),
        }
    }

    fn name(&self) -> &str {
        "pending-call"
    }
}
