//! Where a spawned task starts on a runtime of two workers: the newest
//! spawn of a green thread that then parks starts on the spawner's worker,
//! and a spawner that never parks does not hold its newest spawn back for
//! long (another worker takes it).

use crate::common;

use common::hub::{bounded, rt, HANG};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, ThreadId};
use std::time::Instant;

use greenlet::hub;

/// Spin (not parking) until `flag` is set, at most [`HANG`]; whether it was.
fn spin_until(flag: &AtomicBool) -> bool {
    let start = Instant::now();
    while !flag.load(Ordering::Acquire) {
        if start.elapsed() > HANG {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}

/// A task that sets `flag` when it starts and returns its thread.
fn flagging(flag: &Arc<AtomicBool>) -> impl FnOnce() -> ThreadId + Send + 'static {
    let flag = Arc::clone(flag);
    move || {
        flag.store(true, Ordering::Release);
        thread::current().id()
    }
}

#[test]
fn a_spawner_that_never_parks_has_its_newest_spawn_taken_by_the_other_worker() {
    // The spawner spins without parking, so its own worker never reaches
    // a scheduling point: the child starts only if the other (idle) worker
    // takes it from the spawner's newest-spawn slot once it has aged.
    let (started, elsewhere) = bounded(120, || {
        rt(2)
            .block_on(|| {
                let me = thread::current().id();
                let ran = Arc::new(AtomicBool::new(false));
                let child = hub::spawn(flagging(&ran));
                let started = spin_until(&ran);
                let on = child.join().expect("the child");
                (started, on != me)
            })
            .expect("the block_on task")
    });
    assert!(started, "the child did not start within {HANG:?}");
    assert!(
        elsewhere,
        "the child started on the spinning spawner's worker"
    );
}

#[test]
fn a_task_spawned_by_a_green_thread_that_then_parks_runs_on_its_worker() {
    // The other worker is held by a green thread that spins until released
    // (it gets there as above: its spawner spins too), so it cannot take
    // anything; the child, spawned and joined at once, starts on the
    // joiner's worker when it parks.
    let outcome = bounded(120, || {
        rt(2)
            .block_on(|| {
                let me = thread::current().id();
                let holding = Arc::new(AtomicBool::new(false));
                let release = Arc::new(AtomicBool::new(false));
                let (hold, free) = (Arc::clone(&holding), Arc::clone(&release));
                let holder = hub::spawn(move || {
                    hold.store(true, Ordering::Release);
                    spin_until(&free)
                });
                let held = spin_until(&holding);
                let ran = Arc::new(AtomicBool::new(false));
                let on = hub::spawn(flagging(&ran)).join().expect("the child");
                release.store(true, Ordering::Release);
                let released = holder.join().expect("the holder");
                (held, released, on == me)
            })
            .expect("the block_on task")
    });
    assert_eq!(
        outcome,
        (true, true, true),
        "(the holder started, it was released, the child ran on the joiner's worker)"
    );
}
