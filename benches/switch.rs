//! Switch costs: raw corosensei resume/suspend on a pooled stack (the floor)
//! side by side with greenlet switches. Values are small `Copy` values or
//! `()`, which cross a switch without allocating.
//!
//! Run: `cargo bench --bench switch`.
#![allow(missing_docs)] // criterion_group! defines an undocumented `pub fn`

use std::hint::black_box;
use std::time::{Duration, Instant};

use corosensei::{Coroutine, CoroutineResult, Yielder};
use criterion::{criterion_group, criterion_main, Criterion};
use greenlet::coroutine::{acquire_stack, PooledStack, DEFAULT_STACK_SIZE};
use greenlet::{getcurrent, Greenlet, Value};

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

/// Raw corosensei: one `resume` + one `suspend`, main ↔ coroutine.
fn raw_round_trip(c: &mut Criterion) {
    let stack = acquire_stack(DEFAULT_STACK_SIZE).expect("stack");
    let mut coroutine = Coroutine::with_stack(
        OnPool(stack),
        |yielder: &Yielder<usize, usize>, mut value| loop {
            value = yielder.suspend(value + 1);
        },
    );
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
        Coroutine::with_stack(
            OnPool(stack),
            |yielder: &Yielder<usize, usize>, mut value| loop {
                value = yielder.suspend(value + 1);
            },
        )
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

/// Greenlet: `g.switch(v)` from the main greenlet into a greenlet that
/// switches straight back (two switches through the dispatcher).
fn greenlet_round_trip(c: &mut Criterion) {
    let main = getcurrent();
    let g = Greenlet::new(move |mut value: Value| loop {
        value = main.switch(value)?;
    });
    g.switch(0usize).expect("start");
    c.bench_function(
        "switch/greenlet main<->greenlet g.switch (round trip)",
        |b| b.iter(|| g.switch(black_box(1usize)).expect("switch")),
    );
    g.kill().expect("kill");
}

/// Greenlet: A and B switch to each other; reported per A->B (or B->A)
/// switch. Main hands A the number of round trips to do and the time is
/// taken in main around that.
fn greenlet_ping_pong(c: &mut Criterion) {
    let main = getcurrent();
    let a = Greenlet::new(move |first: Value| {
        let b = first.downcast::<Greenlet>()?;
        let mut rounds = main.switch(())?.downcast::<u64>()?;
        loop {
            for _ in 0..rounds {
                b.switch(())?;
            }
            rounds = main.switch(())?.downcast::<u64>()?;
        }
    });
    let a_handle = a.clone();
    let b = Greenlet::new(move |_| loop {
        a_handle.switch(())?;
    });
    a.switch(Value::new(b.clone())).expect("start A");
    c.bench_function("switch/greenlet A<->B ping-pong (per switch)", |bench| {
        bench.iter_custom(|iters| {
            let rounds = iters.div_ceil(2);
            let start = Instant::now();
            a.switch(rounds).expect("ping-pong");
            start.elapsed().mul_f64(iters as f64 / (2 * rounds) as f64)
        })
    });
    a.kill().expect("kill A");
    b.kill().expect("kill B");
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! { name = benches; config = config(); targets = raw_round_trip, greenlet_round_trip, raw_ping_pong, greenlet_ping_pong }
criterion_main!(benches);
