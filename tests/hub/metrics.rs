//! Runtime metrics count known work: spawns, joins, parks by reason,
//! blocking calls, wakes from other threads, steals and poller calls. Each
//! test waits for states it causes (bounded by `HANG`), never for time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use greenlet::hub::{self, Handle, Metrics, Runtime, Wait};

const HANG: Duration = Duration::from_secs(60);

/// Poll `handle`'s metrics until `ok` holds for one (within `HANG`).
fn until(handle: &Handle, what: &str, ok: impl Fn(&Metrics) -> bool) -> Metrics {
    let start = Instant::now();
    loop {
        let m = handle.metrics();
        if ok(&m) {
            return m;
        }
        assert!(start.elapsed() < HANG, "never {what}: {m}");
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn spawned_and_alive_count_known_work() {
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    let handle = rt.handle();
    let before = handle.metrics();
    assert_eq!(before.alive, 0, "{before}");
    let handles: Vec<_> = (0..100u64).map(|i| handle.spawn(move || i * 2)).collect();
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(total, 9900);
    let after = until(handle, "back to baseline", |m| m.alive == before.alive);
    assert!(after.spawned >= before.spawned + 100, "{after}");
    assert_eq!(after.running, 0, "{after}");
    assert_eq!(after.parked_total(), 0, "{after}");
    assert_eq!(after.workers.len(), 2);
    for w in &after.workers {
        assert!(w.busy <= w.uptime, "{after}");
    }
    let resumes: u64 = after.workers.iter().map(|w| w.resumes).sum();
    assert!(
        resumes >= 100,
        "each of the 100 was resumed at least once: {after}"
    );
}

#[test]
fn parked_green_threads_are_counted_by_what_they_wait_for() {
    let rt = Runtime::builder().worker_threads(1).build().unwrap();
    let handle = rt.handle();
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..3)
        .map(|_| {
            let (tx, rx) = hub::channel::<()>(1);
            (tx, handle.spawn(move || rx.recv().is_ok()))
        })
        .unzip();
    let sleeper = handle.spawn(|| hub::sleep(Duration::from_secs(3600)));
    let m = until(handle, "four parked", |m| {
        m.parked_on(Wait::Recv) == 3 && m.parked_on(Wait::Sleep) == 1
    });
    assert_eq!(m.parked_total(), 4, "{m}");
    assert_eq!(m.alive, 4, "{m}");
    assert!(m.to_string().contains("channel receive: 3"), "{m}");
    assert!(m.to_string().contains("sleep: 1"), "{m}");
    for tx in senders {
        tx.send(()).unwrap();
    }
    for r in receivers {
        assert!(r.join().unwrap());
    }
    sleeper.cancel();
    assert!(sleeper.join().unwrap_err().is_cancelled());
    let m = until(handle, "none parked", |m| m.alive == 0);
    assert_eq!(m.parked_total(), 0, "{m}");
}

#[test]
fn the_blocking_pool_is_counted() {
    let rt = Runtime::builder()
        .worker_threads(1)
        .max_blocking_threads(2)
        .build()
        .unwrap();
    let handle = rt.handle();
    let release = Arc::new(AtomicBool::new(false));
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let r = Arc::clone(&release);
            handle.spawn_blocking(move || {
                let start = Instant::now();
                while !r.load(Ordering::SeqCst) && start.elapsed() < HANG {
                    thread::sleep(Duration::from_millis(1));
                }
            })
        })
        .collect();
    // Two threads at most: two calls run, the third waits.
    let m = until(handle, "two busy and one queued", |m| {
        m.blocking_busy == 2 && m.blocking_queued == 1
    });
    assert_eq!(m.blocking_threads, 2, "{m}");
    assert_eq!(m.blocking, 2, "{m}");
    assert!(m.ready >= 1, "the queued call waits: {m}");
    release.store(true, Ordering::SeqCst);
    for c in calls {
        c.join().unwrap();
    }
    let m = until(handle, "the pool idle", |m| m.blocking_busy == 0);
    assert_eq!(m.blocking_queued, 0, "{m}");
}

#[test]
fn wakes_from_another_thread_and_polls_are_counted() {
    let rt = Runtime::builder().worker_threads(1).build().unwrap();
    let handle = rt.handle();
    let before = handle.metrics();
    let (tx, rx) = hub::channel::<u32>(1);
    let (ack_tx, ack_rx) = hub::channel::<()>(1);
    let receiver = handle.spawn(move || {
        let mut sum = 0;
        for v in rx.iter() {
            sum += v;
            ack_tx.send(()).unwrap();
        }
        sum
    });
    // Sent from this plain thread once the receiver parked again (after
    // its acknowledgement of the previous value, so the park seen is a
    // new one): each send wakes it through the worker's remote queue.
    for i in 0..10 {
        until(handle, "the receiver parked", |m| {
            m.parked_on(Wait::Recv) == 1
        });
        tx.send(i).unwrap();
        ack_rx.recv().unwrap();
    }
    drop(tx);
    assert_eq!(receiver.join().unwrap(), 45);
    let after = handle.metrics();
    let (b, a) = (&before.workers[0], &after.workers[0]);
    assert!(a.remote_wakes >= b.remote_wakes + 10, "{after}");
    // The worker slept in its poller while the receiver waited.
    assert!(a.polls > b.polls, "{after}");
}

#[test]
fn an_idle_worker_steals_unstarted_tasks() {
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    let handle = rt.handle();
    // One green thread spawns many tasks without parking: they queue on
    // its worker's deque, and the other worker, idle, steals them.
    let release = Arc::new(AtomicBool::new(false));
    let r = Arc::clone(&release);
    let spawner = handle.spawn(move || {
        let hs: Vec<_> = (0..64).map(|_| hub::spawn(|| ())).collect();
        let start = Instant::now();
        while !r.load(Ordering::SeqCst) && start.elapsed() < HANG {
            std::hint::spin_loop();
        }
        hs
    });
    let m = until(handle, "a steal", |m| {
        m.workers.iter().any(|w| w.steals > 0)
    });
    release.store(true, Ordering::SeqCst);
    for h in spawner.join().unwrap() {
        h.join().unwrap();
    }
    assert!(m.workers.iter().map(|w| w.steals).sum::<u64>() >= 1, "{m}");
}

#[test]
fn metrics_outside_a_runtime_is_an_error() {
    let err = hub::metrics().unwrap_err();
    assert!(err.to_string().contains("runtime"), "{err}");
}
