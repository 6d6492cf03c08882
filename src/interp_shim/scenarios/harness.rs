//! The harness every scenario runs in: a runtime whose model threads send
//! their greenlet state to the scenario's cleanup queue, and the helpers the
//! scenarios' simulated Python code shares (a finalizer running Python code,
//! a polling wait, the `WeakKeyDictionary` removal callback).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cleanup::{self, CleanupQueue, Policy};
use crate::coroutine::{getcurrent, Greenlet};
use crate::diag::diag_warn;

use super::super::runtime::{Interpreter, Outcome, Py, PyErr, PyResult};
use super::super::scheduler::PendingCallScheduler;
use super::super::version::PyVersion;
use super::super::watchdog::HangReport;
use super::options::{RunOptions, ScenarioReport};

/// A runtime with a cleanup queue wired to it: every model thread sends its
/// greenlet state to the queue; the queue is finalized with the interpreter;
/// the watchdog's report carries the queue's metrics.
pub(super) struct Harness {
    pub(super) runtime: Interpreter,
    pub(super) queue: Arc<CleanupQueue>,
    pub(super) created: Arc<AtomicU64>,
    /// States created when the watchdog fired: what a hung run reports
    /// (the cancelled unwinding that follows still lets drains run, which a
    /// hung interpreter never would). The queue's metrics of that moment
    /// are in the hang report itself ([`HangReport::queue`]).
    created_at_hang: Arc<AtomicU64>,
}

impl Harness {
    pub(super) fn new(version: PyVersion, policy: Policy, options: RunOptions) -> Harness {
        let runtime = Interpreter::new(version);
        options.apply(&runtime);
        let queue = CleanupQueue::new(policy, Arc::new(PendingCallScheduler::new(&runtime)));
        let q = Arc::clone(&queue);
        runtime.set_thread_init(move || cleanup::set_thread_queue(Some(Arc::clone(&q))));
        let q = Arc::clone(&queue);
        runtime.at_finalize(move || q.finalize());
        runtime.report_queue(&queue);
        let created = Arc::new(AtomicU64::new(0));
        let created_at_hang = Arc::new(AtomicU64::new(0));
        let (c, snapshot) = (Arc::clone(&created), Arc::clone(&created_at_hang));
        runtime.set_report_hook(move || {
            snapshot.store(c.load(Ordering::SeqCst), Ordering::SeqCst);
            String::new()
        });
        Harness {
            runtime,
            queue,
            created,
            created_at_hang,
        }
    }

    /// `greenlet.getcurrent()` in the calling thread, counted.
    pub(super) fn touch_greenlet(created: &AtomicU64) -> Greenlet {
        created.fetch_add(1, Ordering::SeqCst);
        getcurrent()
    }

    pub(super) fn finish<T>(
        self,
        outcome: Outcome<T>,
        b_queued: impl FnOnce(Option<T>) -> Option<bool>,
    ) -> ScenarioReport {
        let (hang, error, value) = match outcome {
            Outcome::Hung(report) => (Some(report), None, None),
            Outcome::Finished(Ok(value)) => (None, None, Some(value)),
            Outcome::Finished(Err(err)) => (None, Some(err), None),
        };
        let (queue, created, runtime) = match hang.as_deref() {
            Some(HangReport {
                queue: Some(queue),
                stats,
                ..
            }) => (
                queue.metrics,
                self.created_at_hang.load(Ordering::SeqCst),
                *stats,
            ),
            _ => (
                self.queue.metrics(),
                self.created.load(Ordering::SeqCst),
                self.runtime.stats(),
            ),
        };
        ScenarioReport {
            hang,
            error,
            b_queued: b_queued(value),
            states_created: created,
            queue,
            states_never_destroyed: created.saturating_sub(queue.states_destroyed),
            finalizer_panics: self.queue.finalizer_panics(),
            runtime,
        }
    }
}

/// Run a finalizer's simulated Python code as the function `name` on the
/// thread running the drain; an exception is printed like CPython's
/// "Exception ignored in" and swallowed (weakref callbacks cannot raise).
pub(super) fn python_finalizer(name: &'static str, code: impl FnOnce(&Py) -> PyResult<()>) {
    let Some(py) = Py::current() else {
        diag_warn!("Exception ignored in {name}: the drain runs outside the simulated interpreter");
        return;
    };
    if let Err(err) = py.call(name, code) {
        // handle_callback: PyErr_WriteUnraisable(callback); a cancel of the
        // harness just unwinds.
        let _ = py.write_unraisable(&format!("<function {name}>"), &err);
    }
}

/// The `WeakKeyDictionary` removal callback of a dying thread's main
/// greenlet: enters functions and releases the GIL once, so other threads
/// may die (and push) while the drain runs Python code.
pub(super) fn weak_dict_callback() {
    python_finalizer("remove", |py| {
        py.call("_remove_dead_weakref", |_| Ok(()))?;
        py.sleep(Duration::from_micros(200))?;
        py.call("_commit_removals", |_| Ok(()))
    });
}

/// Poll `ready` like Python code would: sleep 1 ms (GIL released) between
/// checks, for at most 10 s.
pub(super) fn wait_until(py: &Py, ready: impl Fn() -> bool) -> PyResult<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !py.c_call(&ready)? {
        if Instant::now() > deadline {
            return Err(PyErr::exception(
                "TimeoutError",
                "condition not reached in 10 s",
            ));
        }
        py.sleep(Duration::from_millis(1))?;
        py.loop_iter()?;
    }
    Ok(())
}
