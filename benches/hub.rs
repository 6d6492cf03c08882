//! The hub alone: spawn + join, yields, channel ping-pong (one worker and
//! across two), many sleepers, a spawn tree, and a park + resume round trip
//! beside raw corosensei's resume + suspend (the floor).
//!
//! Every measurement runs inside a green thread (`Runtime::block_on`) and
//! times itself (`iter_custom`), so the figure is the hub's, not the cost
//! of entering the runtime. Run: `cargo bench --bench hub`.
//!
//! The sleeper figure uses 100,000 green threads, each on a guarded stack
//! carved from the pool's regions (a guard region costs no kernel mapping,
//! so `vm.max_map_count` does not cap them). The RSS per sleeper is printed
//! by `cargo run --release --example hub_demo -- sleepers`.
#![allow(missing_docs)] // criterion_group! defines an undocumented `pub fn`

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corosensei::{Coroutine, Yielder};
use criterion::{criterion_group, criterion_main, Criterion};
use greenlet::coroutine::{acquire_stack, PooledStack, DEFAULT_STACK_SIZE};
use greenlet::hub::{self, Runtime};

/// A pooled stack as corosensei's `Stack` (the crate's stacks give their
/// addresses; the trait is implemented by the user).
struct OnPool(PooledStack);

// SAFETY: `PooledStack::base` is 64-aligned (corosensei asks for 16) and
// `limit` is the start of the guard page below the usable area, as
// `PooledStack` documents; both stay valid while the stack exists.
unsafe impl corosensei::stack::Stack for OnPool {
    fn base(&self) -> corosensei::stack::StackPointer {
        corosensei::stack::StackPointer::new(self.0.base()).expect("a stack's base is not null")
    }
    fn limit(&self) -> corosensei::stack::StackPointer {
        corosensei::stack::StackPointer::new(self.0.limit()).expect("a stack's limit is not null")
    }
}

fn runtime(workers: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .stack_size(64 * 1024)
        .watchdog(None)
        .build()
        .expect("runtime")
}

/// Time `body(iters)` inside a green thread of `rt`.
fn in_green(rt: &Runtime, iters: u64, body: fn(u64) -> Duration) -> Duration {
    rt.block_on(move || body(iters)).expect("bench body")
}

fn spawn_join(c: &mut Criterion) {
    let rt = runtime(1);
    c.bench_function("hub/spawn+join empty task, 1 worker", |b| {
        b.iter_custom(|iters| {
            in_green(&rt, iters, |n| {
                let start = Instant::now();
                for _ in 0..n {
                    hub::spawn(|| ()).join().unwrap();
                }
                start.elapsed()
            })
        })
    });
}

fn yields(c: &mut Criterion) {
    let rt = runtime(1);
    c.bench_function("hub/two green threads yielding (per yield)", |b| {
        b.iter_custom(|iters| {
            in_green(&rt, iters, |n| {
                let start = Instant::now();
                let other = hub::spawn(move || (0..n).for_each(|_| hub::yield_now()));
                (0..n).for_each(|_| hub::yield_now());
                other.join().unwrap();
                // 2n yields in all.
                start.elapsed() / 2
            })
        })
    });
    c.bench_function("hub/park+resume round trip (yield_now, alone)", |b| {
        b.iter_custom(|iters| {
            in_green(&rt, iters, |n| {
                let start = Instant::now();
                (0..n).for_each(|_| hub::yield_now());
                start.elapsed()
            })
        })
    });
    let stack = acquire_stack(DEFAULT_STACK_SIZE).expect("stack");
    let mut coroutine = Coroutine::with_stack(
        OnPool(stack),
        |yielder: &Yielder<usize, usize>, mut value| loop {
            value = yielder.suspend(value + 1);
        },
    );
    c.bench_function("hub/raw corosensei resume+suspend (floor)", |b| {
        b.iter(|| coroutine.resume(black_box(1)))
    });
}

/// One round trip: send on one channel, receive the answer on another.
fn ping_pong(n: u64) -> Duration {
    let (to_echo, from_main) = hub::channel::<u64>(1);
    let (to_main, from_echo) = hub::channel::<u64>(1);
    let echo = hub::spawn(move || {
        for v in from_main.iter() {
            to_main.send(v).unwrap();
        }
    });
    let start = Instant::now();
    for i in 0..n {
        to_echo.send(i).unwrap();
        black_box(from_echo.recv().unwrap());
    }
    let t = start.elapsed();
    drop(to_echo);
    echo.join().unwrap();
    t
}

fn channels(c: &mut Criterion) {
    let rt1 = runtime(1);
    c.bench_function("hub/channel ping-pong, 1 worker (round trip)", |b| {
        b.iter_custom(|iters| in_green(&rt1, iters, ping_pong))
    });
    let rt2 = runtime(2);
    c.bench_function("hub/channel ping-pong, 2 workers (round trip)", |b| {
        b.iter_custom(|iters| {
            // The echo is measured only when it runs on the other worker.
            in_green(&rt2, iters, ping_pong_across)
        })
    });
}

/// [`ping_pong`] with the echo on the other worker: this green thread
/// spins (without parking, so its own worker never starts the echo) until
/// the idle worker has taken it (from this worker's newest-spawn slot,
/// once it has aged there) and started it.
fn ping_pong_across(n: u64) -> Duration {
    let (to_echo, from_main) = hub::channel::<u64>(1);
    let (to_main, from_echo) = hub::channel::<u64>(1);
    let started = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&started);
    let me = std::thread::current().id();
    let echo = hub::spawn(move || {
        assert_ne!(
            std::thread::current().id(),
            me,
            "the echo runs on the other worker"
        );
        s.store(true, Ordering::Release);
        for v in from_main.iter() {
            to_main.send(v).unwrap();
        }
    });
    while !started.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
    let start = Instant::now();
    for i in 0..n {
        to_echo.send(i).unwrap();
        black_box(from_echo.recv().unwrap());
    }
    let t = start.elapsed();
    drop(to_echo);
    echo.join().unwrap();
    t
}

const SLEEPERS: usize = 100_000;

fn sleepers(c: &mut Criterion) {
    let rt = Runtime::builder()
        .worker_threads(1)
        .stack_size(16 * 1024)
        .watchdog(None)
        .build()
        .expect("runtime");
    let mut g = c.benchmark_group("hub/sleepers");
    g.sample_size(10);
    g.bench_function(
        format!("{SLEEPERS} green threads: spawn, sleep 10 ms, all woken, 1 worker"),
        |b| {
            b.iter_custom(|iters| {
                in_green(&rt, iters, |n| {
                    let start = Instant::now();
                    for _ in 0..n {
                        let hs: Vec<_> = (0..SLEEPERS)
                            .map(|_| hub::spawn(|| hub::sleep(Duration::from_millis(10))))
                            .collect();
                        hs.into_iter().for_each(|h| h.join().unwrap());
                    }
                    start.elapsed()
                })
            })
        },
    );
    g.finish();
}

/// A tree of fan-out 10: `leaves` leaves under this node.
fn tree(leaves: u64) -> u64 {
    if leaves == 1 {
        return 1;
    }
    let part = leaves / 10;
    let hs: Vec<_> = (0..10).map(|_| hub::spawn(move || tree(part))).collect();
    hs.into_iter().map(|h| h.join().unwrap()).sum()
}

fn spawn_tree(c: &mut Criterion) {
    let rt = Runtime::builder()
        .worker_threads(2)
        .stack_size(32 * 1024)
        .watchdog(None)
        .build()
        .expect("runtime");
    let mut g = c.benchmark_group("hub/spawn tree");
    g.sample_size(10);
    g.bench_function("100,000 leaves (fan-out 10), 2 workers", |b| {
        b.iter_custom(|iters| {
            in_green(&rt, iters, |n| {
                let start = Instant::now();
                for _ in 0..n {
                    assert_eq!(tree(100_000), 100_000);
                }
                start.elapsed()
            })
        })
    });
    g.finish();
}

criterion_group!(benches, spawn_join, yields, channels, sleepers, spawn_tree);
criterion_main!(benches);
