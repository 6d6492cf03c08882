//! The seed report's cells on the CPython model: 3.11 + a trace function
//! (Python or C) or a C profiler + legacy livelocks at `<lambda>` (detected by the watchdog), the fixes give
//! `GREEN True`, 3.12 and 3.13 never hang although legacy schedules a second
//! pending call, and 3.11 without tracing never hangs.

use crate::common;

use std::time::Duration;

use greenlet::cleanup::Policy;
use greenlet::interp_shim::explore::{explore, ScenarioName, TableCell, DEFAULT_BOUND};
use greenlet::interp_shim::scenarios::{seed, ScenarioReport, SeedConfig, TraceMode};
use greenlet::interp_shim::{HangCause, PyVersion, Watchdog, EARLY_VERDICT_REDISPATCHES};

fn run(version: PyVersion, policy: Policy, mode: TraceMode, timeout: Duration) -> ScenarioReport {
    let _serial = common::serial();
    seed(SeedConfig {
        version,
        policy,
        mode,
        watchdog: Watchdog::Report(timeout),
    })
    .expect("the runtime starts")
}

/// A livelock is reported after this long; a green run never gets near it.
const HANG: Duration = Duration::from_secs(2);
const GREEN: Duration = Duration::from_secs(30);

/// The explorer's livelock verdict for the seed in the explorer's mode
/// standing for `mode` (`None` for a mode it does not model).
fn explorer_livelock(version: PyVersion, policy: Policy, mode: TraceMode) -> Option<bool> {
    let cell = TableCell {
        scenario: ScenarioName::Seed,
        version,
        policy,
        mode: mode.explored_as()?,
    };
    Some(
        explore(cell, DEFAULT_BOUND)
            .expect("the seed is small")
            .livelock_reachable(),
    )
}

fn assert_livelocked_at_lambda(report: &ScenarioReport) {
    let hang = report.hang.as_ref().expect("the watchdog fired");
    let main = hang.thread(0).expect("the main thread is alive");
    assert_eq!(main.frames.first(), Some(&"<lambda>"), "{hang}");
    assert!(main.frames.contains(&"_in_cleanup"), "{hang}");
    assert_eq!(main.frames.last(), Some(&"<module>"), "{hang}");
    assert!(hang.livelock_predicate, "{hang}");
    assert!(hang.summary.busy && hang.summary.calls_to_do && hang.summary.main_breaker);
    // The spin really spins: the same RESUME dispatched over and over,
    // until the early verdict ends the run.
    assert!(main.redispatches >= EARLY_VERDICT_REDISPATCHES, "{hang}");
    assert!(matches!(hang.cause, HangCause::Livelock { .. }), "{hang}");
    assert!(hang.redispatches >= main.redispatches);
    assert!(hang.to_string().contains("in <lambda>"));
    // The second pending call was scheduled while the first ran.
    assert_eq!(report.queue.max_outstanding, 2, "{hang}");
    assert_eq!(report.queue.schedules_requested, 2);
    assert_eq!(report.b_queued, None, "the main body never finished");
}

#[test]
fn v311_trace_legacy_livelocks_at_lambda() {
    let report = run(PyVersion::V3_11, Policy::Legacy, TraceMode::Trace, HANG);
    assert_livelocked_at_lambda(&report);
    let explored = explorer_livelock(PyVersion::V3_11, Policy::Legacy, TraceMode::Trace);
    assert_eq!(explored, Some(true), "the explorer's trace agrees");
}

#[test]
fn v311_c_tracer_and_c_profiler_livelock_like_trace() {
    for mode in [TraceMode::CTrace, TraceMode::Profile] {
        let report = run(PyVersion::V3_11, Policy::Legacy, mode, HANG);
        assert_livelocked_at_lambda(&report);
        let explored = explorer_livelock(PyVersion::V3_11, Policy::Legacy, mode);
        assert_eq!(explored, Some(true), "{mode}: the explorer agrees");
    }
}

/// A Python profile function gets a `c_return` event right after
/// `time.sleep` returns, before the check site after the call: the first
/// pending call runs inside it, with tracing suspended, so nothing it runs is
/// traced. Real CPython 3.11.7 agrees (a greenlet-free probe of the seed's
/// shape: GREEN under `sys.setprofile(lambda *a: None)`, hangs under
/// `sys.settrace` and `cProfile`).
#[test]
fn v311_python_profile_function_hosts_the_drain_untraced() {
    let report = run(
        PyVersion::V3_11,
        Policy::Legacy,
        TraceMode::PyProfile,
        GREEN,
    );
    assert!(!report.hung(), "{:?}", report.hang);
    assert_eq!(report.green_line(), "GREEN True");
    // The second pending call is still scheduled.
    assert_eq!(report.queue.max_outstanding, 2);
    // The explorer does not model a Python profile function: its `profile`
    // (a C profiler) livelocks here, which is why the two are kept apart.
    assert_eq!(
        explorer_livelock(PyVersion::V3_11, Policy::Legacy, TraceMode::PyProfile),
        None
    );
    let c_profiler = explorer_livelock(PyVersion::V3_11, Policy::Legacy, TraceMode::Profile);
    assert_eq!(c_profiler, Some(true));
}

#[test]
fn v311_without_tracing_never_hangs_even_under_legacy() {
    let report = run(PyVersion::V3_11, Policy::Legacy, TraceMode::None, GREEN);
    assert!(!report.hung());
    assert_eq!(report.green_line(), "GREEN True");
    assert_eq!(report.queue.max_outstanding, 2);
    assert_eq!(report.queue.states_destroyed, 2);
    assert_eq!(report.runtime.redispatches, 0);
    let explored = explorer_livelock(PyVersion::V3_11, Policy::Legacy, TraceMode::None);
    assert_eq!(explored, Some(false));
}

#[test]
fn the_fixes_give_green_true_on_every_version_and_mode() {
    for version in PyVersion::ALL {
        for policy in [
            Policy::Draining,
            Policy::Scheduled,
            Policy::Shielded,
            Policy::Robust,
        ] {
            for mode in TraceMode::ALL {
                let report = run(version, policy, mode, GREEN);
                let cell = format!("{version} {policy} {mode}");
                assert!(!report.hung(), "{cell}: {:?}", report.hang);
                assert_eq!(report.green_line(), "GREEN True", "{cell}");
                assert_eq!(report.queue.schedules_requested, 1, "{cell}");
                assert_eq!(report.queue.max_outstanding, 1, "{cell}");
                assert_eq!(report.queue.states_destroyed, 2, "{cell}");
                assert_eq!(report.states_never_destroyed, 0, "{cell}");
            }
        }
    }
}

#[test]
fn v312_legacy_schedules_a_second_call_but_does_not_hang() {
    for mode in TraceMode::ALL {
        let report = run(PyVersion::V3_12, Policy::Legacy, mode, GREEN);
        assert!(!report.hung(), "{mode}: {:?}", report.hang);
        assert_eq!(report.green_line(), "GREEN True");
        assert_eq!(report.queue.schedules_requested, 2);
        assert_eq!(report.queue.max_outstanding, 2);
        assert_eq!(report.queue.drains_run, 2);
        assert_eq!(report.queue.states_destroyed, 2);
        // While busy with a call signalled, check sites keep tripping.
        assert!(report.runtime.makes_recursive > 0, "{mode}");
        assert_eq!(report.runtime.redispatches, 0);
    }
}

#[test]
fn v313_legacy_never_hangs() {
    for mode in TraceMode::ALL {
        let report = run(PyVersion::V3_13, Policy::Legacy, mode, GREEN);
        assert!(!report.hung(), "{mode}: {:?}", report.hang);
        assert_eq!(report.green_line(), "GREEN True");
        assert_eq!(report.queue.max_outstanding, 2);
        assert_eq!(report.queue.states_destroyed, 2);
    }
}
