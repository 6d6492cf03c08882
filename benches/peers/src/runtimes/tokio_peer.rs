//! tokio: every figure as async tasks, on a `current_thread` runtime for
//! one worker and a `multi_thread` one otherwise (the timer enabled). Every
//! loop runs in a spawned task, as the hub's runs in a green thread; tokio
//! places tasks itself: a task spawned or woken from a worker goes in that
//! worker's LIFO slot, which other workers do not steal from, so the
//! two-worker ping-pong's tasks share a worker (in both the `ping-pong-2w`
//! and the `ping-pong-across` figures: tokio cannot be forced across).

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::time::{Duration, Instant};

use tokio::runtime::{Builder, Runtime};
use tokio::sync::mpsc;

use super::{peak_resident_bytes, Figure, Sample, BATCH, FAN_OUT, SLEEP};
use crate::crowd::resident_bytes;

fn runtime(workers: usize) -> Result<Runtime, String> {
    let mut builder = match workers {
        1 => Builder::new_current_thread(),
        n => {
            let mut b = Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
    };
    builder
        .enable_time()
        .build()
        .map_err(|err| format!("building the tokio runtime: {err}"))
}

type Body = fn(u64) -> Pin<Box<dyn Future<Output = Result<Sample, String>> + Send>>;

/// One sample of `figure`.
pub(super) fn sample(figure: Figure, count: u64, warm: u64) -> Result<Sample, String> {
    let rt = runtime(figure.workers())?;
    let body: Body = match figure {
        Figure::SpawnJoin => |n| Box::pin(async move { Ok(Sample::time(spawn_join(n).await)) }),
        Figure::SpawnJoinBatch => {
            |n| Box::pin(async move { Ok(Sample::time(spawn_join_batch(n).await)) })
        }
        Figure::Yield => |n| Box::pin(async move { Ok(Sample::time(yields(n).await)) }),
        Figure::PingPong | Figure::PingPong2w | Figure::PingPongAcross => {
            |n| Box::pin(async move { Ok(Sample::time(ping_pong(n).await)) })
        }
        Figure::PingPongUnbounded => {
            |n| Box::pin(async move { Ok(Sample::time(ping_pong_unbounded(n).await)) })
        }
        Figure::Sleepers => |n| Box::pin(sleepers(n)),
        Figure::SpawnTree => |n| {
            Box::pin(async move {
                let start = Instant::now();
                let leaves = tree(n).await;
                let elapsed = start.elapsed();
                match leaves == n {
                    true => Ok(Sample::time(elapsed)),
                    false => Err(format!("the tree counted {leaves} leaves, not {n}")),
                }
            })
        },
    };
    rt.block_on(async move {
        tokio::spawn(async move {
            if warm > 0 {
                body(warm).await?;
            }
            body(count).await
        })
        .await
        .map_err(|err| format!("tokio's {} task: {err}", figure.arg()))?
    })
}

async fn spawn_join(n: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        tokio::spawn(async {}).await.expect("an empty task");
    }
    start.elapsed()
}

/// `n` tasks, spawned [`BATCH`] at a time, each batch awaited after all of
/// it is spawned.
async fn spawn_join_batch(n: u64) -> Duration {
    let mut handles = Vec::with_capacity(BATCH as usize);
    let start = Instant::now();
    let mut left = n;
    while left > 0 {
        let batch = left.min(BATCH);
        handles.extend((0..batch).map(|_| tokio::spawn(async {})));
        for handle in handles.drain(..) {
            handle.await.expect("an empty task");
        }
        left -= batch;
    }
    start.elapsed()
}

/// `n` yields in all, half by this task, half by the other.
async fn yields(n: u64) -> Duration {
    let start = Instant::now();
    let other = tokio::spawn(async move {
        for _ in 0..n / 2 {
            tokio::task::yield_now().await;
        }
    });
    for _ in 0..n / 2 {
        tokio::task::yield_now().await;
    }
    other.await.expect("the other yielder");
    start.elapsed()
}

/// `n` round trips to an echo task over two bounded channels.
async fn ping_pong(n: u64) -> Duration {
    let (to_echo, mut from_main) = mpsc::channel::<u64>(1);
    let (to_main, mut from_echo) = mpsc::channel::<u64>(1);
    let echo = tokio::spawn(async move {
        while let Some(v) = from_main.recv().await {
            if to_main.send(v).await.is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    for i in 0..n {
        to_echo.send(i).await.expect("the echo's channel");
        black_box(from_echo.recv().await.expect("the echo's answer"));
    }
    let elapsed = start.elapsed();
    drop(to_echo);
    echo.await.expect("the echo");
    elapsed
}

/// `n` round trips to an echo task over two unbounded channels.
async fn ping_pong_unbounded(n: u64) -> Duration {
    let (to_echo, mut from_main) = mpsc::unbounded_channel::<u64>();
    let (to_main, mut from_echo) = mpsc::unbounded_channel::<u64>();
    let echo = tokio::spawn(async move {
        while let Some(v) = from_main.recv().await {
            if to_main.send(v).is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    for i in 0..n {
        to_echo.send(i).expect("the echo's channel");
        black_box(from_echo.recv().await.expect("the echo's answer"));
    }
    let elapsed = start.elapsed();
    drop(to_echo);
    echo.await.expect("the echo");
    elapsed
}

async fn sleepers(n: u64) -> Result<Sample, String> {
    let before = resident_bytes()?;
    let start = Instant::now();
    let handles: Vec<_> = (0..n)
        .map(|_| tokio::spawn(tokio::time::sleep(SLEEP)))
        .collect();
    for handle in handles {
        handle.await.map_err(|err| format!("a sleeper: {err}"))?;
    }
    let elapsed = start.elapsed();
    let peak = peak_resident_bytes()?;
    Ok(Sample {
        elapsed,
        rss_per: Some(peak.saturating_sub(before) as f64 / n as f64),
    })
}

/// A node with `leaves` leaves under it: its children spawned, then
/// awaited (boxed: an async fn cannot recurse unboxed).
fn tree(leaves: u64) -> Pin<Box<dyn Future<Output = u64> + Send>> {
    Box::pin(async move {
        if leaves <= 1 {
            return 1;
        }
        let part = leaves / FAN_OUT;
        let children: Vec<_> = (0..FAN_OUT).map(|_| tokio::spawn(tree(part))).collect();
        let mut sum = 0;
        for child in children {
            sum += child.await.expect("a tree node");
        }
        sum
    })
}
