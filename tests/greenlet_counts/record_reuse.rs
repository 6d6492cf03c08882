//! Greenlet records are reused by their thread, and a dead greenlet stays in
//! its thread's registry while it has handles: the leak counters and the
//! finalizers must not notice. Checked with dead greenlets whose last handle
//! goes on another thread (while the owner is alive and idle, and after the
//! owner exited), and with records reused across different parents.
//!
//! The counters are process-wide, so these tests run one at a time.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::ThreadId;

use greenlet::{getcurrent, live_greenlets, stack_stats, Greenlet, Value};

/// Run `body` alone, on a fresh thread that has fully exited before the
/// next test starts.
fn serial(body: impl FnOnce() + Send + 'static) {
    let _serial = common::serial();
    std::thread::spawn(body).join().unwrap();
}

/// A greenlet that ran to its end, with a finalizer recording the thread it
/// ran on.
fn finished_with_finalizer(ran_on: &Arc<Mutex<Vec<ThreadId>>>) -> Greenlet {
    let g = Greenlet::new(Ok);
    let ran_on = Arc::clone(ran_on);
    g.on_finalize(move || ran_on.lock().unwrap().push(std::thread::current().id()));
    g.switch(()).unwrap();
    assert!(g.is_dead());
    g
}

#[test]
fn last_handle_of_a_dead_greenlet_dropped_on_another_thread_while_the_owner_idles() {
    serial(|| {
        let _ = getcurrent();
        let live_before = live_greenlets();
        let ran_on = Arc::new(Mutex::new(Vec::new()));
        let g = finished_with_finalizer(&ran_on);
        assert_eq!(live_greenlets(), live_before + 1, "a handle keeps it");
        let dropper = std::thread::spawn(move || {
            drop(g);
            std::thread::current().id()
        });
        let dropper_id = dropper.join().unwrap();
        // Finalized where its last handle went, and no longer counted,
        // though this thread (its owner) made no greenlet operation since.
        assert_eq!(*ran_on.lock().unwrap(), vec![dropper_id]);
        assert_eq!(live_greenlets(), live_before);
        // The owner releases the record at its next operations; making and
        // dropping more greenlets (reusing records) keeps the count exact.
        for i in 0..100u64 {
            let g = Greenlet::new(Ok);
            assert_eq!(g.switch(i).unwrap().downcast::<u64>().unwrap(), i);
        }
        assert_eq!(live_greenlets(), live_before);
        assert_eq!(ran_on.lock().unwrap().len(), 1, "finalized once");
    });
}

#[test]
fn dead_greenlets_whose_handles_outlive_their_thread() {
    serial(|| {
        let _ = getcurrent();
        let live_before = live_greenlets();
        let stacks_before = stack_stats().live;
        let ran_on = Arc::new(Mutex::new(Vec::new()));
        let (send, receive) = mpsc::channel();
        let r = Arc::clone(&ran_on);
        std::thread::spawn(move || {
            // Dead before the thread exits, one handle each: not finalized
            // by the thread's exit, but when the handle goes.
            let kept: Vec<Greenlet> = (0..3).map(|_| finished_with_finalizer(&r)).collect();
            send.send(kept).unwrap();
        })
        .join()
        .unwrap();
        let kept = receive.recv().unwrap();
        assert!(ran_on.lock().unwrap().is_empty(), "not finalized at exit");
        // Three records and their parent (the exited thread's main greenlet).
        assert_eq!(live_greenlets(), live_before + 4);
        assert_eq!(stack_stats().live, stacks_before);
        drop(kept);
        let me = std::thread::current().id();
        assert_eq!(*ran_on.lock().unwrap(), vec![me, me, me]);
        assert_eq!(live_greenlets(), live_before);
    });
}

#[test]
fn reused_records_start_clean() {
    serial(|| {
        let main = getcurrent();
        let live_before = live_greenlets();
        let finalized = Arc::new(AtomicUsize::new(0));
        // Records reused under another parent, with another name, with and
        // without finalizers, keep nothing of the greenlet they served.
        for round in 0..50u64 {
            let outer = Greenlet::builder()
                .name(format!("outer-{round}"))
                .spawn(move |v| {
                    let inner = Greenlet::new(Ok);
                    assert_eq!(inner.parent(), Some(getcurrent()));
                    assert!(!inner.is_started());
                    inner.switch(v)
                })
                .unwrap();
            assert_eq!(outer.name(), format!("outer-{round}"));
            assert_eq!(outer.parent(), Some(main.clone()));
            if round % 2 == 0 {
                let f = Arc::clone(&finalized);
                outer.on_finalize(move || {
                    f.fetch_add(1, Ordering::SeqCst);
                });
            }
            let back = outer.switch(round).unwrap().downcast::<u64>().unwrap();
            assert_eq!(back, round);
            assert!(outer.is_dead());
            drop(outer);
            let plain = Greenlet::new(|_| Ok(Value::new(getcurrent().name())));
            let name = plain.switch(()).unwrap().downcast::<String>().unwrap();
            assert_eq!(name, format!("greenlet-{}", plain.id()));
            assert_eq!(plain.parent(), Some(main.clone()));
        }
        assert_eq!(finalized.load(Ordering::SeqCst), 25);
        assert_eq!(live_greenlets(), live_before);
    });
}

#[test]
fn a_greenlet_reparented_or_killed_after_it_finished_releases_its_parent() {
    serial(|| {
        let main = getcurrent();
        let live_before = live_greenlets();
        for round in 0..20u64 {
            // Its record was ready for reuse as it is when its body ended
            // (main's parent, no name); re-parented since, it is not.
            let other = Greenlet::new(Ok);
            let g = Greenlet::new(Ok);
            g.switch(()).unwrap();
            assert!(g.is_dead());
            g.set_parent(&other).unwrap();
            let weak = other.downgrade();
            drop(other);
            assert!(
                weak.upgrade().is_some(),
                "the dead greenlet's parent link holds it"
            );
            drop(g);
            assert!(
                weak.upgrade().is_none(),
                "round {round}: the dropped greenlet released the parent it was given"
            );
            // Killed by main while suspended: main is its parent for the
            // kill, then the old parent (main) is back.
            let v = Greenlet::new(|_| {
                getcurrent().parent().unwrap().switch(())?;
                Ok(Value::unit())
            });
            v.switch(()).unwrap();
            v.kill().unwrap();
            assert!(v.is_dead());
            assert_eq!(v.parent(), Some(main.clone()));
            drop(v);
            // The records are reused with main as the parent.
            let next = Greenlet::new(|_| Ok(Value::new(getcurrent().parent().unwrap().id())));
            assert_eq!(next.parent(), Some(main.clone()));
            let parent_id = next.switch(()).unwrap().downcast::<u64>().unwrap();
            assert_eq!(parent_id, main.id());
        }
        assert_eq!(live_greenlets(), live_before);
    });
}

#[test]
fn dead_greenlets_dropped_on_other_threads_while_the_owner_keeps_making_greenlets() {
    serial(|| {
        let _ = getcurrent();
        let live_before = live_greenlets();
        let finalized = Arc::new(AtomicUsize::new(0));
        let (send, receive) = mpsc::channel::<Vec<Greenlet>>();
        let receive = Arc::new(Mutex::new(receive));
        // Droppers take batches of dead greenlets (some with a second handle
        // kept by the owner) and drop them while the owner goes on.
        let droppers: Vec<_> = (0..3)
            .map(|_| {
                let receive = Arc::clone(&receive);
                std::thread::spawn(move || loop {
                    let batch = receive.lock().unwrap().recv();
                    match batch {
                        Ok(batch) => drop(batch),
                        Err(_) => break,
                    }
                })
            })
            .collect();
        let mut kept = Vec::new();
        for round in 0..200u64 {
            let mut batch = Vec::new();
            for i in 0..10u64 {
                let g = Greenlet::new(move |v| Ok(Value::new(v.downcast::<u64>()? + i)));
                let f = Arc::clone(&finalized);
                g.on_finalize(move || {
                    f.fetch_add(1, Ordering::SeqCst);
                });
                assert_eq!(
                    g.switch(round).unwrap().downcast::<u64>().unwrap(),
                    round + i
                );
                if i % 5 == 0 {
                    kept.push(g.clone());
                }
                batch.push(g);
            }
            send.send(batch).unwrap();
            if round % 50 == 49 {
                // Drop the owner's copies here, racing the droppers.
                kept.clear();
            }
        }
        drop(send);
        for d in droppers {
            d.join().unwrap();
        }
        drop(kept);
        // The owner's next operation releases what the droppers sent back.
        drop(Greenlet::new(Ok));
        assert_eq!(
            finalized.load(Ordering::SeqCst),
            2000,
            "each finalized once"
        );
        assert_eq!(live_greenlets(), live_before);
    });
}

#[test]
fn a_finished_greenlets_stack_is_kept_for_the_next_start_and_counted_as_pooled() {
    use greenlet::coroutine::trim_stack_pool;
    let _serial = common::serial();
    // Earlier tests' threads left their stacks in the global pool.
    trim_stack_pool();
    let before = stack_stats();
    assert_eq!(before.pooled, 0, "{before:?}");
    std::thread::spawn(move || {
        let run = || {
            let g = Greenlet::new(Ok);
            g.switch(()).unwrap();
            assert!(g.is_dead());
        };
        run();
        let kept = stack_stats();
        assert_eq!(kept.live, before.live, "a kept stack is not live: {kept:?}");
        assert_eq!(kept.pooled, 1, "it is pooled: {kept:?}");
        for _ in 0..100 {
            run();
        }
        let after = stack_stats();
        assert_eq!(
            (after.live, after.pooled, after.created),
            (kept.live, kept.pooled, kept.created),
            "each start took the kept stack, each finish kept it again"
        );
        // Another size does not take it (and keeps nothing more).
        let big = Greenlet::builder()
            .stack_size(1024 * 1024)
            .spawn(Ok)
            .unwrap();
        big.switch(()).unwrap();
        assert_eq!(stack_stats().live, before.live);
        assert!(
            trim_stack_pool() >= 2,
            "the kept stack and the other size's"
        );
        let trimmed = stack_stats();
        assert_eq!(
            (trimmed.live, trimmed.pooled),
            (before.live, 0),
            "{trimmed:?}"
        );
        // Kept again, then the thread exits with it.
        run();
        assert_eq!(stack_stats().pooled, 1);
    })
    .join()
    .unwrap();
    let exited = stack_stats();
    assert_eq!(exited.live, before.live, "no stack left out: {exited:?}");
    assert_eq!(
        exited.pooled, 1,
        "the exited thread's kept stack is in the pool"
    );
    trim_stack_pool();
    assert_eq!(stack_stats().pooled, 0);
}
