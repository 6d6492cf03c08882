//! One hub operation in a loop, for exact per-operation costs under
//! callgrind: run it twice with different `--iters` and divide the
//! difference in instructions by the difference in iterations (the
//! runtime's start and shutdown cancel out).
//!
//! `valgrind --tool=callgrind --callgrind-out-file=/dev/null
//! target/release/examples/hub_hot_loops --op yield --iters 100000`
//! prints the total; see `--help` for the operations.

use std::time::Duration;

use clap::{Parser, ValueEnum};
use greenlet::hub::{self, Runtime};

/// One hub operation, repeated.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The operation.
    #[arg(long, value_enum)]
    op: Op,
    /// How many times.
    #[arg(long, default_value_t = 100_000)]
    iters: u64,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Op {
    /// yield_now of a green thread alone on its worker (park + resume).
    Yield,
    /// Two green threads yielding to each other (count: yields of one).
    YieldPair,
    /// spawn + join of an empty task.
    Spawn,
    /// spawn + join of an empty task, in batches of 10,000 spawned and
    /// then joined (count: tasks; a whole number of batches cancels out).
    SpawnBatch,
    /// A round trip over two bounded channels to an echo green thread.
    PingPong,
    /// The same round trip over two unbounded channels.
    PingPongUnbounded,
    /// `yield_now` inside a one-hour `timeout`: a timer armed and
    /// cancelled at every park.
    TimeoutYield,
    /// `iters` green threads spawned, each sleeping 10 ms, then joined
    /// (count: sleepers).
    Sleepers,
    /// The same with sleeps of 1..=100 ms in a scrambled order: deadlines
    /// armed out of order.
    SleepersScrambled,
}

/// Tasks spawned before any is joined in `spawn-batch`.
const BATCH: u64 = 10_000;

fn main() {
    let args = Args::parse();
    let rt = Runtime::builder()
        .worker_threads(1)
        .watchdog(None)
        .build()
        .expect("runtime");
    let n = args.iters;
    let op = args.op;
    rt.block_on(move || match op {
        Op::Yield => (0..n).for_each(|_| hub::yield_now()),
        Op::YieldPair => {
            let other = hub::spawn(move || (0..n).for_each(|_| hub::yield_now()));
            (0..n).for_each(|_| hub::yield_now());
            other.join().unwrap();
        }
        Op::Spawn => (0..n).for_each(|_| hub::spawn(|| ()).join().unwrap()),
        Op::SpawnBatch => {
            let mut handles = Vec::with_capacity(BATCH as usize);
            let mut left = n;
            while left > 0 {
                let batch = left.min(BATCH);
                handles.extend((0..batch).map(|_| hub::spawn(|| ())));
                handles.drain(..).for_each(|h| h.join().unwrap());
                left -= batch;
            }
        }
        Op::PingPong => ping_pong(n, hub::channel(1), hub::channel(1)),
        Op::PingPongUnbounded => ping_pong(n, hub::unbounded(), hub::unbounded()),
        Op::TimeoutYield => (0..n).for_each(|_| {
            hub::timeout(Duration::from_secs(3600), hub::yield_now).unwrap();
        }),
        Op::Sleepers => sleepers(n, |_| Duration::from_millis(10)),
        Op::SleepersScrambled => sleepers(n, |i| Duration::from_millis(1 + (i * 7_919) % 100)),
    })
    .expect("the loop");
}

/// Spawn `n` green threads, the `i`th sleeping `length(i)`, then join them.
fn sleepers(n: u64, length: impl Fn(u64) -> Duration) {
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let d = length(i);
            hub::spawn(move || hub::sleep(d))
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

/// `n` round trips to an echo green thread over the two channels given.
fn ping_pong(
    n: u64,
    (to_echo, from_main): (hub::Sender<u64>, hub::Receiver<u64>),
    (to_main, from_echo): (hub::Sender<u64>, hub::Receiver<u64>),
) {
    let echo = hub::spawn(move || {
        for v in from_main.iter() {
            to_main.send(v).unwrap();
        }
    });
    for i in 0..n {
        to_echo.send(i).unwrap();
        assert_eq!(from_echo.recv().unwrap(), i);
    }
    drop(to_echo);
    echo.join().unwrap();
}
