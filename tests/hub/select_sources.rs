//! `select` over every parking source: each kind of arm wakes a parked
//! select and wins it, and the arms that did not win (and the winner, until
//! the caller takes from it) keep their value, permit, signal or bytes.

use crate::common;

use common::hub::{bounded, rt, until_parked};

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use greenlet::hub::signal::Signals;
use greenlet::hub::{self, net, Deadline, Elapsed, Event, Selectable, Semaphore, Wait};

const LATER: Duration = Duration::from_millis(5);

/// The signal these tests raise: a real-time one that no other test of
/// this binary raises (a receiver sees every delivery to the process).
fn own_signal() -> i32 {
    libc::SIGRTMIN() + 5
}

#[test]
fn each_source_wakes_a_parked_select_and_nothing_is_taken_by_it() {
    bounded(60, || {
        rt(2)
            .block_on(|| {
                let (tx, rx) = hub::unbounded::<u32>();
                let event = Arc::new(Event::new());
                let sem = Arc::new(Semaphore::new(0));
                let (gate_tx, gate_rx) = hub::oneshot::<()>();
                let joined = hub::spawn(move || gate_rx.recv().unwrap());
                let mut signals = Signals::new(&[own_signal()]).unwrap();
                let (mut r, w) = net::pipe().unwrap();
                let w = Arc::new(std::sync::Mutex::new(w));
                let far = Deadline::after(Duration::from_secs(3600));
                let mut gate_tx = Some(gate_tx);
                // The arm each round makes ready (from another green
                // thread, after the select parked); the join last, as it
                // stays ready.
                for arm in [0, 2, 3, 4, 5, 6, 1] {
                    let round_deadline = match arm {
                        4 => Deadline::after(Duration::from_millis(20)),
                        _ => far,
                    };
                    let trigger: Box<dyn FnOnce() + Send> = match arm {
                        0 => {
                            let tx = tx.clone();
                            Box::new(move || tx.send(1).unwrap())
                        }
                        1 => {
                            let g = gate_tx.take().unwrap();
                            Box::new(move || g.send(()).unwrap())
                        }
                        2 => {
                            let e = Arc::clone(&event);
                            Box::new(move || e.set())
                        }
                        3 => {
                            let s = Arc::clone(&sem);
                            Box::new(move || s.add_permits(1))
                        }
                        4 => Box::new(|| {}),
                        5 => Box::new(|| {
                            // SAFETY: raising a signal whose handler is ours.
                            unsafe { libc::raise(own_signal()) };
                        }),
                        _ => {
                            let w = Arc::clone(&w);
                            Box::new(move || w.lock().unwrap().write_all(b"x").unwrap())
                        }
                    };
                    let helper = hub::spawn(move || {
                        hub::sleep(LATER);
                        trigger();
                    });
                    let won = {
                        let readable = r.select_readable();
                        let arms: [&dyn Selectable; 7] = [
                            &rx,
                            &joined,
                            &*event,
                            &*sem,
                            &round_deadline,
                            &signals,
                            &readable,
                        ];
                        hub::select(&arms, None).unwrap()
                    };
                    assert_eq!(won, arm, "round of arm {arm}");
                    helper.join().unwrap();
                    // Still there after the select: the caller takes it.
                    match arm {
                        0 => assert_eq!(rx.try_recv(), Ok(1)),
                        2 => {
                            assert!(event.is_set());
                            event.clear();
                        }
                        3 => std::mem::forget(sem.try_acquire().expect("the permit is still free")),
                        5 => assert_eq!(signals.try_recv(), Some(own_signal())),
                        6 => {
                            let mut b = [0u8; 1];
                            r.read_exact(&mut b).unwrap();
                            assert_eq!(&b, b"x");
                        }
                        _ => {}
                    }
                }
                assert!(joined.is_finished());
                joined.join().unwrap();

                // Every other source ready at once: selects return the
                // first, and none takes anything.
                tx.send(2).unwrap();
                event.set();
                sem.add_permits(2);
                // SAFETY: raising a signal whose handler is ours.
                unsafe { libc::raise(own_signal()) };
                w.lock().unwrap().write_all(b"yz").unwrap();
                for _ in 0..3 {
                    let readable = r.select_readable();
                    let arms: [&dyn Selectable; 5] = [&rx, &*event, &*sem, &signals, &readable];
                    assert_eq!(hub::select(&arms, None), Ok(0));
                    let arms: [&dyn Selectable; 4] = [&*event, &*sem, &signals, &readable];
                    assert_eq!(hub::select(&arms, None), Ok(0));
                    let arms: [&dyn Selectable; 3] = [&*sem, &signals, &readable];
                    assert_eq!(hub::select(&arms, None), Ok(0));
                    let arms: [&dyn Selectable; 2] = [&signals, &readable];
                    assert_eq!(hub::select(&arms, None), Ok(0));
                    assert_eq!(hub::select(&[&readable as &dyn Selectable], None), Ok(0));
                }
                assert_eq!(rx.try_recv(), Ok(2));
                assert!(event.is_set());
                assert_eq!(sem.available(), 2);
                assert_eq!(signals.try_recv(), Some(own_signal()));
                let mut b = [0u8; 2];
                r.read_exact(&mut b).unwrap();
                assert_eq!(&b, b"yz");
            })
            .unwrap();
    });
}

#[test]
fn a_select_that_does_not_take_its_permit_passes_it_to_a_parked_acquire() {
    bounded(60, || {
        rt(1)
            .block_on(|| {
                let sem = Arc::new(Semaphore::new(0));
                let s = Arc::clone(&sem);
                let selector = hub::spawn(move || {
                    let far = Deadline::after(Duration::from_secs(3600));
                    hub::select(&[&*s as &dyn Selectable, &far], None).unwrap()
                });
                until_parked(&selector, Wait::Select);
                let s = Arc::clone(&sem);
                let acquirer = hub::spawn(move || {
                    let p = s.acquire();
                    std::mem::forget(p);
                });
                until_parked(&acquirer, Wait::Semaphore);
                // One permit: it notifies the select's watch (first in line),
                // which returns without taking it and passes it on.
                sem.add_permits(1);
                assert_eq!(selector.join().unwrap(), 0);
                acquirer.join().unwrap();
                assert_eq!(sem.available(), 0);
            })
            .unwrap();
    });
}

#[test]
fn a_deadline_arm_wins_before_the_selects_own_deadline_and_loses_after_it() {
    bounded(60, || {
        rt(1)
            .block_on(|| {
                let (_tx, rx) = hub::unbounded::<()>();
                let soon = Deadline::after(Duration::from_millis(5));
                let arms: [&dyn Selectable; 2] = [&rx, &soon];
                let start = Instant::now();
                assert_eq!(
                    hub::select(&arms, Some(start + Duration::from_secs(3600))),
                    Ok(1)
                );
                assert!(start.elapsed() >= Duration::from_millis(5));
                let late = Deadline::after(Duration::from_secs(3600));
                let arms: [&dyn Selectable; 2] = [&rx, &late];
                assert_eq!(
                    hub::select(&arms, Some(Instant::now() + Duration::from_millis(5))),
                    Err(Elapsed)
                );
            })
            .unwrap();
    });
}

#[test]
fn a_socket_arm_wakes_a_select_on_a_plain_thread_too() {
    bounded(60, || {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stream = net::TcpStream::connect(addr).unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            peer.write_all(b"ping").unwrap();
            peer
        });
        let readable = stream.select_readable();
        assert_eq!(
            hub::select(
                &[&readable as &dyn Selectable],
                Some(Instant::now() + Duration::from_secs(30))
            ),
            Ok(0)
        );
        let mut b = [0u8; 4];
        (&stream).read_exact(&mut b).unwrap();
        assert_eq!(&b, b"ping");
        drop(writer.join().unwrap());
    });
}

#[test]
fn a_tcp_stream_arm_wins_on_a_green_thread_when_the_peer_writes() {
    bounded(60, || {
        rt(2)
            .block_on(|| {
                let listener = net::TcpListener::bind("127.0.0.1:0").unwrap();
                let addr = listener.local_addr().unwrap();
                let peer = hub::spawn(move || {
                    let mut s = net::TcpStream::connect(addr).unwrap();
                    hub::sleep(LATER);
                    s.write_all(b"hello").unwrap();
                    s
                });
                let accept = listener.select_readable();
                assert_eq!(hub::select(&[&accept as &dyn Selectable], None), Ok(0));
                let (conn, _) = listener.accept().unwrap();
                let (_tx, rx) = hub::unbounded::<()>();
                let readable = conn.select_readable();
                let arms: [&dyn Selectable; 2] = [&rx, &readable];
                assert_eq!(hub::select(&arms, None), Ok(1));
                let mut b = [0u8; 5];
                (&conn).read_exact(&mut b).unwrap();
                assert_eq!(&b, b"hello");
                drop(peer.join().unwrap());
            })
            .unwrap();
    });
}
