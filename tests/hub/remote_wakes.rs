//! Wakes from other threads (a worker's remote queue, `src/hub/worker.rs`
//! `Remote`): a burst of them while the worker is busy loses none and
//! resumes the woken green threads in the order they were woken, bursts
//! after bursts reuse the queue, and wakes from another worker of the same
//! runtime arrive like those from a plain thread.

use crate::common;

use common::hub::{bounded, rt, until_parked, HANG};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Instant;

use greenlet::hub::{self, Wait};

/// Green threads parked on one channel each, woken in index order by
/// `waker` while the worker they live on is held busy; the order they ran
/// in after each of `rounds` bursts.
fn woken_order(
    n: usize,
    rounds: usize,
    waker: impl Fn(Box<dyn FnOnce() + Send>),
) -> Vec<Vec<usize>> {
    let rt = rt(1);
    let mut orders = Vec::new();
    for _ in 0..rounds {
        let ran = Arc::new(Mutex::new(Vec::new()));
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for i in 0..n {
            let (tx, rx) = hub::channel::<usize>(1);
            let ran = Arc::clone(&ran);
            handles.push(rt.handle().spawn(move || {
                let v = rx.recv_timeout(HANG).expect("a wake within HANG");
                ran.lock().unwrap().push(v);
                assert_eq!(v, i);
            }));
            senders.push(tx);
        }
        let parked: Vec<_> = rt
            .block_on(move || {
                for h in &handles {
                    until_parked(h, Wait::Recv);
                }
                handles
            })
            .expect("the parking check");
        // The worker is held by a green thread that spins until every wake
        // is queued: the wakes pile up in its remote queue.
        let sent = Arc::new(AtomicBool::new(false));
        let done = Arc::clone(&sent);
        waker(Box::new(move || {
            for (i, tx) in senders.iter().enumerate() {
                tx.send(i).expect("a parked receiver");
            }
            done.store(true, Ordering::Release);
        }));
        rt.block_on(move || {
            let start = Instant::now();
            while !sent.load(Ordering::Acquire) {
                assert!(start.elapsed() < HANG, "the wakes were never sent");
                std::hint::spin_loop();
            }
            for h in parked {
                h.join().expect("a woken receiver");
            }
        })
        .expect("the busy green thread");
        orders.push(Arc::try_unwrap(ran).unwrap().into_inner().unwrap());
    }
    orders
}

#[test]
fn a_burst_of_wakes_from_a_plain_thread_resumes_in_wake_order() {
    let orders = bounded(120, || {
        woken_order(200, 3, |send| {
            thread::spawn(send).join().expect("the waking thread");
        })
    });
    let expected: Vec<usize> = (0..200).collect();
    for order in orders {
        assert_eq!(order, expected);
    }
}

#[test]
fn a_single_wake_at_a_time_from_a_plain_thread_is_never_lost() {
    // One wake per burst: the first slot of the queue alone, taken and
    // refilled 500 times.
    let orders = bounded(120, || {
        woken_order(1, 500, |send| {
            thread::spawn(send).join().expect("the waking thread");
        })
    });
    assert!(orders.iter().all(|o| o == &[0]));
}

#[test]
fn wakes_from_another_worker_arrive_in_order() {
    // The receivers live on worker A, the sender is a green thread of a
    // runtime of two that runs on worker B: the held A green thread spins
    // until B has sent everything.
    let rt = rt(2);
    let result = bounded(120, move || {
        rt.block_on(|| {
            let n = 100;
            let me = thread::current().id();
            let ran = Arc::new(Mutex::new(Vec::new()));
            let mut senders = Vec::new();
            let mut handles = Vec::new();
            for i in 0..n {
                let (tx, rx) = hub::channel::<usize>(1);
                let ran = Arc::clone(&ran);
                handles.push(hub::spawn_local(move || {
                    let v = rx.recv_timeout(HANG).expect("a wake within HANG");
                    ran.lock().unwrap().push(v);
                    v == i
                }));
                senders.push(tx);
            }
            for h in &handles {
                until_parked(h, Wait::Recv);
            }
            let sent = Arc::new(AtomicBool::new(false));
            let done = Arc::clone(&sent);
            let sender = hub::spawn(move || {
                let elsewhere = thread::current().id() != me;
                for (i, tx) in senders.iter().enumerate() {
                    tx.send(i).expect("a parked receiver");
                }
                done.store(true, Ordering::Release);
                elsewhere
            });
            let start = Instant::now();
            while !sent.load(Ordering::Acquire) {
                assert!(start.elapsed() < HANG, "the sender never ran");
                std::hint::spin_loop();
            }
            let all_right = handles.into_iter().all(|h| h.join().expect("a receiver"));
            let elsewhere = sender.join().expect("the sender");
            let order = ran.lock().unwrap().clone();
            (all_right, elsewhere, order)
        })
        .expect("the block_on task")
    });
    let (all_right, elsewhere, order) = result;
    assert!(all_right, "a receiver got another's value");
    assert!(elsewhere, "the sender ran on the receivers' worker");
    assert_eq!(order, (0..100).collect::<Vec<_>>());
}
