//! Stress and leak checks (in the spirit of greenlet's test_leaks.py):
//! many greenlets created, switched and killed, and many short-lived
//! threads using greenlets, with the live greenlet records and stacks
//! counted before and after.
//!
//! The counters are process-wide, so these tests run one at a time.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use greenlet::{getcurrent, live_greenlets, stack_stats, Greenlet, Value};

/// Run `body` alone, on a fresh thread that has fully exited (greenlet state
/// torn down) before the next test starts.
fn serial(body: impl FnOnce() + Send + 'static) {
    let _serial = common::serial();
    std::thread::spawn(body).join().unwrap();
}

struct DropCounter(Arc<AtomicUsize>);
impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn parked(counter: &Arc<AtomicUsize>) -> Greenlet {
    let c = Arc::clone(counter);
    Greenlet::new(move |v| {
        let _local = DropCounter(c);
        let main = getcurrent().parent().unwrap();
        let mut n = v.downcast::<u64>()?;
        loop {
            n += main.switch(n)?.downcast::<u64>()?;
        }
    })
}

#[test]
fn ten_thousand_greenlets_created_switched_and_killed() {
    serial(ten_thousand_greenlets_created_switched_and_killed_body);
}

fn ten_thousand_greenlets_created_switched_and_killed_body() {
    let _ = getcurrent();
    let live_before = live_greenlets();
    let stacks_before = stack_stats().live;
    let dropped = Arc::new(AtomicUsize::new(0));

    let greenlets: Vec<Greenlet> = (0..10_000).map(|_| parked(&dropped)).collect();
    assert_eq!(live_greenlets(), live_before + 10_000);
    for (i, g) in greenlets.iter().enumerate() {
        assert_eq!(
            g.switch(i as u64).unwrap().downcast::<u64>().unwrap(),
            i as u64
        );
    }
    assert_eq!(stack_stats().live, stacks_before + 10_000);
    for (i, g) in greenlets.iter().enumerate() {
        assert_eq!(
            g.switch(1u64).unwrap().downcast::<u64>().unwrap(),
            i as u64 + 1
        );
    }
    assert_eq!(dropped.load(Ordering::SeqCst), 0);
    // Half killed explicitly, half killed by dropping the last handle.
    let (kill, drop_them): (Vec<_>, Vec<_>) = greenlets
        .into_iter()
        .enumerate()
        .partition(|(i, _)| i % 2 == 0);
    for (_, g) in &kill {
        g.kill().unwrap();
        assert!(g.is_dead());
    }
    assert_eq!(dropped.load(Ordering::SeqCst), 5_000);
    drop(drop_them);
    assert_eq!(dropped.load(Ordering::SeqCst), 10_000);
    drop(kill);
    assert_eq!(live_greenlets(), live_before);
    assert_eq!(stack_stats().live, stacks_before);
}

#[test]
fn create_run_drop_in_a_loop_does_not_grow() {
    serial(create_run_drop_in_a_loop_does_not_grow_body);
}

fn create_run_drop_in_a_loop_does_not_grow_body() {
    let _ = getcurrent();
    let live_before = live_greenlets();
    let stacks_before = stack_stats();
    for i in 0..20_000u64 {
        let payload = String::from("captured");
        let g =
            Greenlet::new(move |v| Ok(Value::new(payload.len() as u64 + i + v.downcast::<u64>()?)));
        assert_eq!(
            g.switch(1u64).unwrap().downcast::<u64>().unwrap(),
            8 + i + 1
        );
    }
    assert_eq!(live_greenlets(), live_before);
    let after = stack_stats();
    assert_eq!(after.live, stacks_before.live);
    // Reused from the pool: at most one new stack for the whole loop.
    assert!(
        after.created <= stacks_before.created + 1,
        "{stacks_before:?} -> {after:?}"
    );
}

#[test]
fn a_thousand_short_lived_threads_using_greenlets() {
    serial(a_thousand_short_lived_threads_using_greenlets_body);
}

fn a_thousand_short_lived_threads_using_greenlets_body() {
    let _ = getcurrent();
    let live_before = live_greenlets();
    let stacks_before = stack_stats().live;
    let dropped = Arc::new(AtomicUsize::new(0));
    let finalized = Arc::new(AtomicUsize::new(0));

    let mut survivors = Vec::new();
    for _batch in 0..250 {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (d, f) = (Arc::clone(&dropped), Arc::clone(&finalized));
                std::thread::spawn(move || {
                    let f2 = Arc::clone(&f);
                    getcurrent().on_finalize(move || {
                        f2.fetch_add(1, Ordering::SeqCst);
                    });
                    let a = parked(&d);
                    let b = parked(&d);
                    assert_eq!(a.switch(1u64).unwrap().downcast::<u64>().unwrap(), 1);
                    assert_eq!(b.switch(2u64).unwrap().downcast::<u64>().unwrap(), 2);
                    a.kill().unwrap();
                    let done = Greenlet::new(Ok);
                    done.switch(()).unwrap();
                    // `b` outlives the thread (returned to the joiner), so it
                    // is still suspended when the thread exits: the exit
                    // must unwind it.
                    b
                })
            })
            .collect();
        for t in threads {
            survivors.push(t.join().unwrap());
        }
    }
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        2_000,
        "every greenlet's locals were dropped"
    );
    assert_eq!(
        finalized.load(Ordering::SeqCst),
        1_000,
        "every main greenlet was finalized"
    );
    assert_eq!(stack_stats().live, stacks_before);
    assert!(survivors.iter().all(Greenlet::is_dead));
    // Each survivor keeps its record and its parent (its thread's main
    // greenlet) alive; dropping them frees everything.
    assert_eq!(live_greenlets(), live_before + 2_000);
    drop(survivors);
    assert_eq!(live_greenlets(), live_before);
}
