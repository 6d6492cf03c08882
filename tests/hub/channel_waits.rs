//! The waits behind hub channels and sync, at the points where a value is
//! handed over: a send to a parked receive hands it the value, a receive
//! from a full channel takes a parked sender's value; a waiter cancelled or
//! timed out after that loses nothing; `select` watches share a receiver's
//! wait list with receives; plain threads and a second worker on either
//! side.

use crate::common;

use common::hub::{rt, until_parked, HANG};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use greenlet::hub::{self, Mutex, RecvTimeoutError, Selectable, Semaphore, TaskState, Wait};

/// Block the worker (not park) until `d` has passed: the green threads
/// woken meanwhile run only after it.
fn hold_worker(d: Duration) {
    let start = Instant::now();
    while start.elapsed() <= d {
        thread::sleep(d);
    }
}

/// Yield until `h` is parked on `wait` (true) or has finished (false).
fn parked_or_done<T>(h: &hub::JoinHandle<T>, wait: Wait) -> bool {
    let start = Instant::now();
    while h.state() != TaskState::Parked(wait) {
        if h.is_finished() {
            return false;
        }
        assert!(start.elapsed() < HANG, "never parked on {wait}");
        hub::yield_now();
    }
    true
}

/// On one worker (nothing runs between a hand-over and the resume of the
/// one it went to), run `attempt` with a timeout of 1 ms, then 10, 100,
/// ... until it gets to exercise its path (returns true): a slow run
/// (valgrind) may see a short timeout elapse before the attempt reaches
/// its hand-over (the attempt returns false), and then tries a longer one.
fn with_growing_timeouts(what: &str, attempt: fn(Duration) -> bool) {
    let exercised = rt(1)
        .block_on(move || {
            [1, 10, 100, 1_000, 10_000]
                .into_iter()
                .any(|ms| attempt(Duration::from_millis(ms)))
        })
        .unwrap();
    assert!(exercised, "every timeout elapsed before {what}");
}

#[test]
fn a_value_handed_to_a_receiver_that_then_times_out_goes_to_the_next() {
    with_growing_timeouts("the send", |d| {
        let (tx, rx) = hub::unbounded::<u32>();
        let rx = Arc::new(rx);
        let r = Arc::clone(&rx);
        let victim = hub::spawn(move || hub::timeout(d, || r.recv()));
        let r = Arc::clone(&rx);
        let survivor = hub::spawn(move || r.recv());
        until_parked(&survivor, Wait::Recv);
        if !parked_or_done(&victim, Wait::Recv) {
            return false; // timed out already
        }
        // Handed to the victim (first in line); its timeout
        // elapses before it runs, so it unwinds holding the value.
        tx.send(7).unwrap();
        hold_worker(d);
        assert!(victim.join().unwrap().is_err(), "the victim timed out");
        assert_eq!(survivor.join().unwrap(), Ok(7));
        tx.send(8).unwrap();
        tx.send(9).unwrap();
        assert_eq!(rx.try_recv(), Ok(8), "order kept after the give-back");
        assert_eq!(rx.try_recv(), Ok(9));
        true
    });
}

#[test]
fn a_receive_whose_deadline_passes_after_a_handover_returns_the_value() {
    with_growing_timeouts("the send", |d| {
        let (tx, rx) = hub::unbounded::<u32>();
        let h = hub::spawn(move || rx.recv_timeout(d));
        if !parked_or_done(&h, Wait::Recv) {
            return false;
        }
        tx.send(5).unwrap();
        hold_worker(d);
        assert_eq!(h.join().unwrap(), Ok(5), "handed over before the deadline");
        true
    });
}

#[test]
fn a_value_handed_to_a_cancelled_receiver_goes_back_to_the_front() {
    rt(1)
        .block_on(|| {
            let (tx, rx) = hub::unbounded::<u32>();
            let rx = Arc::new(rx);
            let r = Arc::clone(&rx);
            let victim = hub::spawn(move || r.recv());
            until_parked(&victim, Wait::Recv);
            tx.send(1).unwrap(); // handed to the victim
            tx.send(2).unwrap(); // queued behind it
            victim.cancel();
            assert!(victim.join().unwrap_err().is_cancelled());
            assert_eq!(rx.try_recv(), Ok(1), "given back to the front");
            assert_eq!(rx.try_recv(), Ok(2));
        })
        .unwrap();
}

#[test]
fn a_cancelled_parked_sender_sends_nothing_unless_its_value_was_taken() {
    rt(1)
        .block_on(|| {
            let (tx, rx) = hub::channel::<u32>(1);
            tx.send(0).unwrap();
            let t = tx.clone();
            let cancelled = hub::spawn(move || t.send(1));
            let t = tx.clone();
            let other = hub::spawn(move || t.send(2));
            until_parked(&cancelled, Wait::Send);
            until_parked(&other, Wait::Send);
            cancelled.cancel();
            assert!(cancelled.join().unwrap_err().is_cancelled());
            // Its value left with it: the next parked sender's fills the room.
            assert_eq!(rx.recv(), Ok(0));
            assert_eq!(rx.recv(), Ok(2));
            assert!(other.join().unwrap().is_ok());

            // Taken (moved into the queue by a receive) before the cancel
            // reaches it: the send happened.
            let t = tx.clone();
            tx.send(3).unwrap();
            let taken = hub::spawn(move || t.send(4));
            until_parked(&taken, Wait::Send);
            assert_eq!(rx.recv(), Ok(3));
            taken.cancel();
            assert!(taken.join().unwrap_err().is_cancelled());
            assert_eq!(rx.try_recv(), Ok(4), "the taken value stays sent");
            drop(tx);
            assert!(rx.recv().is_err());
        })
        .unwrap();
}

#[test]
fn a_parked_send_timed_out_after_its_value_was_taken_stays_sent() {
    with_growing_timeouts("the receive", |d| {
        let (tx, rx) = hub::channel::<u32>(1);
        tx.send(1).unwrap();
        let h = hub::spawn(move || hub::timeout(d, || tx.send(2)));
        if !parked_or_done(&h, Wait::Send) {
            return false;
        }
        assert_eq!(rx.recv(), Ok(1)); // moves 2 into the room it leaves
        hold_worker(d);
        assert!(h.join().unwrap().is_err(), "the send's timeout elapsed");
        assert_eq!(rx.try_recv(), Ok(2), "the value taken stays sent");
        assert!(rx.try_recv().is_err(), "and only once");
        true
    });
}

#[test]
fn a_parked_sender_gets_its_value_back_when_the_receiver_goes() {
    rt(1)
        .block_on(|| {
            let (tx, rx) = hub::channel::<String>(1);
            tx.send("queued".into()).unwrap();
            let h = hub::spawn(move || tx.send("parked".into()).map_err(|e| e.0));
            until_parked(&h, Wait::Send);
            drop(rx);
            assert_eq!(h.join().unwrap(), Err("parked".to_string()));
        })
        .unwrap();
}

/// On an unbounded channel, a `select` parked on its receiver first, then
/// a receive parked behind it.
#[allow(clippy::type_complexity)]
fn select_then_receive() -> (
    hub::Sender<u32>,
    Arc<hub::Receiver<u32>>,
    hub::JoinHandle<Result<usize, hub::Elapsed>>,
    hub::JoinHandle<Result<u32, hub::RecvError>>,
) {
    let (tx, rx) = hub::unbounded::<u32>();
    let rx = Arc::new(rx);
    let r = Arc::clone(&rx);
    let selector = hub::spawn(move || hub::select(&[&*r as &dyn Selectable], None));
    let r = Arc::clone(&rx);
    let receiver = hub::spawn(move || r.recv());
    until_parked(&selector, Wait::Select);
    until_parked(&receiver, Wait::Recv);
    (tx, rx, selector, receiver)
}

#[test]
fn a_select_notified_then_cancelled_passes_the_value_to_a_parked_receive() {
    rt(1)
        .block_on(|| {
            let (tx, _rx, selector, receiver) = select_then_receive();
            // The select is first: the value is queued (a watch takes none)
            // and the select notified; cancelled, it passes that on.
            tx.send(11).unwrap();
            selector.cancel();
            assert!(selector.join().unwrap_err().is_cancelled());
            assert_eq!(receiver.join().unwrap(), Ok(11));
        })
        .unwrap();
}

#[test]
fn a_receive_behind_a_select_keeps_the_order() {
    rt(1)
        .block_on(|| {
            // The select only watches: it receives nothing.
            let (tx, rx, selector, receiver) = select_then_receive();
            tx.send(1).unwrap(); // queued, the select notified
            tx.send(2).unwrap(); // queued behind 1 (not handed past it)
            assert_eq!(selector.join().unwrap(), Ok(0));
            assert_eq!(receiver.join().unwrap(), Ok(1));
            assert_eq!(rx.try_recv(), Ok(2));
        })
        .unwrap();
}

#[test]
fn plain_threads_send_and_receive_with_green_threads_on_two_workers() {
    const ROUNDS: u32 = 2_000;
    let rt = rt(2);
    let (to_plain, from_green) = hub::channel::<u32>(1);
    let (to_green, from_plain) = hub::channel::<u32>(1);
    // A plain thread echoes: it blocks in recv (handed values by green
    // senders) and in send on a full channel (its value taken by a green
    // receive).
    let plain = thread::spawn(move || {
        let mut n = 0;
        for v in from_green.iter() {
            to_green.send(v + 1).unwrap();
            n += 1;
        }
        n
    });
    let sum = rt
        .block_on(move || {
            let (tx, rx) = hub::channel::<u32>(1);
            let producers: Vec<_> = (0..4)
                .map(|_| {
                    let tx = tx.clone();
                    hub::spawn(move || (0..ROUNDS / 4).for_each(|i| tx.send(i).unwrap()))
                })
                .collect();
            drop(tx);
            let mut sum = 0u64;
            for v in rx.iter() {
                to_plain.send(v).unwrap();
                sum += u64::from(from_plain.recv().unwrap());
            }
            producers.into_iter().for_each(|p| p.join().unwrap());
            sum
        })
        .unwrap();
    assert_eq!(plain.join().unwrap(), ROUNDS, "every value made the round");
    let per_producer: u64 = (1..=u64::from(ROUNDS / 4)).sum();
    assert_eq!(sum, 4 * per_producer);
}

#[test]
fn timeouts_and_cancels_under_cross_worker_traffic_lose_nothing() {
    // Receivers on both workers, some of them cancelled or timing out
    // while parked, against producers on both workers and a plain thread:
    // every value is received exactly once.
    const PER_PRODUCER: usize = 500;
    let rt = rt(2);
    let received = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = hub::channel::<usize>(2);
    let plain_tx = tx.clone();
    let plain = thread::spawn(move || (0..PER_PRODUCER).for_each(|i| plain_tx.send(i).unwrap()));
    let got = Arc::clone(&received);
    let total = rt
        .block_on(move || {
            let rx = Arc::new(rx);
            let producers: Vec<_> = (0..2)
                .map(|_| {
                    let tx = tx.clone();
                    hub::spawn(move || (0..PER_PRODUCER).for_each(|i| tx.send(i).unwrap()))
                })
                .collect();
            drop(tx);
            let consumers: Vec<_> = (0..4)
                .map(|k| {
                    let rx = Arc::clone(&rx);
                    let got = Arc::clone(&got);
                    hub::spawn(move || loop {
                        let r = match k % 2 {
                            0 => rx.recv_timeout(Duration::from_micros(50)),
                            _ => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                        };
                        match r {
                            Ok(_) => {
                                got.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(RecvTimeoutError::Timeout) => {}
                            Err(RecvTimeoutError::Disconnected) => return,
                        }
                    })
                })
                .collect();
            // Cancel one receiver while values flow (wherever it is then: parked
            // with a value handed to it, or not); the rest drain.
            let victim = hub::spawn({
                let rx = Arc::clone(&rx);
                let got = Arc::clone(&got);
                move || {
                    while rx.recv().is_ok() {
                        got.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
            for _ in 0..10 {
                hub::yield_now();
            }
            victim.cancel();
            let _ = victim.join();
            producers.into_iter().for_each(|p| p.join().unwrap());
            consumers.into_iter().for_each(|c| c.join().unwrap());
            3 * PER_PRODUCER
        })
        .unwrap();
    plain.join().unwrap();
    assert_eq!(received.load(Ordering::Relaxed), total);
}

#[test]
fn lock_and_permit_waiters_cancelled_after_a_notify_pass_it_on() {
    rt(1)
        .block_on(|| {
            let m = Arc::new(Mutex::new(0u32));
            let guard = m.lock();
            let spawn_locker = |m: &Arc<Mutex<u32>>| {
                let m = Arc::clone(m);
                hub::spawn(move || *m.lock() += 1)
            };
            let (victim, next) = (spawn_locker(&m), spawn_locker(&m));
            until_parked(&victim, Wait::Mutex);
            until_parked(&next, Wait::Mutex);
            drop(guard); // notifies the victim
            victim.cancel();
            assert!(victim.join().unwrap_err().is_cancelled());
            next.join().unwrap();
            assert_eq!(*m.lock(), 1);

            let s = Arc::new(Semaphore::new(0));
            let spawn_acquirer = |s: &Arc<Semaphore>| {
                let s = Arc::clone(s);
                hub::spawn(move || drop(s.acquire()))
            };
            let (victim, next) = (spawn_acquirer(&s), spawn_acquirer(&s));
            until_parked(&victim, Wait::Semaphore);
            until_parked(&next, Wait::Semaphore);
            s.add_permits(1); // notifies the victim
            victim.cancel();
            assert!(victim.join().unwrap_err().is_cancelled());
            next.join().unwrap();
            assert_eq!(s.available(), 1);
        })
        .unwrap();
}

#[test]
fn a_plain_thread_blocked_in_recv_is_handed_the_value() {
    let rt = rt(1);
    let (tx, rx) = hub::unbounded::<u32>();
    let (ready_tx, ready_rx) = hub::oneshot::<()>();
    let plain = thread::spawn(move || {
        ready_tx.send(()).unwrap();
        rx.recv_timeout(HANG)
    });
    rt.block_on(move || {
        ready_rx.recv().unwrap();
        // Give the plain thread time to block (not needed for the value to
        // arrive, only for the hand-over path to be the one taken).
        hub::sleep(Duration::from_millis(1));
        tx.send(3).unwrap();
    })
    .unwrap();
    assert_eq!(plain.join().unwrap(), Ok(3));
}

/// Waiter nodes are pointers in the wait lists now; the owned sync types
/// stay `UnwindSafe`, as they were when the nodes were `Arc`s.
#[test]
fn owned_sync_types_stay_unwind_safe() {
    fn unwind_safe<T: std::panic::UnwindSafe>(_: &T) {}
    unwind_safe(&hub::Event::new());
    unwind_safe(&Mutex::new(0_u32));
    unwind_safe(&Semaphore::new(1));
}

#[test]
fn waiters_that_leave_from_the_middle_and_the_ends_keep_the_rest_in_order() {
    // The wait list is intrusive: a receive that times out in the middle,
    // and cancelled ones at the tail and then the head, unlink themselves;
    // the two left are handed values in the order they parked.
    rt(1)
        .block_on(|| {
            let (tx, rx) = hub::unbounded::<u32>();
            let rx = Arc::new(rx);
            let receiver = |timeout: Option<Duration>| {
                let r = Arc::clone(&rx);
                let h = hub::spawn(move || match timeout {
                    Some(d) => r.recv_timeout(d),
                    None => r.recv().map_err(|_| RecvTimeoutError::Disconnected),
                });
                until_parked(&h, Wait::Recv);
                h
            };
            let head = receiver(None);
            let second = receiver(None);
            let middle = receiver(Some(Duration::from_millis(1)));
            let fourth = receiver(None);
            let tail = receiver(None);
            // Nothing is sent until it returns, so it can only time out.
            assert_eq!(middle.join().unwrap(), Err(RecvTimeoutError::Timeout));
            tail.cancel();
            assert!(tail.join().unwrap_err().is_cancelled());
            head.cancel();
            assert!(head.join().unwrap_err().is_cancelled());
            tx.send(10).unwrap();
            tx.send(20).unwrap();
            tx.send(30).unwrap(); // nobody left waiting: queued
            assert_eq!(second.join().unwrap(), Ok(10));
            assert_eq!(fourth.join().unwrap(), Ok(20));
            assert_eq!(rx.try_recv(), Ok(30));
        })
        .unwrap();
}

#[test]
fn a_lock_waiter_cancelled_in_the_middle_of_the_line_is_skipped() {
    rt(1)
        .block_on(|| {
            let m = Arc::new(Mutex::new(Vec::new()));
            let guard = m.lock();
            let locker = |tag: u32| {
                let m = Arc::clone(&m);
                let h = hub::spawn(move || m.lock().push(tag));
                until_parked(&h, Wait::Mutex);
                h
            };
            let (first, middle, last) = (locker(1), locker(2), locker(3));
            middle.cancel();
            assert!(middle.join().unwrap_err().is_cancelled());
            drop(guard);
            first.join().unwrap();
            last.join().unwrap();
            assert_eq!(*m.lock(), [1, 3], "the line kept its order");
        })
        .unwrap();
}

#[test]
fn values_handed_to_a_plain_thread_across_threads_arrive_in_order() {
    // A plain thread's receive reads the value handed to it without
    // taking the channel's lock again: every value, in order, from green
    // threads on two workers taking turns with it.
    const ROUNDS: u32 = 5_000;
    let rt = rt(2);
    let (tx, rx) = hub::channel::<u32>(1);
    let (ack_tx, ack_rx) = hub::channel::<()>(1);
    let plain = thread::spawn(move || {
        let mut next = 0;
        for v in rx.iter() {
            assert_eq!(v, next, "out of order or lost");
            next += 1;
            ack_tx.send(()).unwrap();
        }
        next
    });
    rt.block_on(move || {
        for i in 0..ROUNDS {
            tx.send(i).unwrap();
            ack_rx.recv().unwrap();
        }
    })
    .unwrap();
    assert_eq!(plain.join().unwrap(), ROUNDS);
}

#[test]
fn cloned_receivers_share_one_queue_on_two_workers_and_close_with_the_last() {
    const VALUES: u64 = 20_000;
    let (sums, counts, closed_after_last) = rt(2)
        .block_on(|| {
            let (tx, rx) = hub::channel::<u64>(16);
            let consumers: Vec<_> = (0..4)
                .map(|_| {
                    let rx = rx.clone();
                    hub::spawn(move || {
                        let (mut sum, mut count) = (0u64, 0u64);
                        for v in rx.iter() {
                            sum += v;
                            count += 1;
                        }
                        (sum, count)
                    })
                })
                .collect();
            // A clone dropped while others live leaves the channel open.
            let spare = rx.clone();
            drop(spare);
            assert!(!tx.is_closed(), "dropping one clone closed the channel");
            drop(rx);
            let producers: Vec<_> = (0..2)
                .map(|p| {
                    let tx = tx.clone();
                    hub::spawn(move || {
                        for v in (p..VALUES).step_by(2) {
                            tx.send(v).unwrap();
                        }
                    })
                })
                .collect();
            drop(tx);
            producers.into_iter().for_each(|p| p.join().unwrap());
            let results: Vec<(u64, u64)> =
                consumers.into_iter().map(|c| c.join().unwrap()).collect();
            // With every receiver gone, a send fails with its value back.
            let (tx, rx) = hub::unbounded::<u8>();
            let rx2 = rx.clone();
            drop(rx);
            tx.send(1).unwrap();
            drop(rx2);
            let closed = tx.is_closed() && tx.send(2).map_err(|e| e.0) == Err(2);
            (
                results.iter().map(|r| r.0).sum::<u64>(),
                results.iter().map(|r| r.1).collect::<Vec<_>>(),
                closed,
            )
        })
        .unwrap();
    assert_eq!(
        sums,
        VALUES * (VALUES - 1) / 2,
        "a value lost or received twice"
    );
    assert_eq!(counts.iter().sum::<u64>(), VALUES);
    assert!(
        counts.iter().filter(|&&c| c > 0).count() >= 2,
        "one consumer took every value: {counts:?}"
    );
    assert!(
        closed_after_last,
        "sends still succeed after every receiver went"
    );
}
