//! Lifecycle costs: creating, running to the end and dropping a coroutine,
//! killing a suspended one, and the stack pool itself; raw corosensei on a
//! pooled stack (the floor) side by side with greenlets.
//!
//! Run: `cargo bench --bench lifecycle`.
#![allow(missing_docs)] // criterion_group! defines an undocumented `pub fn`

use std::hint::black_box;
use std::time::Duration;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
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

/// How many suspended coroutines one batch of a kill benchmark keeps alive
/// (each holds a stack: two kernel mappings).
const KILL_BATCH: u64 = 100;

fn pool(c: &mut Criterion) {
    c.bench_function("pool/acquire+release a pooled stack", |b| {
        b.iter(|| drop(black_box(acquire_stack(DEFAULT_STACK_SIZE).expect("stack"))))
    });
}

fn raw_create_run_drop(c: &mut Criterion) {
    c.bench_function(
        "lifecycle/raw corosensei create+run+finish+drop (pooled stack)",
        |b| {
            b.iter(|| {
                let stack = acquire_stack(DEFAULT_STACK_SIZE).expect("stack");
                let mut coroutine =
                    Coroutine::with_stack(OnPool(stack), |_: &Yielder<usize, ()>, value: usize| {
                        value + 1
                    });
                black_box(coroutine.resume(black_box(1)));
            })
        },
    );
    c.bench_function(
        "lifecycle/raw corosensei create+run+finish+drop (fresh mmap stack)",
        |b| {
            b.iter(|| {
                let stack = DefaultStack::new(DEFAULT_STACK_SIZE).expect("stack");
                let mut coroutine =
                    Coroutine::with_stack(stack, |_: &Yielder<usize, ()>, value: usize| value + 1);
                black_box(coroutine.resume(black_box(1)));
            })
        },
    );
}

/// A raw coroutine that waits for messages and returns when it gets 0: the
/// floor of a kill delivered as a message.
fn suspended_raw() -> Coroutine<usize, usize, usize, OnPool> {
    let stack = acquire_stack(DEFAULT_STACK_SIZE).expect("stack");
    let mut coroutine = Coroutine::with_stack(
        OnPool(stack),
        |yielder: &Yielder<usize, usize>, mut value: usize| {
            while value != 0 {
                value = yielder.suspend(value);
            }
            value
        },
    );
    assert!(matches!(coroutine.resume(1), CoroutineResult::Yield(1)));
    coroutine
}

fn raw_kill(c: &mut Criterion) {
    c.bench_function("kill/raw corosensei message (resume to return)+drop", |b| {
        b.iter_batched(
            suspended_raw,
            |mut coroutine| {
                black_box(coroutine.resume(0));
                drop(coroutine);
            },
            BatchSize::NumIterations(KILL_BATCH),
        )
    });
    c.bench_function(
        "kill/raw corosensei forced unwind (drop while suspended)",
        |b| b.iter_batched(suspended_raw, drop, BatchSize::NumIterations(KILL_BATCH)),
    );
}

fn greenlet_create_run_drop(c: &mut Criterion) {
    c.bench_function("lifecycle/greenlet create+run+finish+drop", |b| {
        b.iter(|| {
            let g = Greenlet::new(|value: Value| Ok(value));
            black_box(g.switch(black_box(1usize)).expect("run"));
        })
    });
}

/// A greenlet suspended in a switch to main: a kill makes that switch return
/// `Err(GreenletExit)`, which `?` propagates to the greenlet's end.
fn suspended_greenlet(main: &Greenlet) -> Greenlet {
    let main = main.clone();
    let g = Greenlet::new(move |_| {
        main.switch(())?;
        Ok(Value::unit())
    });
    g.switch(()).expect("start");
    g
}

fn greenlet_kill(c: &mut Criterion) {
    let main = getcurrent();
    c.bench_function(
        "kill/greenlet g.kill() of a suspended greenlet + drop",
        |b| {
            b.iter_batched(
                || suspended_greenlet(&main),
                |g| {
                    g.kill().expect("kill");
                    drop(g);
                },
                BatchSize::NumIterations(KILL_BATCH),
            )
        },
    );
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! { name = benches; config = config(); targets = pool, raw_create_run_drop, greenlet_create_run_drop, raw_kill, greenlet_kill }
criterion_main!(benches);
