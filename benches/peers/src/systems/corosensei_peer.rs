//! corosensei 0.3.4 used directly, the floor the crate is built on: a
//! `usize` message each way, no checks. Two stack sources, each a column:
//! corosensei's own `DefaultStack` (one mapping with a guard page per
//! stack, as corosensei's users get it) and this crate's stack pool.

use std::hint::black_box;
use std::marker::PhantomData;

use corosensei::stack::{DefaultStack, Stack};
use corosensei::{Coroutine, CoroutineResult, Yielder};
use greenlet::coroutine::{acquire_stack, PooledStack};

use super::{Crowd, STACK_BYTES};

/// A pooled stack as corosensei's `Stack` (the crate's stacks give their
/// addresses; the trait is implemented by the user).
pub(super) struct OnPool(PooledStack);

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

/// Where a raw coroutine's stack comes from.
pub(super) trait Source: 'static {
    /// The stack type.
    type Stack: Stack;
    /// A fresh stack of [`STACK_BYTES`].
    fn stack() -> Result<Self::Stack, String>;
}

/// corosensei's own stacks.
pub(super) struct Own;

impl Source for Own {
    type Stack = DefaultStack;
    fn stack() -> Result<DefaultStack, String> {
        DefaultStack::new(STACK_BYTES).map_err(|err| err.to_string())
    }
}

/// This crate's stack pool.
pub(super) struct Pool;

impl Source for Pool {
    type Stack = OnPool;
    fn stack() -> Result<OnPool, String> {
        acquire_stack(STACK_BYTES)
            .map(OnPool)
            .map_err(|err| err.to_string())
    }
}

type Echo<S> = Coroutine<usize, usize, (), <S as Source>::Stack>;

/// A coroutine that suspends with its input plus one, forever.
fn echo<S: Source>() -> Result<Echo<S>, String> {
    Ok(Coroutine::with_stack(
        S::stack()?,
        |yielder: &Yielder<usize, usize>, mut value| loop {
            value = yielder.suspend(value + 1);
        },
    ))
}

fn resume<S: Source>(coroutine: &mut Echo<S>, value: usize) -> Result<usize, String> {
    match coroutine.resume(value) {
        CoroutineResult::Yield(value) => Ok(value),
        CoroutineResult::Return(()) => Err("the echo coroutine returned".into()),
    }
}

/// One resume and one suspend per operation.
pub(super) fn round_trip<S: Source>(count: u64) -> Result<(), String> {
    let mut coroutine = echo::<S>()?;
    for _ in 0..count {
        black_box(resume::<S>(&mut coroutine, black_box(1))?);
    }
    Ok(())
}

/// corosensei only resumes and suspends: a loop on the thread's stack
/// resumes A and B in turn, one resume and suspend per switch.
pub(super) fn switch<S: Source>(count: u64) -> Result<(), String> {
    let (mut a, mut b) = (echo::<S>()?, echo::<S>()?);
    let mut value = 0;
    for _ in 0..count / 2 {
        value = resume::<S>(&mut a, black_box(value))?;
        value = resume::<S>(&mut b, black_box(value))?;
    }
    black_box(value);
    Ok(())
}

/// A coroutine that returns at once, resumed to its end.
fn run_to_end<T: Stack + 'static>(stack: T) -> Result<T, String> {
    let mut coroutine = Coroutine::with_stack(stack, |_: &Yielder<usize, ()>, value| value);
    match coroutine.resume(black_box(1)) {
        CoroutineResult::Return(value) => black_box(value),
        CoroutineResult::Yield(()) => return Err("the coroutine suspended".into()),
    };
    Ok(coroutine.into_stack())
}

/// On corosensei's own stacks: one `DefaultStack`, taken back from each
/// finished coroutine (`into_stack`) for the next, as corosensei's users
/// reuse a stack.
pub(super) fn create_own(count: u64) -> Result<(), String> {
    let mut stack = Own::stack()?;
    for _ in 0..count {
        stack = run_to_end(stack)?;
    }
    Ok(())
}

/// On this crate's pool: a stack taken from the pool for each coroutine
/// and given back when it is dropped.
pub(super) fn create_pooled(count: u64) -> Result<(), String> {
    for _ in 0..count {
        drop(run_to_end(Pool::stack()?)?);
    }
    Ok(())
}

/// Started so that it suspends, then dropped: corosensei's forced unwind
/// runs its destructors.
pub(super) fn kill<S: Source>(count: u64) -> Result<(), String> {
    for _ in 0..count {
        let mut coroutine = echo::<S>()?;
        black_box(resume::<S>(&mut coroutine, black_box(1))?);
        drop(coroutine);
    }
    Ok(())
}

/// Coroutines suspended in their first `suspend`.
pub(super) struct Suspended<S: Source>(Vec<Echo<S>>, PhantomData<S>);

impl<S: Source> Suspended<S> {
    pub(super) fn with_capacity(capacity: usize) -> Self {
        Suspended(Vec::with_capacity(capacity), PhantomData)
    }
}

impl<S: Source> Crowd for Suspended<S> {
    fn add(&mut self) -> Result<(), String> {
        let mut coroutine = echo::<S>()?;
        resume::<S>(&mut coroutine, 0)?;
        self.0.push(coroutine);
        Ok(())
    }
}
