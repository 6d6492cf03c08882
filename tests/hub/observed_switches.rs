//! The hub's start, park and resume of a green thread take a lean switch
//! path (`coroutine::direct`) only when nothing observes the switch: with a
//! trace hook set on a worker's thread, its hooks still see every switch
//! between a green thread and its hub, a green thread's start and end
//! included; and a cancellation still arrives at a parking point entered
//! through the lean path.

use crate::common;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use greenlet::hub::{self, Wait};
use greenlet::{getcurrent, settrace, ThreadTraceHook, TraceEvent};

use common::hub::{rt, until_parked};

#[test]
fn trace_hooks_see_the_hubs_switches_while_one_is_set() {
    let rt = rt(1);
    let events = rt
        .block_on(|| {
            // (origin is the hub, target is the hub) per switch event.
            let seen: Rc<RefCell<Vec<(bool, bool)>>> = Rc::default();
            let log = Rc::clone(&seen);
            let hook: ThreadTraceHook = Rc::new(move |event: &TraceEvent| {
                if let TraceEvent::Switch { origin, target } = event {
                    log.borrow_mut().push((origin.is_main(), target.is_main()));
                }
                Ok(())
            });
            let old = settrace(Some(hook));
            for _ in 0..3 {
                hub::yield_now();
            }
            settrace(old);
            let with_hook = seen.borrow().len();
            for _ in 0..3 {
                hub::yield_now();
            }
            assert_eq!(seen.borrow().len(), with_hook, "events without a hook");
            let events = seen.borrow().clone();
            events
        })
        .expect("the green thread");
    // Each yield: the green thread to the hub, then the hub back to it.
    assert_eq!(events, [(false, true), (true, false)].repeat(3));
}

#[test]
fn trace_hooks_see_a_green_threads_start_and_end_while_one_is_set() {
    let rt = rt(1);
    let (me, task, events) = rt
        .block_on(|| {
            // (origin id, target id, target is the hub) per switch event.
            let seen: Rc<RefCell<Vec<(u64, u64, bool)>>> = Rc::default();
            let log = Rc::clone(&seen);
            let hook: ThreadTraceHook = Rc::new(move |event: &TraceEvent| {
                if let TraceEvent::Switch { origin, target } = event {
                    log.borrow_mut()
                        .push((origin.id(), target.id(), target.is_main()));
                }
                Ok(())
            });
            let old = settrace(Some(hook));
            let task = hub::spawn(|| getcurrent().id()).join();
            settrace(old);
            let events = seen.borrow().clone();
            (getcurrent().id(), task, events)
        })
        .expect("the green thread");
    let task = task.expect("the spawned green thread");
    let hub = events.first().map(|e| e.1).expect("an event");
    // The join parks, the hub starts the task, the task ends back into the
    // hub, the hub resumes the joiner.
    assert_eq!(
        events,
        [
            (me, hub, true),
            (hub, task, false),
            (task, hub, true),
            (hub, me, false)
        ]
    );
}

#[test]
fn a_cancel_reaches_a_green_thread_parked_on_the_lean_path() {
    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let rt = rt(1);
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = Flag(Arc::clone(&dropped));
    let err = rt
        .block_on(move || {
            let h = hub::spawn(move || {
                let _flag = flag;
                // Many lean parks and resumes first, then a long one.
                for _ in 0..100 {
                    hub::yield_now();
                }
                hub::sleep(Duration::from_secs(3600));
            });
            until_parked(&h, Wait::Sleep);
            h.cancel();
            h.join().unwrap_err()
        })
        .expect("the green thread");
    assert!(err.is_cancelled(), "{err}");
    assert!(dropped.load(Ordering::SeqCst));
}
