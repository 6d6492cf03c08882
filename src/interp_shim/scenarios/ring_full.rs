//! A full pending-call ring at the moment the queue goes non-empty
//! ([`ring_full`]).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::cleanup::Policy;

use super::super::runtime::{Py, PyErr, PyEvent, PyResult, RunError, ThreadHandle};
use super::super::version::PyVersion;
use super::super::watchdog::Watchdog;
use super::harness::{wait_until, Harness};
use super::options::{RunOptions, ScenarioReport};

/// A full pending-call ring at the moment the queue goes non-empty.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{ring_full, RingFullConfig};
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let config = RingFullConfig {
///     version: PyVersion::V3_11,
///     policy: Policy::Shielded,
///     watchdog: Watchdog::Report(Duration::from_secs(20)),
/// };
/// let report = ring_full(config).unwrap();
/// assert!(report.queue.schedules_failed >= 1); // the ring had no room for A's drain
/// assert_eq!((report.queue.states_destroyed, report.queue.states_leaked), (3, 0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingFullConfig {
    /// The modelled CPython version.
    pub version: PyVersion,
    /// The cleanup queue's policy.
    pub policy: Policy,
    /// The watchdog.
    pub watchdog: Watchdog,
}

/// A burst of pending calls fills the ring while the main thread is already
/// inside `make_pending_calls` (so none of them can run yet), and thread A
/// dies meanwhile: its drain cannot be scheduled. The same
/// `make_pending_calls` then runs the burst, so the ring has room again;
/// then threads C and D die one after the other. `Legacy` and `Draining`
/// never schedule again (every later push sees a size above 1): all three
/// states are leaked at finalization. `Scheduled` and `Shielded` retry at
/// C's push and destroy everything.
///
/// # Errors
/// [`RunError`] if the runtime could not start.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{ring_full, RingFullConfig};
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let watchdog = Watchdog::Report(Duration::from_secs(20));
/// let stuck = ring_full(RingFullConfig { version: PyVersion::V3_12, policy: Policy::Draining, watchdog })
///     .unwrap();
/// assert_eq!((stuck.queue.states_destroyed, stuck.queue.states_leaked), (0, 3));
/// let fixed = ring_full(RingFullConfig { version: PyVersion::V3_12, policy: Policy::Scheduled, watchdog })
///     .unwrap();
/// assert_eq!((fixed.queue.states_destroyed, fixed.queue.states_leaked), (3, 0));
/// ```
pub fn ring_full(config: RingFullConfig) -> Result<ScenarioReport, RunError> {
    let harness = Harness::new(config.version, config.policy, RunOptions::default());
    let queue = Arc::clone(&harness.queue);
    let created = Arc::clone(&harness.created);
    let capacity = config.version.spec().ring_capacity;
    let outcome = harness.runtime.run(config.watchdog, move |py| {
        let (q, c) = (Arc::clone(&queue), Arc::clone(&created));
        let burst_done = PyEvent::new(&py.runtime());
        let done = burst_done.clone();
        // A C extension adds the call: the check site after that call runs it.
        let added = py.c_call(|| {
            py.add_pending_call(move |py| {
                py.call("burst", |py| {
                    // The call itself was popped: the ring is empty; fill it.
                    let filled = py.c_call(|| {
                        (0..capacity)
                            .filter(|_| {
                                py.add_pending_call(|py| py.call("noop", |_| Ok(())))
                                    .is_ok()
                            })
                            .count()
                    })?;
                    if filled != capacity {
                        return Err(PyErr::exception("RuntimeError", "the ring did not fill up"));
                    }
                    let a = spawn_dying(py, &c)?;
                    py.join(&a)?;
                    // A's push has tried to schedule and failed (ring full).
                    wait_until(py, || q.metrics().schedules_failed >= 1)?;
                    py.c_call(|| done.set())
                })
            })
        })?;
        if added.is_err() {
            return Err(PyErr::exception(
                "RuntimeError",
                "the ring is not empty at start",
            ));
        }
        // The main thread runs the burst call at its next check site, then
        // the calls it added, in the same make_pending_calls.
        py.wait(&burst_done)?;
        for expected in [2_u64, 3] {
            let t = spawn_dying(py, &created)?;
            py.join(&t)?;
            let q = Arc::clone(&queue);
            wait_until(py, move || {
                let m = q.metrics();
                q.len() as u64 + m.states_destroyed >= expected
            })?;
        }
        // A drain still scheduled runs in _Py_FinishPendingCalls.
        Ok(())
    })?;
    Ok(harness.finish(outcome, |_| None))
}

/// Start a thread that touches its greenlet state and exits.
fn spawn_dying(py: &Py, created: &Arc<AtomicU64>) -> PyResult<ThreadHandle> {
    let c = Arc::clone(created);
    py.spawn("dies", move |py| {
        py.c_call(|| Harness::touch_greenlet(&c)).map(drop)
    })
}
