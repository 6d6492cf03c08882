//! Calls and the events they fire on the live runtime, each replaying a
//! probe's real result on CPython 3.11.7, 3.12.1 and 3.13.0
//! (`probes/RESULTS.md`): `trace_events.py` (which events a trace function
//! returning `None` or itself, and a profile function, receive) and
//! `ctypes_pending_call.py` (`Py_AddPendingCall` called as a builtin or
//! through ctypes, under a Python profile function).

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use greenlet::interp_shim::{
    HangCause, Hook, Interpreter, Outcome, Py, PyErr, PyResult, PyVersion, RingFull, Watchdog,
};

const WATCHDOG: Watchdog = Watchdog::Report(Duration::from_secs(20));

/// `outer` calls `inner` and `len` (the probe's raise-and-catch inside
/// `outer` fires an `exception` event, which the model does not send).
fn outer(py: &Py) -> PyResult<()> {
    py.call("outer", |py| {
        py.call("inner", |_| Ok(()))?;
        py.c_call(|| 3usize)?;
        Ok(())
    })
}

/// `trace_events.py`, identical on all three versions: a trace function
/// returning `None` runs for `call:outer, call:inner` only; one returning
/// itself also for `return:inner, return:outer` (and `exception:outer`,
/// not modelled); a profile function for `call` and `return` of both and
/// `c_call`/`c_return` of `len`: six.
#[test]
fn python_hooks_run_at_the_events_a_real_one_receives() {
    for version in PyVersion::ALL {
        for (hook, profile, runs) in [
            (Hook::Python, false, 2),
            (Hook::PythonLocal, false, 4),
            (Hook::Python, true, 6),
            (Hook::PythonLocal, true, 6),
        ] {
            let what = format!("{version} {hook:?} profile={profile}");
            let rt = Interpreter::new(version);
            let outcome = rt
                .run(WATCHDOG, move |py| {
                    if profile {
                        py.setprofile(hook)?;
                    } else {
                        py.settrace(hook)?;
                    }
                    let before = py.runtime().stats();
                    outer(py)?;
                    let after = py.runtime().stats();
                    Ok(after.trace_function_runs + after.profile_function_runs
                        - before.trace_function_runs
                        - before.profile_function_runs)
                })
                .unwrap();
            assert!(
                matches!(outcome, Outcome::Finished(Ok(n)) if n == runs),
                "{what}: {outcome:?}"
            );
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Add {
    Builtin,
    Ctypes,
}

fn room(e: RingFull) -> PyErr {
    PyErr::exception("RuntimeError", e.to_string())
}

/// `Py_AddPendingCall(call)` from the running thread, the probe's way.
fn add(py: &Py, how: Add, call: impl FnOnce(&Py) -> PyResult<()> + Send + 'static) -> PyResult<()> {
    match how {
        Add::Builtin => py.c_call(|| py.add_pending_call(call))?,
        Add::Ctypes => py.ctypes_call(|| py.add_pending_call(call))?,
    }
    .map_err(room)
}

/// `ctypes_pending_call.py builtin|ctypes` under `sys.setprofile(profiler)`,
/// identical on all three versions: the builtin add's `c_return` event runs
/// the profile function, whose entry runs `cb` with tracing suspended
/// (`cb_profiled=False`); the ctypes add fires no event and `cb` runs at
/// the check after the call, in `add`, profiled (`cb_profiled=True`).
#[test]
fn a_ctypes_add_runs_the_call_profiled_a_builtin_add_does_not() {
    for version in PyVersion::ALL {
        for (how, profiled) in [(Add::Builtin, false), (Add::Ctypes, true)] {
            let rt = Interpreter::new(version);
            let seen = Arc::new(AtomicBool::new(!profiled));
            let record = Arc::clone(&seen);
            let outcome = rt
                .run(WATCHDOG, move |py| {
                    py.setprofile(Hook::Python)?;
                    py.call("adder", |py| {
                        py.call("add", |py| {
                            add(py, how, move |py| {
                                record.store(py.runtime().summary().main_traced, Ordering::SeqCst);
                                py.call("cb", |py| py.call("probe_fn", |_| Ok(())))
                            })
                        })?;
                        py.call("after", |_| Ok(()))
                    })
                })
                .unwrap();
            assert!(
                matches!(outcome, Outcome::Finished(Ok(()))),
                "{version} {how:?}"
            );
            assert_eq!(seen.load(Ordering::SeqCst), profiled, "{version} {how:?}");
            assert_eq!(rt.stats().pending_calls_run, 1);
        }
    }
}

/// `ctypes_pending_call.py nested-builtin|nested-ctypes`: the pending call
/// adds a second one the same way, then calls a function. Real: the
/// builtin form finishes everywhere; the ctypes form livelocks 3.11.7 in
/// `probe_fn <- cb <- add <- adder`; 3.12.1 and 3.13.0 finish.
#[test]
fn a_nested_ctypes_add_livelocks_311_under_a_python_profiler() {
    let _serial = common::serial();
    for version in PyVersion::ALL {
        for how in [Add::Builtin, Add::Ctypes] {
            let what = format!("{version} {how:?}");
            let rt = Interpreter::new(version);
            let outcome = rt
                .run(WATCHDOG, move |py| {
                    py.setprofile(Hook::Python)?;
                    py.call("adder", |py| {
                        py.call("add", |py| {
                            add(py, how, move |py| {
                                py.call("cb", |py| {
                                    add(py, how, |_| Ok(()))?;
                                    py.call("probe_fn", |_| Ok(()))
                                })
                            })
                        })
                    })
                })
                .unwrap();
            let hangs = version == PyVersion::V3_11 && how == Add::Ctypes;
            match outcome {
                Outcome::Hung(report) => {
                    assert!(hangs, "{what}: {report}");
                    let frames = &report.thread(0).unwrap().frames;
                    assert_eq!(frames[..4], ["probe_fn", "cb", "add", "adder"], "{report}");
                    assert!(
                        matches!(report.cause, HangCause::Livelock { .. }),
                        "{report}"
                    );
                }
                Outcome::Finished(result) => {
                    assert!(!hangs, "{what} should hang");
                    assert_eq!(result, Ok(()), "{what}");
                    assert_eq!(rt.stats().pending_calls_run, 2, "{what}");
                }
            }
        }
    }
}
