//! Conformance: throw on every state, kill, kill on drop (same thread and
//! from another thread), greenlets that refuse to die, and parent checks
//! (in the spirit of greenlet's test_throw.py and test_greenlet.py).

use crate::common;

use common::{stubborn, stubborn_holding};

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use greenlet::{getcurrent, ErrorKind, Greenlet, GreenletError, GreenletExit, Value};

/// Counts its drops into a shared counter.
struct DropCounter(Arc<AtomicUsize>);
impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A greenlet that suspends once to main with "ready" and then reports what
/// its pending switch raised.
fn catcher() -> Greenlet {
    Greenlet::new(|_| {
        let main = getcurrent().parent().unwrap();
        match main.switch("ready") {
            Ok(v) => Ok(Value::new(format!("value {}", v.type_name()))),
            Err(e) => Ok(Value::new(format!("caught {e}"))),
        }
    })
}

#[test]
fn throw_into_suspended_raises_at_its_pending_switch() {
    let g = catcher();
    assert_eq!(g.switch(()).unwrap().downcast::<&str>().unwrap(), "ready");
    let v = g.throw(GreenletError::user("oops")).unwrap();
    assert_eq!(v.downcast::<String>().unwrap(), "caught oops");
    assert!(g.is_dead());
}

#[test]
fn throw_into_unstarted_kills_it_and_the_error_goes_up() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let guard = DropCounter(Arc::clone(&dropped));
    let ran = Rc::new(RefCell::new(false));
    let r = Rc::clone(&ran);
    let g = Greenlet::new(move |v| {
        let _guard = guard;
        *r.borrow_mut() = true;
        Ok(v)
    });
    match g
        .throw(GreenletError::user("never ran"))
        .map_err(GreenletError::into_kind)
    {
        Err(ErrorKind::User(e)) => assert_eq!(e.to_string(), "never ran"),
        other => panic!("unexpected {other:?}"),
    }
    assert!(g.is_dead());
    assert!(!*ran.borrow());
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "the closure was dropped");
}

#[test]
fn throw_into_dead() {
    let g = Greenlet::new(Ok);
    g.switch(()).unwrap();
    // GreenletExit comes back as a value.
    assert!(g.throw(GreenletError::exit()).unwrap().is::<GreenletExit>());
    let v = g
        .throw(ErrorKind::GreenletExit(Some(Value::new(3u8))).into())
        .unwrap();
    assert_eq!(v.downcast::<u8>().unwrap(), 3);
    // Other errors go to the nearest live ancestor: main, the caller.
    let err = g.throw(GreenletError::user("to main")).unwrap_err();
    assert_eq!(err.to_string(), "to main");
}

#[test]
fn uncaught_throw_propagates_to_parent() {
    let g = Greenlet::new(|_| {
        getcurrent().parent().unwrap().switch(())?;
        Ok("unreachable".into())
    });
    g.switch(()).unwrap();
    let err = g.throw(GreenletError::user("through")).unwrap_err();
    assert_eq!(err.to_string(), "through");
    assert!(g.is_dead());
}

#[test]
fn kill_unwinds_locals_and_returns_to_the_killer() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let log = Rc::new(RefCell::new(Vec::new()));
    let g = suspended_logging(Arc::clone(&dropped), Rc::clone(&log));
    assert_eq!(dropped.load(Ordering::SeqCst), 0);
    g.kill().unwrap();
    assert!(g.is_dead());
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert_eq!(*log.borrow(), ["exit"]);
    // Killing again, or killing an unstarted one, is harmless.
    g.kill().unwrap();
    let u = Greenlet::new(Ok);
    u.kill().unwrap();
    assert!(u.is_dead() && !u.is_started());
}

#[test]
fn kill_returns_to_the_killer_even_with_another_parent() {
    // g's parent is p (suspended); the kill still comes back to main.
    let p = Greenlet::new(|_| {
        getcurrent().parent().unwrap().switch("p suspended")?;
        Ok("p finished".into())
    });
    assert_eq!(
        p.switch(()).unwrap().downcast::<&str>().unwrap(),
        "p suspended"
    );
    let g = Greenlet::builder()
        .parent(&p)
        .spawn(|_| {
            getcurrent()
                .parent()
                .unwrap()
                .parent()
                .unwrap()
                .switch("g suspended")?;
            Ok(().into())
        })
        .unwrap();
    assert_eq!(
        g.switch(()).unwrap().downcast::<&str>().unwrap(),
        "g suspended"
    );
    g.kill().unwrap();
    assert!(g.is_dead());
    assert!(p.is_active(), "the parent was not resumed");
}

#[test]
fn kill_ignored_is_reported() {
    let g = stubborn("stubborn");
    match g.kill().map_err(GreenletError::into_kind) {
        Err(ErrorKind::KillIgnored { greenlet }) => assert!(greenlet.contains("stubborn")),
        other => panic!("unexpected {other:?}"),
    }
    assert!(g.is_active());
    // It stays suspended; this test thread's exit unwinds it.
}

/// A greenlet killed while it waits in its own `kill()` of another one
/// (which caught the exit and switched elsewhere) gets that exit from its
/// `kill()`, as from any pending switch: it used to get `KillIgnored` about
/// the other greenlet instead, so it ended with that error and its killer
/// was told `KillIgnored` about a greenlet it never targeted.
#[test]
fn a_killer_killed_while_its_victim_is_away_gets_the_exit() {
    let victim = stubborn("away");
    // Kept here, so that the killer's end does not drop its last handle.
    let _kept = victim.clone();
    let killer = Greenlet::builder()
        .name("killer")
        .spawn(move |_| {
            victim.kill()?;
            Ok("kill returned".into())
        })
        .unwrap();
    // The killer kills `away`, which switches back here, not to it.
    killer.switch(()).unwrap();
    assert!(killer.is_active());
    killer.kill().unwrap();
    assert!(killer.is_dead());
    // `away` stays suspended; this test thread's exit unwinds it.
}

#[test]
fn kill_yourself_raises_the_exit() {
    let g = Greenlet::new(|_| {
        let me = getcurrent();
        match me.kill() {
            Err(e) if e.is_exit() => Err(e),
            other => Ok(Value::new(format!("{other:?}"))),
        }
    });
    assert!(g.switch(()).unwrap().is::<GreenletExit>());
}

#[test]
fn drop_of_last_handle_kills_synchronously() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let log = Rc::new(RefCell::new(Vec::new()));
    let g = suspended_logging(Arc::clone(&dropped), Rc::clone(&log));
    log.borrow_mut().push("dropping");
    drop(g);
    log.borrow_mut().push("dropped");
    assert_eq!(*log.borrow(), ["dropping", "exit", "dropped"]);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

/// A started greenlet suspended in its first switch to the main greenlet,
/// holding a local that counts its drop in `dropped`.
fn suspended_holding(dropped: Arc<AtomicUsize>) -> Greenlet {
    suspended_logging(dropped, Rc::default())
}

/// As [`suspended_holding`], and when that switch returns it logs `"exit"`
/// (a `GreenletExit`, which it then propagates) or `"other"` in `log`.
fn suspended_logging(dropped: Arc<AtomicUsize>, log: Rc<RefCell<Vec<&'static str>>>) -> Greenlet {
    let g = Greenlet::new(move |_| {
        let _local = DropCounter(dropped);
        // Not `getcurrent().parent()...switch()` in one statement: the
        // temporary handle to ourselves would live across the switch.
        let main = getcurrent().parent().unwrap();
        let r = main.switch(());
        log.borrow_mut().push(match &r {
            Err(e) if e.is_exit() => "exit",
            _ => "other",
        });
        r?;
        Ok(().into())
    });
    g.switch(()).unwrap();
    g
}

#[test]
fn drop_in_another_greenlet_returns_there() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let victim = suspended_holding(Arc::clone(&dropped));
    let counter = Arc::clone(&dropped);
    let dropper = Greenlet::new(move |v| {
        let victim = v.downcast::<Greenlet>()?;
        drop(victim); // killed right here, control comes back
        Ok(Value::new(counter.load(Ordering::SeqCst)))
    });
    let seen = dropper
        .switch(Value::new(victim))
        .unwrap()
        .downcast::<usize>()
        .unwrap();
    assert_eq!(seen, 1);
}

#[test]
fn unstarted_greenlet_dropped_drops_its_closure() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let guard = DropCounter(Arc::clone(&dropped));
    let g = Greenlet::new(move |v| {
        let _g = guard;
        Ok(v)
    });
    drop(g);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

#[test]
fn running_greenlet_dropping_its_own_last_handle_is_killed_after_switching_away() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&dropped);
    let slot: Rc<RefCell<Option<Greenlet>>> = Rc::new(RefCell::new(None));
    let s = Rc::clone(&slot);
    let g = Greenlet::new(move |_| {
        let _local = DropCounter(d);
        let main = getcurrent().parent().unwrap();
        s.borrow_mut().take(); // the last handle goes while we run
        main.switch("suspending")?;
        Ok("not reached".into())
    });
    *slot.borrow_mut() = Some(g);
    let starter = slot.borrow().clone().unwrap();
    drop(starter.clone());
    let v = starter.switch(());
    // `starter` still holds a handle, so nothing is killed yet.
    assert_eq!(v.unwrap().downcast::<&str>().unwrap(), "suspending");
    assert_eq!(dropped.load(Ordering::SeqCst), 0);
    drop(starter); // now the last handle: killed synchronously
    assert_eq!(dropped.load(Ordering::SeqCst), 1);

    // Now with no handle left at all while it runs: `g` is started as the
    // unstarted parent of `c` (whose parent link is g's only handle) and
    // re-parents `c`, dropping that link.
    let dropped2 = Arc::new(AtomicUsize::new(0));
    let d2 = Arc::clone(&dropped2);
    let main = getcurrent();
    let g = Greenlet::new(move |v| {
        let _local = DropCounter(d2);
        let c = v.downcast::<Greenlet>()?;
        let main = c.parent().unwrap().parent().unwrap();
        c.set_parent(&main)?; // g's last handle goes while g runs
        drop(c);
        main.switch("away")?;
        Ok("not reached".into())
    });
    let c = Greenlet::builder()
        .parent(&g)
        .spawn(|_| Ok(Value::new(getcurrent())))
        .unwrap();
    drop(g);
    let v = c.switch(()).unwrap();
    // g was killed as soon as it had switched away, before we got control.
    assert_eq!(v.downcast::<&str>().unwrap(), "away");
    assert_eq!(dropped2.load(Ordering::SeqCst), 1);
    assert_eq!(c.parent(), Some(main));
}

#[test]
fn drop_on_another_thread_is_queued_to_the_owner() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let g = suspended_holding(Arc::clone(&dropped));
    let observed = std::thread::spawn(move || {
        let dead = g.is_dead();
        drop(g); // the last handle, on a foreign thread
        dead
    })
    .join()
    .unwrap();
    assert!(!observed);
    // Not killed yet: the owner has not made a greenlet call since.
    assert_eq!(dropped.load(Ordering::SeqCst), 0);
    let _ = getcurrent(); // the owner's next greenlet operation
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

#[test]
fn drop_killed_greenlet_that_refuses_is_leaked_then_unwound_at_thread_exit() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&dropped);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let g = stubborn_holding("immortal", DropCounter(d));
        drop(g); // warns and leaks: never looped on
        tx.send(()).unwrap();
    })
    .join()
    .unwrap();
    rx.recv().unwrap();
    // The thread's exit unwound it (with a forced unwind as last resort).
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

/// With tracing on, the kill of a dropped greenlet that refuses to die is
/// tried once, as without: the switch back from it fires a trace event
/// whose handle to it, dropped at the end of the event, is its last handle
/// again. Its drop used to start a new kill from inside the first one, whose
/// switch back fired another event: unbounded recursion, ending in a stack
/// overflow that aborted the process.
#[test]
fn a_refusing_greenlet_dropped_with_tracing_on_is_killed_once() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let events = Arc::new(AtomicUsize::new(0));
    let (d, e) = (Arc::clone(&dropped), Arc::clone(&events));
    std::thread::spawn(move || {
        let g = stubborn_holding("immortal-traced", DropCounter(d));
        greenlet::settrace(Some(Rc::new(move |_: &greenlet::TraceEvent| {
            e.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })));
        drop(g); // warns and leaks, as without tracing
        greenlet::settrace(None);
    })
    .join()
    .unwrap();
    // main -> g (the kill's throw) and g -> main (it switched back).
    assert_eq!(events.load(Ordering::SeqCst), 2);
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "unwound at thread exit");
}

/// A greenlet that ignores every kill is force-unwound at thread exit; a
/// destructor that switches during that unwind cannot suspend it (corosensei
/// would unwind the suspended switch again, from inside the destructor, and
/// Rust aborts on a panic in a destructor during cleanup): the switch fails
/// with `GreenletExit` instead, and the unwind goes on.
#[test]
fn a_destructor_switching_during_the_forced_unwind_at_thread_exit_gets_the_exit() {
    struct SwitchOnDrop(Arc<AtomicUsize>);
    impl Drop for SwitchOnDrop {
        fn drop(&mut self) {
            let main = getcurrent().parent().unwrap();
            if matches!(main.switch(()), Err(e) if e.is_exit()) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    let refused = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&refused);
    std::thread::spawn(move || {
        let g = stubborn_holding("switches-while-unwound", SwitchOnDrop(r));
        std::mem::forget(g.clone()); // outlives its thread: only the exit unwinds it
    })
    .join()
    .unwrap();
    assert_eq!(refused.load(Ordering::SeqCst), 1);
}

#[test]
fn set_parent_checks() {
    let main = getcurrent();
    let a = Greenlet::new(Ok);
    let b = Greenlet::builder().parent(&a).spawn(Ok).unwrap();
    let c = Greenlet::builder().parent(&b).spawn(Ok).unwrap();
    match a.set_parent(&c).map_err(GreenletError::into_kind) {
        Err(ErrorKind::ParentCycle { greenlet, parent }) => {
            assert!(greenlet.contains(&a.id().to_string()));
            assert!(parent.contains(&c.id().to_string()));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(matches!(
        a.set_parent(&a).map_err(GreenletError::into_kind),
        Err(ErrorKind::ParentCycle { .. })
    ));
    match main.set_parent(&a).map_err(GreenletError::into_kind) {
        Err(err @ ErrorKind::MainCannotHaveParent { .. }) => {
            let message = err.to_string();
            assert!(
                message.starts_with("cannot set the parent of a main greenlet"),
                "{message}"
            );
            assert!(message.contains(&main.id().to_string()), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    c.set_parent(&a).unwrap();
    assert_eq!(c.parent(), Some(a.clone()));

    let foreign = std::thread::spawn(|| {
        let g = Greenlet::new(Ok);
        (g, getcurrent())
    })
    .join()
    .unwrap();
    match c.set_parent(&foreign.0).map_err(GreenletError::into_kind) {
        Err(e @ ErrorKind::ParentOnOtherThread { .. }) => {
            assert!(e.to_string().contains("different thread"), "{e}")
        }
        other => panic!("unexpected {other:?}"),
    }
    match Greenlet::builder()
        .parent(&foreign.1)
        .spawn(Ok)
        .map_err(GreenletError::into_kind)
    {
        Err(ErrorKind::ParentOnOtherThread { .. }) => {}
        other => panic!("unexpected {other:?}"),
    }
}

/// A greenlet that survived the kill of its last handle (it caught the exit
/// and switched away, so it was reported and leaked) and finishes later:
/// its finalizers run once nothing refers to it any more.
#[test]
fn a_leaked_greenlet_that_finishes_later_is_finalized() {
    let main = getcurrent();
    let finalized = Arc::new(AtomicUsize::new(0));
    let c_slot: Rc<RefCell<Option<Greenlet>>> = Rc::default();
    let (to_main, slot) = (main.clone(), Rc::clone(&c_slot));
    let x = Greenlet::new(move |_| {
        match to_main.switch(()) {
            Err(err) if err.is_exit() => {} // the kill of X's last handle: survived
            other => panic!("expected the kill, got {other:?}"),
        }
        // C's parent is X: when C finishes, X's pending switch gets its result.
        let back = to_main.clone();
        let c = Greenlet::new(move |_| {
            *slot.borrow_mut() = Some(getcurrent());
            back.switch(())?;
            Ok(Value::new("c done"))
        });
        c.switch(()) // C parks in main; X stays suspended here, leaked
    });
    let count = Arc::clone(&finalized);
    x.on_finalize(move || {
        count.fetch_add(1, Ordering::SeqCst);
    });
    x.switch(()).unwrap();
    drop(x); // kills X, which starts C, which parks in main
    assert_eq!(finalized.load(Ordering::SeqCst), 0, "X is still alive");
    let c = c_slot.borrow_mut().take().expect("C parked in main");
    // C finishes: its result resumes X, which finishes and sends it to main.
    let result = c.switch(()).unwrap().downcast::<&str>().unwrap();
    assert_eq!(result, "c done");
    // C's record, and with it its parent handle, the last reference to X, go.
    drop(c);
    drop(getcurrent()); // a greenlet operation settles any deferred work
    assert_eq!(finalized.load(Ordering::SeqCst), 1);
}

/// Set for the child process of
/// `a_greenlet_that_refuses_to_die_on_drop_is_reported_by_name`.
const REFUSE_CHILD: &str = "GREENLET_REFUSE_TEST_CHILD";

/// Run by the test below only: drops the last handle of a greenlet that
/// swallows every exit, then says it got control back.
#[test]
#[ignore = "child process of a_greenlet_that_refuses_to_die_on_drop_is_reported_by_name"]
fn refuse_child_process() {
    if std::env::var_os(REFUSE_CHILD).is_none() {
        return;
    }
    drop(stubborn("immortal-reported"));
    eprintln!("child: control came back after the drop");
    drop_from_a_forced_unwind("holder", "unreached");
}

/// On a new thread, a destructor run by the forced unwind at the thread's
/// exit (in greenlet `holder`) drops the last handle of greenlet `victim`:
/// its kill cannot switch, so it fails in the dropping greenlet without
/// reaching the victim.
fn drop_from_a_forced_unwind(holder: &'static str, victim: &'static str) {
    struct DropOnUnwind(Rc<RefCell<Option<Greenlet>>>);
    impl Drop for DropOnUnwind {
        fn drop(&mut self) {
            drop(self.0.borrow_mut().take());
        }
    }
    std::thread::spawn(move || {
        // The holder is older, so the exit unwinds it before the victim.
        let slot = Rc::new(RefCell::new(None));
        let holder = stubborn_holding(holder, DropOnUnwind(Rc::clone(&slot)));
        *slot.borrow_mut() = Some(stubborn_holding(victim, ()));
        drop(slot);
        std::mem::forget(holder); // only the thread's exit unwinds it
    })
    .join()
    .unwrap();
}

/// The warning for a greenlet that survives the kill of its last handle's
/// drop goes to stderr, which the test harness captures in-process: read it
/// from a child process.
#[test]
fn a_greenlet_that_refuses_to_die_on_drop_is_reported_by_name() {
    let out = common::run_child_test(module_path!(), "refuse_child_process", REFUSE_CHILD, "1");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    let warning = stderr
        .lines()
        .position(|l| l.contains("did not kill") && l.contains("'immortal-reported'"))
        .unwrap_or_else(|| panic!("no warning naming the greenlet; stderr: {stderr}"));
    let back = stderr
        .lines()
        .position(|l| l == "child: control came back after the drop")
        .unwrap_or_else(|| panic!("the drop did not return; stderr: {stderr}"));
    assert!(warning < back, "warned before the drop returned: {stderr}");
    let unreached = stderr
        .lines()
        .find(|l| l.contains("kill") && l.contains("'unreached'"))
        .unwrap_or_else(|| panic!("no warning naming 'unreached'; stderr: {stderr}"));
    assert!(
        unreached.contains("dropped by a greenlet being force-unwound")
            && !unreached.contains("caught the exit"),
        "{unreached}"
    );
}

/// Throwing into an unstarted greenlet sends the error up its parent chain:
/// with a parent that is a suspended greenlet other than the thrower, that
/// parent's pending switch raises it (returning it straight to the thrower
/// would hand main an `Err`).
#[test]
fn throw_into_unstarted_raises_in_its_parent_not_in_the_thrower() {
    let p = Greenlet::new(|_| {
        let main = getcurrent().parent().unwrap();
        Ok(Value::new(match main.switch("parked") {
            Ok(v) => format!("parent got a {}", v.type_name()),
            Err(e) => format!("parent raised {e}"),
        }))
    });
    assert_eq!(p.switch(()).unwrap().downcast::<&str>().unwrap(), "parked");
    let ran = Rc::new(RefCell::new(false));
    let r = Rc::clone(&ran);
    let g = Greenlet::builder()
        .parent(&p)
        .spawn(move |v| {
            *r.borrow_mut() = true;
            Ok(v)
        })
        .unwrap();
    let got = g.throw(GreenletError::user("never ran")).unwrap();
    assert_eq!(got.downcast::<String>().unwrap(), "parent raised never ran");
    assert!(g.is_dead() && !g.is_started() && !*ran.borrow());
    assert!(p.is_dead());
}

/// Panics when dropped (a closure capture whose destructor is user code).
struct PanicOnDrop;
impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("PanicOnDrop dropped (expected in this test)");
    }
}

/// Every report of a kill on drop goes through the `log` facade, in
/// process: a greenlet that survives the kill, one that turns the exit into
/// another error, a closure whose drop panics, a finalizer that panics, and
/// a greenlet dropped by a destructor of a force-unwound one.
#[test]
fn kill_on_drop_problems_are_reported_through_the_log_facade() {
    let _serial = common::serial();
    common::take_diagnostics();

    drop(stubborn("immortal-logged"));
    let refuses = Greenlet::builder()
        .name("turns-exit-into-error")
        .spawn(|_| {
            let parent = getcurrent().parent().unwrap();
            match parent.switch(()) {
                Err(e) if e.is_exit() => Err(GreenletError::user("refused to exit")),
                other => other,
            }
        })
        .unwrap();
    refuses.switch(()).unwrap();
    drop(refuses);
    let held = PanicOnDrop;
    let unstarted = Greenlet::builder()
        .name("closure-drop-panics")
        .spawn(move |v| {
            let _held = &held;
            Ok(v)
        })
        .unwrap();
    unstarted.kill().unwrap();
    assert!(unstarted.is_dead());
    let finalized = Greenlet::builder()
        .name("finalizer-panics")
        .spawn(Ok)
        .unwrap();
    finalized.on_finalize(|| panic!("finalizer panic (expected in this test)"));
    finalized.switch(()).unwrap();
    drop(finalized);

    drop_from_a_forced_unwind("holder-logged", "unreached-logged");

    let lines = common::take_diagnostics();
    common::diagnostic(
        &lines,
        "WARN greenlet::coroutine::",
        &["did not kill 'immortal-logged'", "leaking it"],
    );
    common::diagnostic(
        &lines,
        "WARN greenlet::coroutine::",
        &[
            "'turns-exit-into-error'",
            "ended with an error while being killed: refused to exit",
        ],
    );
    common::diagnostic(
        &lines,
        "ERROR greenlet::coroutine::",
        &[
            "dropping the closure of 'closure-drop-panics'",
            "PanicOnDrop dropped",
        ],
    );
    common::diagnostic(
        &lines,
        "ERROR greenlet::coroutine::",
        &[
            "a finalizer of 'finalizer-panics'",
            "finalizer panic (expected",
        ],
    );
    common::diagnostic(
        &lines,
        "WARN greenlet::coroutine::",
        &["cannot kill 'unreached-logged'", "force-unwound"],
    );
}
