//! Greenlets inside the model (issue 13 point 2): each greenlet has its
//! own simulated frames, tracing stays with the thread. Replays
//! `probes/greenlet_switch_in_cleanup.py` (identical on 3.11.7, 3.12.1,
//! 3.13.0): on the robust build nothing in the cleanup is traced (not the
//! callback, not G parked under tracing and switched into, not H started
//! inside), and everything is traced again after it; on stock everything
//! is traced; stock 3.11 with a second cleanup call signalled (`--kick=b`)
//! livelocks inside G, the dump showing only G's frames.

use crate::common;

use std::time::Duration;

use greenlet::cleanup::Policy;
use greenlet::interp_shim::scenarios::{
    greenlet_switch_in_cleanup, GreenletSwitchReport, Kick, SeedConfig, TraceMode,
};
use greenlet::interp_shim::{HangCause, Hook, Interpreter, PyVersion, Watchdog};

fn run(version: PyVersion, policy: Policy, kick: Kick) -> GreenletSwitchReport {
    let _serial = common::serial();
    let config = SeedConfig {
        version,
        policy,
        mode: TraceMode::Trace,
        watchdog: Watchdog::Report(Duration::from_secs(30)),
    };
    greenlet_switch_in_cleanup(config, kick).expect("the runtime starts")
}

#[test]
fn robust_traces_nothing_in_the_cleanup_and_everything_after() {
    for version in PyVersion::ALL {
        for kick in [Kick::None, Kick::B] {
            let seen = run(version, Policy::Robust, kick);
            assert!(
                seen.report.hang.is_none(),
                "{version} {kick:?}: {:?}",
                seen.report.hang
            );
            assert!(seen.report.error.is_none(), "{version} {kick:?}");
            assert_eq!(seen.traced_in_cleanup, Some(0), "{version} {kick:?}");
            assert_eq!(seen.traced_after, Some(3), "{version} {kick:?}");
        }
    }
}

#[test]
fn stock_traces_everything() {
    for version in PyVersion::ALL {
        let seen = run(version, Policy::Legacy, Kick::None);
        assert!(
            seen.report.hang.is_none(),
            "{version}: {:?}",
            seen.report.hang
        );
        // cleanup_cb, cb_probe, g_in_cleanup, cb_probe_after_g, h_body, h_in_cleanup
        assert_eq!(seen.traced_in_cleanup, Some(6), "{version}");
        assert_eq!(seen.traced_after, Some(3), "{version}");
    }
}

#[test]
fn stock_3_11_with_a_second_cleanup_call_spins_inside_g() {
    let seen = run(PyVersion::V3_11, Policy::Legacy, Kick::B);
    let hang = seen.report.hang.as_ref().expect("stock 3.11.7 livelocks");
    assert!(matches!(hang.cause, HangCause::Livelock { .. }), "{hang}");
    let main = hang.thread(0).expect("the main thread is alive");
    // faulthandler prints the current greenlet's frames only: the drain's
    // are in the main greenlet's saved stack.
    assert_eq!(main.frames, ["g_in_cleanup", "g_body"], "{hang}");
    assert!(hang.livelock_predicate, "{hang}");
    assert_eq!(seen.traced_in_cleanup, None);
    for version in [PyVersion::V3_12, PyVersion::V3_13] {
        let seen = run(version, Policy::Legacy, Kick::B);
        assert!(
            seen.report.hang.is_none(),
            "{version}: {:?}",
            seen.report.hang
        );
        // and `set` (threading.Event.set) too
        assert_eq!(seen.traced_in_cleanup, Some(7), "{version}");
    }
}

#[test]
fn each_greenlet_has_its_own_frames() {
    for version in PyVersion::ALL {
        let rt = Interpreter::new(version);
        rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
            py.settrace(Hook::Python)?;
            let main = py.current_greenlet();
            let g = py.greenlet("g_body", move |py, _| {
                // a new greenlet starts on an empty stack
                assert_eq!(py.frames(), ["g_body"]);
                py.call("inner", |py| py.switch(&main, "parked"))?;
                assert_eq!(py.frames(), ["g_body"]);
                Ok("done".into())
            })?;
            let parked = py.call("outer", |py| {
                let v = py.switch(&g, ())?;
                // back in main: main's frames again, not G's
                assert_eq!(py.frames(), ["outer", "<module>"]);
                Ok(v)
            })?;
            assert_eq!(parked.downcast::<&str>().unwrap(), "parked");
            let runs = py.runtime().stats().trace_function_runs;
            let done = py.switch(&g, ())?; // G resumes inside `inner` and ends
            assert_eq!(done.downcast::<&str>().unwrap(), "done");
            assert!(g.is_dead());
            assert_eq!(py.frames(), ["<module>"]);
            // tracing is the thread's: G's entries were traced, nothing
            // entered on the resume
            assert_eq!(py.runtime().stats().trace_function_runs, runs);
            py.settrace(Hook::Off)
        })
        .expect("the runtime starts");
        // outer, g_body, inner
        assert_eq!(rt.stats().trace_function_runs, 3, "{version}");
    }
}
