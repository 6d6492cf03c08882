//! The spawn path's cross-thread cases: a task registered on one worker
//! and finished, cancelled or dropped on another thread leaves the
//! registry; `dump` from a plain thread during heavy spawn churn sees every
//! long-lived green thread once; a task made in a spent task's allocation
//! (the worker's pool) is a new task in every way that shows; a green
//! joiner is woken by a task finishing on another worker; a green thread's
//! spawn onto another runtime runs there; on one worker, the tasks kept on
//! the worker's own stack until they start show as queued, start in spawn
//! order before injected ones, and are cancelled and dropped at shutdown;
//! every task's greenlet has the hub as its parent.

use crate::common;

use common::hub::{bounded, rt, until_parked, Dropped, HANG};

use std::collections::HashSet;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use greenlet::hub::{self, Event, JoinError, TaskState, Wait};

/// The worker the calling green thread, named `name`, runs on.
fn worker_of(name: &str) -> usize {
    let me = hub::tasks()
        .unwrap()
        .into_iter()
        .find(|t| t.state == TaskState::Running && t.name == name)
        .unwrap_or_else(|| panic!("{name} is not running"));
    me.worker.expect("running on a worker")
}

/// Spawn `f` (named `name`) from the calling green thread and spin,
/// without parking (so this worker cannot start it), until another worker
/// has started it; returns its handle and the worker it started on.
fn spawn_elsewhere<F>(name: &'static str, f: F) -> (hub::JoinHandle<()>, usize)
where
    F: FnOnce() + Send + 'static,
{
    const UNSET: usize = usize::MAX;
    let worker = Arc::new(AtomicUsize::new(UNSET));
    let at = Arc::clone(&worker);
    let h = hub::task()
        .name(name)
        .spawn(move || {
            at.store(worker_of(name), Ordering::Release);
            f();
        })
        .unwrap();
    let start = Instant::now();
    loop {
        let w = worker.load(Ordering::Acquire);
        if w != UNSET {
            return (h, w);
        }
        assert!(start.elapsed() < HANG, "no other worker stole the task");
        std::hint::spin_loop();
    }
}

#[test]
fn a_task_stolen_by_another_worker_leaves_the_dump_when_it_finishes_or_is_cancelled() {
    let rt = rt(2);
    rt.block_on(|| {
        let here = worker_of("block_on");
        // Finished on the other worker: its registry entry (made on this
        // worker's shard) is removed there.
        let (done, there) = spawn_elsewhere("finishes there", || ());
        assert_ne!(here, there, "the task ran on the other worker");
        let id = done.id();
        done.join().unwrap();
        assert!(hub::tasks().unwrap().iter().all(|t| t.id != id));
        // Parked on the other worker, cancelled from a plain thread.
        let (parked, there) =
            spawn_elsewhere("parks there", || hub::sleep(Duration::from_secs(3600)));
        assert_ne!(here, there);
        until_parked(&parked, Wait::Sleep);
        let id = parked.id();
        let name = parked.name();
        let parked = thread::spawn(move || {
            parked.cancel();
            parked
        })
        .join()
        .unwrap();
        match parked.join() {
            Err(JoinError::Cancelled { name: n }) => assert_eq!(n, name),
            other => panic!("expected cancelled, got {other:?}"),
        }
        assert!(hub::tasks().unwrap().iter().all(|t| t.id != id));
    })
    .unwrap();
    assert!(rt.handle().tasks().is_empty(), "nothing left registered");
}

#[test]
fn a_task_spawned_from_a_plain_thread_and_cancelled_before_it_starts_leaves_the_dump() {
    let rt = rt(1);
    let running = Arc::new(AtomicBool::new(false));
    let go = Arc::new(AtomicBool::new(false));
    // Hold the only worker (spinning, never parking) so that the next
    // spawn stays queued until it is cancelled.
    let holder = {
        let (running, go) = (Arc::clone(&running), Arc::clone(&go));
        rt.handle().spawn(move || {
            running.store(true, Ordering::Release);
            let start = Instant::now();
            while !go.load(Ordering::Acquire) {
                assert!(start.elapsed() < HANG, "never released");
                std::hint::spin_loop();
            }
        })
    };
    let start = Instant::now();
    while !running.load(Ordering::Acquire) {
        assert!(start.elapsed() < HANG, "the holder never started");
        thread::yield_now();
    }
    let handle = rt.handle().clone();
    let queued = thread::spawn(move || handle.spawn(|| 5)).join().unwrap();
    assert_eq!(queued.state(), TaskState::Queued);
    let id = queued.id();
    assert!(rt
        .handle()
        .tasks()
        .iter()
        .any(|t| t.id == id && t.state == TaskState::Queued));
    queued.cancel();
    go.store(true, Ordering::Release);
    holder.join().unwrap();
    assert!(matches!(queued.join(), Err(JoinError::Cancelled { .. })));
    assert!(rt.handle().tasks().iter().all(|t| t.id != id));
}

#[test]
fn dump_from_a_plain_thread_during_spawn_churn_lists_every_live_task_once() {
    const LONG: usize = 16;
    const ROUNDS: usize = 400;
    let rt = rt(2);
    let gate = Arc::new(Event::new());
    let long: Vec<_> = (0..LONG)
        .map(|_| {
            let g = Arc::clone(&gate);
            rt.handle().spawn(move || g.wait())
        })
        .collect();
    let long_ids: HashSet<u64> = long.iter().map(|h| h.id()).collect();
    for h in &long {
        let start = Instant::now();
        while h.state() != TaskState::Parked(Wait::Event) {
            assert!(start.elapsed() < HANG, "a long task never parked");
            thread::yield_now();
        }
    }
    let churning = Arc::new(AtomicBool::new(true));
    let dumps = Arc::new(AtomicUsize::new(0));
    let dumper = {
        let handle = rt.handle().clone();
        let churning = Arc::clone(&churning);
        let dumps = Arc::clone(&dumps);
        let long_ids = long_ids.clone();
        thread::spawn(move || {
            let start = Instant::now();
            while churning.load(Ordering::Acquire) || dumps.load(Ordering::Relaxed) == 0 {
                assert!(start.elapsed() < HANG, "the churn never ended");
                let dump = handle.tasks();
                let ids: Vec<u64> = dump.iter().map(|t| t.id).collect();
                assert!(ids.windows(2).all(|w| w[0] < w[1]), "by id, each once");
                for id in &long_ids {
                    let t = dump.iter().find(|t| t.id == *id);
                    let t = t.unwrap_or_else(|| panic!("long task {id} missing from a dump"));
                    assert_eq!(t.state, TaskState::Parked(Wait::Event));
                    assert!(
                        t.spawned_at.contains("cross_thread_spawns.rs"),
                        "{}",
                        t.spawned_at
                    );
                }
                dumps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    rt.block_on(move || {
        for round in 0..ROUNDS {
            // Some joined here, some left to finish on their own.
            let hs: Vec<_> = (0..32u64).map(|i| hub::spawn(move || i)).collect();
            if round % 2 == 0 {
                assert_eq!(hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>(), 496);
            }
            hub::yield_now();
        }
    })
    .unwrap();
    churning.store(false, Ordering::Release);
    dumper.join().expect("the dumper saw consistent dumps");
    assert!(dumps.load(Ordering::Relaxed) > 0);
    gate.set();
    for h in long {
        h.join().unwrap();
    }
    let start = Instant::now();
    while !rt.handle().tasks().is_empty() {
        assert!(start.elapsed() < HANG, "detached tasks never left the dump");
        thread::yield_now();
    }
}

#[test]
fn a_task_made_in_a_spent_ones_allocation_is_a_new_task() {
    let rt = rt(1);
    rt.block_on(|| {
        let first = hub::task().name("first").spawn(|| 1).unwrap();
        let first_id = first.id();
        assert_eq!(first.join().unwrap(), 1);
        // A spawn_local task's value was put on this thread; the next task
        // made in the same allocation is a Send one.
        let local = hub::spawn_local(|| Rc::new(2));
        assert_eq!(*local.join().unwrap(), 2);
        let second = hub::task()
            .name("second")
            .spawn(|| -> u32 { panic!("boom") })
            .unwrap();
        assert_ne!(second.id(), first_id);
        assert_eq!(second.name(), "second");
        match second.join() {
            Err(JoinError::Panicked { name, message }) => {
                assert_eq!(name, "second");
                assert_eq!(message, "boom");
            }
            other => panic!("expected a panic, got {other:?}"),
        }
        // Cancelled before it starts, then one that runs: each its own
        // outcome.
        let cancelled = hub::spawn(|| 3);
        cancelled.cancel();
        assert!(matches!(cancelled.join(), Err(JoinError::Cancelled { .. })));
        let third = hub::spawn(|| 4);
        assert_eq!(third.state(), TaskState::Queued);
        assert!(!third.is_finished());
        assert_eq!(third.join().unwrap(), 4);
        // Many in a row, each with its own value and a fresh id.
        let mut ids = HashSet::new();
        for i in 0..500u64 {
            let h = hub::spawn(move || i * 2);
            assert!(ids.insert(h.id()), "ids are never reused");
            assert_eq!(h.join().unwrap(), i * 2);
        }
        let me = hub::tasks().unwrap();
        assert_eq!(me.len(), 1, "only block_on is left: {me:?}");
    })
    .unwrap();
}

#[test]
fn a_green_joiner_parked_on_one_worker_is_woken_by_a_task_finishing_on_the_other() {
    bounded(120, green_joiner_woken_across_workers);
}

fn green_joiner_woken_across_workers() {
    let rt = rt(2);
    rt.block_on(|| {
        let here = worker_of("block_on");
        for round in 0..20u64 {
            // The task waits, yielding on its worker, until this green
            // thread is parked in its join, then finishes there: the wake
            // crosses to this worker's remote queue.
            let (value, there_at) = (Arc::new(AtomicUsize::new(0)), Instant::now());
            let v = Arc::clone(&value);
            let (h, there) = spawn_elsewhere("joined there", move || {
                while !hub::tasks()
                    .unwrap()
                    .iter()
                    .any(|t| t.name == "block_on" && t.state == TaskState::Parked(Wait::Join))
                {
                    assert!(there_at.elapsed() < HANG, "the joiner never parked");
                    hub::yield_now();
                }
                v.store(round as usize + 1, Ordering::Release);
            });
            assert_ne!(here, there, "the task ran on the other worker");
            let id = h.id();
            h.join().unwrap();
            assert_eq!(value.load(Ordering::Acquire), round as usize + 1);
            assert_eq!(
                worker_of("block_on"),
                here,
                "the joiner resumed on its worker"
            );
            assert!(hub::tasks().unwrap().iter().all(|t| t.id != id));
        }
    })
    .unwrap();
    assert!(rt.handle().tasks().is_empty(), "nothing left registered");
}

#[test]
fn a_spawn_from_a_green_thread_onto_another_runtime_runs_there_and_joins_here() {
    bounded(120, spawn_onto_another_runtime);
}

fn spawn_onto_another_runtime() {
    let (a, b) = (rt(1), rt(1));
    let b_thread = b.block_on(|| thread::current().id()).unwrap();
    let other = b.handle().clone();
    a.block_on(move || {
        let a_thread = thread::current().id();
        // Spent tasks of this worker's pool first, so a mix-up would show.
        for i in 0..4u32 {
            assert_eq!(hub::spawn(move || i).join().unwrap(), i);
        }
        for i in 0..50u64 {
            let h = other.spawn(move || (thread::current().id(), i * 3));
            let (ran_on, v) = h.join().unwrap();
            assert_eq!(ran_on, b_thread, "it ran on the other runtime's worker");
            assert_ne!(ran_on, a_thread);
            assert_eq!(v, i * 3);
            let local = hub::spawn(move || thread::current().id()).join().unwrap();
            assert_eq!(local, a_thread, "a spawn here still runs here");
        }
        assert!(other.tasks().is_empty(), "the other runtime keeps nothing");
    })
    .unwrap();
}

#[test]
fn on_one_worker_unstarted_tasks_show_queued_and_start_before_injected_ones() {
    bounded(120, one_worker_stack_and_injector);
}

fn one_worker_stack_and_injector() {
    let rt = rt(1);
    let handle = rt.handle().clone();
    let log = rt
        .block_on(move || {
            let log = Arc::new(std::sync::Mutex::new(Vec::new()));
            let entry = |name: &'static str| {
                let log = Arc::clone(&log);
                move || log.lock().unwrap().push(name)
            };
            // From a plain thread (the worker blocked meanwhile): onto the
            // injector, older than what this green thread spawns next.
            let injected = {
                let (h, f) = (handle.clone(), entry("injected"));
                thread::spawn(move || h.spawn(f)).join().unwrap()
            };
            let mine: Vec<_> = ["first", "second", "third"]
                .into_iter()
                .map(|name| hub::task().name(name).spawn(entry(name)).unwrap())
                .collect();
            // Not parked yet: none started, each listed as queued with its
            // spawn site.
            let dump = hub::tasks().unwrap();
            for name in ["first", "second", "third"] {
                let t = dump.iter().find(|t| t.name == name).expect("listed");
                assert_eq!(t.state, TaskState::Queued, "{t:?}");
                assert!(t.spawned_at.contains("cross_thread_spawns.rs"), "{t:?}");
            }
            mine.into_iter().for_each(|h| h.join().unwrap());
            injected.join().unwrap();
            let v = log.lock().unwrap().clone();
            v
        })
        .unwrap();
    // This worker's own spawns first, in spawn order; then the injector's.
    assert_eq!(log, ["first", "second", "third", "injected"]);
    assert!(rt.handle().tasks().is_empty(), "nothing left registered");
}

#[test]
fn on_one_worker_tasks_still_unstarted_at_shutdown_are_cancelled_and_dropped() {
    bounded(120, one_worker_stack_at_shutdown);
}

fn one_worker_stack_at_shutdown() {
    let rt = rt(1);
    let handle = rt.handle().clone();
    let (ran, dropped) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let (rt_tx, rt_rx) = hub::oneshot::<hub::Runtime>();
    let (r, d) = (Arc::clone(&ran), Arc::clone(&dropped));
    let spawner = handle.spawn(move || {
        let rt = rt_rx.recv().unwrap();
        let kids: Vec<_> = (0..10)
            .map(|_| {
                let (r, c) = (Arc::clone(&r), Dropped(Arc::clone(&d)));
                hub::spawn(move || {
                    let _c = c;
                    r.store(true, Ordering::SeqCst);
                })
            })
            .collect();
        // Shutdown begins before this green thread parks, so the ten are
        // still on the worker's stack of unstarted tasks.
        drop(rt);
        hub::sleep(Duration::from_secs(3600));
        kids
    });
    rt_tx.send(rt).map_err(|_| "the receiver is gone").unwrap();
    assert!(spawner.join().unwrap_err().is_cancelled());
    let start = Instant::now();
    while dropped.load(Ordering::SeqCst) < 10 {
        assert!(start.elapsed() < HANG, "unstarted closures never dropped");
        thread::yield_now();
    }
    assert!(!ran.load(Ordering::SeqCst), "none of them started");
    assert_eq!(dropped.load(Ordering::SeqCst), 10, "each dropped once");
    let start = Instant::now();
    while !handle.tasks().is_empty() {
        assert!(
            start.elapsed() < HANG,
            "cancelled tasks never left the dump"
        );
        thread::yield_now();
    }
}

#[test]
fn every_task_s_greenlet_has_the_hub_as_its_parent() {
    rt(1)
        .block_on(|| {
            let hub = greenlet::getcurrent().parent().expect("block_on's parent");
            assert!(
                hub.is_main(),
                "the hub is the worker thread's main greenlet"
            );
            // The first spawns may make new greenlet records, later ones
            // reuse spare ones: both get the hub.
            for round in 0..20u32 {
                let parent = hub::spawn_local(|| greenlet::getcurrent().parent())
                    .join()
                    .unwrap();
                assert!(parent.as_ref() == Some(&hub), "round {round}");
                let is_main = hub::spawn(|| greenlet::getcurrent().parent().map(|p| p.is_main()))
                    .join()
                    .unwrap();
                assert_eq!(is_main, Some(true), "round {round}");
            }
        })
        .unwrap();
}
