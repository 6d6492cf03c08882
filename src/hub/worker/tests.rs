//! Where the workers start tasks: the newest-spawn slot against other
//! workers' looks, the deque's steals, and placement after the shutdown.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::super::shared::Shared;
use super::current::current;

use std::panic::Location;
use std::sync::mpsc;

use crate::hub::spawning::NewTask;
use crate::hub::Runtime;

/// How long a test waits for what must happen before it calls it hung.
const HANG: Duration = Duration::from_secs(30);

/// A runtime of two workers (no watchdog) and its shared state.
pub(crate) fn runtime_of_two() -> (Runtime, Arc<Shared>) {
    let rt = Runtime::builder()
        .worker_threads(2)
        .watchdog(None)
        .build()
        .expect("a runtime");
    let shared = rt
        .block_on(|| Arc::clone(&current().expect("a worker").shared))
        .expect("the block_on task");
    (rt, shared)
}

/// A runtime of two workers (no watchdog) whose newest spawns never
/// age: no worker takes another's.
fn runtime_of_two_never_aging() -> Runtime {
    Runtime::builder()
        .worker_threads(2)
        .watchdog(None)
        .slot_age(Duration::from_secs(3600))
        .build()
        .expect("a runtime")
}

/// Spin (not parking) until `flag` is set, at most [`HANG`]; whether it
/// was.
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

/// A green thread that spawns a task and then parks (joins it) has it
/// start on its own worker, while the other worker is idle and looks
/// for work after the spawn: the spawn wakes it from its sleep, and it
/// goes through a round of its loop (where it would steal a task from
/// the deque) before it sleeps again. The newest spawn waits in the
/// spawner's slot, which the other worker leaves alone until it ages
/// (never, here), so it has not started when the spawner parks, and
/// then starts on the spawner's worker.
#[test]
fn a_spawn_joined_after_the_other_worker_looked_starts_on_the_spawners_worker() {
    let rt = runtime_of_two_never_aging();
    let outcomes = rt
        .block_on(|| {
            let here = current().expect("a worker");
            let me = std::thread::current().id();
            let other = &here.shared.workers[1 - here.index];
            let asleep = || {
                other.sleeping.load(Ordering::SeqCst) && here.shared.idle.load(Ordering::SeqCst) > 0
            };
            (0..20)
                .map(|_| {
                    let start = Instant::now();
                    while !asleep() {
                        assert!(start.elapsed() < HANG, "the other worker never slept");
                        std::hint::spin_loop();
                    }
                    let ran = Arc::new(AtomicBool::new(false));
                    let flag = Arc::clone(&ran);
                    let h = crate::hub::spawn(move || {
                        flag.store(true, Ordering::Release);
                        std::thread::current().id()
                    });
                    // Woken by the spawn (which cleared its flag), it
                    // sets it again once its round found nothing.
                    let slept = spin_until(&other.sleeping);
                    let early = ran.load(Ordering::Acquire);
                    let on = h.join().expect("the child");
                    (slept, early, on == me)
                })
                .collect::<Vec<_>>()
        })
        .expect("the block_on task");
    for outcome in outcomes {
        assert_eq!(
            outcome,
            (true, false, true),
            "(the other worker slept again, the child started before the join, \
             the child started on the spawner's worker)"
        );
    }
}

/// A newer spawn moves the older one to the deque, where the idle
/// worker steals it while the spawner spins; the newest stays in the
/// slot (not started while the spawner does not park) and starts on
/// the spawner's worker once it joins.
#[test]
fn a_newer_spawn_leaves_the_older_one_to_steal() {
    let rt = runtime_of_two_never_aging();
    let outcome = rt
        .block_on(|| {
            let me = std::thread::current().id();
            let older_ran = Arc::new(AtomicBool::new(false));
            let newest_ran = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&older_ran);
            let older = crate::hub::spawn(move || {
                flag.store(true, Ordering::Release);
                std::thread::current().id()
            });
            let flag = Arc::clone(&newest_ran);
            let newest = crate::hub::spawn(move || {
                flag.store(true, Ordering::Release);
                std::thread::current().id()
            });
            let stolen = spin_until(&older_ran);
            let newest_early = newest_ran.load(Ordering::Acquire);
            let older_on = older.join().expect("the older task");
            let newest_on = newest.join().expect("the newest task");
            (stolen, newest_early, older_on != me, newest_on == me)
        })
        .expect("the block_on task");
    assert_eq!(
        outcome,
        (true, false, true, true),
        "(older started while the spawner spun, newest started while the spawner spun, \
         older on the other worker, newest on the spawner's)"
    );
}

/// `net::serve` on a blocking-pool thread places its connections'
/// tasks through `Remote::place`; one placed after the shutdown has
/// closed the inboxes (the thread was past its check of the shutdown
/// flag) must be refused, so the caller drops it: left in the inbox,
/// it held the runtime's `Shared` (which holds the inbox) for ever,
/// and its closure, and the connection in it, with it.
#[test]
fn a_placement_after_the_shutdown_is_refused_not_leaked() {
    const PLACED: usize = 8;
    let (rt, shared) = runtime_of_two();
    let runtime_state = Arc::downgrade(&shared);
    let held = Arc::new(());
    let in_closures = Arc::clone(&held);
    let (go, wait_for_go) = mpsc::channel::<()>();
    let (started, wait_for_start) = mpsc::channel::<()>();
    let (report, refusals) = mpsc::channel();
    drop(rt.handle().spawn_blocking(move || {
        started.send(()).expect("the test waits");
        wait_for_go.recv().expect("the test's go");
        let mut refused = 0;
        for i in 0..PLACED {
            let guard = Arc::clone(&in_closures);
            let (u, join) = NewTask {
                shared: &shared,
                name: None,
                stack_size: None,
                site: Location::caller(),
                shard: shared.workers.len(),
            }
            .build(move || drop(guard));
            drop(join);
            if let Err(u) = shared.workers[i % 2].place(u) {
                drop(u);
                refused += 1;
            }
        }
        drop((in_closures, shared));
        report.send(refused).expect("the test waits");
    }));
    // Running (a queued call would be cancelled by the shutdown).
    wait_for_start
        .recv_timeout(HANG)
        .expect("the blocking call never started");
    drop(rt);
    go.send(()).expect("the blocking call waits");
    let refused = refusals.recv_timeout(HANG).expect("the blocking call hung");
    assert_eq!(refused, PLACED, "placements on ended workers were taken");
    assert_eq!(
        Arc::strong_count(&held),
        1,
        "a refused task's closure was not dropped"
    );
    // The pool thread lets its context go as it ends: then nothing
    // holds the runtime's state.
    let start = Instant::now();
    while runtime_state.strong_count() > 0 {
        assert!(
            start.elapsed() < HANG,
            "the runtime's shared state outlived its shutdown"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
