//! The coverage.py-like churn of short-lived threads ([`churn`]).

use std::sync::Arc;
use std::time::Duration;

use crate::cleanup::Policy;

use super::super::runtime::RunError;
use super::super::version::PyVersion;
use super::super::watchdog::Watchdog;
use super::harness::{weak_dict_callback, Harness};
use super::options::{RunOptions, ScenarioReport, TraceMode};

/// The coverage.py-like churn.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{churn, ChurnConfig, TraceMode};
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let config = ChurnConfig {
///     version: PyVersion::V3_12,
///     policy: Policy::Legacy,
///     mode: TraceMode::CTrace,
///     threads: 4,
///     waves: 2,
///     watchdog: Watchdog::Report(Duration::from_secs(30)),
/// };
/// let report = churn(config).unwrap();
/// assert_eq!(report.states_created, 8); // one greenlet state per thread
/// assert_eq!(report.queue.states_destroyed, 8);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChurnConfig {
    /// The modelled CPython version.
    pub version: PyVersion,
    /// The cleanup queue's policy.
    pub policy: Policy,
    /// What the main thread installs.
    pub mode: TraceMode,
    /// Threads started per wave.
    pub threads: usize,
    /// Waves.
    pub waves: usize,
    /// The watchdog.
    pub watchdog: Watchdog,
}

/// Hundreds of short-lived threads in waves, each keying a weak dictionary
/// by its main greenlet (a finalizer that enters functions and releases the
/// GIL); the main thread, traced, keeps entering functions while the waves
/// die, then waits for the queue to empty.
///
/// # Errors
/// [`RunError`] if the runtime could not start.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{churn, ChurnConfig, TraceMode};
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let report = churn(ChurnConfig {
///     version: PyVersion::V3_11,
///     policy: Policy::Shielded,
///     mode: TraceMode::Trace,
///     threads: 8,
///     waves: 2,
///     watchdog: Watchdog::Report(Duration::from_secs(30)),
/// })
/// .unwrap();
/// assert!(!report.hung());
/// assert_eq!(report.states_never_destroyed, 0);
/// ```
pub fn churn(config: ChurnConfig) -> Result<ScenarioReport, RunError> {
    churn_with(config, RunOptions::default())
}

/// [`churn`] with `options` (exit order, early verdict).
///
/// # Errors
/// [`RunError`] if the runtime could not start.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{churn_with, ChurnConfig, RunOptions, TraceMode};
/// use greenlet::interp_shim::{ExitOrder, PyVersion, Watchdog};
///
/// let config = ChurnConfig {
///     version: PyVersion::V3_13,
///     policy: Policy::Robust,
///     mode: TraceMode::Trace,
///     threads: 4,
///     waves: 1,
///     watchdog: Watchdog::Report(Duration::from_secs(30)),
/// };
/// let report = churn_with(config, RunOptions::default().exit_order(ExitOrder::Racing)).unwrap();
/// assert_eq!(report.states_never_destroyed, 0);
/// ```
pub fn churn_with(config: ChurnConfig, options: RunOptions) -> Result<ScenarioReport, RunError> {
    let harness = Harness::new(config.version, config.policy, options);
    let queue = Arc::clone(&harness.queue);
    let created = Arc::clone(&harness.created);
    let outcome = harness.runtime.run(config.watchdog, move |py| {
        config.mode.install(py)?;
        for _ in 0..config.waves {
            let mut wave = Vec::with_capacity(config.threads);
            for _ in 0..config.threads {
                let c = Arc::clone(&created);
                wave.push(py.spawn("worker", move |py| {
                    // coverage's CTracer: data[getcurrent()] in every thread
                    let current = py.c_call(|| Harness::touch_greenlet(&c))?;
                    current.on_finalize(weak_dict_callback);
                    py.call("traced_work", |py| py.call("helper", |_| Ok(())))
                })?);
            }
            // The traced main thread keeps running Python while they die.
            for thread in &wave {
                while py.is_alive(thread)? {
                    py.call("main_work", |py| py.call("helper", |_| Ok(())))?;
                    py.loop_iter()?;
                }
                py.join(thread)?;
            }
        }
        // Let the drains finish: poll like the seed's main loop (a thread's
        // state is queued by its TLS destructors, after Thread.join).
        let total = (config.waves * config.threads) as u64;
        for _ in 0..10_000 {
            let idle = py.c_call(|| queue.metrics().states_destroyed >= total)?;
            if idle {
                break;
            }
            py.sleep(Duration::from_millis(1))?;
            py.loop_iter()?;
        }
        Ok(())
    })?;
    Ok(harness.finish(outcome, |_| None))
}
