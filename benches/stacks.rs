//! The stack pool's cold paths: growing it (a stack that no pool holds, so
//! a new one is prepared, its top page touched as a coroutine's first frame
//! touches it) and trimming it (giving a pooled stack's memory back). The
//! hot path, a pooled acquire + release, is `pool/` in `benches/lifecycle.rs`.
//!
//! Run: `cargo bench --bench stacks`.
#![allow(missing_docs)] // criterion_group! defines an undocumented `pub fn`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use greenlet::coroutine::{acquire_stack, trim_stack_pool, PooledStack, DEFAULT_STACK_SIZE};

/// Stacks alive at once in one round: well below the ~32,000 that per-stack
/// guard mappings allow under the default `vm.max_map_count`.
const ROUND: u64 = 1_000;

/// Acquires `count` fresh stacks (the pool emptied first), writing to the
/// top usable byte of each; returns them and the time the acquires took.
fn grow(count: u64) -> (Vec<PooledStack>, Duration) {
    trim_stack_pool();
    let mut stacks = Vec::with_capacity(count as usize);
    let start = Instant::now();
    for _ in 0..count {
        let stack = acquire_stack(DEFAULT_STACK_SIZE).expect("stack");
        let top = stack.base() - 1;
        // SAFETY: `top` is the highest usable byte of `stack`, which nothing
        // else uses.
        unsafe { (top as *mut u8).write_volatile(1) };
        stacks.push(black_box(stack));
    }
    (stacks, start.elapsed())
}

/// Runs `iters` operations in rounds of at most [`ROUND`]; `round(n)` does
/// one round of `n` and returns the time of the part measured.
fn in_rounds(iters: u64, mut round: impl FnMut(u64) -> Duration) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let count = left.min(ROUND);
        total += round(count);
        left -= count;
    }
    total
}

fn stacks(c: &mut Criterion) {
    c.bench_function("stacks/grow: acquire a fresh stack and touch it", |b| {
        b.iter_custom(|iters| {
            in_rounds(iters, |count| {
                let (stacks, took) = grow(count);
                drop(stacks);
                trim_stack_pool();
                took
            })
        })
    });
    c.bench_function("stacks/trim: give back a pooled, touched stack", |b| {
        b.iter_custom(|iters| {
            in_rounds(iters, |count| {
                drop(grow(count).0);
                let start = Instant::now();
                black_box(trim_stack_pool());
                start.elapsed()
            })
        })
    });
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! { name = benches; config = config(); targets = stacks }
criterion_main!(benches);
