//! may: every figure as coroutines on may's scheduler with the figure's
//! worker count (set once per process, before the first coroutine; the
//! reason each sample is a child) and may's default 32 KiB stacks.
//!
//! may's spawn is `unsafe`: it moves started coroutines between workers, so
//! a coroutine must not hold `!Send` data or thread-local references across
//! a switch. The closures here hold only `Send` values (channels, join
//! handles, integers) and touch no thread-local.

use std::hint::black_box;
use std::time::{Duration, Instant};

use may::coroutine::{self, JoinHandle};
use may::sync::mpsc;

use super::{peak_resident_bytes, Figure, Sample, BATCH, FAN_OUT, SLEEP};
use crate::crowd::resident_bytes;
use crate::panic_text;

/// Spawn a coroutine.
fn go<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // SAFETY: every closure this file spawns owns only `Send` values and
    // uses no thread-local storage, so moving it between may's workers
    // mid-run (what makes may's spawn unsafe) breaks nothing.
    unsafe { coroutine::spawn(f) }
}

fn joined<T>(handle: JoinHandle<T>, what: &str) -> Result<T, String> {
    handle
        .join()
        .map_err(|payload| format!("{what}: {}", panic_text(payload.as_ref())))
}

/// One sample of `figure`.
pub(super) fn sample(figure: Figure, count: u64, warm: u64) -> Result<Sample, String> {
    may::config().set_workers(figure.workers());
    let body: fn(u64) -> Result<Sample, String> = match figure {
        Figure::SpawnJoin => |n| spawn_join(n).map(Sample::time),
        Figure::SpawnJoinBatch => |n| spawn_join_batch(n).map(Sample::time),
        Figure::Yield => |n| yields(n).map(Sample::time),
        Figure::PingPong => return Err("may has no bounded channel".into()),
        Figure::PingPongUnbounded | Figure::PingPong2w | Figure::PingPongAcross => {
            |n| ping_pong(n).map(Sample::time)
        }
        Figure::Sleepers => sleepers,
        Figure::SpawnTree => |n| {
            let start = Instant::now();
            let leaves = tree(n)?;
            let elapsed = start.elapsed();
            match leaves == n {
                true => Ok(Sample::time(elapsed)),
                false => Err(format!("the tree counted {leaves} leaves, not {n}")),
            }
        },
    };
    joined(
        go(move || {
            if warm > 0 {
                body(warm)?;
            }
            body(count)
        }),
        &format!("may's {} coroutine", figure.arg()),
    )?
}

fn spawn_join(n: u64) -> Result<Duration, String> {
    let start = Instant::now();
    for _ in 0..n {
        joined(go(|| ()), "an empty coroutine")?;
    }
    Ok(start.elapsed())
}

/// `n` coroutines, spawned [`BATCH`] at a time, each batch joined after
/// all of it is spawned.
fn spawn_join_batch(n: u64) -> Result<Duration, String> {
    let mut handles = Vec::with_capacity(BATCH as usize);
    let start = Instant::now();
    let mut left = n;
    while left > 0 {
        let batch = left.min(BATCH);
        handles.extend((0..batch).map(|_| go(|| ())));
        for handle in handles.drain(..) {
            joined(handle, "an empty coroutine")?;
        }
        left -= batch;
    }
    Ok(start.elapsed())
}

/// `n` yields in all, half by this coroutine, half by the other.
fn yields(n: u64) -> Result<Duration, String> {
    let start = Instant::now();
    let other = go(move || (0..n / 2).for_each(|_| coroutine::yield_now()));
    (0..n / 2).for_each(|_| coroutine::yield_now());
    joined(other, "the other yielder")?;
    Ok(start.elapsed())
}

/// `n` round trips to an echo coroutine over two of may's channels (which
/// are unbounded: may has no bounded mpsc).
fn ping_pong(n: u64) -> Result<Duration, String> {
    let (to_echo, from_main) = mpsc::channel::<u64>();
    let (to_main, from_echo) = mpsc::channel::<u64>();
    let echo = go(move || {
        while let Ok(v) = from_main.recv() {
            if to_main.send(v).is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    for i in 0..n {
        to_echo.send(i).map_err(|_| "the echo went away")?;
        black_box(from_echo.recv().map_err(|_| "the echo went away")?);
    }
    let elapsed = start.elapsed();
    drop(to_echo);
    joined(echo, "the echo")?;
    Ok(elapsed)
}

fn sleepers(n: u64) -> Result<Sample, String> {
    let before = resident_bytes()?;
    let start = Instant::now();
    let handles: Vec<_> = (0..n).map(|_| go(|| coroutine::sleep(SLEEP))).collect();
    for handle in handles {
        joined(handle, "a sleeper")?;
    }
    let elapsed = start.elapsed();
    let peak = peak_resident_bytes()?;
    Ok(Sample {
        elapsed,
        rss_per: Some(peak.saturating_sub(before) as f64 / n as f64),
    })
}

/// A node with `leaves` leaves under it: its children spawned, then joined.
fn tree(leaves: u64) -> Result<u64, String> {
    if leaves <= 1 {
        return Ok(1);
    }
    let part = leaves / FAN_OUT;
    let children: Vec<_> = (0..FAN_OUT).map(|_| go(move || tree(part))).collect();
    let mut sum = 0;
    for child in children {
        sum += joined(child, "a tree node")??;
    }
    Ok(sum)
}
