//! This crate's hub: every figure's loop, run inside a green thread of a
//! runtime built with the default builder (256 KiB stacks, the watchdog on)
//! and the figure's worker count.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use greenlet::hub::{self, Runtime};

use super::{peak_resident_bytes, Figure, Sample, BATCH, FAN_OUT, SLEEP};
use crate::crowd::resident_bytes;

/// One sample of `figure`.
pub(super) fn sample(figure: Figure, count: u64, warm: u64) -> Result<Sample, String> {
    let rt = Runtime::builder()
        .worker_threads(figure.workers())
        .build()
        .map_err(|err| format!("building the hub runtime: {err}"))?;
    let body: fn(u64) -> Result<Sample, String> = match figure {
        Figure::SpawnJoin => |n| Ok(Sample::time(spawn_join(n))),
        Figure::SpawnJoinBatch => |n| Ok(Sample::time(spawn_join_batch(n))),
        Figure::Yield => |n| Ok(Sample::time(yields(n))),
        Figure::PingPong | Figure::PingPong2w => {
            |n| Ok(Sample::time(ping_pong(n, Channels::Bounded, false)))
        }
        Figure::PingPongUnbounded => |n| Ok(Sample::time(ping_pong(n, Channels::Unbounded, false))),
        Figure::PingPongAcross => |n| Ok(Sample::time(ping_pong(n, Channels::Bounded, true))),
        Figure::Sleepers => sleepers,
        Figure::SpawnTree => |n| {
            let start = Instant::now();
            let leaves = tree(n);
            let elapsed = start.elapsed();
            match leaves == n {
                true => Ok(Sample::time(elapsed)),
                false => Err(format!("the tree counted {leaves} leaves, not {n}")),
            }
        },
    };
    rt.block_on(move || {
        if warm > 0 {
            body(warm)?;
        }
        body(count)
    })
    .map_err(|err| format!("the hub's {} green thread: {err}", figure.arg()))?
}

fn spawn_join(n: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        hub::spawn(|| ()).join().expect("an empty task");
    }
    start.elapsed()
}

/// `n` tasks, spawned [`BATCH`] at a time, each batch joined after all of
/// it is spawned.
fn spawn_join_batch(n: u64) -> Duration {
    let mut handles = Vec::with_capacity(BATCH as usize);
    let start = Instant::now();
    let mut left = n;
    while left > 0 {
        let batch = left.min(BATCH);
        handles.extend((0..batch).map(|_| hub::spawn(|| ())));
        for handle in handles.drain(..) {
            handle.join().expect("an empty task");
        }
        left -= batch;
    }
    start.elapsed()
}

/// `n` yields in all, half by this green thread, half by the other.
fn yields(n: u64) -> Duration {
    let start = Instant::now();
    let other = hub::spawn(move || (0..n / 2).for_each(|_| hub::yield_now()));
    (0..n / 2).for_each(|_| hub::yield_now());
    other.join().expect("the other yielder");
    start.elapsed()
}

/// The hub's channels of a ping-pong.
#[derive(Clone, Copy)]
enum Channels {
    /// `hub::channel(1)`.
    Bounded,
    /// `hub::unbounded()`.
    Unbounded,
}

fn pair<T>(channels: Channels) -> (hub::Sender<T>, hub::Receiver<T>) {
    match channels {
        Channels::Bounded => hub::channel(1),
        Channels::Unbounded => hub::unbounded(),
    }
}

/// `n` round trips to an echo green thread over two channels (the
/// `ping-pong`, `ping-pong-unbounded` and `ping-pong-2w` figures: the echo
/// starts where the runtime places it, on this green thread's worker). `across` (the
/// `ping-pong-across` figure): this green thread spins, without parking
/// (so its own worker cannot start the echo), until another worker has
/// taken the echo and started it, and so the round trips cross workers.
fn ping_pong(n: u64, channels: Channels, across: bool) -> Duration {
    let (to_echo, from_main) = pair::<u64>(channels);
    let (to_main, from_echo) = pair::<u64>(channels);
    let started = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&started);
    let me = std::thread::current().id();
    let echo = hub::spawn(move || {
        if across && std::thread::current().id() == me {
            return Err("the echo started on the pinger's worker");
        }
        flag.store(true, Ordering::Release);
        for v in from_main.iter() {
            to_main.send(v).map_err(|_| "the pinger went away")?;
        }
        Ok(())
    });
    while across && !started.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
    let start = Instant::now();
    for i in 0..n {
        to_echo.send(i).expect("the echo's channel");
        black_box(from_echo.recv().expect("the echo's answer"));
    }
    let elapsed = start.elapsed();
    drop(to_echo);
    echo.join().expect("the echo").expect("the echo's loop");
    elapsed
}

fn sleepers(n: u64) -> Result<Sample, String> {
    let before = resident_bytes()?;
    let start = Instant::now();
    let handles: Vec<_> = (0..n).map(|_| hub::spawn(|| hub::sleep(SLEEP))).collect();
    for handle in handles {
        handle.join().map_err(|err| format!("a sleeper: {err}"))?;
    }
    let elapsed = start.elapsed();
    let peak = peak_resident_bytes()?;
    Ok(Sample {
        elapsed,
        rss_per: Some(peak.saturating_sub(before) as f64 / n as f64),
    })
}

/// A node with `leaves` leaves under it: its children spawned, then joined.
fn tree(leaves: u64) -> u64 {
    if leaves <= 1 {
        return 1;
    }
    let part = leaves / FAN_OUT;
    let children: Vec<_> = (0..FAN_OUT)
        .map(|_| hub::spawn(move || tree(part)))
        .collect();
    children
        .into_iter()
        .map(|child| child.join().expect("a tree node"))
        .sum()
}
