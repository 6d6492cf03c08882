//! A greenlet's coroutine outlives its body: when the body ends the
//! coroutine parks with its stack, kept by the thread for the next start,
//! which runs its body on it. Whatever ran on a kept coroutine before (a
//! body that returned, failed, panicked or was killed) must not show in the
//! next greenlet, the stack counts must stay exact while coroutines are
//! kept, ended (more finish than one thread keeps) and trimmed, and thread
//! exit must unwind greenlets started on a kept coroutine as any other.
//!
//! The stack counters are process-wide, so these tests run one at a time.

use crate::common;

use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use greenlet::coroutine::trim_stack_pool;
use greenlet::{getcurrent, stack_stats, ErrorKind, Greenlet, GreenletError, Value};

/// Run `body` alone, on a fresh thread that has fully exited before the
/// next test starts.
fn serial(body: impl FnOnce() + Send + 'static) {
    let _serial = common::serial();
    std::thread::spawn(body).join().unwrap();
}

/// A greenlet that checks it runs as itself, under main, with the value it
/// was started with, and returns that value doubled.
fn doubler() -> Greenlet {
    let main = getcurrent();
    Greenlet::new(move |value| {
        let me = getcurrent();
        assert!(!me.is_main() && me.is_started() && !me.is_dead());
        assert_eq!(me.parent().map(|p| p.id()), Some(main.id()));
        Ok(Value::new(value.downcast::<u64>()? * 2))
    })
}

#[test]
fn greenlets_after_a_failed_panicked_or_killed_body_start_clean_on_the_kept_coroutine() {
    serial(|| {
        // Earlier tests' threads left their stacks in the global pool.
        trim_stack_pool();
        let warm = Greenlet::new(Ok);
        warm.switch(()).unwrap();
        let kept = stack_stats();
        assert_eq!(kept.pooled, 1, "one coroutine kept: {kept:?}");
        let ends: [&dyn Fn(); 4] = [
            &|| {
                let g = Greenlet::new(|_| Err(GreenletError::exit()));
                assert!(g.switch(()).is_ok(), "an exit's value reaches main");
            },
            &|| {
                let g = Greenlet::new(|value| value.downcast::<String>().map(Value::new));
                assert!(g.switch(1u8).is_err(), "a failed downcast is an error");
            },
            &|| {
                let g = Greenlet::new(|_| -> Result<Value, GreenletError> {
                    panic!("body panic (expected in this test)")
                });
                match g.switch(()).map_err(GreenletError::into_kind) {
                    Err(ErrorKind::Panic { message, .. }) => {
                        assert!(message.contains("body panic"), "{message}");
                    }
                    other => panic!("expected the panic, got {other:?}"),
                }
            },
            &|| {
                let main = getcurrent();
                let dropped = Rc::new(());
                let held = Rc::clone(&dropped);
                let g = Greenlet::new(move |_| {
                    let _held = held;
                    main.switch(())?;
                    unreachable!("killed while suspended")
                });
                g.switch(()).unwrap();
                g.kill().unwrap();
                assert_eq!(Rc::strong_count(&dropped), 1, "its stack was unwound");
            },
        ];
        for (round, end) in ends.iter().enumerate() {
            end();
            for value in 0..3u64 {
                let g = doubler();
                let doubled = g.switch(value).unwrap().downcast::<u64>().unwrap();
                assert_eq!(doubled, value * 2, "after end {round}");
                assert!(g.is_dead());
            }
            let now = stack_stats();
            assert_eq!(
                (now.live, now.pooled, now.created),
                (kept.live, kept.pooled, kept.created),
                "after end {round}, every start took the kept coroutine again"
            );
        }
    });
}

#[test]
fn a_suspended_greenlet_resumes_unharmed_while_others_run_on_the_kept_coroutine() {
    serial(|| {
        let main = getcurrent();
        let a = Greenlet::new(move |first| {
            let mut sum = first.downcast::<u64>()?;
            for _ in 0..3 {
                sum += main.switch(sum)?.downcast::<u64>()?;
            }
            Ok(Value::new(sum))
        });
        let mut last = a.switch(1u64).unwrap().downcast::<u64>().unwrap();
        for step in 0..3u64 {
            // Starts and ends a greenlet on the kept coroutine each time
            // (the first time, a new one) while `a` stays suspended.
            let g = doubler();
            assert_eq!(g.switch(step).unwrap().downcast::<u64>().unwrap(), step * 2);
            let back = a.switch(10u64).unwrap().downcast::<u64>().unwrap();
            assert_eq!(back, last + 10);
            last = back;
        }
        assert!(a.is_dead());
        assert_eq!(last, 31);
    });
}

#[test]
fn many_finishing_at_once_end_the_coroutines_not_kept_and_counts_stay_exact() {
    serial(|| {
        trim_stack_pool();
        let before = stack_stats();
        let main = getcurrent();
        let dropped = Arc::new(AtomicUsize::new(0));
        struct Count(Arc<AtomicUsize>);
        impl Drop for Count {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let suspended: Vec<Greenlet> = (0..20)
            .map(|_| {
                let main = main.clone();
                let count = Count(Arc::clone(&dropped));
                let g = Greenlet::new(move |_| {
                    let _count = count;
                    main.switch(())?;
                    Ok(Value::unit())
                });
                g.switch(()).unwrap();
                g
            })
            .collect();
        assert_eq!(stack_stats().live, before.live + 20);
        // Each ends in turn: one coroutine is kept, the others end (their
        // stacks pooled), each body's locals dropped once.
        for g in &suspended {
            g.switch(()).unwrap();
            assert!(g.is_dead());
        }
        assert_eq!(dropped.load(Ordering::SeqCst), 20);
        let after = stack_stats();
        assert_eq!(after.live, before.live, "{after:?}");
        assert_eq!(after.pooled, before.pooled + 20, "{after:?}");
        drop(suspended);
        // The kept one serves the next start; the trim ends it too.
        let g = doubler();
        assert_eq!(g.switch(4u64).unwrap().downcast::<u64>().unwrap(), 8);
        assert_eq!(stack_stats().created, after.created, "no new stack");
        assert!(trim_stack_pool() >= 20);
        let trimmed = stack_stats();
        assert_eq!((trimmed.live, trimmed.pooled), (before.live, 0));
        // A start after the trim makes a new coroutine on a new stack.
        let g = doubler();
        assert_eq!(g.switch(5u64).unwrap().downcast::<u64>().unwrap(), 10);
        assert_eq!(stack_stats().created, trimmed.created + 1);
    });
}

#[test]
fn thread_exit_unwinds_greenlets_started_on_the_kept_coroutine_and_ends_it() {
    let _serial = common::serial();
    trim_stack_pool();
    let before = stack_stats();
    let killed = Arc::new(AtomicUsize::new(0));
    let unwound = Arc::new(AtomicUsize::new(0));
    let (k, u) = (Arc::clone(&killed), Arc::clone(&unwound));
    struct Count(Arc<AtomicUsize>);
    impl Drop for Count {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    std::thread::spawn(move || {
        let main = getcurrent();
        // Its coroutine is kept, then taken by the one that dies by kill.
        Greenlet::new(Ok).switch(()).unwrap();
        let count = Count(k);
        let polite = Greenlet::new(move |_| {
            let _count = count;
            main.switch(())?;
            Ok(Value::unit())
        });
        polite.switch(()).unwrap();
        // Kept again, then taken by one that swallows every kill: the
        // thread's exit unwinds it by force.
        Greenlet::new(Ok).switch(()).unwrap();
        let stubborn = common::stubborn_holding("stubborn-on-kept", Count(u));
        // And one more kept when the thread goes.
        Greenlet::new(Ok).switch(()).unwrap();
        std::mem::forget((polite, stubborn));
    })
    .join()
    .unwrap();
    assert_eq!(killed.load(Ordering::SeqCst), 1, "killed at thread exit");
    assert_eq!(unwound.load(Ordering::SeqCst), 1, "force-unwound");
    let exited = stack_stats();
    assert_eq!(exited.live, before.live, "no stack left live: {exited:?}");
    trim_stack_pool();
    assert_eq!(stack_stats().pooled, 0);
}
