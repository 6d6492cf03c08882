//! The workers' idle policy (`src/hub/idle.rs`) seen from outside: an idle
//! runtime does not burn CPU (its workers' own CPU clocks over an idle
//! stretch), a ping-pong between two workers loses no wake-up whether the
//! other worker spins, is about to sleep or sleeps when a message comes,
//! and timers and shutdown are honoured while workers spin.

use crate::common;

use common::hub::{rt, HANG};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use greenlet::hub::{self, RecvTimeoutError};

/// The CPU clock of the calling thread (a `clockid_t` other threads may
/// read).
fn this_thread_cpu_clock() -> libc::clockid_t {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `pthread_self` is the calling thread, alive; `clock` is a
    // valid place for the result.
    let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) };
    assert_eq!(rc, 0, "pthread_getcpuclockid");
    clock
}

/// The CPU time `clock` has counted.
fn cpu_time(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid place for the result; `clock` is the clock of
    // a worker thread that lives until the runtime is dropped, after the
    // last read.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime of a worker's CPU clock");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The CPU clocks of both workers of `rt` (a runtime of two): a green
/// thread takes its worker's and holds it (spinning, without parking,
/// bounded by [`HANG`]) until a second one has run on the other worker.
fn both_worker_clocks(rt: &hub::Runtime) -> [libc::clockid_t; 2] {
    rt.block_on(|| {
        let other_ran = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&other_ran);
        let me = thread::current().id();
        let other = hub::spawn(move || {
            let clock = this_thread_cpu_clock();
            flag.store(true, Ordering::Release);
            (thread::current().id(), clock)
        });
        let start = Instant::now();
        while !other_ran.load(Ordering::Acquire) {
            assert!(start.elapsed() < HANG, "the other worker never ran a task");
            std::hint::spin_loop();
        }
        let mine = this_thread_cpu_clock();
        let (there, theirs) = other.join().expect("the clock reader");
        assert_ne!(there, me, "both green threads ran on one worker");
        [mine, theirs]
    })
    .expect("the block_on task")
}

#[test]
fn idle_workers_use_little_cpu() {
    let rt = rt(2);
    let clocks = both_worker_clocks(&rt);
    let used = || clocks.iter().map(|&c| cpu_time(c)).sum::<Duration>();

    // Nothing to do at all: the workers sleep in their pollers after at
    // most one spin each.
    let (before, start) = (used(), Instant::now());
    thread::sleep(Duration::from_millis(300));
    let (idle_cpu, idle_wall) = (used() - before, start.elapsed());
    assert!(
        idle_cpu * 10 < idle_wall,
        "two idle workers used {idle_cpu:?} of CPU in {idle_wall:?}"
    );

    // A green thread woken by its timer every millisecond: every wake ends
    // in an idle, whose spins find nothing and back off.
    let (before, start) = (used(), Instant::now());
    rt.block_on(|| (0..300).for_each(|_| hub::sleep(Duration::from_millis(1))))
        .expect("the sleeper");
    let (timer_cpu, timer_wall) = (used() - before, start.elapsed());
    assert!(
        timer_cpu * 4 < timer_wall,
        "a sleeper waking each millisecond cost its workers {timer_cpu:?} of CPU in {timer_wall:?}"
    );
}

/// Busy work of `units` × ten `spin_loop` rounds (half a microsecond or so), without parking.
fn compute(units: u64) {
    for _ in 0..units * 10 {
        std::hint::spin_loop();
    }
}

#[test]
fn ping_pong_across_workers_loses_no_wake() {
    // The echo runs on the other worker (the pinger holds its own worker
    // until the echo has started elsewhere). Between messages each side
    // computes for a varying while, from nothing to well past a spin
    // window, so a message finds the other worker spinning, entering its
    // sleep or asleep. A lost wake-up would leave a receive
    // waiting: each one is bounded by HANG and reports it.
    let rt = rt(2);
    let trips = rt
        .block_on(|| {
            let (to_echo, from_pinger) = hub::channel::<u64>(1);
            let (to_pinger, from_echo) = hub::channel::<u64>(1);
            let started = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&started);
            let me = thread::current().id();
            let echo = hub::spawn(move || {
                if thread::current().id() == me {
                    return Err("the echo started on the pinger's worker".to_string());
                }
                flag.store(true, Ordering::Release);
                loop {
                    match from_pinger.recv_timeout(HANG) {
                        Ok(v) => {
                            compute(v % 7 * (v % 13) * 12);
                            to_pinger
                                .send(v + 1)
                                .map_err(|_| "the pinger went away".to_string())?;
                        }
                        Err(RecvTimeoutError::Disconnected) => return Ok(()),
                        Err(RecvTimeoutError::Timeout) => {
                            return Err("the echo waited HANG for a message".to_string())
                        }
                    }
                }
            });
            let start = Instant::now();
            while !started.load(Ordering::Acquire) {
                assert!(start.elapsed() < HANG, "the echo never started");
                std::hint::spin_loop();
            }
            let mut trips = 0u64;
            for i in 0..3000u64 {
                to_echo.send(i * 2).expect("the echo's channel");
                compute(i % 11 * 30);
                let back = from_echo
                    .recv_timeout(HANG)
                    .unwrap_or_else(|e| panic!("round trip {i}: no answer in HANG: {e}"));
                assert_eq!(back, i * 2 + 1);
                trips += 1;
            }
            drop(to_echo);
            echo.join().expect("the echo").expect("the echo's loop");
            trips
        })
        .expect("the pinger");
    assert_eq!(trips, 3000);
}

#[test]
fn timers_fire_on_time_beside_a_spinning_worker() {
    // Two workers, messages from a plain thread keep waking one of them
    // (so spins find work), while a green thread sleeps: its sleeps end,
    // none before its deadline.
    let rt = rt(2);
    let (tx, rx) = hub::unbounded::<u32>();
    let stop = Arc::new(AtomicBool::new(false));
    let got = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&got);
    let drain = rt.handle().spawn(move || {
        while let Ok(_v) = rx.recv_timeout(HANG) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    });
    let stopping = Arc::clone(&stop);
    let feeder = thread::spawn(move || {
        let start = Instant::now();
        let mut i = 0;
        while !stopping.load(Ordering::Relaxed) && start.elapsed() < HANG {
            tx.send(i).expect("the drain");
            i += 1;
            thread::yield_now();
        }
    });
    let on_time = rt
        .block_on(|| {
            (0..20).all(|_| {
                let at = Instant::now() + Duration::from_millis(2);
                hub::sleep_until(at);
                Instant::now() >= at
            })
        })
        .expect("the sleeper");
    stop.store(true, Ordering::Relaxed);
    feeder.join().expect("the feeder");
    drain.join().expect("the drain");
    assert!(on_time, "a sleep ended before its deadline");
    assert!(
        got.load(Ordering::Relaxed) > 0,
        "no message reached the drain"
    );
}

#[test]
fn shutdown_ends_idle_workers() {
    // Four idle workers (spinning or asleep) all notice the
    // shutdown; a worker asleep with no timer is woken for it.
    for _ in 0..20 {
        let rt = rt(4);
        rt.block_on(hub::yield_now).expect("a yield");
        let report = rt.shutdown_timeout(HANG);
        assert!(
            report.refused.is_empty() && report.blocking_still_running == 0,
            "{report:?}"
        );
    }
}
