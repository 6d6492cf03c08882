//! The switch path of one worker: a green thread that parks or yields hands
//! the CPU straight to the next ready one (or runs on, when it is the next
//! itself) while the hub's loop has nothing else to do. These tests check
//! that nothing starves meanwhile (remote wakes, timers, sockets, new
//! tasks), that the order stays the ready queue's, and that the hub's
//! bookkeeping (dump, the watchdog, cancellation, a task that ends or
//! panics after a hand-off) names the right green thread; that a channel
//! ping-pong (each receive parks and hands the CPU to the other side) takes
//! turns with other ready green threads and starves no timer, wake or
//! socket; and the same with timers armed (green threads inside `timeout` scopes), which no
//! longer keep a worker from handing off: timers still fire when due, and
//! no earlier.

use crate::common;

use common::hub::{bounded, rt, until_parked, HANG};

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::thread;
use std::time::{Duration, Instant};

use greenlet::hub::{self, net::TcpListener, JoinError, TaskState, Wait};

/// `n` green threads that yield until `stop` is set; each returns how many
/// times it yielded.
fn yielders(n: usize, stop: &Arc<AtomicBool>) -> Vec<hub::JoinHandle<u64>> {
    (0..n)
        .map(|_| {
            let stop = Arc::clone(stop);
            hub::spawn(move || {
                let mut yields = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    hub::yield_now();
                    yields += 1;
                }
                yields
            })
        })
        .collect()
}

/// Join every yielder; each must have yielded (run while the other waited).
fn join_yielders(hs: Vec<hub::JoinHandle<u64>>) {
    for h in hs {
        assert!(h.join().unwrap() > 0, "a yielder never ran");
    }
}

#[test]
fn busy_yielders_do_not_starve_a_wake_from_a_plain_thread() {
    let rt = rt(1);
    bounded(60, move || {
        rt.block_on(|| {
            let stop = Arc::new(AtomicBool::new(false));
            let (tx, rx) = hub::channel::<u32>(1);
            let s = Arc::clone(&stop);
            let receiver = hub::spawn(move || {
                let v = rx.recv().unwrap();
                s.store(true, Ordering::SeqCst);
                v
            });
            let ys = yielders(2, &stop);
            until_parked(&receiver, Wait::Recv);
            // Sent from a plain thread: the wake goes through the remote
            // queue while the yielders hand the CPU to each other.
            let sender = thread::spawn(move || tx.send(7).unwrap());
            assert_eq!(receiver.join().unwrap(), 7);
            join_yielders(ys);
            sender.join().unwrap();
        })
        .unwrap()
    });
}

/// A socket's readiness reaches a green thread parked on it while `make`'s
/// yielders hand the CPU to each other.
fn a_socket_among(make: fn(usize, &Arc<AtomicBool>) -> Vec<hub::JoinHandle<u64>>) {
    let rt = rt(1);
    bounded(60, move || {
        rt.block_on(move || {
            let stop = Arc::new(AtomicBool::new(false));
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let s = Arc::clone(&stop);
            let acceptor = hub::spawn(move || {
                let accepted = l.accept().is_ok();
                s.store(true, Ordering::SeqCst);
                accepted
            });
            let ys = make(2, &stop);
            until_parked(&acceptor, Wait::Io);
            // No wake comes from another thread: only the worker's poll
            // (every so many rounds, hand-offs counted) sees the connection.
            let client = thread::spawn(move || std::net::TcpStream::connect(addr).unwrap());
            assert!(acceptor.join().unwrap(), "the accept failed");
            join_yielders(ys);
            drop(client.join().unwrap());
        })
        .unwrap()
    });
}

#[test]
fn busy_yielders_do_not_starve_a_socket() {
    a_socket_among(yielders);
}

#[test]
fn busy_yielders_do_not_starve_a_socket_with_timers_armed() {
    a_socket_among(yielders_with_deadlines);
}

/// `pairs` channel ping-pongs until `stop` is set: a pinger and its echo
/// over two unbounded channels, the receiver parked whenever a value comes
/// (each send hands the value over and each receive parks and hands the CPU
/// to the other side). Each returns its round trips.
fn ping_pongs(pairs: usize, stop: &Arc<AtomicBool>) -> Vec<hub::JoinHandle<u64>> {
    let mut hs = Vec::new();
    for _ in 0..pairs {
        let (to_echo, from_pinger) = hub::unbounded::<u64>();
        let (to_pinger, from_echo) = hub::unbounded::<u64>();
        hs.push(hub::spawn(move || {
            let mut rounds = 0u64;
            for v in from_pinger.iter() {
                to_pinger.send(v).expect("the pinger waits for the echo");
                rounds += 1;
            }
            rounds
        }));
        let stop = Arc::clone(stop);
        hs.push(hub::spawn(move || {
            let mut rounds = 0u64;
            while !stop.load(Ordering::SeqCst) {
                to_echo
                    .send(rounds)
                    .expect("the echo runs until the pinger stops");
                assert_eq!(from_echo.recv().expect("the echo's answer"), rounds);
                rounds += 1;
            }
            rounds
        }));
    }
    hs
}

#[test]
fn a_channel_ping_pong_does_not_starve_a_ready_green_thread() {
    const YIELDS: u64 = 1_000;
    let rt = rt(1);
    bounded(60, move || {
        rt.block_on(|| {
            let stop = Arc::new(AtomicBool::new(false));
            let pair = ping_pongs(1, &stop);
            let s = Arc::clone(&stop);
            // Ready at every one of its turns: it takes them in the ready
            // queue's order between the pair's hand-offs.
            let other = hub::spawn(move || {
                for _ in 0..YIELDS {
                    hub::yield_now();
                }
                s.store(true, Ordering::SeqCst);
            });
            other.join().unwrap();
            let rounds: Vec<u64> = pair.into_iter().map(|h| h.join().unwrap()).collect();
            assert!(
                rounds.iter().all(|&r| r > 0),
                "the pair never ran: {rounds:?}"
            );
            // In turn with the yielder: about one round trip per yield, not
            // a run of round trips while it waits.
            assert!(
                rounds.iter().all(|&r| r <= 10 * YIELDS),
                "the pair ran {rounds:?} round trips during {YIELDS} yields of another"
            );
        })
        .unwrap()
    });
}

#[test]
fn a_channel_ping_pong_does_not_starve_a_timer_or_a_wake_from_a_plain_thread() {
    let rt = rt(1);
    bounded(60, move || {
        rt.block_on(|| {
            let stop = Arc::new(AtomicBool::new(false));
            let pairs = ping_pongs(1, &stop);
            let sleeper = hub::spawn(|| hub::sleep(Duration::from_millis(1)));
            let (tx, rx) = hub::channel::<u32>(1);
            let receiver = hub::spawn(move || rx.recv().unwrap());
            until_parked(&receiver, Wait::Recv);
            let sender = thread::spawn(move || tx.send(7).unwrap());
            sleeper.join().unwrap();
            assert_eq!(receiver.join().unwrap(), 7);
            stop.store(true, Ordering::SeqCst);
            join_yielders(pairs);
            sender.join().unwrap();
        })
        .unwrap()
    });
}

#[test]
fn a_channel_ping_pong_does_not_starve_a_socket() {
    a_socket_among(ping_pongs);
}

#[test]
fn busy_yielders_do_not_starve_a_timer() {
    let rt = rt(1);
    bounded(60, move || {
        rt.block_on(|| {
            let stop = Arc::new(AtomicBool::new(false));
            let s = Arc::clone(&stop);
            let sleeper = hub::spawn(move || {
                hub::sleep(Duration::from_millis(1));
                s.store(true, Ordering::SeqCst);
            });
            let ys = yielders(2, &stop);
            sleeper.join().unwrap();
            join_yielders(ys);
        })
        .unwrap()
    });
}

#[test]
fn busy_yielders_do_not_starve_a_task_spawned_from_a_plain_thread() {
    let rt = rt(1);
    bounded(60, move || {
        rt.block_on(|| {
            let handle = hub::Handle::current().unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let ys = yielders(2, &stop);
            let s = Arc::clone(&stop);
            // Spawned from outside: it waits in the runtime's injector.
            let outside = thread::spawn(move || {
                handle
                    .spawn(move || s.store(true, Ordering::SeqCst))
                    .join()
                    .unwrap()
            });
            join_yielders(ys);
            outside.join().unwrap();
        })
        .unwrap()
    });
}

/// Three green threads that log their turns and yield 50 times each (inside
/// an hour's `timeout` with `armed`: timers armed at every yield): the
/// turns keep the ready queue's rotation.
fn take_turns(armed: bool) {
    let rt = rt(1);
    let log = rt
        .block_on(move || {
            let log = Arc::new(StdMutex::new(Vec::new()));
            let hs: Vec<_> = (0..3usize)
                .map(|i| {
                    let log = Arc::clone(&log);
                    hub::spawn(move || {
                        let turns = || {
                            for _ in 0..50 {
                                log.lock().unwrap().push(i);
                                hub::yield_now();
                            }
                        };
                        if armed {
                            hub::timeout(Duration::from_secs(3600), turns).unwrap();
                        } else {
                            turns();
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            Arc::try_unwrap(log).unwrap().into_inner().unwrap()
        })
        .unwrap();
    assert_eq!(log.len(), 150);
    assert_eq!(&log[..3], &[0, 1, 2], "started in spawn order");
    for (i, w) in log.windows(4).enumerate() {
        assert_eq!(w[0], w[3], "turn {i} broke the rotation: {log:?}");
    }
}

#[test]
fn yielders_take_turns_in_the_order_of_the_ready_queue() {
    take_turns(false);
}

#[test]
fn yielders_with_timers_armed_take_turns_in_the_order_of_the_ready_queue() {
    take_turns(true);
}

#[test]
fn dump_names_the_running_green_thread_after_hand_offs() {
    let rt = rt(1);
    rt.block_on(|| {
        let hs: Vec<_> = (0..3)
            .map(|i| {
                hub::task()
                    .name(format!("turn-{i}"))
                    .spawn(move || {
                        for _ in 0..20 {
                            hub::yield_now();
                            let dump = hub::tasks().unwrap();
                            let running: Vec<_> = dump
                                .iter()
                                .filter(|t| t.state == TaskState::Running)
                                .map(|t| t.name.as_str())
                                .collect();
                            assert_eq!(running, [format!("turn-{i}")], "{dump:?}");
                            for t in dump.iter().filter(|t| t.name.starts_with("turn-")) {
                                if t.state != TaskState::Running {
                                    assert!(
                                        matches!(
                                            t.state,
                                            TaskState::Parked(Wait::Yield) | TaskState::Ready
                                        ),
                                        "{t:?}"
                                    );
                                }
                            }
                        }
                    })
                    .unwrap()
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    })
    .unwrap();
}

#[test]
fn a_green_thread_that_ends_or_panics_after_a_hand_off_is_recorded_as_itself() {
    let rt = rt(1);
    rt.block_on(|| {
        let stop = Arc::new(AtomicBool::new(false));
        let ys = yielders(1, &stop);
        let ends = hub::spawn(|| {
            (0..10).for_each(|_| hub::yield_now());
            "ended"
        });
        let panics = hub::task()
            .name("panicker")
            .spawn(|| {
                (0..10).for_each(|_| hub::yield_now());
                panic!("after its hand-offs");
            })
            .unwrap();
        assert_eq!(ends.join().unwrap(), "ended");
        match panics.join() {
            Err(JoinError::Panicked { name, message }) => {
                assert_eq!(name, "panicker");
                assert!(message.contains("after its hand-offs"), "{message}");
            }
            other => panic!("expected the panicker's panic, got {other:?}"),
        }
        // The yielder it handed the CPU to and from is still alive and well.
        let dump = hub::tasks().unwrap();
        assert!(dump.iter().all(|t| t.name != "panicker"), "{dump:?}");
        stop.store(true, Ordering::SeqCst);
        join_yielders(ys);
    })
    .unwrap();
}

#[test]
fn a_cancel_reaches_green_threads_that_hand_the_cpu_to_each_other() {
    let rt = rt(1);
    bounded(60, move || {
        rt.block_on(|| {
            let spin = || {
                hub::spawn(|| loop {
                    hub::yield_now();
                })
            };
            let (first, second) = (spin(), spin());
            // One cancelled from this worker, the other from a plain thread,
            // which hands its handle back to be joined here.
            first.cancel();
            let (back, handed) = hub::channel(1);
            let canceller = thread::spawn(move || {
                second.cancel();
                back.send(second).unwrap();
            });
            let second = handed.recv().unwrap();
            for joined in [first.join(), second.join()] {
                assert!(
                    matches!(joined, Err(JoinError::Cancelled { .. })),
                    "not cancelled: {joined:?}"
                );
            }
            canceller.join().unwrap();
        })
        .unwrap()
    });
}

#[test]
fn a_yield_with_nothing_else_ready_still_delivers_an_elapsed_timeout() {
    let rt = rt(1);
    let r = bounded(60, move || {
        rt.block_on(|| {
            hub::timeout(Duration::from_millis(1), || loop {
                hub::yield_now();
            })
        })
        .unwrap()
    });
    assert_eq!(r, Err(hub::Elapsed));
}

#[test]
fn the_watchdog_names_a_green_thread_resumed_by_a_hand_off() {
    let _serial = common::serial();
    common::take_diagnostics();
    let rt = common::hub::watched_rt();
    let release = Arc::new(AtomicBool::new(false));
    let r = Arc::clone(&release);
    let main = rt.handle().spawn(move || {
        let stop = Arc::new(AtomicBool::new(false));
        let ys = yielders(1, &stop);
        let hog = hub::task()
            .name("handed-hog")
            .spawn(move || {
                // Resumed by the yielder's hand-offs, then holds the worker
                // (no parking) until the report is seen, bounded by HANG.
                (0..10).for_each(|_| hub::yield_now());
                let start = Instant::now();
                while !r.load(Ordering::SeqCst) && start.elapsed() < HANG {
                    std::hint::spin_loop();
                }
            })
            .unwrap();
        hog.join().unwrap();
        stop.store(true, Ordering::SeqCst);
        join_yielders(ys);
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
    main.join().unwrap();
    assert!(report.contains("'handed-hog'"), "{report}");
}

/// `n` green threads that yield until `stop` is set, each inside a
/// `timeout` scope that never elapses: every yield parks with a timer
/// armed for the scope's deadline, so they hand the CPU to each other with
/// timers armed. Each returns how many times it yielded.
fn yielders_with_deadlines(n: usize, stop: &Arc<AtomicBool>) -> Vec<hub::JoinHandle<u64>> {
    (0..n)
        .map(|_| {
            let stop = Arc::clone(stop);
            hub::spawn(move || {
                hub::timeout(Duration::from_secs(3600), || {
                    let mut yields = 0u64;
                    while !stop.load(Ordering::SeqCst) {
                        hub::yield_now();
                        yields += 1;
                    }
                    yields
                })
                .expect("an hour's timeout elapsed")
            })
        })
        .collect()
}

#[test]
fn a_timer_fires_among_yielders_that_hand_off_with_timers_armed_and_not_early() {
    let rt = rt(1);
    bounded(60, move || {
        rt.block_on(|| {
            let stop = Arc::new(AtomicBool::new(false));
            let ys = yielders_with_deadlines(2, &stop);
            let s = Arc::clone(&stop);
            let sleeper = hub::spawn(move || {
                let deadline = Instant::now() + Duration::from_millis(2);
                hub::sleep_until(deadline);
                let woke = Instant::now();
                s.store(true, Ordering::SeqCst);
                woke >= deadline
            });
            assert!(
                sleeper.join().unwrap(),
                "the sleeper woke before its deadline"
            );
            join_yielders(ys);
        })
        .unwrap()
    });
}

#[test]
fn timeouts_elapse_in_green_threads_that_hand_the_cpu_to_each_other() {
    let rt = rt(1);
    let outcomes = bounded(60, move || {
        rt.block_on(|| {
            // Two yielders that only ever yield to each other, each in a
            // timeout of its own: the deadlines pass during hand-offs.
            let hs: Vec<_> = [1u64, 3]
                .into_iter()
                .map(|ms| {
                    hub::spawn(move || {
                        let yields = Cell::new(0u64);
                        // Counted before each yield: a worker thread the
                        // OS preempts past the deadline ends the first
                        // yield with the timeout, which is still a run.
                        let r = hub::timeout(Duration::from_millis(ms), || loop {
                            yields.set(yields.get() + 1);
                            hub::yield_now();
                        });
                        (r, yields.get())
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        })
        .unwrap()
    });
    for (r, yields) in outcomes {
        assert_eq!(r, Err(hub::Elapsed));
        assert!(yields > 0, "a yielder never ran");
    }
}

#[test]
fn a_shutdown_reaches_busy_yielders() {
    let rt = rt(1);
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    let ys = rt
        .handle()
        .spawn(move || {
            // Started by the loop (so they run on with the CPU handed
            // between them) before this one ends.
            let mut ys = yielders(1, &s);
            ys.extend(yielders_with_deadlines(1, &s));
            (0..4).for_each(|_| hub::yield_now());
            ys
        })
        .join()
        .unwrap();
    // The shutdown, from this plain thread, is seen by the worker at its
    // loop's next round, which the yielders' hand-offs reach within the
    // poll cadence.
    let report = bounded(60, move || rt.shutdown_timeout(HANG));
    assert!(report.refused.is_empty(), "{report:?}");
    for h in ys {
        let joined = h.join();
        assert!(
            matches!(joined, Err(JoinError::Cancelled { .. })),
            "not cancelled: {joined:?}"
        );
    }
    assert!(!stop.load(Ordering::SeqCst));
}
