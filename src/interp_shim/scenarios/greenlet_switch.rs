//! `probes/greenlet_switch_in_cleanup.py` on the model: a cleanup callback
//! that switches greenlets ([`greenlet_switch_in_cleanup`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::cleanup::CleanupQueue;
use crate::coroutine::Value;

use super::super::runtime::{Hook, Py, PyErr, PyEvent, PyGreenlet, RunError};
use super::harness::{python_finalizer, Harness};
use super::options::{RunOptions, ScenarioReport};
use super::seed::SeedConfig;

/// What `probes/greenlet_switch_in_cleanup.py`'s callback signals before
/// it switches into G (its `--kick`).
///
/// # Examples
/// ```
/// use greenlet::interp_shim::scenarios::Kick;
///
/// assert_ne!(Kick::None, Kick::B);
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kick {
    /// Nothing.
    None,
    /// Thread B (which owns a greenlet state) exits and the callback waits
    /// until its state is queued: the legacy queue schedules a second
    /// cleanup call, the others do not.
    B,
}

/// What [`greenlet_switch_in_cleanup`] observed.
#[non_exhaustive]
#[derive(Debug)]
pub struct GreenletSwitchReport {
    /// The run itself.
    pub report: ScenarioReport,
    /// Trace-function runs (Python `call` events) from the callback's
    /// entry to its end: the callback, `cb_probe`, G's `g_in_cleanup`,
    /// `cb_probe_after_g`, H's `h_body` and `h_in_cleanup` (and `set` with
    /// [`Kick::B`]) when traced; `None` if the callback did not end.
    pub traced_in_cleanup: Option<u64>,
    /// Trace-function runs after the cleanup: `main_after_cleanup`, G's
    /// `g_after_cleanup`, H's `h_after_cleanup` when all are traced; `None`
    /// if the run did not get there.
    pub traced_after: Option<u64>,
}

/// `probes/greenlet_switch_in_cleanup.py` on the model: the traced main
/// thread parks greenlet G inside `g_body` (under tracing); thread A's
/// finalizer, run by the drain on the main thread, calls `cb_probe`,
/// switches into G (which calls `g_in_cleanup` and switches back), calls
/// `cb_probe_after_g`, starts H (which calls `h_in_cleanup` and parks);
/// after the cleanup the main thread calls `main_after_cleanup` and
/// resumes G and H, which call `g_after_cleanup` / `h_after_cleanup`.
/// Each greenlet has its own frames; tracing stays with the thread.
///
/// # Errors
/// [`RunError`] if the runtime could not start.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::scenarios::{greenlet_switch_in_cleanup, Kick, SeedConfig, TraceMode};
/// use greenlet::interp_shim::{PyVersion, Watchdog};
///
/// let config = SeedConfig {
///     version: PyVersion::V3_11,
///     policy: Policy::Robust,
///     mode: TraceMode::Trace,
///     watchdog: Watchdog::Report(Duration::from_secs(20)),
/// };
/// let seen = greenlet_switch_in_cleanup(config, Kick::B).unwrap();
/// assert_eq!((seen.traced_in_cleanup, seen.traced_after), (Some(0), Some(3)));
/// ```
pub fn greenlet_switch_in_cleanup(
    config: SeedConfig,
    kick: Kick,
) -> Result<GreenletSwitchReport, RunError> {
    let harness = Harness::new(config.version, config.policy, RunOptions::default());
    let release_b = PyEvent::new(&harness.runtime);
    let queue = Arc::clone(&harness.queue);
    let created = Arc::clone(&harness.created);
    let in_cleanup: Arc<Mutex<Option<u64>>> = Arc::new(Mutex::new(None));
    let seen = Arc::clone(&in_cleanup);
    let outcome = harness.runtime.run(config.watchdog, move |py| {
        let main = py.current_greenlet();
        // def g_body(): g_before_park(); back_to = main.switch("parked"); ...
        let g = py.greenlet("g_body", move |py, _| {
            py.call("g_before_park", |_| Ok(()))?;
            let back = py.switch(&main, "parked")?;
            let back = back
                .downcast::<PyGreenlet>()
                .map_err(|e| PyErr::exception("TypeError", e.to_string()))?;
            py.call("g_in_cleanup", |_| Ok(()))?;
            py.switch(&back, "done in cleanup")?;
            py.call("g_after_cleanup", |_| Ok(()))?;
            Ok("finished".into())
        })?;
        config.mode.install(py)?;
        py.switch(&g, ())?;
        let (cr, rb) = (Arc::clone(&created), release_b.clone());
        let b = py.spawn("thread_b", move |py| {
            py.c_call(|| Harness::touch_greenlet(&cr))?;
            py.wait(&rb)
        })?;
        let h_slot: Arc<Mutex<Option<PyGreenlet>>> = Arc::new(Mutex::new(None));
        let (cr, rb, q, gg, hs, st) = (
            Arc::clone(&created),
            release_b.clone(),
            Arc::clone(&queue),
            g.clone(),
            Arc::clone(&h_slot),
            Arc::clone(&seen),
        );
        let a = py.spawn("thread_a", move |py| {
            let current = py.c_call(|| Harness::touch_greenlet(&cr))?;
            current.on_finalize(move || {
                let runs = || Py::current().map(|py| py.runtime().stats().trace_function_runs);
                let before = runs();
                let finished = cleanup_cb(kick, &rb, &q, &gg, &hs);
                if finished {
                    *st.lock() = before.zip(runs()).map(|(b, a)| a - b);
                }
            });
            Ok(())
        })?;
        py.join(&a)?;
        for _ in 0..5000 {
            if seen.lock().is_some() {
                break;
            }
            py.sleep(Duration::from_millis(1))?;
            py.loop_iter()?;
        }
        if kick != Kick::B {
            py.call("set", |py| py.c_call(|| release_b.set()))?;
        }
        py.join(&b)?;
        let before = py.runtime().stats().trace_function_runs;
        py.call("main_after_cleanup", |_| Ok(()))?;
        py.switch(&g, ())?;
        let h = h_slot.lock().clone();
        if let Some(h) = h {
            py.switch(&h, ())?;
        }
        let after = py.runtime().stats().trace_function_runs - before;
        py.settrace(Hook::Off)?;
        Ok(after)
    })?;
    let in_cleanup = *in_cleanup.lock();
    let mut traced_after = None;
    let report = harness.finish(outcome, |after| {
        traced_after = after;
        None
    });
    Ok(GreenletSwitchReport {
        report,
        traced_in_cleanup: in_cleanup,
        traced_after,
    })
}

/// The probe's `cleanup_cb`; whether it ran to its end.
fn cleanup_cb(
    kick: Kick,
    release_b: &PyEvent,
    queue: &Arc<CleanupQueue>,
    g: &PyGreenlet,
    h_slot: &Mutex<Option<PyGreenlet>>,
) -> bool {
    let mut ran = false;
    python_finalizer("cleanup_cb", |py| {
        py.call("cb_probe", |_| Ok(()))?;
        if kick == Kick::B {
            py.call("set", |py| py.c_call(|| release_b.set()))?;
            let deadline = Instant::now() + Duration::from_secs(10);
            while py.c_call(|| queue.len())? == 0 && py.c_call(Instant::now)? < deadline {
                py.sleep(Duration::from_millis(1))?;
                py.loop_iter()?;
            }
        }
        py.switch(g, Value::new(py.current_greenlet()))?;
        py.call("cb_probe_after_g", |_| Ok(()))?;
        // def h_body(back_to): h_in_cleanup(); back_to.switch("H parked"); h_after_cleanup()
        let h = py.greenlet("h_body", |py, back| {
            let back = back
                .downcast::<PyGreenlet>()
                .map_err(|e| PyErr::exception("TypeError", e.to_string()))?;
            py.call("h_in_cleanup", |_| Ok(()))?;
            py.switch(&back, "H parked")?;
            py.call("h_after_cleanup", |_| Ok(()))?;
            Ok("finished".into())
        })?;
        *h_slot.lock() = Some(h.clone());
        py.switch(&h, Value::new(py.current_greenlet()))?;
        ran = true;
        Ok(())
    });
    ran
}
