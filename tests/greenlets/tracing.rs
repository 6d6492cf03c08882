//! Conformance: trace hooks (in the spirit of greenlet's test_tracing.py):
//! events and their order, run in the target after the switch, failing
//! hooks removed with their error replacing the value, the global hook.
//!
//! The global hook is process-wide, so the tests that use it hold a lock
//! and only count events of their own thread.

use crate::common;

use std::rc::Rc;
use std::sync::{Arc, Mutex};

use greenlet::{
    getcurrent, set_global_trace, settrace, ErrorKind, Greenlet, GreenletError, ThreadTraceHook,
    TraceEvent,
};

type Log = Arc<Mutex<Vec<String>>>;

/// A greenlet's name, `main` for any thread's main greenlet (named after
/// its thread, here the test's).
fn name(g: &Greenlet) -> String {
    if g.is_main() {
        "main".into()
    } else {
        g.name()
    }
}

/// A hook that records `kind origin->target (current)` with names.
fn recorder(log: &Log) -> ThreadTraceHook {
    let log = Arc::clone(log);
    Rc::new(move |e: &TraceEvent| {
        let kind = match e {
            TraceEvent::Switch { .. } => "switch",
            TraceEvent::Throw { .. } => "throw",
        };
        log.lock().unwrap().push(format!(
            "{kind} {}->{} in {}",
            name(e.origin()),
            name(e.target()),
            name(&getcurrent())
        ));
        Ok(())
    })
}

#[test]
fn switch_and_throw_events_in_order_run_in_the_target() {
    let log: Log = Arc::default();
    assert!(settrace(Some(recorder(&log))).is_none());
    let g = Greenlet::builder()
        .name("g")
        .spawn(|_| {
            let main = getcurrent().parent().unwrap();
            let _ = main.switch(1);
            main.switch(2)?;
            Ok(().into())
        })
        .unwrap();
    g.switch(()).unwrap();
    g.throw(GreenletError::user("x")).unwrap();
    let err = g.throw(GreenletError::user("y")).unwrap_err();
    assert_eq!(err.to_string(), "y");
    let previous = settrace(None).expect("our hook");
    drop(previous);
    assert_eq!(
        *log.lock().unwrap(),
        [
            "switch main->g in g",
            "switch g->main in main",
            "throw main->g in g",
            "switch g->main in main",
            "throw main->g in g",
            "throw g->main in main", // g finished with the error
        ]
    );
}

#[test]
fn switch_to_self_is_traced() {
    let log: Log = Arc::default();
    settrace(Some(recorder(&log)));
    getcurrent().switch(()).unwrap();
    settrace(None);
    assert_eq!(*log.lock().unwrap(), ["switch main->main in main"]);
}

#[test]
fn failing_hook_is_removed_and_its_error_replaces_the_value() {
    let hook: ThreadTraceHook = Rc::new(|e: &TraceEvent| {
        if e.target().is_main() {
            Err(GreenletError::user("hook says no"))
        } else {
            Ok(())
        }
    });
    settrace(Some(hook));
    let g = Greenlet::new(|_| {
        let main = getcurrent().parent().unwrap();
        main.switch("value")?;
        Ok(().into())
    });
    match g.switch(()).map_err(GreenletError::into_kind) {
        Err(ErrorKind::User(e)) => assert_eq!(e.to_string(), "hook says no"),
        other => panic!("unexpected {other:?}"),
    }
    assert!(
        greenlet::gettrace().is_none(),
        "the failing hook was removed"
    );
    // Switching still works, untraced.
    assert!(g.kill().is_ok());
}

#[test]
fn panicking_hook_is_removed_too() {
    let hook: ThreadTraceHook = Rc::new(|_: &TraceEvent| panic!("hook panic"));
    settrace(Some(hook));
    let g = Greenlet::new(Ok);
    // Into g: the hook panics in g, so g's run gets the error instead of the
    // value, and dies without running; the error comes back to main.
    let err = g.switch(5).unwrap_err();
    let expected = format!(
        "greenlet '{}' (id {})'s trace hook panicked: hook panic",
        g.name(),
        g.id()
    );
    assert_eq!(err.to_string(), expected);
    match err.into_kind() {
        ErrorKind::Panic { message, .. } => assert_eq!(message, "hook panic"),
        other => panic!("unexpected {other:?}"),
    }
    assert!(greenlet::gettrace().is_none());
    assert!(g.is_dead());
}

#[test]
fn switches_inside_a_hook_are_not_traced() {
    let log: Log = Arc::default();
    let l = Arc::clone(&log);
    let helper = Greenlet::builder().name("helper").spawn(Ok).unwrap();
    let helper_in_hook = Mutex::new(Some(helper));
    let hook: ThreadTraceHook = Rc::new(move |e: &TraceEvent| {
        l.lock()
            .unwrap()
            .push(format!("{}->{}", name(e.origin()), name(e.target())));
        if let Some(h) = helper_in_hook.lock().unwrap().take() {
            h.set_parent(&getcurrent())?; // so it finishes back into the hook
            h.switch(())?; // switches inside the hook: no nested events
        }
        Ok(())
    });
    settrace(Some(hook));
    let g = Greenlet::builder().name("g").spawn(Ok).unwrap();
    g.switch(()).unwrap();
    settrace(None);
    assert_eq!(*log.lock().unwrap(), ["main->g", "g->main"]);
}

#[test]
fn settrace_is_per_thread() {
    let log: Log = Arc::default();
    settrace(Some(recorder(&log)));
    let other = std::thread::spawn(|| {
        assert!(greenlet::gettrace().is_none());
        Greenlet::new(Ok).switch(()).unwrap();
    });
    other.join().unwrap();
    settrace(None);
    assert!(log.lock().unwrap().is_empty());
}

#[test]
fn global_hook_sees_every_thread_and_runs_after_the_thread_hook() {
    let _serial = common::serial();
    let log: Log = Arc::default();
    let l = Arc::clone(&log);
    let previous = set_global_trace(Some(Arc::new(move |e: &TraceEvent| {
        if name(e.target()).starts_with("traced-") || name(e.origin()).starts_with("traced-") {
            l.lock()
                .unwrap()
                .push(format!("global {}->{}", name(e.origin()), name(e.target())));
        }
        Ok(())
    })));
    assert!(previous.is_none());
    let l = Arc::clone(&log);
    settrace(Some(Rc::new(move |e: &TraceEvent| {
        l.lock()
            .unwrap()
            .push(format!("thread {}->{}", name(e.origin()), name(e.target())));
        Ok(())
    })));
    Greenlet::builder()
        .name("traced-a")
        .spawn(Ok)
        .unwrap()
        .switch(())
        .unwrap();
    settrace(None);
    std::thread::spawn(|| {
        Greenlet::builder()
            .name("traced-b")
            .spawn(Ok)
            .unwrap()
            .switch(())
            .unwrap();
    })
    .join()
    .unwrap();
    set_global_trace(None);
    assert_eq!(
        *log.lock().unwrap(),
        [
            "thread main->traced-a",
            "global main->traced-a",
            "thread traced-a->main",
            "global traced-a->main",
            "global main->traced-b",
            "global traced-b->main",
        ]
    );
}

#[test]
fn failing_global_hook_is_removed() {
    let _serial = common::serial();
    set_global_trace(Some(Arc::new(|e: &TraceEvent| {
        if name(e.target()) == "trip" {
            Err(GreenletError::user("global no"))
        } else {
            Ok(())
        }
    })));
    let g = Greenlet::builder().name("trip").spawn(Ok).unwrap();
    let err = g.switch(()).unwrap_err();
    assert_eq!(err.to_string(), "global no");
    assert!(set_global_trace(None).is_none(), "it was removed");
}
