//! The hub's runtime services: block_on with an external future,
//! spawn_blocking, the pending-call slot and the cleanup queue on it, the
//! watchdog, shutdown.

use crate::common;

use common::hub::{rt, until_parked, HANG};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex as StdMutex};
use std::thread;
use std::time::{Duration, Instant};

use greenlet::hub::{self, HubError, Runtime, TaskState, Wait};

/// Run `f` on a plain thread and wait for it at most HANG.
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(HANG)
        .unwrap_or_else(|_| panic!("{what}: hung"))
}

struct Count(Arc<AtomicUsize>);
impl Drop for Count {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn block_on_an_external_future_parks_only_the_green_thread() {
    // One worker: the future is completed by another green thread of the
    // same worker, which can only run if block_on parked instead of
    // blocking the thread.
    let v = bounded("block_on", || {
        rt(1).block_on(|| {
            let (tx, rx) = futures_channel::oneshot::channel::<u32>();
            let completer = hub::spawn(move || {
                hub::yield_now();
                tx.send(11).unwrap();
            });
            let v = hub::block_on(rx).unwrap();
            completer.join().unwrap();
            v
        })
    });
    assert_eq!(v.unwrap(), 11);
    // Woken from a plain thread.
    let v = rt(1)
        .block_on(|| {
            let (tx, rx) = futures_channel::oneshot::channel::<&str>();
            thread::spawn(move || tx.send("plain").unwrap());
            hub::block_on(rx).unwrap()
        })
        .unwrap();
    assert_eq!(v, "plain");
}

#[test]
fn spawn_blocking_is_joined_without_blocking_the_hub() {
    let v = bounded("spawn_blocking", || {
        rt(1).block_on(|| {
            let (tx, rx) = mpsc::channel::<u32>();
            let job = hub::spawn_blocking(move || rx.recv().unwrap() + 1);
            // Runs on the (only) worker while this green thread is parked
            // in join below.
            let feeder = hub::spawn(move || tx.send(41).unwrap());
            let v = job.join().unwrap();
            feeder.join().unwrap();
            v
        })
    });
    assert_eq!(v.unwrap(), 42);
}

#[test]
fn blocking_pool_is_bounded_and_its_threads_can_spawn() {
    let rt = Runtime::builder()
        .worker_threads(1)
        .max_blocking_threads(2)
        .watchdog(None)
        .build()
        .unwrap();
    let (max, nested) = rt
        .block_on(|| {
            let inside = Arc::new(AtomicUsize::new(0));
            let max = Arc::new(AtomicUsize::new(0));
            let jobs: Vec<_> = (0..8)
                .map(|_| {
                    let (i, m) = (Arc::clone(&inside), Arc::clone(&max));
                    hub::spawn_blocking(move || {
                        let now = i.fetch_add(1, Ordering::SeqCst) + 1;
                        m.fetch_max(now, Ordering::SeqCst);
                        thread::sleep(Duration::from_millis(2));
                        i.fetch_sub(1, Ordering::SeqCst);
                    })
                })
                .collect();
            jobs.into_iter().for_each(|j| j.join().unwrap());
            let nested = hub::spawn_blocking(|| hub::spawn(|| 5).join().unwrap())
                .join()
                .unwrap();
            (max.load(Ordering::SeqCst), nested)
        })
        .unwrap();
    assert!((1..=2).contains(&max), "{max} blocking calls at once");
    assert_eq!(nested, 5);
    let panicked = rt.handle().spawn_blocking(|| panic!("in the pool")).join();
    assert!(panicked.unwrap_err().is_panic());
}

#[test]
fn pending_calls_run_on_a_hub_in_order_and_never_nest() {
    let rt = rt(2);
    let log = Arc::new(StdMutex::new(Vec::new()));
    let (done_tx, done_rx) = hub::unbounded();
    for i in 0..3 {
        let log = Arc::clone(&log);
        let done = done_tx.clone();
        rt.handle()
            .add_pending_call(move || {
                let name = thread::current().name().unwrap_or("").to_string();
                assert!(name.starts_with("hub-worker"), "ran on {name}");
                log.lock().unwrap().push(format!("start {i}"));
                hub::sleep(Duration::from_millis(1)); // a scheduling point inside the call
                log.lock().unwrap().push(format!("end {i}"));
                done.send(i).unwrap();
            })
            .unwrap();
    }
    for _ in 0..3 {
        done_rx.recv_timeout(HANG).unwrap();
    }
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log,
        ["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"]
    );
}

#[test]
fn the_pending_call_slot_is_bounded() {
    let rt = Runtime::builder()
        .worker_threads(1)
        .pending_call_capacity(2)
        .watchdog(None)
        .build()
        .unwrap();
    // Hold the only worker so that no scheduling point comes.
    let hold = Arc::new(AtomicBool::new(true));
    let h = Arc::clone(&hold);
    let holder = rt.handle().spawn(move || {
        while h.load(Ordering::SeqCst) {
            std::hint::spin_loop();
        }
    });
    while holder.state() != TaskState::Running {
        thread::yield_now();
    }
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..2 {
        let r = Arc::clone(&ran);
        rt.handle()
            .add_pending_call(move || {
                r.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
    }
    let full = rt.handle().add_pending_call(|| ()).unwrap_err();
    assert!(
        matches!(full, HubError::PendingCallsFull { capacity: 2 }),
        "{full}"
    );
    assert!(full.to_string().contains("retry"));
    hold.store(false, Ordering::SeqCst);
    holder.join().unwrap();
    let start = Instant::now();
    while ran.load(Ordering::SeqCst) < 2 {
        assert!(start.elapsed() < HANG);
        thread::yield_now();
    }
}

#[test]
fn a_dying_threads_greenlet_state_is_cleaned_up_on_the_hub() {
    let rt = rt(1);
    let queue = rt.handle().cleanup_queue();
    let (tx, rx) = hub::unbounded::<String>();
    let q = Arc::clone(&queue);
    thread::spawn(move || {
        greenlet::cleanup::set_thread_queue(Some(q));
        greenlet::getcurrent().on_finalize(move || {
            let name = thread::current().name().unwrap_or("").to_string();
            tx.send(name).unwrap();
        });
    })
    .join()
    .unwrap();
    let ran_on = rx.recv_timeout(HANG).expect("the finalizer ran");
    assert!(ran_on.starts_with("hub-worker"), "ran on {ran_on}");
    let m = queue.metrics();
    assert_eq!(m.states_destroyed, 1);
    assert_eq!(m.schedules_failed, 0);
}

#[test]
fn the_watchdog_names_the_green_thread_that_holds_its_worker() {
    let _serial = common::serial();
    common::take_diagnostics();
    let rt = common::hub::watched_rt();
    let release = Arc::new(AtomicBool::new(false));
    let r = Arc::clone(&release);
    let hog = rt.handle().spawn(move || {
        hub::task()
            .name("cpu-hog")
            .spawn(move || {
                // Blocks its worker (no parking) until the report is seen,
                // bounded by HANG.
                let start = Instant::now();
                while !r.load(Ordering::SeqCst) && start.elapsed() < HANG {
                    std::hint::spin_loop();
                }
            })
            .unwrap()
            .join()
            .unwrap()
    });
    let start = Instant::now();
    let report = loop {
        let lines = common::take_diagnostics();
        if let Some(l) = lines.into_iter().find(|l| l.contains("has not come back")) {
            break l;
        }
        assert!(start.elapsed() < HANG, "no watchdog report");
        thread::sleep(Duration::from_millis(5));
    };
    release.store(true, Ordering::SeqCst);
    hog.join().unwrap();
    assert!(report.starts_with("WARN greenlet::hub"), "{report}");
    assert!(report.contains("'cpu-hog'"), "{report}");
    assert!(report.contains("runtime_services.rs"), "{report}");
}

#[test]
fn shutdown_with_10000_parked_green_threads_runs_every_destructor() {
    let rt = Runtime::builder()
        .worker_threads(2)
        .stack_size(32 * 1024)
        .watchdog(None)
        .build()
        .unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&dropped);
    let handles = rt
        .block_on(move || {
            let hs: Vec<_> = (0..10_000)
                .map(|i| {
                    let c = Count(Arc::clone(&d));
                    hub::spawn(move || {
                        let _c = c;
                        if i % 2 == 0 {
                            hub::sleep(Duration::from_secs(3600));
                        } else {
                            let (_tx, rx) = hub::unbounded::<()>();
                            let _ = rx.recv();
                        }
                    })
                })
                .collect::<Vec<_>>();
            // Wait until every one has started and parked.
            let start = Instant::now();
            while hub::tasks()
                .unwrap()
                .iter()
                .any(|t| matches!(t.state, TaskState::Queued | TaskState::Ready))
            {
                assert!(start.elapsed() < HANG);
                hub::sleep(Duration::from_millis(1));
            }
            hs
        })
        .unwrap();
    assert_eq!(dropped.load(Ordering::SeqCst), 0);
    let report = rt.shutdown_timeout(HANG);
    assert!(report.refused.is_empty(), "{:?}", report.refused);
    assert_eq!(dropped.load(Ordering::SeqCst), 10_000);
    assert!(handles
        .into_iter()
        .all(|h| h.join().unwrap_err().is_cancelled()));
}

#[test]
fn shutdown_reports_a_green_thread_that_refuses_to_die() {
    let _serial = common::serial();
    common::take_diagnostics();
    let rt = rt(1);
    let refusals = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let (r, d) = (Arc::clone(&refusals), Arc::clone(&dropped));
    let h = rt.handle().spawn(move || {
        hub::task()
            .name("stubborn")
            .spawn(move || {
                let _c = Count(d);
                // Swallows the first two cancellations, then lets go.
                for _ in 0..2 {
                    let caught = std::panic::catch_unwind(|| hub::sleep(Duration::from_secs(3600)));
                    if caught.is_err() {
                        r.fetch_add(1, Ordering::SeqCst);
                    }
                }
                hub::sleep(Duration::from_secs(3600));
            })
            .unwrap()
    });
    let stubborn = h.join().unwrap();
    while stubborn.state() != TaskState::Parked(Wait::Sleep) {
        thread::yield_now();
    }
    let report = rt.shutdown_timeout(Duration::from_millis(20));
    assert_eq!(report.refused.len(), 1, "{:?}", report.refused);
    assert_eq!(report.refused[0].name, "stubborn");
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "its destructor ran in the end"
    );
    assert_eq!(refusals.load(Ordering::SeqCst), 2);
    assert!(stubborn.join().unwrap_err().is_cancelled());
    let lines = common::take_diagnostics();
    assert!(
        lines.iter().any(|l| l.contains("'stubborn'")
            && l.contains("did not finish within the shutdown timeout")),
        "{lines:?}"
    );
}

#[test]
fn dropping_the_runtime_cancels_and_a_late_spawn_says_it_has_shut_down() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let rt = rt(2);
    let handle = rt.handle().clone();
    for _ in 0..100 {
        let c = Count(Arc::clone(&dropped));
        rt.handle().spawn(move || {
            let _c = c;
            hub::sleep(Duration::from_secs(3600));
        });
    }
    drop(rt);
    assert_eq!(dropped.load(Ordering::SeqCst), 100);
    let late = handle.spawn(|| 1);
    assert!(late.join().unwrap_err().is_runtime_shut_down());
    assert!(matches!(
        handle.add_pending_call(|| ()),
        Err(HubError::ShuttingDown)
    ));
}

#[test]
fn a_parked_join_is_a_cancellation_point_too() {
    hub::run(|| {
        let (_tx, rx) = hub::unbounded::<()>();
        let inner = hub::spawn(move || {
            let _ = rx.recv();
        });
        let outer = hub::spawn(move || inner.join());
        until_parked(&outer, Wait::Join);
        outer.cancel();
        assert!(outer.join().unwrap_err().is_cancelled());
    })
    .unwrap();
}

#[test]
fn dropping_the_runtime_inside_one_of_its_green_threads_shuts_it_down_in_the_background() {
    let rt = rt(2);
    let handle = rt.handle().clone();
    let (rt_tx, rt_rx) = hub::oneshot::<Runtime>();
    let h = handle.spawn(move || {
        let rt = rt_rx.recv().unwrap();
        drop(rt); // cannot join its own worker: goes on in the background
        hub::sleep(Duration::from_secs(3600)); // cancelled here
    });
    rt_tx.send(rt).map_err(|_| "the receiver is gone").unwrap();
    let err = bounded("background shutdown", move || h.join());
    assert!(err.unwrap_err().is_cancelled());
    assert!(handle
        .spawn(|| ())
        .join()
        .unwrap_err()
        .is_runtime_shut_down());
}

#[test]
fn a_blocking_thread_that_outlives_the_runtime_still_has_its_state_cleaned_up() {
    let rt = rt(1);
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (fin_tx, fin_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let job = rt.handle().spawn_blocking(move || {
        greenlet::getcurrent().on_finalize(move || fin_tx.send(()).unwrap());
        started_tx.send(()).unwrap();
        release_rx.recv().unwrap();
    });
    started_rx.recv_timeout(HANG).unwrap();
    let report = rt.shutdown_timeout(HANG);
    assert_eq!(report.blocking_still_running, 1);
    release_tx.send(()).unwrap();
    job.join().unwrap();
    // The pool thread exits now that the runtime is gone; its greenlet
    // state is drained on that thread.
    fin_rx.recv_timeout(HANG).expect("the finalizer ran");
}
