//! Conformance with Python's greenlet 3.5.6 in kills on drop: who runs a
//! kill mailed by another thread, and what a kill on drop reports. Each
//! test asserts what greenlet does, with the Python program it mirrors in
//! its doc comment (the differential tester, `tests/differential/`, makes
//! programs of these shapes at random: `--gen kill-shapes`).

use crate::common;

use std::sync::{Arc, Mutex};

use greenlet::{getcurrent, settrace, ErrorKind, Greenlet, GreenletError, TraceEvent, Value};

/// Events recorded by greenlets of the test, in order.
type Seen = Arc<Mutex<Vec<String>>>;

fn note(seen: &Seen, event: impl Into<String>) {
    seen.lock().unwrap().push(event.into());
}

/// The name of the current greenlet's parent (`main` for its thread's main
/// greenlet, which is named after the thread).
fn parent_name() -> String {
    match getcurrent().parent() {
        Some(p) if p.is_main() => "main".into(),
        Some(p) => p.name(),
        None => "none".into(),
    }
}

/// A greenlet named `name`, suspended, that notes `<name> killed by
/// <parent>` when the exit comes and lets it end it.
fn victim(name: &'static str, seen: &Seen) -> Greenlet {
    let seen = Arc::clone(seen);
    let main = getcurrent();
    let g = Greenlet::builder()
        .name(name)
        .spawn(move |_| match main.switch(()) {
            Err(e) if e.is_exit() => {
                note(&seen, format!("{name} killed by {}", parent_name()));
                Err(e)
            }
            other => other,
        })
        .unwrap();
    g.switch(()).unwrap();
    g
}

/// Drops `g`, the last handle of a greenlet of this thread, on another
/// thread: its kill is mailed here.
fn drop_on_another_thread(g: Greenlet) {
    std::thread::spawn(move || drop(g)).join().unwrap();
}

/// What a mailed kill and the next switch do, in order: `victim`'s last
/// handle dropped on another thread, then main switches to `other`
/// (suspended in a loop of switches to main when `started`, else unstarted),
/// with a trace hook installed when `traced` (the switch's slow path).
fn mailed_kill_then_switch(started: bool, traced: bool) -> Vec<String> {
    let seen: Seen = Arc::default();
    let a = victim("victim", &seen);
    let log = Arc::clone(&seen);
    let main = getcurrent();
    let b = Greenlet::builder()
        .name("other")
        .spawn(move |_| loop {
            note(&log, format!("other runs, parent {}", parent_name()));
            main.switch(())?;
        })
        .unwrap();
    if started {
        b.switch(()).unwrap();
        seen.lock().unwrap().clear();
    }
    if traced {
        let hook: greenlet::ThreadTraceHook = std::rc::Rc::new(|_: &TraceEvent| Ok(()));
        drop(settrace(Some(hook)));
    }
    drop_on_another_thread(a);
    // Nothing between the join and the switch looks at the mail
    // (`getcurrent` would run it).
    b.switch(()).unwrap();
    if traced {
        drop(settrace(None));
    }
    drop(b);
    let events = seen.lock().unwrap().clone();
    events
}

/// A kill mailed by another thread is run by the greenlet that switches,
/// before the switch, whether the target is unstarted or suspended and
/// whether a trace hook is installed. Python:
/// ```python
/// main = getcurrent()
/// def run_victim(v):
///     try: main.switch()
///     except GreenletExit:
///         seen.append("victim killed by " + name(getcurrent().parent))
///         raise
/// def run_other(v):
///     while True:
///         seen.append("other runs, parent " + name(getcurrent().parent))
///         main.switch()
/// a = greenlet(run_victim); a.switch(0)
/// b = greenlet(run_other)             # or started: b.switch(0); seen.clear()
/// box = [a]; del a
/// t = threading.Thread(target=box.clear); t.start(); t.join()   # mailed
/// b.switch(1)
/// assert seen == ["victim killed by main", "other runs, parent main"]
/// ```
#[test]
fn a_mailed_kill_runs_in_the_switching_greenlet_before_a_start() {
    assert_eq!(
        mailed_kill_then_switch(false, false),
        ["victim killed by main", "other runs, parent main"]
    );
}

/// As [`a_mailed_kill_runs_in_the_switching_greenlet_before_a_start`], the
/// target suspended.
#[test]
fn a_mailed_kill_runs_in_the_switching_greenlet_before_a_resume() {
    assert_eq!(
        mailed_kill_then_switch(true, false),
        ["victim killed by main", "other runs, parent main"]
    );
}

/// As above with a trace hook installed: the same order as without one.
#[test]
fn a_mailed_kill_runs_in_the_same_order_when_traced() {
    for started in [false, true] {
        assert_eq!(
            mailed_kill_then_switch(started, true),
            ["victim killed by main", "other runs, parent main"],
            "target started: {started}"
        );
    }
}

/// A greenlet switching to another greenlet (not from main) runs the mailed
/// kill too, as the killer. Python:
/// ```python
/// def run_c(v):
///     t = threading.Thread(target=box.clear); t.start(); t.join()
///     b.switch(1)        # the victim is killed by c first
/// ```
#[test]
fn a_mailed_kill_runs_in_a_switching_greenlet_that_is_not_main() {
    let seen: Seen = Arc::default();
    let a = victim("victim", &seen);
    let log = Arc::clone(&seen);
    let b = Greenlet::builder()
        .name("other")
        .spawn(move |_| {
            note(&log, "other runs");
            Ok(Value::unit())
        })
        .unwrap();
    let box_a = Mutex::new(Some(a));
    let c = Greenlet::builder()
        .name("switcher")
        .spawn(move |_| {
            drop_on_another_thread(box_a.lock().unwrap().take().unwrap());
            b.switch(())
        })
        .unwrap();
    c.switch(()).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        ["victim killed by switcher", "other runs"]
    );
}

/// A greenlet that survives every kill: it catches the exit and switches
/// to its parent of the moment (the killer, during a kill).
fn stubborn(name: &str) -> Greenlet {
    let g = Greenlet::builder()
        .name(name)
        .spawn(|_| loop {
            let parent = getcurrent().parent().unwrap();
            let _ = parent.switch(());
        })
        .unwrap();
    g.switch(()).unwrap();
    g
}

/// A victim of a kill on drop that kills another greenlet during its own
/// kill, gets `KillIgnored` from it and lets it end it: the kill's error
/// is reported. Python (`kill` is the tester's stand-in, interp.py):
/// ```python
/// def run_b(v):
///     while True:
///         try: getcurrent().parent.switch()
///         except GreenletExit: pass
/// b = greenlet(run_b); b.switch(0)
/// def run_a(v):
///     try: main.switch()
///     except GreenletExit:
///         kill(b)         # b survives: raises KillIgnored, which ends a
/// a = greenlet(run_a); a.switch(0)
/// del a                   # unraisable KillIgnored() on a
/// ```
#[test]
fn a_kill_ignored_that_ends_a_victim_is_reported() {
    let _guard = common::serial();
    common::take_diagnostics();
    let b = stubborn("stubborn");
    let main = getcurrent();
    let b_handle = b.clone();
    let a = Greenlet::builder()
        .name("killer-victim")
        .spawn(move |_| match main.switch(()) {
            Err(e) if e.is_exit() => {
                b_handle.kill()?;
                Ok(Value::unit())
            }
            other => other,
        })
        .unwrap();
    a.switch(()).unwrap();
    drop(a);
    let reports = common::take_diagnostics();
    common::diagnostic(
        &reports,
        "WARN greenlet",
        &[
            "'killer-victim'",
            "ended with an error while being killed",
            "did not kill 'stubborn'",
        ],
    );
    assert!(!b.is_dead());
}

/// A victim of a kill on drop that throws a `GreenletExit` carrying a value
/// into the greenlet that dropped it: the report shows the value. Python:
/// ```python
/// def run_a(v):
///     try: main.switch()
///     except GreenletExit:
///         getcurrent().parent.throw(GreenletExit(10))
/// a = greenlet(run_a); a.switch(0)
/// del a   # unraisable GreenletExit(10) on a, then "GreenletExit did not kill a"
/// ```
#[test]
fn an_exit_with_a_value_thrown_into_the_dropper_is_reported_with_the_value() {
    let _guard = common::serial();
    common::take_diagnostics();
    let main = getcurrent();
    let a = Greenlet::builder()
        .name("exit-thrower")
        .spawn(move |_| match main.switch(()) {
            Err(e) if e.is_exit() => {
                let dropper = getcurrent().parent().unwrap();
                dropper.throw(ErrorKind::GreenletExit(Some(Value::new(10i64))).into())
            }
            other => other,
        })
        .unwrap();
    a.switch(()).unwrap();
    drop(a);
    let reports = common::take_diagnostics();
    let line = common::diagnostic(
        &reports,
        "WARN greenlet",
        &[
            "'exit-thrower'",
            "raised an error into the greenlet that dropped it",
        ],
    );
    assert!(line.contains("GreenletExit carrying"), "{line}");
    assert!(line.contains("value: 10"), "{line}");
    common::diagnostic(&reports, "WARN greenlet", &["did not kill 'exit-thrower'"]);
}

/// The message of a `GreenletExit` shows the value it carries, and a bare
/// one shows none.
#[test]
fn an_exit_error_shows_its_value() {
    let carrying: GreenletError = ErrorKind::GreenletExit(Some(Value::new(7i64))).into();
    assert!(
        carrying
            .to_string()
            .starts_with("GreenletExit carrying Value"),
        "{carrying}"
    );
    assert!(carrying.to_string().contains("value: 7"), "{carrying}");
    assert!(GreenletError::exit()
        .to_string()
        .starts_with("GreenletExit: the greenlet was asked to exit"));
}
