//! The live runtime's own behaviour: the 3.11 spin without greenlet (a
//! pending call that adds a pending call), signal handlers, the GIL drop
//! during a spin, `Py_MakePendingCalls`, the exiting watchdog.

use crate::common;

use std::process::Command;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use greenlet::cleanup::Policy;
use greenlet::interp_shim::scenarios::{seed, SeedConfig, TraceMode};
use greenlet::interp_shim::{
    ExitOrder, HangCause, Hook, Interpreter, InterpreterStats, Outcome, Py, PyErr, PyEvent,
    PyResult, PyVersion, RunError, Watchdog, EARLY_VERDICT_REDISPATCHES,
};
use parking_lot::Mutex;

const HANG: Watchdog = Watchdog::Report(Duration::from_secs(2));
const GREEN: Watchdog = Watchdog::Report(Duration::from_secs(30));

/// The main thread, traced, runs a pending call that adds another pending
/// call and then enters a function.
fn nested_pending_call(py: &Py) -> PyResult<()> {
    nested_pending_call_under(py, |py| py.settrace(Hook::C))
}

fn nested_pending_call_under(py: &Py, install: impl FnOnce(&Py) -> PyResult<()>) -> PyResult<()> {
    install(py)?;
    py.c_call(|| {
        py.add_pending_call(|py| {
            py.call("first_callback", |py| {
                py.c_call(|| py.add_pending_call(|py| py.call("second_callback", |_| Ok(()))))?
                    .map_err(|e| PyErr::exception("RuntimeError", e.to_string()))?;
                py.call("inner", |_| Ok(()))
            })
        })
    })?
    .map_err(|e| PyErr::exception("RuntimeError", e.to_string()))?;
    py.call("after", |_| Ok(()))
}

#[test]
fn a_pending_call_adding_a_pending_call_livelocks_only_on_311() {
    let _serial = common::serial();
    let rt = Interpreter::new(PyVersion::V3_11);
    let Outcome::Hung(report) = rt.run(HANG, nested_pending_call).unwrap() else {
        panic!("3.11 traced must livelock");
    };
    let main = report.thread(0).unwrap();
    assert_eq!(main.frames[..2], ["inner", "first_callback"], "{report}");
    assert!(report.livelock_predicate, "{report}");
    // Ended by the early verdict: the predicate held over its bound.
    assert_eq!(
        report.cause,
        HangCause::Livelock {
            redispatches: EARLY_VERDICT_REDISPATCHES
        },
        "{report}"
    );
    assert!(main.redispatches >= EARLY_VERDICT_REDISPATCHES, "{report}");
    for version in [PyVersion::V3_12, PyVersion::V3_13] {
        let rt = Interpreter::new(version);
        let outcome = rt.run(GREEN, nested_pending_call).unwrap();
        assert!(
            matches!(outcome, Outcome::Finished(Ok(()))),
            "{version}: {outcome:?}"
        );
        assert_eq!(rt.stats().pending_calls_run, 2, "{version}");
        assert_eq!(rt.stats().redispatches, 0, "{version}");
    }
}

/// The same probe run on CPython 3.11.7 (`_testcapi._pending_threadfunc`
/// as `Py_AddPendingCall`): livelocks under `sys.settrace(f)` with a Python
/// `f` and under `cProfile`; completes under `sys.setprofile(f)` with a
/// Python `f`, whose `c_return` event after the adding call runs the first
/// call with tracing suspended.
#[test]
fn which_hooks_livelock_on_311_matches_cpython() {
    let _serial = common::serial();
    type Install = fn(&Py) -> PyResult<()>;
    let cases: [(Install, bool); 4] = [
        (|py| py.settrace(Hook::Python), true),
        (|py| py.settrace(Hook::C), true),
        (|py| py.setprofile(Hook::C), true),
        (|py| py.setprofile(Hook::Python), false),
    ];
    for (i, (install, hangs)) in cases.into_iter().enumerate() {
        let rt = Interpreter::new(PyVersion::V3_11);
        let outcome = rt
            .run(if hangs { HANG } else { GREEN }, move |py| {
                nested_pending_call_under(py, install)
            })
            .unwrap();
        match outcome {
            Outcome::Hung(report) => {
                assert!(hangs, "case {i}: {report}");
                assert_eq!(report.thread(0).unwrap().frames[0], "inner", "{report}");
            }
            Outcome::Finished(result) => {
                assert!(!hangs, "case {i} should hang");
                assert_eq!(result, Ok(()));
                assert_eq!(rt.stats().pending_calls_run, 2);
            }
        }
    }
}

/// Checked on CPython 3.11.7: the same spin with a `SIGUSR1` sent by
/// another thread dumps `on_signal` ← `<lambda>` ← `first` ← `<module>`.
#[test]
fn a_signal_handler_entered_from_the_spin_livelocks_too() {
    let _serial = common::serial();
    let rt = Interpreter::new(PyVersion::V3_11);
    rt.set_signal_handler("on_signal", |_: &Py| Ok(()));
    // The OS delivers the signal to the main thread once the spin has
    // started; the sender is a model thread, so the early verdict waits
    // for it to end.
    let observer = rt.clone();
    let outcome = rt
        .run(HANG, move |py| {
            py.spawn("kicker", move |py| {
                while observer.stats().redispatches == 0 {
                    py.sleep(Duration::from_millis(1))?;
                }
                observer.raise_signal();
                Ok(())
            })?;
            nested_pending_call(py)
        })
        .unwrap();
    let Outcome::Hung(report) = outcome else {
        panic!("3.11 traced must livelock");
    };
    assert!(
        matches!(report.cause, HangCause::Livelock { .. }),
        "{report}"
    );
    let main = report.thread(0).unwrap();
    assert_eq!(
        main.frames[..3],
        ["on_signal", "inner", "first_callback"],
        "{report}"
    );
    assert_eq!(rt.stats().signal_handlers_run, 1);
}

#[test]
fn other_threads_get_the_gil_while_the_main_thread_spins() {
    let _serial = common::serial();
    let rt = Interpreter::new(PyVersion::V3_11);
    let during_spin = Arc::new(AtomicU64::new(0));
    let (observer, progress) = (rt.clone(), Arc::clone(&during_spin));
    let outcome = rt
        .run(HANG, move |py| {
            py.spawn("busy", move |py| loop {
                // Python code that needs the GIL: each round takes it back
                // from the spinning main thread through a drop request.
                py.call("step", |_| Ok(()))?;
                if observer.stats().redispatches > 0 {
                    progress.fetch_add(1, Ordering::SeqCst);
                }
                py.sleep(Duration::from_micros(100))?;
                py.loop_iter()?;
            })?;
            nested_pending_call(py)
        })
        .unwrap();
    let Outcome::Hung(report) = outcome else {
        panic!("3.11 traced must livelock");
    };
    assert!(during_spin.load(Ordering::SeqCst) > 0, "{report}");
    assert!(rt.stats().drop_requests > 0);
    assert_eq!(report.thread(0).unwrap().frames[0], "inner");
}

#[test]
fn signal_handlers_run_on_the_main_thread_and_a_failing_one_raises() {
    let _serial = common::serial();
    for version in PyVersion::ALL {
        let rt = Interpreter::new(version);
        let ran_on = Arc::new(Mutex::new(Vec::new()));
        let calls = Arc::new(AtomicUsize::new(0));
        let (log, n) = (Arc::clone(&ran_on), Arc::clone(&calls));
        rt.set_signal_handler("handler", move |py: &Py| {
            log.lock().push(py.thread_index());
            if n.fetch_add(1, Ordering::SeqCst) == 0 {
                Err(PyErr::exception("KeyboardInterrupt", ""))
            } else {
                Ok(())
            }
        });
        let counter = Arc::clone(&calls);
        let go = PyEvent::new(&rt);
        let outcome = rt
            .run(GREEN, move |py| {
                let ready = go.clone();
                let t = py.spawn("raiser", move |py| {
                    py.wait(&ready)?;
                    py.raise_signal()
                })?;
                go.set();
                // The first handler call fails: its exception surfaces at a
                // check site of the main thread.
                let mut caught = None;
                while caught.is_none() {
                    match py
                        .loop_iter()
                        .and_then(|()| py.sleep(Duration::from_millis(1)))
                    {
                        Ok(()) => {}
                        Err(err) => caught = Some(err),
                    }
                }
                py.join(&t)?;
                // A second signal runs the handler again, successfully.
                py.raise_signal()?;
                while counter.load(Ordering::SeqCst) < 2 {
                    py.loop_iter()?;
                }
                Ok(caught)
            })
            .unwrap();
        let Outcome::Finished(Ok(Some(err))) = outcome else {
            panic!("{version}: {outcome:?}");
        };
        assert_eq!(err, PyErr::exception("KeyboardInterrupt", ""), "{version}");
        assert_eq!(*ran_on.lock(), [0, 0], "{version}: main thread only");
        assert_eq!(rt.stats().signal_handlers_run, 2, "{version}");
    }
}

#[test]
fn py_make_pending_calls_is_a_no_op_off_the_main_thread() {
    let _serial = common::serial();
    for version in PyVersion::ALL {
        let rt = Interpreter::new(version);
        let seen_by_worker = Arc::new(AtomicU64::new(u64::MAX));
        let seen = Arc::clone(&seen_by_worker);
        let outcome = rt
            .run(GREEN, move |py| {
                let t = py.spawn("worker", move |py| {
                    py.c_call(|| py.add_pending_call(|py| py.call("cb", |_| Ok(()))))?
                        .map_err(|e| PyErr::exception("RuntimeError", e.to_string()))?;
                    py.make_pending_calls()?;
                    let run = py.runtime().stats().pending_calls_run;
                    seen.store(run, Ordering::SeqCst);
                    Ok(())
                })?;
                py.join(&t)?;
                py.make_pending_calls()?;
                Ok(py.runtime().stats().pending_calls_run)
            })
            .unwrap();
        assert!(
            matches!(outcome, Outcome::Finished(Ok(1))),
            "{version}: {outcome:?}"
        );
        assert_eq!(seen_by_worker.load(Ordering::SeqCst), 0, "{version}");
    }
}

#[test]
fn a_foreign_thread_adding_a_call_does_not_set_the_main_breaker_before_3_13() {
    let _serial = common::serial();
    for version in PyVersion::ALL {
        let rt = Interpreter::new(version);
        let adder = rt.clone();
        let outcome = rt
            .run(GREEN, move |py| {
                // No check site while the foreign thread adds (#95820).
                std::thread::spawn(move || adder.add_pending_call(|_| Ok(())).is_ok())
                    .join()
                    .unwrap_or(false)
                    .then_some(())
                    .ok_or_else(|| PyErr::exception("RuntimeError", "ring full"))?;
                let summary = py.runtime().summary();
                py.sleep(Duration::from_millis(1))?; // take_gil recomputes as main
                Ok((summary, py.runtime().stats().pending_calls_run))
            })
            .unwrap();
        let Outcome::Finished(Ok((summary, run))) = outcome else {
            panic!("{version}: {outcome:?}");
        };
        assert!(summary.calls_to_do, "{version}");
        assert_eq!(
            summary.main_breaker,
            version == PyVersion::V3_13,
            "{version}"
        );
        assert_eq!(run, 1, "{version}");
    }
}

#[test]
fn a_runtime_runs_once() {
    let rt = Interpreter::new(PyVersion::V3_12);
    assert!(matches!(
        rt.run(GREEN, |_| Ok(())),
        Ok(Outcome::Finished(Ok(())))
    ));
    assert!(matches!(
        rt.run(GREEN, |_| Ok(())),
        Err(RunError::AlreadyRan)
    ));
}

/// Set when this test binary re-executes itself to run an exiting watchdog.
const CHILD: &str = "SHIM_EXIT_WATCHDOG_CHILD";

/// Not a test of its own: the body of the child process started by
/// `the_exiting_watchdog_prints_the_stack_and_exits_1` (it returns at once
/// unless `SHIM_EXIT_WATCHDOG_CHILD` is set).
#[test]
fn helper_exit_watchdog_child() {
    let Some(cell) = std::env::var_os(CHILD) else {
        return;
    };
    let policy = if cell == "hang" {
        Policy::Legacy
    } else {
        Policy::Shielded
    };
    let report = seed(SeedConfig {
        version: PyVersion::V3_11,
        policy,
        mode: TraceMode::Trace,
        watchdog: Watchdog::Exit(Duration::from_secs(1)),
    })
    .unwrap();
    println!("{}", report.green_line());
    std::process::exit(0);
}

fn run_child(cell: &str) -> std::process::Output {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &common::test_path(module_path!(), "helper_exit_watchdog_child"),
            "--nocapture",
        ])
        .env(CHILD, cell)
        .output()
        .unwrap()
}

#[test]
fn the_exiting_watchdog_prints_the_stack_and_exits_1() {
    let _serial = common::serial();
    let out = run_child("hang");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Timeout (0:00:01)!"), "{stderr}");
    assert!(
        stderr.contains("(most recent call first):\n  File \"<simulated>\", in <lambda>"),
        "{stderr}"
    );
    assert!(
        stderr.contains("busy=1 calls_to_do=1 eval_breaker(main)=1"),
        "{stderr}"
    );
    assert!(stderr.contains("cleanup queue: policy=legacy"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("GREEN"));

    let out = run_child("green");
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("GREEN True"));
}

/// The ring and the per-make bound, as probed on CPython 3.11.7, 3.12.1 and
/// 3.13.0 with `_testcapi._pending_threadfunc` (a running pending call adds
/// calls until the push fails): capacity 31/31/32; the same
/// `make_pending_calls` runs 31 of them (its bound of 32 counts the running
/// call); 3.13 re-signals for the one left behind, which runs at the next
/// check site with nothing added.
#[test]
fn ring_capacity_and_loop_bound_match_cpython() {
    let _serial = common::serial();
    for (version, expected) in [
        (PyVersion::V3_11, (31, 31, 31)),
        (PyVersion::V3_12, (31, 31, 31)),
        (PyVersion::V3_13, (32, 31, 32)),
    ] {
        let rt = Interpreter::new(version);
        let ran = Arc::new(AtomicUsize::new(0));
        let capacity = Arc::new(AtomicUsize::new(0));
        let (r, c) = (Arc::clone(&ran), Arc::clone(&capacity));
        let outcome = rt
            .run(GREEN, move |py| {
                let (r2, c2) = (Arc::clone(&r), Arc::clone(&c));
                let outer = move |py: &Py| loop {
                    let r3 = Arc::clone(&r2);
                    let pushed = py.add_pending_call(move |_| {
                        r3.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    });
                    if pushed.is_err() {
                        return Ok(());
                    }
                    c2.fetch_add(1, Ordering::SeqCst);
                };
                // The check site after this C call runs `outer`, then the
                // calls it queued, in one make_pending_calls.
                py.c_call(|| py.add_pending_call(outer))?
                    .map_err(|e| PyErr::exception("RuntimeError", e.to_string()))?;
                let by_same_make = r.load(Ordering::SeqCst);
                for _ in 0..100 {
                    py.loop_iter()?;
                }
                Ok((
                    c.load(Ordering::SeqCst),
                    by_same_make,
                    r.load(Ordering::SeqCst),
                ))
            })
            .unwrap();
        let Outcome::Finished(Ok(seen)) = outcome else {
            panic!("{version}: {outcome:?}");
        };
        assert_eq!(seen, expected, "{version}");
    }
}

/// The seed's shape without greenlet, call for call the program that was run
/// on CPython 3.11.7, 3.12.1 and 3.13.0 (`_testcapi._pending_threadfunc` as
/// `Py_AddPendingCall`): thread A adds `first` (no GIL needed, not the main
/// thread); `first` releases B and polls `added_b.is_set()` (sleeping 1 ms)
/// until B has added `second`, then calls a lambda. Real results, 3 runs
/// each: 3.11.7 hangs in `is_set` under `sys.settrace(f)` and under
/// cProfile, completes under `sys.setprofile(f)` with a Python `f` and with
/// neither; 3.12.1 and 3.13.0 complete in every mode.
#[test]
fn the_seed_shape_without_greenlet_matches_cpython() {
    let _serial = common::serial();
    type Install = fn(&Py) -> PyResult<()>;
    let modes: [(&str, Install); 4] = [
        ("settrace(py)", |py| py.settrace(Hook::Python)),
        ("cProfile", |py| py.setprofile(Hook::C)),
        ("setprofile(py)", |py| py.setprofile(Hook::Python)),
        ("none", |_| Ok(())),
    ];
    for version in PyVersion::ALL {
        for (mode, install) in modes {
            let hangs = version == PyVersion::V3_11 && matches!(mode, "settrace(py)" | "cProfile");
            let rt = Interpreter::new(version);
            let release_b = PyEvent::new(&rt);
            let added_b = PyEvent::new(&rt);
            let ran = Arc::new(Mutex::new(Vec::new()));
            let done = Arc::clone(&ran);
            let outcome = rt
                .run(if hangs { HANG } else { GREEN }, move |py| {
                    install(py)?;
                    let (rb, ab, log) = (release_b.clone(), added_b.clone(), Arc::clone(&done));
                    let b = py.spawn("_b", move |py| {
                        py.call("wait", |py| py.wait(&rb))?;
                        let log2 = Arc::clone(&log);
                        py.c_call(|| {
                            py.add_pending_call(move |py| {
                                py.call("second", |_| {
                                    log2.lock().push("second");
                                    Ok(())
                                })
                            })
                        })?
                        .map_err(|e| PyErr::exception("RuntimeError", e.to_string()))?;
                        py.call("set", |py| py.c_call(|| ab.set()))
                    })?;
                    let (rb, ab, log) = (release_b.clone(), added_b.clone(), Arc::clone(&done));
                    let first = move |py: &Py| {
                        py.call("first", |py| {
                            py.call("set", |py| py.c_call(|| rb.set()))?;
                            while !py.call("is_set", |py| py.c_call(|| ab.is_set()))? {
                                py.sleep(Duration::from_millis(1))?;
                                py.loop_iter()?;
                            }
                            py.call("<lambda>", |_| Ok(()))?;
                            log.lock().push("first");
                            Ok(())
                        })
                    };
                    let a = py.spawn("_a", move |py| {
                        py.c_call(|| py.add_pending_call(first))?
                            .map_err(|e| PyErr::exception("RuntimeError", e.to_string()))
                    })?;
                    py.join(&a)?;
                    for _ in 0..2000 {
                        py.sleep(Duration::from_millis(1))?;
                        if done.lock().len() == 2 {
                            break;
                        }
                        py.loop_iter()?;
                    }
                    py.join(&b)
                })
                .unwrap();
            let cell = format!("{version} {mode}");
            match outcome {
                Outcome::Hung(report) => {
                    assert!(hangs, "{cell}: {report}");
                    let frames = &report.thread(0).unwrap().frames;
                    assert_eq!(frames[..2], ["is_set", "first"], "{cell}: {report}");
                }
                Outcome::Finished(result) => {
                    assert!(!hangs, "{cell} should hang");
                    assert_eq!(result, Ok(()), "{cell}");
                    let mut seen = ran.lock().clone();
                    seen.sort_unstable();
                    assert_eq!(seen, ["first", "second"], "{cell}");
                }
            }
        }
    }
}

/// `_Py_FinishPendingCalls` on 3.13 repeats `make_pending_calls` until both
/// queues are empty; 3.11/3.12 make one. Checked on 3.11.7, 3.12.1 and 3.13.0
/// (`probes/finish_pending_calls.py`): a call queued where no bytecode runs
/// before finalization (`threading._shutdown` replaced by a C-only call)
/// adds calls until the ring is full; every one of them runs with no Python
/// frame below it, i.e. from `_Py_FinishPendingCalls` itself: 31 on
/// 3.11/3.12, all 32 on 3.13 although one make runs at most 32 calls and the
/// first of them was the adder.
#[test]
fn finish_pending_calls_runs_every_queued_call() {
    let _serial = common::serial();
    for (version, capacity) in [
        (PyVersion::V3_11, 31),
        (PyVersion::V3_12, 31),
        (PyVersion::V3_13, 32),
    ] {
        let rt = Interpreter::new(version);
        let outcome = rt
            .run(GREEN, |py| {
                // Py_AddPendingCall is no check site: the call is still
                // queued when <module> returns.
                py.add_pending_call(|py| {
                    while py.add_pending_call(|_| Ok(())).is_ok() {}
                    Ok(())
                })
                .map_err(|e| PyErr::exception("RuntimeError", e.to_string()))
            })
            .unwrap();
        assert!(matches!(outcome, Outcome::Finished(Ok(()))), "{version}");
        let stats = rt.stats();
        assert_eq!(stats.pending_calls_added, 1 + capacity, "{version}");
        assert_eq!(stats.pending_calls_run, 1 + capacity, "{version}");
        assert_eq!(rt.summary().ring, 0, "{version}");
    }
}

/// On Linux, 3.11/3.12's `_PyEval_SignalReceived` calls
/// `SIGNAL_PENDING_SIGNALS(interp, force=0)` (force is 1 only on Windows):
/// `COMPUTE_EVAL_BREAKER` as the thread the C handler runs on, which stores 0
/// when that is not the main thread. The main thread sees the signal at its
/// next `take_gil`. 3.13 sets the main thread's bit. Checked on 3.11.7,
/// 3.12.1 and 3.13.0 (`probes/signal_on_other_thread.py`): with the C handler
/// on a native thread and the main thread spinning with the GIL, 3.11/3.12
/// run the Python handler only after a `time.sleep`, 3.13 at once.
#[test]
fn a_signal_raised_on_another_thread_sets_the_main_breaker_only_on_3_13() {
    let _serial = common::serial();
    for version in PyVersion::ALL {
        let rt = Interpreter::new(version);
        rt.set_signal_handler("on_signal", |_: &Py| Ok(()));
        let seen = Arc::new(Mutex::new(None));
        let record = Arc::clone(&seen);
        // The raiser raises only once the main thread is on its way into
        // join, so that the main thread does not compete for the GIL that
        // raise_signal releases (it would handle the signal first).
        let go = PyEvent::new(&rt);
        let went = go.clone();
        let outcome = rt
            .run(GREEN, move |py| {
                let t = py.spawn("raiser", move |py| {
                    py.wait(&went)?;
                    // signal.raise_signal: raise() runs the C handler on
                    // this thread (with the GIL released around it).
                    py.raise_signal()?;
                    *record.lock() = Some(py.runtime().summary().main_breaker);
                    Ok(())
                })?;
                py.c_call(|| go.set())?;
                py.join(&t)?; // take_gil recomputes as main; the check site after join
                Ok(py.runtime().stats().signal_handlers_run)
            })
            .unwrap();
        assert!(
            matches!(outcome, Outcome::Finished(Ok(1))),
            "{version}: {outcome:?}"
        );
        assert_eq!(
            *seen.lock(),
            Some(version == PyVersion::V3_13),
            "{version}: the main thread's breaker after the raise"
        );
    }
}

/// From a running pending call: another thread queues a second call (which
/// waits behind the running one) and is joined.
fn queue_a_call_behind(py: &Py) -> PyResult<()> {
    let adder = py.spawn("adder", |py| {
        py.add_pending_call(|_| Ok(()))
            .map_err(|e| PyErr::exception("RuntimeError", e.to_string()))
    })?;
    py.join(&adder)
}

/// Run `body` as a pending call of `rt`'s main thread, to the end; the
/// runtime's counters afterwards.
fn run_in_a_pending_call(
    rt: &Interpreter,
    body: impl FnOnce(&Py) -> PyResult<()> + Send + 'static,
) -> InterpreterStats {
    let outcome = rt
        .run(GREEN, move |py| {
            py.add_pending_call(body)
                .map_err(|e| PyErr::exception("RuntimeError", e.to_string()))?;
            py.loop_iter()
        })
        .unwrap();
    assert!(matches!(outcome, Outcome::Finished(Ok(()))), "{outcome:?}");
    rt.stats()
}

/// 3.13's `take_gil` re-sets the main thread's `CALLS_TO_DO` bit while the
/// main-thread queue holds calls (`update_eval_breaker_for_thread`): a
/// running call that sleeps while another waits behind it makes one
/// recursive `make_pending_calls` per sleep. Checked on 3.13.0 under gdb
/// (`probes/recursive_trips_after_take_gil.py`): 54-55 entries into
/// `make_pending_calls` for 50 sleeps, 3 when no call waits.
#[test]
fn on_3_13_each_gil_take_trips_again_while_a_call_waits() {
    let _serial = common::serial();
    let rt = Interpreter::new(PyVersion::V3_13);
    let stats = run_in_a_pending_call(&rt, |py| {
        queue_a_call_behind(py)?;
        for _ in 0..50 {
            py.sleep(Duration::from_micros(100))?;
        }
        Ok(())
    });
    assert_eq!(stats.pending_calls_run, 2);
    assert!(stats.makes_recursive >= 50, "{stats:?}");
}

/// `signal.raise_signal` calls C `raise()` between `Py_BEGIN_ALLOW_THREADS`
/// and `Py_END_ALLOW_THREADS` (`signal_raise_signal_impl`): the raiser drops
/// the GIL and takes it back. On 3.13 that `take_gil` ends with
/// `update_eval_breaker_for_thread`, so a main thread raising while a call
/// waits behind the one it runs trips into one more recursive
/// `make_pending_calls` at the check site after the call.
#[test]
fn raise_signal_drops_and_takes_the_gil_around_raise() {
    let _serial = common::serial();
    let rt = Interpreter::new(PyVersion::V3_13);
    rt.set_signal_handler("on_signal", |_: &Py| Ok(()));
    let trips = Arc::new(Mutex::new(None));
    let record = Arc::clone(&trips);
    let stats = run_in_a_pending_call(&rt, move |py| {
        queue_a_call_behind(py)?;
        let before = py.runtime().stats().makes_recursive;
        py.raise_signal()?;
        let after = py.runtime().stats().makes_recursive;
        *record.lock() = Some(after - before);
        Ok(())
    });
    assert_eq!(stats.pending_calls_run, 2);
    assert_eq!(stats.signal_handlers_run, 1);
    assert_eq!(*trips.lock(), Some(1), "recursive makes after the raise");
}

/// The runtime's schedule rule: a GIL take waits while another thread runs
/// its thread-local destructors (where greenlet queues a dying thread's
/// state without the GIL), so live runs follow an idle machine's order on a
/// loaded one too. A destructor that takes 200 ms is over by the time
/// `Thread.join` has the GIL back, and by the time a main thread polling
/// with `time.sleep(0.001)` sees the thread's state gone.
#[test]
fn a_gil_take_waits_for_a_dying_threads_thread_local_destructors() {
    struct Slow(Arc<AtomicUsize>);
    impl Drop for Slow {
        fn drop(&mut self) {
            std::thread::sleep(Duration::from_millis(200));
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    thread_local! {
        static SLOW: std::cell::RefCell<Option<Slow>> = const { std::cell::RefCell::new(None) };
    }
    let _serial = common::serial();
    let rt = Interpreter::new(PyVersion::V3_11);
    let (go_first, go_second) = (PyEvent::new(&rt), PyEvent::new(&rt));
    let ended = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&ended);
    let outcome = rt
        .run(GREEN, move |py| {
            let spawn_dying = |py: &Py, go: &PyEvent| {
                let (ended, go) = (Arc::clone(&seen), go.clone());
                py.spawn("dying", move |py| {
                    py.wait(&go)?;
                    py.c_call(|| SLOW.with(|s| *s.borrow_mut() = Some(Slow(ended))))
                })
            };
            let joined = spawn_dying(py, &go_first)?;
            py.c_call(|| go_first.set())?;
            py.join(&joined)?;
            let after_join = seen.load(Ordering::SeqCst);
            let polled = spawn_dying(py, &go_second)?;
            py.c_call(|| go_second.set())?;
            while py.is_alive(&polled)? {
                py.sleep(Duration::from_millis(1))?;
                py.loop_iter()?;
            }
            Ok((after_join, seen.load(Ordering::SeqCst)))
        })
        .unwrap();
    let Outcome::Finished(Ok((after_join, after_poll))) = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(after_join, 1, "join took the GIL back mid-destructor");
    assert_eq!(after_poll, 2, "a sleep took the GIL back mid-destructor");
}

/// With [`ExitOrder::Racing`] a GIL take does not wait: the main thread's
/// `Thread.join` returns and runs Python code while the dying thread's
/// destructor is blocked on a gate that only that code opens (under the
/// settled order this would be the hang the module docs warn of).
#[test]
fn racing_exits_let_python_code_run_during_a_dying_threads_destructors() {
    struct Gated(Option<std::sync::mpsc::Receiver<()>>, Arc<AtomicUsize>);
    impl Drop for Gated {
        fn drop(&mut self) {
            if let Some(gate) = self.0.take() {
                let opened = gate.recv_timeout(Duration::from_secs(20)).is_ok();
                self.1.store(if opened { 1 } else { 2 }, Ordering::SeqCst);
            }
        }
    }
    thread_local! {
        static GATED: std::cell::RefCell<Option<Gated>> = const { std::cell::RefCell::new(None) };
    }
    let _serial = common::serial();
    let rt = Interpreter::new(PyVersion::V3_11);
    rt.set_exit_order(ExitOrder::Racing);
    let ended = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&ended);
    let (open, gate) = std::sync::mpsc::channel();
    let outcome = rt
        .run(GREEN, move |py| {
            let state = Gated(Some(gate), Arc::clone(&seen));
            let dying = py.spawn("dying", move |py| {
                py.c_call(|| GATED.with(|s| *s.borrow_mut() = Some(state)))
            })?;
            py.join(&dying)?;
            let during = py.call("during", |py| py.c_call(|| seen.load(Ordering::SeqCst)))?;
            open.send(()).expect("the destructor waits");
            Ok(during)
        })
        .unwrap();
    assert!(matches!(outcome, Outcome::Finished(Ok(0))), "{outcome:?}");
    assert_eq!(ended.load(Ordering::SeqCst), 1, "the gate was opened");
}

/// A thread whose body raises reports it as `threading.excepthook` would,
/// through the crate's diagnostics (the capture here; stderr without a
/// logger), and the main thread goes on.
#[test]
fn an_exception_in_a_thread_is_reported_like_threading_excepthook() {
    let _serial = common::serial();
    common::take_diagnostics();
    let rt = Interpreter::new(PyVersion::V3_12);
    let outcome = rt
        .run(GREEN, |py| {
            let t = py.spawn("bad", |py| {
                py.call("work", |_| {
                    Err::<(), _>(PyErr::exception("ValueError", "x"))
                })
            })?;
            py.join(&t)
        })
        .unwrap();
    assert!(matches!(outcome, Outcome::Finished(Ok(()))), "{outcome:?}");
    let reports = common::take_diagnostics();
    assert_eq!(
        reports,
        ["ERROR greenlet::interp_shim::runtime::threads: Exception in thread Thread-1 (bad):\nValueError: x"],
        "{reports:?}"
    );
}
