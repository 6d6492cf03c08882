//! Conformance with Python's greenlet 3.5.6 where the differential tester
//! (issue 12, `tests/differential/`) found the crate behaving otherwise:
//! each test asserts what greenlet does, with the Python program it mirrors
//! in its doc comment (causes 1-5 and 8 of `tests/differential/FINDINGS.md`;
//! 7 agreed already and is kept so).

use crate::common;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use greenlet::{
    getcurrent, settrace, ErrorKind, Greenlet, GreenletError, GreenletExit, TraceEvent, Value,
};

/// The trace events of the calling thread while `body` runs, as
/// `(is_switch, origin, target)` names.
fn traced(body: impl FnOnce()) -> Vec<(bool, String, String)> {
    let events = Rc::new(RefCell::new(Vec::new()));
    let log = Rc::clone(&events);
    settrace(Some(Rc::new(move |e: &TraceEvent| {
        log.borrow_mut().push((
            matches!(e, TraceEvent::Switch { .. }),
            e.origin().name(),
            e.target().name(),
        ));
        Ok(())
    })));
    body();
    settrace(None);
    let events = events.borrow().clone();
    events
}

/// Where the report containing every one of `needles` is in `reports`.
fn position(reports: &[String], needles: &[&str]) -> usize {
    reports
        .iter()
        .position(|r| needles.iter().all(|n| r.contains(n)))
        .unwrap_or_else(|| panic!("no report with {needles:?} in {reports:#?}"))
}

/// Cause 1. Python:
/// ```python
/// ran = []
/// g = greenlet(lambda v: ran.append(v))
/// r = g.throw(GreenletExit)          # g never runs
/// assert isinstance(r, GreenletExit) and g.dead and not ran
/// ```
#[test]
fn exit_thrown_into_an_unstarted_greenlet_reaches_the_parent_as_a_value() {
    let ran = Rc::new(Cell::new(false));
    let flag = Rc::clone(&ran);
    let g = Greenlet::new(move |_| {
        flag.set(true);
        Ok(1i64.into())
    });
    let v = g
        .throw(GreenletError::exit())
        .expect("GreenletExit is a normal result");
    assert!(v.is::<GreenletExit>(), "{v:?}");
    assert!(g.is_dead() && !ran.get());
}

/// Cause 1, with a suspended parent. Python:
/// ```python
/// main = getcurrent()
/// def run_a(v):
///     got = main.switch(1)               # resumed by b's death
///     return isinstance(got, GreenletExit)
/// a = greenlet(run_a); a.switch()
/// b = greenlet(lambda v: None, parent=a)
/// assert b.throw(GreenletExit) is True  # a got the exit as a value
/// ```
#[test]
fn an_unstarted_greenlet_killed_by_a_throw_sends_the_exit_to_its_parent_as_a_value() {
    let main = getcurrent();
    let a = Greenlet::new(move |_| {
        let got = main.switch(1i64)?;
        Ok(got.is::<GreenletExit>().into())
    });
    a.switch(()).unwrap();
    let b = Greenlet::builder().parent(&a).spawn(Ok).unwrap();
    let r = b.throw(GreenletError::exit()).expect("a ended normally");
    assert!(r.downcast::<bool>().unwrap());
    assert!(a.is_dead() && b.is_dead() && !b.is_started());
}

/// Cause 2. Python:
/// ```python
/// main = getcurrent()
/// def run_a(v):
///     got = main.switch(10)
///     assert isinstance(got, GreenletExit)   # a resumes with the exit
/// a = greenlet(run_a); a.switch(20)
/// b = greenlet(lambda v: None); b.switch(30)  # b dead
/// b.parent = a
/// assert b.throw(GreenletExit) is None        # a's result
/// assert a.dead
/// ```
#[test]
fn exit_thrown_into_a_dead_greenlet_resumes_its_nearest_live_ancestor() {
    let main = getcurrent();
    let a = Greenlet::new(move |_| {
        let got = main.switch(10i64)?;
        Ok(got.is::<GreenletExit>().into())
    });
    a.switch(20i64).unwrap();
    let b = Greenlet::new(|_| Ok(Value::unit()));
    b.switch(30i64).unwrap();
    b.set_parent(&a).unwrap();
    let r = b.throw(GreenletError::exit()).unwrap();
    assert!(r.downcast::<bool>().unwrap(), "a got the exit as a value");
    assert!(a.is_dead());
}

/// Cause 2, the ancestor being the caller: the value comes back, through a
/// switch the hook sees. Python:
/// ```python
/// b = greenlet(lambda v: None); b.switch()
/// settrace(hook)
/// b.throw(GreenletExit)     # hook: ('switch', (main, main))
/// ```
#[test]
fn exit_thrown_into_a_dead_child_of_the_caller_fires_a_switch_to_itself() {
    let b = Greenlet::builder().name("b").spawn(Ok).unwrap();
    b.switch(()).unwrap();
    let me = getcurrent().name();
    let events = traced(|| {
        let v = b.throw(GreenletError::exit()).unwrap();
        assert!(v.is::<GreenletExit>());
    });
    assert_eq!(events, vec![(true, me.clone(), me)]);
}

/// Cause 3, kill on drop. Python:
/// ```python
/// a = greenlet(lambda v: None)
/// def run_b(v):
///     global b; del b                          # main's frame holds the last reference
///     try: getcurrent().parent.switch(10)      # -> a, which ends -> main
///     except GreenletExit:
///         assert getcurrent().parent is main   # the killer
///         getcurrent().parent.switch(20)       # back to main's dealloc
/// b = greenlet(run_b, parent=a); b.switch(30)
/// ```
#[test]
fn a_victim_sees_its_killer_as_parent_during_a_kill_on_drop() {
    let _guard = common::serial();
    let main = getcurrent();
    let seen = Rc::new(RefCell::new(None));
    let a = Greenlet::new(|_| Ok(Value::unit()));
    let s = Rc::clone(&seen);
    let b = Greenlet::builder()
        .parent(&a)
        .spawn(move |_| {
            // No handle of its own across the switch: main's is the last.
            let parent = getcurrent().parent().unwrap();
            match parent.switch(10i64) {
                Err(e) if e.is_exit() => {
                    let parent = getcurrent().parent().unwrap();
                    *s.borrow_mut() = Some(parent.clone());
                    parent.switch(20i64)?;
                    Ok(Value::unit())
                }
                other => other,
            }
        })
        .unwrap();
    b.switch(30i64).unwrap(); // b -> a, a ends -> main
    assert!(a.is_dead());
    drop(a);
    drop(b); // main kills b; b switches to its parent: main, the dropper
    assert_eq!(
        seen.borrow().as_ref(),
        Some(&main),
        "b's parent during the kill"
    );
    let reports = common::take_diagnostics();
    common::diagnostic(&reports, "WARN", &["did not kill"]);
}

/// Cause 3, `kill()`: the victim's parent is the killer for the throw (a
/// switch to it comes back to the killer, not to the real parent), and the
/// old parent is back afterwards. Python (the stand-in of FORMAT.md: the
/// guard of greenlet's kill on collection):
/// ```python
/// p = greenlet(lambda v: main.switch()); p.switch()
/// def run_g(v):
///     try: main.switch()
///     except GreenletExit: getcurrent().parent.switch("caught")
/// g = greenlet(run_g, parent=p); g.switch()
/// old = g.parent; g.parent = getcurrent()
/// try: assert g.throw(GreenletExit) == "caught"   # main, not p
/// finally: g.parent = old
/// ```
#[test]
fn kill_makes_the_killer_the_victims_parent_for_the_throw() {
    let main = getcurrent();
    let m = main.clone();
    let p = Greenlet::new(move |_| m.switch(()));
    p.switch(()).unwrap();
    let m = main.clone();
    let g = Greenlet::builder()
        .parent(&p)
        .spawn(move |_| match m.switch(()) {
            Err(e) if e.is_exit() => {
                let parent = getcurrent().parent().unwrap();
                assert!(parent.is_main(), "the killer is its parent");
                parent.switch("caught")
            }
            other => other,
        })
        .unwrap();
    g.switch(()).unwrap();
    assert!(matches!(
        g.kill().map_err(GreenletError::into_kind),
        Err(ErrorKind::KillIgnored { .. })
    ));
    assert!(p.is_active(), "p never ran");
    assert_eq!(g.parent(), Some(p), "the old parent is back");
}

/// Cause 4: the victim throws into the dropper. Python:
/// ```python
/// def run_a(v):
///     try: main.switch(10)
///     except GreenletExit: main.throw(UserError("boom"))
/// a = greenlet(run_a); a.switch(20)
/// del a   # unraisable UserError('boom') on a, then "GreenletExit did not kill a"
/// ```
#[test]
fn an_error_thrown_into_the_dropper_during_a_kill_is_reported_before_the_leak() {
    let _guard = common::serial();
    common::take_diagnostics();
    let main = getcurrent();
    let a = Greenlet::builder()
        .name("thrower")
        .spawn(move |_| match main.switch(10i64) {
            Err(e) if e.is_exit() => main.throw(GreenletError::user("boom")),
            other => other,
        })
        .unwrap();
    a.switch(20i64).unwrap();
    drop(a);
    let reports = common::take_diagnostics();
    let boom = position(&reports, &["thrower", "boom"]);
    let leak = position(&reports, &["thrower", "did not kill"]);
    assert!(boom < leak, "the error first: {reports:#?}");
}

/// Cause 4: a victim that ends with an error is reported before it is
/// finalized. Python:
/// ```python
/// def run_c(v):
///     try: main.switch()
///     except GreenletExit: raise UserError("h4")
/// c = greenlet(run_c); c.switch()
/// weakref.ref(c, lambda r: print("fin"))
/// del c   # unraisable UserError('h4'), then "fin"
/// ```
#[test]
fn a_victim_ending_with_an_error_is_reported_before_its_finalizers_run() {
    let _guard = common::serial();
    victim_ending_with_an_error_reported_then_finalized();
}

/// Cause 4, traced: the trace event of the victim's end holds a handle to
/// it, which goes before the kill is back (the tester's case with
/// `settrace`).
#[test]
fn a_traced_victim_ending_with_an_error_is_reported_before_its_finalizers_run() {
    let _guard = common::serial();
    let events = traced(victim_ending_with_an_error_reported_then_finalized);
    assert!(events.iter().any(|(_, origin, _)| origin == "failer"));
}

fn victim_ending_with_an_error_reported_then_finalized() {
    common::take_diagnostics();
    let main = getcurrent();
    let c = Greenlet::builder()
        .name("failer")
        .spawn(move |_| match main.switch(()) {
            Err(e) if e.is_exit() => {
                // A handle of its own, made and dropped during the kill.
                drop(getcurrent());
                Err(GreenletError::user("h4"))
            }
            other => other,
        })
        .unwrap();
    c.switch(()).unwrap();
    c.on_finalize(|| log::warn!(target: "conformance", "finalized"));
    drop(c);
    let reports = common::take_diagnostics();
    let report = position(&reports, &["failer", "h4"]);
    let fin = position(&reports, &["conformance", "finalized"]);
    assert!(report < fin, "the report first: {reports:#?}");
}

/// Cause 5. Python:
/// ```python
/// def run_a(v):
///     global b
///     try: main.switch(1)
///     except GreenletExit:
///         b = greenlet(lambda v: None)   # b.parent is a: a is reachable again
///         main.switch(2)
/// a = greenlet(run_a); a.switch(3)
/// del a      # no "did not kill" report
/// del b      # a is collected again: killed again, and it ends
/// ```
#[test]
fn a_victim_made_reachable_again_is_not_leaked_and_is_killed_again() {
    let _guard = common::serial();
    common::take_diagnostics();
    let main = getcurrent();
    let child = Rc::new(RefCell::new(None));
    let slot = Rc::clone(&child);
    let ended = Rc::new(Cell::new(false));
    let e = Rc::clone(&ended);
    let a = Greenlet::builder()
        .name("revived-a")
        .spawn(move |_| {
            if let Err(err) = main.switch(1i64) {
                assert!(err.is_exit());
                let b = Greenlet::builder()
                    .name("revived-b")
                    .spawn(|_| Ok(Value::unit()))
                    .unwrap();
                *slot.borrow_mut() = Some(b);
                let r = main.switch(2i64);
                e.set(r.as_ref().is_err_and(GreenletError::is_exit));
                return r;
            }
            Ok(Value::unit())
        })
        .unwrap();
    a.switch(3i64).unwrap();
    drop(a);
    let about_us = |r: &String| r.contains("'revived-");
    let reports = common::take_diagnostics();
    assert!(
        !reports
            .iter()
            .any(|r| about_us(r) && r.contains("did not kill")),
        "{reports:#?}"
    );
    assert!(!ended.get());
    let b = child.borrow_mut().take().expect("a made its child");
    drop(b);
    assert!(ended.get(), "dropping the child killed a again");
    let reports = common::take_diagnostics();
    assert!(!reports.iter().any(about_us), "{reports:#?}");
}

/// Cause 8. Python (nothing is printed when the thread ends):
/// ```python
/// def run_a(v): held = [b]; main.switch(1)
/// def run_b(v): held = [a]; main.switch(2)
/// a = greenlet(run_a); b = greenlet(run_b); a.switch(3); b.switch(4)
/// del a, b    # a cycle; the thread ends
/// ```
#[test]
fn thread_exit_does_not_report_greenlets_that_ended() {
    let _guard = common::serial();
    common::take_diagnostics();
    std::thread::spawn(|| {
        let slots: Rc<RefCell<Vec<Greenlet>>> = Rc::default();
        let body = |other: usize, value: i64| {
            let slots = Rc::clone(&slots);
            let main = getcurrent();
            move |_: Value| {
                let _held = slots.borrow()[other].clone();
                main.switch(value)?;
                Ok(Value::unit())
            }
        };
        let a = Greenlet::builder()
            .name("cycle-a")
            .spawn(body(1, 1))
            .unwrap();
        let b = Greenlet::builder()
            .name("cycle-b")
            .spawn(body(0, 2))
            .unwrap();
        slots.borrow_mut().extend([a.clone(), b.clone()]);
        a.switch(3i64).unwrap();
        b.switch(4i64).unwrap();
        slots.borrow_mut().clear();
    })
    .join()
    .unwrap();
    let reports = common::take_diagnostics();
    assert!(
        !reports
            .iter()
            .any(|r| r.contains("'cycle-") && r.contains("did not kill")),
        "{reports:#?}"
    );
}

/// Cause 7 (agreed already): a throw into the running greenlet fires one
/// throw event from it to itself. Python:
/// ```python
/// settrace(hook)
/// def run_a(v):
///     try: getcurrent().throw(GreenletExit)   # hook: ('throw', (a, a))
///     except GreenletExit: pass
/// ```
#[test]
fn a_throw_into_the_current_greenlet_fires_one_throw_event() {
    let a = Greenlet::builder()
        .name("a")
        .spawn(|_| match getcurrent().throw(GreenletError::exit()) {
            Err(e) if e.is_exit() => Ok(Value::unit()),
            other => other,
        })
        .unwrap();
    let me = getcurrent().name();
    let events = traced(|| a.switch(()).map(drop).unwrap());
    let a_name = "a".to_string();
    assert_eq!(
        events,
        vec![
            (true, me.clone(), a_name.clone()),
            (false, a_name.clone(), a_name.clone()),
            (true, a_name, me),
        ]
    );
}

/// Killing the running greenlet is a throw into it: one throw event from
/// it to itself. Python (the `kill` stand-in of FORMAT.md):
/// ```python
/// settrace(hook)
/// def run_b(v): b.throw(GreenletExit)   # hook: ('throw', (b, b))
/// b = greenlet(run_b); b.switch()
/// ```
#[test]
fn killing_the_current_greenlet_fires_a_throw_event() {
    let b = Greenlet::builder()
        .name("b")
        .spawn(|_| getcurrent().kill().map(|()| Value::unit()))
        .unwrap();
    let me = getcurrent().name();
    let events = traced(|| {
        assert!(b.switch(()).unwrap().is::<GreenletExit>());
    });
    let b_name = "b".to_string();
    assert_eq!(
        events,
        vec![
            (true, me.clone(), b_name.clone()),
            (false, b_name.clone(), b_name.clone()),
            (true, b_name, me),
        ]
    );
}
