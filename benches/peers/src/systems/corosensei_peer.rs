//! corosensei 0.3.4 used directly, on this crate's stack pool (the floor the
//! crate is built on): a `usize` message each way, no checks.

use std::hint::black_box;

use corosensei::{Coroutine, CoroutineResult, Yielder};
use greenlet::coroutine::{acquire_stack, PooledStack};

use super::{Crowd, STACK_BYTES};

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

type Echo = Coroutine<usize, usize, (), OnPool>;

fn stack() -> Result<PooledStack, String> {
    acquire_stack(STACK_BYTES).map_err(|err| err.to_string())
}

/// A coroutine that suspends with its input plus one, forever.
fn echo() -> Result<Echo, String> {
    Ok(Coroutine::with_stack(OnPool(stack()?),
        |yielder: &Yielder<usize, usize>, mut value| loop {
            value = yielder.suspend(value + 1);
        },
    ))
}

fn resume(coroutine: &mut Echo, value: usize) -> Result<usize, String> {
    match coroutine.resume(value) {
        CoroutineResult::Yield(value) => Ok(value),
        CoroutineResult::Return(()) => Err("the echo coroutine returned".into()),
    }
}

/// One resume and one suspend per operation.
pub(super) fn round_trip(count: u64) -> Result<(), String> {
    let mut coroutine = echo()?;
    for _ in 0..count {
        black_box(resume(&mut coroutine, black_box(1))?);
    }
    Ok(())
}

/// corosensei only resumes and suspends: a loop on the thread's stack
/// resumes A and B in turn, one resume and suspend per switch.
pub(super) fn switch(count: u64) -> Result<(), String> {
    let (mut a, mut b) = (echo()?, echo()?);
    let mut value = 0;
    for _ in 0..count / 2 {
        value = resume(&mut a, black_box(value))?;
        value = resume(&mut b, black_box(value))?;
    }
    black_box(value);
    Ok(())
}

/// A coroutine on a pooled stack that returns at once, resumed to its end
/// and dropped (its stack goes back to the pool).
pub(super) fn create(count: u64) -> Result<(), String> {
    for _ in 0..count {
        let mut coroutine = Coroutine::with_stack(OnPool(stack()?), |_: &Yielder<usize, ()>, value| value);
        match coroutine.resume(black_box(1)) {
            CoroutineResult::Return(value) => black_box(value),
            CoroutineResult::Yield(()) => return Err("the coroutine suspended".into()),
        };
    }
    Ok(())
}

/// Started so that it suspends, then dropped: corosensei's forced unwind
/// runs its destructors.
pub(super) fn kill(count: u64) -> Result<(), String> {
    for _ in 0..count {
        let mut coroutine = echo()?;
        black_box(resume(&mut coroutine, black_box(1))?);
        drop(coroutine);
    }
    Ok(())
}

/// Coroutines suspended in their first `suspend`.
pub(super) struct Suspended(Vec<Echo>);

impl Suspended {
    pub(super) fn with_capacity(capacity: usize) -> Self {
        Suspended(Vec::with_capacity(capacity))
    }
}

impl Crowd for Suspended {
    fn add(&mut self) -> Result<(), String> {
        let mut coroutine = echo()?;
        resume(&mut coroutine, 0)?;
        self.0.push(coroutine);
        Ok(())
    }
}
