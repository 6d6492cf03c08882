//! The hub's core: runtime, spawn/join, yield, sleep, timeouts, cancel,
//! panics, spawn_local, stealing, thread affinity, wakes from plain threads.

use crate::common;

use common::hub::{rt, until_parked, HANG};

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::thread;
use std::time::{Duration, Instant};

use greenlet::hub::{self, Elapsed, HubError, JoinError, Runtime, TaskState, Wait};

#[test]
fn block_on_returns_the_value_and_run_is_one_line() {
    let rt = rt(1);
    assert_eq!(rt.block_on(|| 7 * 6).unwrap(), 42);
    assert_eq!(hub::run(|| "x").unwrap(), "x");
}

#[test]
fn spawn_join_many_on_two_workers() {
    let rt = rt(2);
    let sum = rt
        .block_on(|| {
            let hs: Vec<_> = (0..1000u64).map(|i| hub::spawn(move || i)).collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
        })
        .unwrap();
    assert_eq!(sum, 999 * 1000 / 2);
}

#[test]
fn join_from_a_plain_thread_blocks_until_done() {
    let rt = rt(1);
    let (tx, rx) = hub::oneshot::<()>();
    let h = rt.handle().spawn(move || {
        rx.recv().unwrap();
        5
    });
    let t = thread::spawn(move || h.join());
    tx.send(()).unwrap();
    assert_eq!(t.join().unwrap().unwrap(), 5);
}

#[test]
fn yield_interleaves_two_green_threads_on_one_worker() {
    let rt = rt(1);
    let log = rt
        .block_on(|| {
            let log = Arc::new(StdMutex::new(Vec::new()));
            let hs: Vec<_> = ["a", "b"]
                .into_iter()
                .map(|name| {
                    let log = Arc::clone(&log);
                    hub::spawn(move || {
                        for i in 0..3 {
                            log.lock().unwrap().push(format!("{name}{i}"));
                            hub::yield_now();
                        }
                    })
                })
                .collect();
            hs.into_iter().for_each(|h| h.join().unwrap());
            let v = log.lock().unwrap().clone();
            v
        })
        .unwrap();
    assert_eq!(log, ["a0", "b0", "a1", "b1", "a2", "b2"]);
}

type Log = Arc<StdMutex<Vec<&'static str>>>;

/// A task that notes `name` in `log` when it runs.
fn leaf(log: &Log, name: &'static str) -> hub::JoinHandle<()> {
    let log = Arc::clone(log);
    hub::spawn(move || log.lock().unwrap().push(name))
}

#[test]
fn spawned_tasks_start_in_spawn_order_and_before_older_ones() {
    let rt = rt(1);
    let log = rt
        .block_on(|| {
            let log = Log::default();
            let a = {
                let log = Arc::clone(&log);
                hub::spawn(move || {
                    log.lock().unwrap().push("a");
                    let kids = [leaf(&log, "a1"), leaf(&log, "a2")];
                    kids.into_iter().for_each(|h| h.join().unwrap());
                })
            };
            let b = leaf(&log, "b");
            a.join().unwrap();
            b.join().unwrap();
            let v = log.lock().unwrap().clone();
            v
        })
        .unwrap();
    // Depth first: a's children, spawned after b, start before it.
    assert_eq!(log, ["a", "a1", "a2", "b"]);
}

/// A task spawned by a green thread that then runs on without parking is
/// stolen by another worker, also when that worker went idle only after
/// the spawn. (Kept aside until its spawner parked, it waited for ever: the
/// other worker, busy at the spawn, then slept with nothing to steal.)
#[test]
fn a_task_spawned_by_a_spinning_green_thread_is_stolen_by_a_worker_idle_later() {
    let rt = rt(2);
    let outcome = rt
        .block_on(|| {
            let deadline = Instant::now() + HANG;
            let spin_until = |flag: &AtomicUsize, value: usize| {
                while flag.load(Ordering::Acquire) != value {
                    if Instant::now() > deadline {
                        return false;
                    }
                    std::hint::spin_loop();
                }
                true
            };
            let busy = Arc::new(AtomicUsize::new(0));
            let me = thread::current().id();
            // Keeps the other worker busy while the probe is spawned.
            let held = Arc::clone(&busy);
            let holder = hub::spawn(move || {
                // Not over a 2 stored already (it started too late).
                let _ = held.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire);
                while held.load(Ordering::Acquire) != 2 && Instant::now() < deadline {
                    std::hint::spin_loop();
                }
                thread::current().id()
            });
            if !spin_until(&busy, 1) {
                busy.store(2, Ordering::Release);
                return Err("the holder never started on the other worker");
            }
            let ran = Arc::new(AtomicUsize::new(0));
            let flag = Arc::clone(&ran);
            let probe = hub::spawn(move || flag.store(1, Ordering::Release));
            // The other worker goes idle only now, after the spawn.
            busy.store(2, Ordering::Release);
            let stolen = spin_until(&ran, 1);
            let holder_thread = holder.join().unwrap();
            probe.join().unwrap();
            if holder_thread == me {
                return Err("the holder ran on the spawning worker");
            }
            Ok(stolen)
        })
        .unwrap();
    assert_eq!(
        outcome,
        Ok(true),
        "the probe did not start while its spawner spun for {HANG:?}"
    );
}

#[test]
fn sleepers_wake_in_deadline_order() {
    let rt = rt(1);
    let order = rt
        .block_on(|| {
            let (tx, rx) = hub::unbounded();
            // One base instant: the deadlines' order does not depend on
            // when each green thread gets to run.
            let base = Instant::now();
            for ms in [30u64, 10, 20] {
                let tx = tx.clone();
                hub::spawn(move || {
                    let at = base + Duration::from_millis(ms);
                    hub::sleep_until(at);
                    assert!(Instant::now() >= at);
                    tx.send(ms).unwrap();
                });
            }
            drop(tx);
            rx.iter().collect::<Vec<_>>()
        })
        .unwrap();
    assert_eq!(order, [10, 20, 30]);
}

#[test]
fn sleep_waits_at_least_its_duration_and_a_past_instant_returns_at_once() {
    hub::run(|| {
        let start = Instant::now();
        hub::sleep(Duration::from_millis(2));
        assert!(start.elapsed() >= Duration::from_millis(2));
        hub::sleep_until(Instant::now() - Duration::from_millis(1));
    })
    .unwrap();
}

/// Counts its drops in the shared counter: a destructor that ran.
struct Flag(Arc<AtomicUsize>);

impl Drop for Flag {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn timeout_elapses_at_a_parking_point_and_runs_destructors() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&dropped);
    let (r, ok, nested) = hub::run(move || {
        let r = hub::timeout(Duration::from_millis(5), || {
            let _f = Flag(d);
            hub::sleep(Duration::from_secs(3600));
        });
        let ok = hub::timeout(Duration::from_secs(3600), || 3);
        // The inner deadline is the later one: the outer scope elapses.
        let nested = hub::timeout(Duration::from_millis(5), || {
            hub::timeout(Duration::from_secs(3600), || {
                hub::sleep(Duration::from_secs(3600))
            })
        });
        (r, ok, nested)
    })
    .unwrap();
    assert_eq!(r, Err(Elapsed));
    assert_eq!(ok, Ok(3));
    assert_eq!(nested, Err(Elapsed));
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

#[test]
fn timeout_works_on_a_plain_thread() {
    let (_tx, rx) = hub::unbounded::<u8>();
    assert_eq!(
        hub::timeout(Duration::from_millis(5), || rx.recv()),
        Err(Elapsed)
    );
}

#[test]
fn cancel_raises_at_the_parking_point_and_runs_destructors() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&dropped);
    let err = hub::run(move || {
        let h = hub::task()
            .name("sleeper")
            .spawn(move || {
                let _f = Flag(d);
                hub::sleep(Duration::from_secs(3600));
                "woke"
            })
            .unwrap();
        until_parked(&h, Wait::Sleep);
        h.cancel();
        h.join().unwrap_err()
    })
    .unwrap();
    assert_eq!(
        err,
        JoinError::Cancelled {
            name: "sleeper".into()
        }
    );
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

#[test]
fn cancel_before_start_never_runs_and_drops_the_closure() {
    let ran = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&ran);
    let token = Arc::new(());
    let t = Arc::clone(&token);
    let rt = rt(1);
    let err = rt
        .block_on(move || {
            let h = hub::spawn(move || {
                let _keep = t;
                r.fetch_add(1, Ordering::SeqCst);
            });
            h.cancel(); // not started: this green thread has not parked since
            h.join().unwrap_err()
        })
        .unwrap();
    assert!(err.is_cancelled());
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(Arc::strong_count(&token), 1);
}

/// A capture of `N` words plus a drop counter, over-aligned when asked.
#[derive(Clone)]
#[repr(C, align(32))]
struct Wide<const N: usize>([u64; N], Arc<()>);

#[test]
fn closures_small_large_and_over_aligned_run_once_or_drop_once_unstarted() {
    let token = Arc::new(());
    let rt = rt(1);
    let t = Arc::clone(&token);
    let (sums, errors) = rt
        .block_on(move || {
            let none = hub::spawn(|| 1u64);
            let small = {
                let c = (7u64, Arc::clone(&t));
                hub::spawn(move || c.0)
            };
            let large = {
                let c = Wide([1, 2, 3, 4, 5, 6], Arc::clone(&t));
                hub::spawn(move || c.0.iter().sum::<u64>())
            };
            let aligned = {
                let c = Wide([9], Arc::clone(&t));
                hub::spawn(move || c.0[0])
            };
            let local = {
                let rc = Rc::new(40u64);
                let c = Wide([1, 1, 1, 1], Arc::clone(&t));
                hub::spawn_local(move || *rc + c.0.iter().sum::<u64>() - 2)
            };
            // Cancelled before they start (one worker, no park since).
            let cancelled = [
                {
                    let c = Wide([0; 8], Arc::clone(&t));
                    hub::spawn(move || c.0[0])
                },
                {
                    let c = (0u64, Arc::clone(&t));
                    hub::spawn(move || c.0)
                },
            ];
            for h in &cancelled {
                h.cancel();
            }
            let sums: Vec<u64> = [none, small, large, aligned, local]
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect();
            let errors: Vec<bool> = cancelled
                .into_iter()
                .map(|h| h.join().unwrap_err().is_cancelled())
                .collect();
            (sums, errors)
        })
        .unwrap();
    assert_eq!(sums, [1, 7, 21, 9, 42]);
    assert_eq!(errors, [true, true]);
    assert_eq!(Arc::strong_count(&token), 1, "every capture dropped once");
}

#[test]
fn a_running_green_thread_is_cancelled_at_its_next_parking_point_only() {
    let (reached, err) = hub::run(|| {
        let (go_tx, go_rx) = hub::oneshot::<()>();
        let steps = Arc::new(AtomicUsize::new(0));
        let s = Arc::clone(&steps);
        let h = hub::spawn_local(move || {
            go_rx.recv().unwrap();
            s.fetch_add(1, Ordering::SeqCst); // runs: no parking point before it
            hub::yield_now(); // the cancellation is delivered here
            s.fetch_add(1, Ordering::SeqCst);
        });
        until_parked(&h, Wait::Recv);
        go_tx.send(()).unwrap(); // it is now ready, not running
        h.cancel();
        let err = h.join().unwrap_err();
        (steps.load(Ordering::SeqCst), err)
    })
    .unwrap();
    // The cancel was requested while it was queued to resume out of recv:
    // recv is the parking point it is delivered at.
    assert_eq!(reached, 0);
    assert!(err.is_cancelled());
}

#[test]
fn a_panic_reaches_the_join_handle_and_others_keep_running() {
    let rt = rt(2);
    let (err, other) = rt
        .block_on(|| {
            let bad = hub::task()
                .name("bad")
                .spawn(|| -> u8 { panic!("kaboom") })
                .unwrap();
            let good = hub::spawn(|| {
                hub::sleep(Duration::from_millis(1));
                9
            });
            (bad.join().unwrap_err(), good.join().unwrap())
        })
        .unwrap();
    assert_eq!(err.to_string(), "green thread 'bad' panicked: kaboom");
    assert_eq!(other, 9);
    // The runtime is still usable.
    assert_eq!(rt.block_on(|| 1).unwrap(), 1);
}

#[test]
fn spawn_local_runs_non_send_closures_on_the_same_thread() {
    let v = hub::run(|| {
        let cell = Rc::new(RefCell::new(Vec::new()));
        let me = thread::current().id();
        let c = Rc::clone(&cell);
        let h = hub::spawn_local(move || {
            assert_eq!(thread::current().id(), me);
            c.borrow_mut().push(1);
            hub::yield_now();
            c.borrow_mut().push(2);
            Rc::new(3) // a !Send result
        });
        let r = h.join().unwrap();
        let v = cell.borrow().clone();
        (v, *r)
    })
    .unwrap();
    assert_eq!(v, (vec![1, 2], 3));
}

#[test]
fn functions_outside_a_runtime_say_what_to_do() {
    assert!(matches!(hub::Handle::current(), Err(HubError::NoRuntime)));
    assert!(matches!(hub::task().spawn(|| ()), Err(HubError::NoRuntime)));
    assert!(matches!(
        hub::task().spawn_local(|| ()),
        Err(HubError::NotOnWorker)
    ));
    assert!(hub::tasks().is_err());
    let panic = std::panic::catch_unwind(|| hub::spawn(|| ())).unwrap_err();
    let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("outside a hub runtime"), "{msg}");
    let err = Runtime::builder().worker_threads(0).build().unwrap_err();
    assert!(matches!(err, HubError::InvalidConfig(_)));
}

#[test]
fn stealing_balances_unstarted_work_across_two_workers() {
    // One green thread spawns 1,000 tasks onto its worker's deque. A task
    // that runs before any has run on the other worker holds its worker
    // (spinning, without parking, bounded by HANG) until one has: its own
    // worker cannot start the rest meanwhile, so they run on the other
    // worker only if it steals them. However slowly the OS schedules the
    // other worker's thread, it gets there; if it never stole, the spinner
    // gives up and the assertion below fails.
    let rt = rt(2);
    let per_worker = rt
        .block_on(|| {
            let counts: Arc<[AtomicUsize; 2]> =
                Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
            let hs: Vec<_> = (0..1000)
                .map(|_| {
                    let c = Arc::clone(&counts);
                    hub::spawn(move || {
                        let name = thread::current().name().unwrap_or("").to_string();
                        let mine = usize::from(name.ends_with('1'));
                        c[mine].fetch_add(1, Ordering::SeqCst);
                        let start = Instant::now();
                        while c[1 - mine].load(Ordering::SeqCst) == 0 {
                            if start.elapsed() > HANG {
                                return false;
                            }
                            std::hint::spin_loop();
                        }
                        true
                    })
                })
                .collect();
            let all_saw_both = hs.into_iter().all(|h| h.join().unwrap());
            assert!(all_saw_both, "the other worker never stole any task");
            [
                counts[0].load(Ordering::SeqCst),
                counts[1].load(Ordering::SeqCst),
            ]
        })
        .unwrap();
    assert_eq!(per_worker[0] + per_worker[1], 1000);
    assert!(per_worker[0] > 0 && per_worker[1] > 0, "{per_worker:?}");
}

#[test]
fn a_started_green_thread_never_changes_thread_under_stealing_load() {
    let rt = rt(2);
    let resumes = rt
        .block_on(|| {
            let total = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..200)
                .map(|i| {
                    let total = Arc::clone(&total);
                    hub::spawn(move || {
                        let home = thread::current().id();
                        for k in 0..20 {
                            if (i + k) % 3 == 0 {
                                hub::sleep(Duration::from_micros(50));
                            } else {
                                hub::yield_now();
                            }
                            assert_eq!(thread::current().id(), home, "moved after a resume");
                            total.fetch_add(1, Ordering::Relaxed);
                            // Keep spawning so both workers keep stealing.
                            if k == 10 {
                                drop(hub::spawn(hub::yield_now));
                            }
                        }
                    })
                })
                .collect();
            hs.into_iter().for_each(|h| h.join().unwrap());
            total.load(Ordering::SeqCst)
        })
        .unwrap();
    assert_eq!(resumes, 200 * 20);
}

#[test]
fn wakes_from_another_worker_and_from_plain_threads() {
    let rt = rt(2);
    let h = rt.handle().clone();
    let got = rt
        .block_on(move || {
            let (tx, rx) = hub::unbounded();
            // From plain threads.
            let plain: Vec<_> = (0..4)
                .map(|i| {
                    let tx = tx.clone();
                    thread::spawn(move || tx.send(i).unwrap())
                })
                .collect();
            // From green threads (on either worker).
            for i in 4..8 {
                let tx = tx.clone();
                h.spawn(move || tx.send(i).unwrap());
            }
            drop(tx);
            let mut v: Vec<i32> = rx.iter().collect();
            plain.into_iter().for_each(|t| t.join().unwrap());
            v.sort();
            v
        })
        .unwrap();
    assert_eq!(got, (0..8).collect::<Vec<_>>());
}

#[test]
fn a_stack_that_cannot_be_mapped_is_a_clear_error_and_the_runtime_goes_on() {
    // An absurd stack size cannot be mapped: the same error path as hitting
    // vm.max_map_count.
    let rt = rt(1);
    let (err, after) = rt
        .block_on(|| {
            let h = hub::task()
                .name("huge")
                .stack_size(1 << 60)
                .spawn(|| ())
                .unwrap();
            (h.join().unwrap_err(), hub::spawn(|| 4).join().unwrap())
        })
        .unwrap();
    assert!(matches!(err, JoinError::NoStack { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("vm.max_map_count") && msg.contains("huge"),
        "{msg}"
    );
    assert_eq!(after, 4);
}

#[test]
fn dump_lists_every_green_thread_with_state_and_spawn_site() {
    let rt = rt(1);
    let (lines, id) = rt
        .block_on(|| {
            let h = hub::task()
                .name("napper")
                .spawn(|| hub::sleep(Duration::from_secs(3600)))
                .unwrap();
            until_parked(&h, Wait::Sleep);
            let dump = hub::tasks().unwrap();
            h.cancel();
            (dump, h.id())
        })
        .unwrap();
    let napper = lines.iter().find(|t| t.id == id).expect("listed");
    assert_eq!(napper.name, "napper");
    assert_eq!(napper.state, TaskState::Parked(Wait::Sleep));
    assert_eq!(napper.worker, Some(0));
    assert!(napper.spawned_at.contains("basics.rs"), "{napper}");
    let me = lines
        .iter()
        .find(|t| t.name == "block_on")
        .expect("caller listed");
    assert_eq!(me.state, TaskState::Running);
    assert!(napper.to_string().contains("parked on sleep"));
}

#[test]
fn hang_bound_is_not_reached_by_a_quick_run() {
    // The HANG bound used above really bounds: a green thread that never
    // parks on `Recv` makes until_parked fail instead of hanging.
    let r = hub::run(|| {
        let h = hub::spawn(|| ());
        let start = Instant::now();
        while !h.is_finished() {
            assert!(start.elapsed() < HANG);
            hub::yield_now();
        }
        h.state()
    })
    .unwrap();
    assert_eq!(r, TaskState::Finished);
}
