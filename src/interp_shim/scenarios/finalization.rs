//! Interpreter finalization with greenlet state still around
//! ([`finalization`]) and finalizers that panic ([`panicking_finalizers`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::cleanup::Policy;

use super::super::runtime::{PyErr, PyEvent, RunError};
use super::super::version::PyVersion;
use super::super::watchdog::Watchdog;
use super::harness::{wait_until, weak_dict_callback, Harness};
use super::options::{RunOptions, ScenarioReport};

/// Finalization with greenlet state still around: a daemon thread owning a
/// state is still running when the interpreter finalizes; it exits at its
/// next GIL take and its state is leaked on purpose (counted), no finalizer
/// runs, nothing crashes.
///
/// # Errors
/// [`RunError`] if the runtime could not start.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::finalization;
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let r = finalization(PyVersion::V3_11, Policy::Shielded, Watchdog::Report(Duration::from_secs(20)))
///     .unwrap();
/// assert_eq!(r.error, None); // the daemon's finalizer never ran
/// assert_eq!(r.queue.states_leaked, 1);
/// ```
pub fn finalization(
    version: PyVersion,
    policy: Policy,
    watchdog: Watchdog,
) -> Result<ScenarioReport, RunError> {
    let harness = Harness::new(version, policy, RunOptions::default());
    let created = Arc::clone(&harness.created);
    let started = PyEvent::new(&harness.runtime);
    let ran = Arc::new(AtomicU64::new(0));
    let finalizer_runs = Arc::clone(&ran);
    let outcome = harness.runtime.run(watchdog, move |py| {
        let s = started.clone();
        py.spawn_daemon("daemon", move |py| {
            let current = py.c_call(|| Harness::touch_greenlet(&created))?;
            current.on_finalize(move || {
                finalizer_runs.fetch_add(1, Ordering::SeqCst);
            });
            py.c_call(|| s.set())?;
            loop {
                py.sleep(Duration::from_millis(1))?;
                py.loop_iter()?;
            }
        })?;
        py.wait(&started)
    })?;
    let mut report = harness.finish(outcome, |_| None);
    if ran.load(Ordering::SeqCst) != 0 {
        report.error = Some(PyErr::exception(
            "AssertionError",
            "a finalizer ran after finalization",
        ));
    }
    Ok(report)
}

/// Threads whose finalizers panic (every other one): each panic is reported
/// and the drain goes on to destroy every state.
///
/// # Errors
/// [`RunError`] if the runtime could not start.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::panicking_finalizers;
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let r = panicking_finalizers(PyVersion::V3_13, Policy::Shielded, 4, Watchdog::Report(Duration::from_secs(20)))
///     .unwrap();
/// assert_eq!((r.finalizer_panics, r.queue.states_destroyed), (2, 4));
/// ```
pub fn panicking_finalizers(
    version: PyVersion,
    policy: Policy,
    threads: usize,
    watchdog: Watchdog,
) -> Result<ScenarioReport, RunError> {
    let harness = Harness::new(version, policy, RunOptions::default());
    let created = Arc::clone(&harness.created);
    let queue = Arc::clone(&harness.queue);
    let outcome = harness.runtime.run(watchdog, move |py| {
        let mut all = Vec::new();
        for i in 0..threads {
            let c = Arc::clone(&created);
            all.push(py.spawn("worker", move |py| {
                let current = py.c_call(|| Harness::touch_greenlet(&c))?;
                if i % 2 == 0 {
                    current.on_finalize(move || panic!("finalizer {i} fails on purpose"));
                } else {
                    current.on_finalize(weak_dict_callback);
                }
                Ok(())
            })?);
        }
        for t in &all {
            py.join(t)?;
        }
        // Thread.join returns before a thread's TLS destructors queue its
        // state: wait until every state was destroyed.
        let q = Arc::clone(&queue);
        wait_until(py, move || q.metrics().states_destroyed >= threads as u64)
    })?;
    Ok(harness.finish(outcome, |_| None))
}
