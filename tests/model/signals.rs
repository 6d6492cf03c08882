//! Signal dispositions on the live runtime, each replaying a probe's real
//! result on CPython 3.11.7, 3.12.1 and 3.13.0 (`probes/RESULTS.md`):
//! `signal_handlers.py` (the default SIGINT handler, `SIG_IGN` and a Python
//! handler while the main thread runs Python code) and
//! `sigint_in_livelock.py` (SIGINT sent to the main thread once the 3.11
//! livelock has begun, in greenlet's drain and with a Python-level pending
//! call, with and without a source file for the unraisable report).

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use greenlet::interp_shim::{
    HangCause, HangReport, Hook, Interpreter, Outcome, Py, PyErr, PyResult, PyVersion,
    SignalDisposition, Watchdog,
};

/// Long enough never to be reached by a run that ends by itself or by the
/// early verdict; reached only by the one case the early verdict must not
/// judge (a default SIGINT handler is installed).
const WATCHDOG: Watchdog = Watchdog::Report(Duration::from_secs(3));

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Default,
    Ignore,
    Python,
}

const KINDS: [Kind; 3] = [Kind::Default, Kind::Ignore, Kind::Python];

fn install(rt: &Interpreter, kind: Kind, handled: &Arc<AtomicBool>) {
    let flag = Arc::clone(handled);
    rt.set_signal_disposition(match kind {
        Kind::Default => SignalDisposition::DefaultInt,
        Kind::Ignore => SignalDisposition::Ignore,
        Kind::Python => SignalDisposition::python("on_sigint", move |_| {
            flag.store(true, Ordering::SeqCst);
            Ok(())
        }),
    });
}

fn ring(e: greenlet::interp_shim::RingFull) -> PyErr {
    PyErr::exception("RuntimeError", e.to_string())
}

/// `signal_handlers.py`: SIGINT reaches the main thread while it runs
/// `busy()` calling `tick()`, untraced, under a Python trace function and
/// under a Python profile function. Real, every version and hook: the
/// default handler raises `KeyboardInterrupt` with no frame of its own (no
/// Python handler ran, `tick`'s body did not), `SIG_IGN` does nothing, a
/// Python handler runs once and the program completes.
#[test]
fn signal_handlers_replay_the_probe_on_every_version() {
    let _serial = common::serial();
    for version in PyVersion::ALL {
        for hook in ["none", "settrace", "setprofile"] {
            for kind in KINDS {
                let what = format!("{version} {hook} {kind:?}");
                let rt = Interpreter::new(version);
                let handled = Arc::new(AtomicBool::new(false));
                install(&rt, kind, &handled);
                let ticked = Arc::new(AtomicBool::new(false));
                let t = Arc::clone(&ticked);
                let outcome = rt
                    .run(WATCHDOG, move |py| {
                        match hook {
                            "settrace" => py.settrace(Hook::Python)?,
                            "setprofile" => py.setprofile(Hook::Python)?,
                            _ => {}
                        }
                        py.call("busy", |py| {
                            py.runtime().raise_signal(); // pthread_kill(main, SIGINT)
                            py.call("tick", |_| {
                                t.store(true, Ordering::SeqCst);
                                Ok(())
                            })?;
                            py.loop_iter()
                        })
                    })
                    .unwrap();
                let Outcome::Finished(result) = outcome else {
                    panic!("{what}: hung")
                };
                match kind {
                    Kind::Default => {
                        assert_eq!(result, Err(PyErr::keyboard_interrupt()), "{what}");
                        // Raised at the first check site: tick's entry (or
                        // the profile function's own frame before it).
                        assert!(!ticked.load(Ordering::SeqCst), "{what}");
                        assert_eq!(rt.stats().signal_handlers_run, 0, "{what}");
                    }
                    Kind::Ignore => {
                        assert_eq!(result, Ok(()), "{what}");
                        assert!(!rt.summary().main_breaker, "{what}");
                    }
                    Kind::Python => {
                        assert_eq!(result, Ok(()), "{what}");
                        assert!(handled.load(Ordering::SeqCst), "{what}");
                        assert_eq!(rt.stats().signal_handlers_run, 1, "{what}");
                    }
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// greenlet's drain: a C pending call that calls the weakref callback
    /// and reports its failure as unraisable.
    Seed,
    /// `_testcapi._pending_threadfunc(first)`: the pending call is the
    /// Python function itself.
    Testcapi,
}

/// What the main thread saw (the probe's `main_got`/`main_got_in`).
#[derive(Debug, PartialEq, Eq)]
enum MainGot {
    Nothing,
    /// The exception, at the check site after the add (inside the handling
    /// that ran the pending call) or after `join` (the `<module>` loop).
    Raised(&'static str),
}

/// `sigint_in_livelock.py` under `sys.settrace`: the pending call enters
/// `after_a_destroyed` (seed) or is `first` (testcapi), which adds a second
/// pending call while it runs, then enters `first_call_after_b_queued`.
/// A model thread sends SIGINT to the main thread once the main thread has
/// re-dispatched (3.11: it is spinning) or has got past the add and is
/// about to join it (3.12/3.13: the callback returned long before, as in
/// the probe, which signals 0.3 s after the callback's entry), then exits.
fn sigint_program(
    version: PyVersion,
    shape: Shape,
    kind: Kind,
    reads_source: bool,
) -> (Outcome<MainGot>, Interpreter, bool) {
    let rt = Interpreter::new(version);
    rt.set_unraisable_reads_source(reads_source);
    let handled = Arc::new(AtomicBool::new(false));
    install(&rt, kind, &handled);
    let at_join = Arc::new(AtomicBool::new(false));
    let (observer, seen, set) = (rt.clone(), Arc::clone(&at_join), Arc::clone(&at_join));
    let outcome = rt
        .run(WATCHDOG, move |py| {
            py.settrace(Hook::Python)?;
            let kicker = py.spawn("kicker", move |py| {
                while observer.stats().redispatches == 0 && !seen.load(Ordering::SeqCst) {
                    py.sleep(Duration::from_millis(1))?;
                }
                observer.raise_signal();
                Ok(())
            })?;
            let callback = move |py: &Py| -> PyResult<()> {
                py.c_call(|| py.add_pending_call(|_| Ok(())))?
                    .map_err(ring)?;
                py.call("first_call_after_b_queued", |_| Ok(()))
            };
            let added = py.c_call(|| match shape {
                Shape::Testcapi => py.add_pending_call(move |py| py.call("first", callback)),
                Shape::Seed => py.add_pending_call(move |py| {
                    // PendingCallback_DestroyQueue → handle_callback
                    if let Err(err) = py.call("after_a_destroyed", callback) {
                        py.write_unraisable("<function after_a_destroyed>", &err)?;
                    }
                    Ok(())
                }),
            });
            match added {
                Ok(pushed) => pushed.map_err(ring)?,
                Err(err) => return caught(err, "the add"),
            }
            // No check site between this store and the join's own.
            set.store(true, Ordering::SeqCst);
            match py.join(&kicker).and_then(|()| py.loop_iter()) {
                Ok(()) => Ok(MainGot::Nothing),
                Err(err) => caught(err, "<module>"),
            }
        })
        .unwrap();
    let ran = handled.load(Ordering::SeqCst);
    (outcome, rt, ran)
}

fn caught(err: PyErr, at: &'static str) -> PyResult<MainGot> {
    if err == PyErr::keyboard_interrupt() {
        Ok(MainGot::Raised(at))
    } else {
        Err(err)
    }
}

fn hang(outcome: &Outcome<MainGot>, what: &str) -> HangReport {
    match outcome {
        Outcome::Hung(report) => (**report).clone(),
        Outcome::Finished(result) => panic!("{what}: finished with {result:?}"),
    }
}

/// 3.11.7, the seed shape: the default handler's `KeyboardInterrupt`
/// escapes the callback, is reported as unraisable, and the report's
/// source-line read spins at `codecs.BufferedIncrementalDecoder.__init__`
/// directly over the frames where the pending call ran (the callback's are
/// gone); without a source file the drain finishes and the run completes,
/// the main thread never seeing the exception. `SIG_IGN` spins on at the
/// entry; a Python handler spins at its own entry.
#[test]
fn sigint_in_the_311_livelock_seed_shape() {
    let _serial = common::serial();
    let v = PyVersion::V3_11;
    let (outcome, _, _) = sigint_program(v, Shape::Seed, Kind::Default, true);
    let report = hang(&outcome, "seed default");
    assert_eq!(
        report.thread(0).unwrap().frames,
        ["__init__", "<module>"],
        "{report}"
    );
    assert!(report.livelock_predicate, "{report}");
    // A default SIGINT handler could still end it: only the timeout judges.
    assert_eq!(report.cause, HangCause::Timeout, "{report}");

    let (outcome, rt, _) = sigint_program(v, Shape::Seed, Kind::Default, false);
    let Outcome::Finished(result) = outcome else {
        panic!("--no-source completes")
    };
    assert_eq!(result, Ok(MainGot::Nothing));
    assert_eq!(rt.stats().pending_calls_run, 2);
    assert!(!rt.summary().busy);

    let (outcome, _, _) = sigint_program(v, Shape::Seed, Kind::Ignore, true);
    let report = hang(&outcome, "seed ignore");
    assert_eq!(
        report.thread(0).unwrap().frames,
        ["first_call_after_b_queued", "after_a_destroyed", "<module>"],
        "{report}"
    );
    assert!(
        matches!(report.cause, HangCause::Livelock { .. }),
        "{report}"
    );

    let (outcome, _, ran) = sigint_program(v, Shape::Seed, Kind::Python, true);
    let report = hang(&outcome, "seed python");
    assert_eq!(
        report.thread(0).unwrap().frames,
        [
            "on_sigint",
            "first_call_after_b_queued",
            "after_a_destroyed",
            "<module>"
        ],
        "{report}"
    );
    assert!(!ran, "the handler never got past its entry");
}

/// 3.11.7, a Python-level pending call (no greenlet): the default
/// handler's `KeyboardInterrupt` escapes `first` and `make_pending_calls`
/// (its error exit clears `busy`), reaches the main thread where handling
/// began, and the run completes; `SIG_IGN` and a Python handler hang as in
/// the seed shape.
#[test]
fn sigint_in_the_311_livelock_python_pending_call() {
    let _serial = common::serial();
    let v = PyVersion::V3_11;
    let (outcome, rt, _) = sigint_program(v, Shape::Testcapi, Kind::Default, true);
    let Outcome::Finished(result) = outcome else {
        panic!("the livelock ends")
    };
    assert_eq!(result, Ok(MainGot::Raised("the add")));
    assert!(!rt.summary().busy);
    assert_eq!(rt.stats().pending_calls_run, 2, "the second call ran later");

    let (outcome, _, _) = sigint_program(v, Shape::Testcapi, Kind::Ignore, true);
    let report = hang(&outcome, "testcapi ignore");
    assert_eq!(
        report.thread(0).unwrap().frames,
        ["first_call_after_b_queued", "first", "<module>"],
        "{report}"
    );
    let (outcome, _, _) = sigint_program(v, Shape::Testcapi, Kind::Python, true);
    let report = hang(&outcome, "testcapi python");
    assert_eq!(
        report.thread(0).unwrap().frames,
        [
            "on_sigint",
            "first_call_after_b_queued",
            "first",
            "<module>"
        ],
        "{report}"
    );
}

/// 3.12.1 and 3.13.0: no livelock; the callback has returned when SIGINT
/// arrives. The default handler's `KeyboardInterrupt` reaches `<module>`,
/// `SIG_IGN` does nothing, a Python handler runs; both shapes complete.
#[test]
fn sigint_after_the_callback_on_312_and_313() {
    let _serial = common::serial();
    for version in [PyVersion::V3_12, PyVersion::V3_13] {
        for shape in [Shape::Seed, Shape::Testcapi] {
            for kind in KINDS {
                let what = format!("{version} {shape:?} {kind:?}");
                let (outcome, rt, ran) = sigint_program(version, shape, kind, true);
                let Outcome::Finished(result) = outcome else {
                    panic!("{what}: hung")
                };
                let expected = match kind {
                    Kind::Default => MainGot::Raised("<module>"),
                    Kind::Ignore | Kind::Python => MainGot::Nothing,
                };
                assert_eq!(result, Ok(expected), "{what}");
                assert_eq!(ran, kind == Kind::Python, "{what}");
                assert_eq!(rt.stats().pending_calls_run, 2, "{what}");
            }
        }
    }
}
