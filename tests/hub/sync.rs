//! Hub channels, select, Event, Mutex, Semaphore, task groups: between green
//! threads on one and on several workers, and from plain threads.

use crate::common;

use common::hub::{rt, until_parked, HANG};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use greenlet::hub::{
    self, Event, Mutex, RecvError, RecvTimeoutError, Selectable, Semaphore, TaskGroup,
    TryRecvError, Wait,
};

#[test]
fn bounded_channel_parks_the_sender_when_full_and_keeps_order() {
    for workers in [1, 2] {
        let got = rt(workers)
            .block_on(|| {
                let (tx, rx) = hub::channel(2);
                let producer = hub::spawn(move || {
                    for i in 0..100 {
                        tx.send(i).unwrap();
                    }
                });
                let v: Vec<i32> = rx.iter().collect();
                producer.join().unwrap();
                v
            })
            .unwrap();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
    }
}

#[test]
fn a_full_bounded_channel_parks_its_sender() {
    hub::run(|| {
        let (tx, rx) = hub::channel(1);
        tx.send(0).unwrap();
        let h = hub::spawn(move || tx.send(1).unwrap());
        until_parked(&h, Wait::Send);
        assert_eq!(rx.recv(), Ok(0));
        h.join().unwrap();
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.recv(), Err(RecvError));
    })
    .unwrap();
}

#[test]
fn ping_pong_across_two_workers_and_with_a_plain_thread() {
    let rt = rt(2);
    let rounds = rt
        .block_on(|| {
            let (a_tx, a_rx) = hub::channel::<u32>(1);
            let (b_tx, b_rx) = hub::channel::<u32>(1);
            let echo = hub::spawn(move || {
                for v in a_rx.iter() {
                    b_tx.send(v + 1).unwrap();
                }
            });
            let mut v = 0;
            for _ in 0..1000 {
                a_tx.send(v).unwrap();
                v = b_rx.recv().unwrap();
            }
            drop(a_tx);
            echo.join().unwrap();
            v
        })
        .unwrap();
    assert_eq!(rounds, 1000);
    // A plain thread talks to a green thread.
    let (tx, rx) = hub::channel::<u32>(1);
    let (back_tx, back_rx) = hub::channel::<u32>(1);
    let h = rt.handle().spawn(move || {
        for v in rx.iter() {
            back_tx.send(v * 2).unwrap();
        }
    });
    for i in 0..100 {
        tx.send(i).unwrap();
        assert_eq!(back_rx.recv().unwrap(), i * 2);
    }
    drop(tx);
    h.join().unwrap();
}

#[test]
fn dropping_every_sender_ends_iteration_and_dropping_the_receiver_fails_sends() {
    let (tx, rx) = hub::unbounded();
    let tx2 = tx.clone();
    tx.send(1).unwrap();
    tx2.send(2).unwrap();
    drop(tx);
    assert_eq!(rx.try_recv(), Ok(1));
    drop(tx2);
    assert_eq!(rx.iter().collect::<Vec<_>>(), [2]);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    let (tx, rx) = hub::channel(1);
    drop(rx);
    assert_eq!(tx.send(7).unwrap_err().0, 7);
    assert!(tx.is_closed());
}

#[test]
fn nothing_sent_is_lost_when_a_parked_receiver_is_cancelled() {
    // One worker: the victim cannot run between the send and the cancel.
    rt(1)
        .block_on(|| {
            let (tx, rx) = hub::unbounded::<u32>();
            let rx = Arc::new(rx);
            let r = Arc::clone(&rx);
            let victim = hub::spawn(move || r.recv());
            let r = Arc::clone(&rx);
            let survivor = hub::spawn(move || r.recv());
            until_parked(&victim, Wait::Recv);
            until_parked(&survivor, Wait::Recv);
            // The send notifies the first waiter (the victim); it is cancelled
            // before it runs, so the notification must pass to the survivor.
            tx.send(42).unwrap();
            victim.cancel();
            assert!(victim.join().unwrap_err().is_cancelled());
            assert_eq!(survivor.join().unwrap(), Ok(42));
            tx.send(43).unwrap();
            assert_eq!(rx.recv(), Ok(43));
        })
        .unwrap();
}

#[test]
fn recv_timeout_and_oneshot() {
    hub::run(|| {
        let (tx, rx) = hub::unbounded::<u8>();
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(2)),
            Err(RecvTimeoutError::Timeout)
        );
        drop(tx);
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(3600)),
            Err(RecvTimeoutError::Disconnected)
        );
        let (otx, orx) = hub::oneshot();
        let h = hub::spawn(move || orx.recv());
        otx.send("one").unwrap();
        assert_eq!(h.join().unwrap(), Ok("one"));
        let (otx, orx) = hub::oneshot::<u8>();
        drop(otx);
        assert_eq!(orx.recv(), Err(RecvError));
    })
    .unwrap();
}

#[test]
fn select_returns_the_ready_receiver_or_elapses() {
    let rt = rt(2);
    rt.block_on(|| {
        let (a_tx, a_rx) = hub::unbounded::<u8>();
        let (b_tx, b_rx) = hub::unbounded::<&str>();
        let (o_tx, o_rx) = hub::oneshot::<u16>();
        let sets: [&dyn Selectable; 3] = [&a_rx, &b_rx, &o_rx];
        let deadline = Instant::now() + Duration::from_millis(3);
        assert!(hub::select(&sets, Some(deadline)).is_err());
        let h = hub::spawn(move || {
            hub::sleep(Duration::from_millis(1));
            b_tx.send("b").unwrap();
        });
        assert_eq!(hub::select(&sets, None), Ok(1));
        assert_eq!(b_rx.try_recv(), Ok("b"));
        h.join().unwrap();
        // b's senders are gone: it is ready (its end).
        assert_eq!(hub::select(&sets, None), Ok(1));
        o_tx.send(5).unwrap();
        assert_eq!(hub::select(&sets[2..], None), Ok(0));
        assert_eq!(o_rx.try_recv(), Ok(5));
        drop(a_tx);
        assert_eq!(hub::select(&sets[..1], None), Ok(0));
    })
    .unwrap();
}

#[test]
fn event_wakes_every_waiter_on_any_worker_and_from_a_plain_thread() {
    let rt = rt(2);
    let ev = Arc::new(Event::new());
    let e = Arc::clone(&ev);
    let woke = rt.handle().spawn(move || {
        let hs: Vec<_> = (0..50)
            .map(|_| {
                let e = Arc::clone(&e);
                hub::spawn(move || e.wait())
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        50
    });
    thread::sleep(Duration::from_millis(1));
    ev.set(); // from a plain thread
    assert_eq!(woke.join().unwrap(), 50);
    assert!(ev.is_set());
    ev.clear();
    assert!(ev.wait_timeout(Duration::from_millis(1)).is_err());
}

#[test]
fn mutex_excludes_across_parks_and_workers() {
    let rt = rt(2);
    let (count, max_inside) = rt
        .block_on(|| {
            let m = Arc::new(Mutex::new(0u64));
            let inside = Arc::new(AtomicUsize::new(0));
            let max = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..100)
                .map(|_| {
                    let (m, inside, max) = (Arc::clone(&m), Arc::clone(&inside), Arc::clone(&max));
                    hub::spawn(move || {
                        let mut g = m.lock();
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        max.fetch_max(now, Ordering::SeqCst);
                        hub::yield_now();
                        *g += 1;
                        inside.fetch_sub(1, Ordering::SeqCst);
                    })
                })
                .collect();
            hs.into_iter().for_each(|h| h.join().unwrap());
            let v = *m.lock();
            (v, max.load(Ordering::SeqCst))
        })
        .unwrap();
    assert_eq!(count, 100);
    assert_eq!(max_inside, 1);
}

#[test]
fn a_cancelled_lock_waiter_passes_the_lock_on() {
    // One worker: `first` cannot take the lock between the unlock and the
    // cancel.
    rt(1)
        .block_on(|| {
            let m = Arc::new(Mutex::new(()));
            let g = m.lock();
            let m1 = Arc::clone(&m);
            let first = hub::spawn(move || drop(m1.lock()));
            let m2 = Arc::clone(&m);
            let second = hub::spawn(move || drop(m2.lock()));
            until_parked(&first, Wait::Mutex);
            until_parked(&second, Wait::Mutex);
            drop(g); // notifies `first`...
            first.cancel(); // ...which is cancelled before it takes the lock
            assert!(first.join().unwrap_err().is_cancelled());
            second.join().unwrap();
            assert!(m.try_lock().is_some());
        })
        .unwrap();
}

#[test]
fn semaphore_bounds_concurrency() {
    let rt = rt(2);
    let max = rt
        .block_on(|| {
            let sem = Arc::new(Semaphore::new(3));
            let inside = Arc::new(AtomicUsize::new(0));
            let max = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..60)
                .map(|_| {
                    let (s, i, m) = (Arc::clone(&sem), Arc::clone(&inside), Arc::clone(&max));
                    hub::spawn(move || {
                        let _p = s.acquire();
                        let now = i.fetch_add(1, Ordering::SeqCst) + 1;
                        m.fetch_max(now, Ordering::SeqCst);
                        hub::yield_now();
                        i.fetch_sub(1, Ordering::SeqCst);
                    })
                })
                .collect();
            hs.into_iter().for_each(|h| h.join().unwrap());
            assert_eq!(sem.available(), 3);
            max.load(Ordering::SeqCst)
        })
        .unwrap();
    assert!((1..=3).contains(&max), "{max}");
}

#[test]
fn task_group_joins_first_finished_then_all_and_cancels_on_drop() {
    let dropped = Arc::new(AtomicUsize::new(0));
    struct Count(Arc<AtomicUsize>);
    impl Drop for Count {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let d = Arc::clone(&dropped);
    hub::run(move || {
        let (go_tx, go_rx) = hub::unbounded::<()>();
        let go_rx = Arc::new(go_rx);
        let mut g = TaskGroup::new();
        for i in 0..3 {
            let r = Arc::clone(&go_rx);
            g.spawn(move || {
                r.recv().unwrap();
                i
            })
            .unwrap();
        }
        g.spawn(|| 99).unwrap();
        assert_eq!(g.join_next().unwrap().unwrap(), 99);
        for _ in 0..3 {
            go_tx.send(()).unwrap();
        }
        let mut rest: Vec<_> = g.join_all().into_iter().map(Result::unwrap).collect();
        rest.sort();
        assert_eq!(rest, [0, 1, 2]);
        // Dropping a group cancels its members.
        let mut g = TaskGroup::new();
        for _ in 0..5 {
            let c = Count(Arc::clone(&d));
            g.spawn(move || {
                let _c = c;
                hub::sleep(Duration::from_secs(3600));
            })
            .unwrap();
        }
        hub::yield_now();
        drop(g);
        let start = Instant::now();
        while d.load(Ordering::SeqCst) < 5 {
            assert!(start.elapsed() < HANG);
            hub::yield_now();
        }
    })
    .unwrap();
    assert_eq!(dropped.load(Ordering::SeqCst), 5);
}

#[test]
fn task_group_try_join_next_reaps_finished_members_without_parking() {
    rt(1)
        .block_on(|| {
            let mut g = TaskGroup::new();
            g.spawn(|| 1).unwrap();
            // On one worker the member starts only when this green thread
            // parks or yields: a `try_join_next` that parked would find it.
            assert!(g.try_join_next().is_none());
            assert_eq!(g.len(), 1);
            hub::yield_now();
            assert_eq!(g.try_join_next().unwrap().unwrap(), 1);
            assert!(g.is_empty());
            assert!(g.try_join_next().is_none());
        })
        .unwrap();
}

#[test]
fn task_group_reaped_between_spawns_stays_small_and_loses_no_result() {
    for workers in [1, 2] {
        let (seen, most) = rt(workers)
            .block_on(|| {
                let (stop_tx, stop_rx) = hub::unbounded::<()>();
                let stop_rx = Arc::new(stop_rx);
                let mut g = TaskGroup::new();
                // One long-lived member, as a connection that stays open.
                let r = Arc::clone(&stop_rx);
                g.spawn(move || r.recv().map(|()| usize::MAX).unwrap())
                    .unwrap();
                let mut seen = Vec::new();
                let mut most = 0;
                for i in 0..300usize {
                    g.spawn(move || i).unwrap();
                    hub::yield_now();
                    while let Some(r) = g.try_join_next() {
                        seen.push(r.unwrap());
                    }
                    most = most.max(g.len());
                }
                let start = Instant::now();
                while seen.len() < 300 {
                    assert!(start.elapsed() < HANG, "reaped {} of 300", seen.len());
                    hub::yield_now();
                    seen.extend(g.try_join_next().map(Result::unwrap));
                }
                stop_tx.send(()).unwrap();
                assert_eq!(g.join_next().unwrap().unwrap(), usize::MAX);
                assert!(g.join_next().is_none());
                (seen, most)
            })
            .unwrap();
        let mut sorted = seen.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..300).collect::<Vec<_>>(), "workers {workers}");
        assert!(most < 100, "workers {workers}: the group grew to {most}");
    }
}

#[test]
fn owned_permits_bound_blocking_calls_whose_callers_stop_waiting() {
    // A CPU pool bounded by a semaphore: each request takes a permit, moves
    // it into a blocking call, and waits for the call under a deadline
    // shorter than some calls. The callers that time out stop waiting; the
    // permits stay with the calls, so no more than two run at once.
    let rt = hub::Runtime::builder()
        .worker_threads(2)
        .max_blocking_threads(8)
        .build()
        .unwrap();
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let ended = Arc::new(AtomicUsize::new(0));
    let (r, p, e) = (running.clone(), peak.clone(), ended.clone());
    let (timed_out, started) = rt
        .block_on(move || {
            let cpu = Arc::new(Semaphore::new(2));
            let mut g = TaskGroup::new();
            for i in 0..16u64 {
                let (cpu, r, p, e) = (cpu.clone(), r.clone(), p.clone(), e.clone());
                g.spawn(move || {
                    hub::timeout(Duration::from_millis(25), || {
                        let permit = cpu.acquire_owned();
                        let call = hub::spawn_blocking(move || {
                            let _permit = permit;
                            let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                            p.fetch_max(now, Ordering::SeqCst);
                            thread::sleep(Duration::from_millis(10 + 5 * (i % 4)));
                            r.fetch_sub(1, Ordering::SeqCst);
                            e.fetch_add(1, Ordering::SeqCst);
                        });
                        call.join().unwrap();
                    })
                    .is_err()
                })
                .unwrap();
            }
            let timed_out = g
                .join_all()
                .into_iter()
                .filter(|r| *r.as_ref().unwrap())
                .count();
            // Every call that got a permit ends and gives it back.
            let start = Instant::now();
            while cpu.available() < 2 {
                assert!(start.elapsed() < HANG, "a permit never came back");
                hub::sleep(Duration::from_millis(1));
            }
            (timed_out, 16 - timed_out)
        })
        .unwrap();
    assert!(
        timed_out > 0,
        "no caller stopped waiting: the test shows nothing"
    );
    assert!(ended.load(Ordering::SeqCst) >= started);
    assert_eq!(running.load(Ordering::SeqCst), 0);
    let peak = peak.load(Ordering::SeqCst);
    assert!((1..=2).contains(&peak), "{peak} blocking calls ran at once");
}

/// Sleeps (holding its thread) when dropped, and says on which thread.
struct SlowDrop(Arc<std::sync::Mutex<Option<thread::ThreadId>>>);

impl Drop for SlowDrop {
    fn drop(&mut self) {
        *self.0.lock().unwrap() = Some(thread::current().id());
        thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn a_task_group_join_cut_short_while_a_result_is_on_its_way_loses_nothing() {
    // A member cancelled before it starts reports its end when its closure
    // is dropped, and its result (the cancellation) is stored after the
    // closure's captures are: here one that holds the other worker for
    // 300 ms. A join_next cut by a 50 ms timeout in that window keeps the
    // member, and the next join_next returns it. The window needs the
    // member dropped on the other worker; an attempt where it was not
    // (the root's worker ran it) proves nothing and is tried again.
    let mut windows = 0;
    for _ in 0..10 {
        let hit = rt(2)
            .block_on(|| {
                let dropped_on = Arc::new(std::sync::Mutex::new(None));
                let started = Arc::new(AtomicUsize::new(0));
                let mut g = TaskGroup::new();
                let (slow, flag) = (SlowDrop(Arc::clone(&dropped_on)), Arc::clone(&started));
                g.spawn(move || {
                    flag.fetch_add(1, Ordering::SeqCst);
                    drop(slow);
                    7
                })
                .unwrap();
                g.cancel_all();
                // Hold this worker so that the other one takes the member.
                thread::sleep(Duration::from_millis(30));
                let cut = hub::timeout(Duration::from_millis(50), || g.join_next());
                let cut_short = cut.is_err();
                let rest = g.join_next();
                let outcome = match (cut, rest) {
                    (Ok(Some(r)), None) | (Err(_), Some(r)) => r,
                    other => panic!("one result, once: {other:?}"),
                };
                let here = thread::current().id();
                let elsewhere = dropped_on.lock().unwrap().is_some_and(|t| t != here);
                let unstarted = started.load(Ordering::SeqCst) == 0;
                if unstarted {
                    assert!(outcome.unwrap_err().is_cancelled());
                } else {
                    assert_eq!(outcome.unwrap(), 7);
                }
                assert!(g.join_next().is_none());
                unstarted && elsewhere && cut_short
            })
            .unwrap();
        windows += usize::from(hit);
        if windows >= 2 {
            break;
        }
    }
    assert!(
        windows > 0,
        "the member was never dropped on the other worker"
    );
}
