//! Switch costs: raw corosensei resume/suspend on a pooled stack (the floor)
//! side by side with greenlet switches.
//!
//! Run: `cargo bench --bench switch`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use corosensei::{Coroutine, CoroutineResult, Yielder};
use criterion::{criterion_group, criterion_main, Criterion};
use greenlet::coroutine::{acquire_stack, DEFAULT_STACK_SIZE};

/// Raw corosensei: one `resume` + one `suspend`, main ↔ coroutine.
fn raw_round_trip(c: &mut Criterion) {
    let stack = acquire_stack(DEFAULT_STACK_SIZE).expect("stack");
    let mut coroutine =
        Coroutine::with_stack(stack, |yielder: &Yielder<usize, usize>, mut value| loop {
            value = yielder.suspend(value + 1);
        });
    c.bench_function("switch/raw corosensei resume+suspend (round trip)", |b| {
        b.iter(|| coroutine.resume(black_box(1)))
    });
}

/// Raw corosensei floor of a symmetric A→B switch done by a dispatcher on the
/// native stack: A suspends to the dispatcher, which resumes B (one
/// resume+suspend round trip per greenlet-to-greenlet switch, plus the
/// dispatcher's decision). Reported per A→B switch.
fn raw_ping_pong(c: &mut Criterion) {
    let make = || {
        let stack = acquire_stack(DEFAULT_STACK_SIZE).expect("stack");
        Coroutine::with_stack(stack, |yielder: &Yielder<usize, usize>, mut value| loop {
            value = yielder.suspend(value + 1);
        })
    };
    let (mut a, mut b) = (make(), make());
    c.bench_function(
        "switch/raw corosensei A->B via dispatcher (per switch)",
        |bench| {
            bench.iter_custom(|iters| {
                let start = Instant::now();
                let mut value = 0;
                let mut target_is_a = true;
                for _ in 0..iters {
                    let coroutine = if target_is_a { &mut a } else { &mut b };
                    value = match coroutine.resume(black_box(value)) {
                        CoroutineResult::Yield(v) => v,
                        CoroutineResult::Return(()) => unreachable!("the coroutines loop forever"),
                    };
                    target_is_a = !target_is_a;
                }
                black_box(value);
                start.elapsed()
            })
        },
    );
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! { name = benches; config = config(); targets = raw_round_trip, raw_ping_pong }
criterion_main!(benches);
