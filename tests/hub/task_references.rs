//! A task's greenlet holds no count of its task of its own (the worker's
//! entry of it does): a detached task whose greenlet cannot get a stack
//! drops its closure once and never runs it; a detached task parked when
//! the runtime shuts down unwinds (its destructors run, its outcome is
//! recorded) with its task alive; and the outcome and registry locks (a
//! lock whose waiters spin, then yield) hold up under joins, cancels and
//! dumps from plain threads while two workers spawn and finish tasks.

use crate::common;

use common::hub::{bounded, rt, until_parked, Dropped, HANG};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use greenlet::hub::{self, Wait};

#[test]
fn a_detached_task_without_a_stack_drops_its_closure_once_and_never_runs() {
    bounded(60, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let ran = Arc::new(AtomicUsize::new(0));
        let rt = rt(1);
        let (d, r) = (Arc::clone(&drops), Arc::clone(&ran));
        let listed_after = rt
            .block_on(move || {
                let guard = Dropped(d);
                let h = hub::task()
                    .name("huge")
                    .stack_size(1 << 60)
                    .spawn(move || {
                        let _g = guard;
                        r.fetch_add(1, Ordering::SeqCst);
                    })
                    .unwrap();
                drop(h);
                // Its start fails in the loop; the runtime goes on.
                assert_eq!(hub::spawn(|| 5).join().unwrap(), 5);
                hub::tasks()
                    .unwrap()
                    .iter()
                    .filter(|t| t.name == "huge")
                    .count()
            })
            .unwrap();
        drop(rt);
        assert_eq!(ran.load(Ordering::SeqCst), 0, "never ran");
        assert_eq!(drops.load(Ordering::SeqCst), 1, "its closure dropped once");
        assert_eq!(listed_after, 0, "it left the dump");
    });
}

#[test]
fn a_detached_task_parked_at_shutdown_unwinds_with_its_task_alive() {
    bounded(60, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let rt = rt(1);
        let d = Arc::clone(&drops);
        rt.block_on(move || {
            for i in 0..8 {
                let guard = Dropped(Arc::clone(&d));
                let h = hub::task()
                    .name(format!("sleeper-{i}"))
                    .spawn(move || {
                        let _g = guard;
                        hub::sleep(Duration::from_secs(3600));
                    })
                    .unwrap();
                until_parked(&h, Wait::Sleep);
                // Detached: the worker's entry is its task's last count.
                drop(h);
            }
        })
        .unwrap();
        let report = rt.shutdown_timeout(HANG);
        assert!(report.refused.is_empty(), "{:?}", report.refused);
        assert_eq!(drops.load(Ordering::SeqCst), 8, "every stack unwound once");
    });
}

#[test]
fn joins_cancels_and_dumps_from_plain_threads_while_two_workers_churn() {
    bounded(120, || {
        let rt = rt(2);
        let handle = rt.handle().clone();
        let stop = Arc::new(AtomicUsize::new(0));
        let dumper = {
            let (handle, stop) = (handle.clone(), Arc::clone(&stop));
            thread::spawn(move || {
                let mut dumps = 0u64;
                while stop.load(Ordering::SeqCst) == 0 {
                    let all = handle.tasks();
                    assert!(all.iter().all(|t| !t.name.is_empty()));
                    dumps += 1;
                }
                dumps
            })
        };
        let joiners: Vec<_> = (0..3u64)
            .map(|k| {
                let handle = handle.clone();
                thread::spawn(move || {
                    let mut sum = 0;
                    for i in 0..300u64 {
                        let h = handle.spawn(move || {
                            // Spawns of its own, joined on the worker.
                            let inner: Vec<_> = (0..4).map(|j| hub::spawn(move || j)).collect();
                            inner.into_iter().map(|h| h.join().unwrap()).sum::<u64>() + i
                        });
                        if (i + k) % 7 == 0 {
                            h.cancel();
                            match h.join() {
                                Ok(v) => sum += v,
                                Err(e) => assert!(e.is_cancelled(), "{e}"),
                            }
                        } else {
                            sum += h.join().unwrap();
                        }
                    }
                    sum
                })
            })
            .collect();
        let start = Instant::now();
        let sums: Vec<u64> = joiners.into_iter().map(|j| j.join().unwrap()).collect();
        assert!(start.elapsed() < HANG, "the churn took too long");
        stop.store(1, Ordering::SeqCst);
        assert!(dumper.join().unwrap() > 0);
        // Each uncancelled task returned 6 + i; a cancelled one may have
        // finished first (it is cancelled while queued or at a join).
        for (k, sum) in sums.into_iter().enumerate() {
            let all: u64 = (0..300u64).map(|i| 6 + i).sum();
            let cancelled: u64 = (0..300u64)
                .filter(|i| (i + k as u64).is_multiple_of(7))
                .map(|i| 6 + i)
                .sum();
            assert!(
                (all - cancelled..=all).contains(&sum),
                "joiner {k}: {sum} outside {}..={all}",
                all - cancelled
            );
        }
        // A task cancelled while joining its own leaves them detached, to
        // finish on their own: every task leaves the registry, soon.
        let start = Instant::now();
        loop {
            let left = rt.handle().tasks();
            if left.is_empty() {
                break;
            }
            assert!(start.elapsed() < HANG, "never left the registry: {left:?}");
            thread::sleep(Duration::from_millis(1));
        }
    });
}
