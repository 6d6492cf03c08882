//! The hub's timers through the public API: many sleepers at one deadline,
//! deadlines armed out of order, the order of wakes across the timing
//! wheel's levels and at one deadline, far-future deadlines, cancelled
//! sleeps and `timeout` scopes left early, and timers still armed at
//! shutdown. Every check is "never early", "in order" or "everything wakes
//! / ends": nothing here depends on how fast the machine is (the order
//! checks leave out a sleeper that started after its deadline, and ask
//! that most did not, with half a second to spare); a lost wake shows as a
//! hang, which the [`HANG`] bound turns into a failure.

use crate::common;

use common::hub::{rt, until_parked, HANG};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use greenlet::hub::{self, JoinError, Wait};

/// Run `f` on a thread of its own and fail if it has not ended within
/// [`HANG`] (a lost wake would park something forever).
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(HANG)
        .expect("the test body did not end within the hang bound")
}

#[test]
fn thousands_of_sleepers_at_one_deadline_all_wake_and_none_early() {
    let (woken, early) = bounded(|| {
        rt(2).block_on(|| {
            let at = Instant::now() + Duration::from_millis(20);
            let handles: Vec<_> = (0..3_000)
                .map(|_| {
                    hub::spawn(move || {
                        hub::sleep_until(at);
                        Instant::now() >= at
                    })
                })
                .collect();
            let on_time: Vec<bool> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            (on_time.len(), on_time.iter().filter(|ok| !**ok).count())
        })
    })
    .unwrap();
    assert_eq!(woken, 3_000);
    assert_eq!(early, 0, "sleepers woke before their deadline");
}

#[test]
fn sleeps_of_scrambled_lengths_each_last_at_least_their_length() {
    let short = bounded(|| {
        rt(1).block_on(|| {
            let handles: Vec<_> = (0..600u64)
                .map(|i| {
                    // 0..=49 ms in a scrambled order, zero included.
                    let d = Duration::from_millis((i * 37) % 50);
                    hub::spawn(move || {
                        let start = Instant::now();
                        hub::sleep(d);
                        start.elapsed() >= d
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .filter(|ok| !ok)
                .count()
        })
    })
    .unwrap();
    assert_eq!(short, 0, "sleeps ended before their length");
}

/// Where [`note_wakes`]'s deadlines start: far enough ahead that all its
/// sleepers park before any deadline (one that starts after its deadline
/// does not park, and is left out of the order).
const MARGIN: Duration = Duration::from_millis(500);

/// What [`note_wakes`]'s sleepers note when woken.
#[derive(Clone, Copy)]
enum Label {
    /// Its deadline, in ms past the margin.
    Deadline,
    /// The order in which it started (so armed: no park before its own).
    Start,
}

/// On one worker, a sleeper per deadline (past the margin), each parking
/// until it and noting its label when woken: the labels in the order
/// noted, and how many sleepers woke before their deadline.
fn note_wakes(deadlines: Vec<Duration>, label: Label) -> (Vec<u128>, usize) {
    bounded(move || {
        rt(1).block_on(move || {
            let base = Instant::now() + MARGIN;
            let started = Arc::new(AtomicUsize::new(0));
            let noted = Arc::new(std::sync::Mutex::new(Vec::new()));
            let handles: Vec<_> = deadlines
                .into_iter()
                .map(|after| {
                    let (started, noted) = (Arc::clone(&started), Arc::clone(&noted));
                    hub::spawn(move || {
                        let n = started.fetch_add(1, Ordering::SeqCst);
                        let at = base + after;
                        let in_time = Instant::now() < at;
                        hub::sleep_until(at);
                        if in_time {
                            noted.lock().unwrap().push(match label {
                                Label::Deadline => after.as_millis(),
                                Label::Start => n as u128,
                            });
                        }
                        Instant::now() < at
                    })
                })
                .collect();
            let early = handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .filter(|early| *early)
                .count();
            let order = std::mem::take(&mut *noted.lock().unwrap());
            (order, early)
        })
    })
    .unwrap()
}

#[test]
fn sleepers_wake_in_deadline_order_across_the_wheel_s_levels() {
    // Deadlines 1 ms apart over 300 ms (the wheel's first two levels:
    // slots of 1 ms, then of 64 ms), armed in a scrambled order, on one
    // worker: timers fire in deadline order and a woken sleeper runs in
    // the order it was woken.
    let deadlines = (0..300u64)
        .map(|i| Duration::from_millis(1 + (i * 7_919) % 300))
        .collect();
    let (order, early) = note_wakes(deadlines, Label::Deadline);
    assert_eq!(early, 0, "sleepers woke before their deadline");
    assert!(
        order.len() > 250,
        "most sleepers parked in time: {}",
        order.len()
    );
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(order, sorted, "woken out of deadline order");
}

#[test]
fn sleepers_at_one_deadline_wake_in_the_order_they_armed() {
    let (order, early) = note_wakes(vec![Duration::ZERO; 1_000], Label::Start);
    assert_eq!(early, 0, "sleepers woke before their deadline");
    assert!(
        order.len() > 900,
        "most sleepers parked in time: {}",
        order.len()
    );
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(order, sorted, "equal deadlines woken out of arming order");
}

#[test]
fn far_future_sleepers_behind_near_ones_are_cancelled_cleanly() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&dropped);
    let (near, far) = bounded(move || {
        rt(1).block_on(move || {
            let far: Vec<_> = (0..200)
                .map(|_| {
                    let d = Arc::clone(&d);
                    hub::spawn(move || {
                        let _f = Flag(d);
                        hub::sleep(Duration::from_secs(100 * 365 * 24 * 3600));
                    })
                })
                .collect();
            // Nearer deadlines armed after the far ones still fire.
            let near: Vec<_> = (0..200)
                .map(|_| hub::spawn(|| hub::sleep(Duration::from_millis(2))))
                .collect();
            let near_ok = near.into_iter().filter_map(|h| h.join().ok()).count();
            for h in &far {
                until_parked(h, Wait::Sleep);
                h.cancel();
            }
            let cancelled = far
                .into_iter()
                .map(|h| h.join())
                .filter(|r| matches!(r, Err(JoinError::Cancelled { .. })))
                .count();
            (near_ok, cancelled)
        })
    })
    .unwrap();
    assert_eq!(near, 200);
    assert_eq!(far, 200);
    assert_eq!(dropped.load(Ordering::SeqCst), 200, "destructors ran");
}

#[test]
fn timeout_scopes_left_early_leave_no_wake_behind() {
    let (scopes, got) = bounded(|| {
        rt(1).block_on(|| {
            // Each scope arms an hour-long timer at its park and is left at
            // once: thousands of stale entries the timers must not keep or
            // fire.
            let ok = (0..5_000)
                .filter(|_| hub::timeout(Duration::from_secs(3600), hub::yield_now).is_ok())
                .count();
            let (tx, rx) = hub::channel::<u32>(1);
            let sender = hub::spawn(move || {
                hub::sleep(Duration::from_millis(2));
                tx.send(7).unwrap();
            });
            let got = hub::timeout(Duration::from_secs(3600), || rx.recv());
            sender.join().unwrap();
            (ok, got)
        })
    })
    .unwrap();
    assert_eq!(scopes, 5_000);
    assert_eq!(got, Ok(Ok(7)));
}

#[test]
fn sleepers_still_armed_at_shutdown_are_cancelled_and_unwound() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&dropped);
    bounded(move || {
        let rt = rt(2);
        rt.block_on(move || {
            let handles: Vec<_> = (0..2_000)
                .map(|i| {
                    let d = Arc::clone(&d);
                    hub::spawn(move || {
                        let _f = Flag(d);
                        hub::sleep(Duration::from_secs(3600 + i));
                    })
                })
                .collect();
            for h in &handles {
                until_parked(h, Wait::Sleep);
            }
        })
        .unwrap();
        drop(rt);
    });
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        2_000,
        "every sleeper unwound"
    );
}

/// Counts its drops in the shared counter: a destructor that ran.
struct Flag(Arc<AtomicUsize>);

impl Drop for Flag {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
