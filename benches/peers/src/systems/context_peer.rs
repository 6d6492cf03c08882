//! context 3.0.0 (Boost.Context's `fcontext`): a bare jump that hands over a
//! word. It is symmetric (A jumps straight to B), has no notion of a
//! coroutine finishing (its function must never return: "the end" is its
//! last jump out) and none of unwinding a suspended one, so it has no kill.

use std::hint::black_box;

use context::stack::ProtectedFixedSizeStack;
use context::{Context, Transfer};

use super::{Crowd, STACK_BYTES};

/// Why the kill row has no figure for context.
pub(super) const NO_KILL: &str = "no unwinding: a suspended context's frames are abandoned";

fn stack() -> Result<ProtectedFixedSizeStack, String> {
    ProtectedFixedSizeStack::new(STACK_BYTES).map_err(|err| err.to_string())
}

/// Jumps back to whoever resumed it with the word plus one, forever.
extern "C" fn echo(mut transfer: Transfer) -> ! {
    loop {
        // SAFETY: `transfer.context` is the context that just jumped here,
        // suspended in its `resume` and alive (its stack outlives this one).
        transfer = unsafe { transfer.context.resume(transfer.data + 1) };
    }
}

/// One jump in and one jump out per operation.
pub(super) fn round_trip(count: u64) -> Result<(), String> {
    let stack = stack()?;
    // SAFETY: `stack` outlives every use of the context made on it.
    let mut context = unsafe { Context::new(&stack, echo) };
    for _ in 0..count {
        // SAFETY: `context` is suspended in `echo`, on the live `stack`.
        let transfer = unsafe { context.resume(black_box(1)) };
        black_box(transfer.data);
        context = transfer.context;
    }
    Ok(())
}

/// Shared by the two sides of a duel: who to jump to when it is over, and
/// how many switches are left.
struct Duel {
    main: Option<Context>,
    b: Option<Context>,
    left: u64,
}

/// One side of the duel: jump to `other` until no switch is left, then to
/// main.
///
/// # Safety
/// `duel` points to the live `Duel` of this run, whose `main` is set.
unsafe fn duel(duel: *mut Duel, mut other: Context) -> ! {
    loop {
        // SAFETY: the caller's guarantee; only one side runs at a time, and
        // no reference to the `Duel` is held across a jump.
        unsafe {
            if (*duel).left == 0 {
                let main = (*duel).main.take().expect("the duel's main context");
                main.resume(0);
                unreachable!("a finished duel is never resumed");
            }
            (*duel).left -= 1;
            // SAFETY: `other` is suspended in its own jump, on a live stack.
            other = other.resume(duel as usize).context;
        }
    }
}

extern "C" fn duel_a(transfer: Transfer) -> ! {
    let state = transfer.data as *mut Duel;
    // SAFETY: `switch` passes its live `Duel`; A runs first, so it records
    // main and takes B before any other access.
    unsafe {
        (*state).main = Some(transfer.context);
        let b = (*state).b.take().expect("B's context");
        duel(state, b)
    }
}

extern "C" fn duel_b(transfer: Transfer) -> ! {
    // SAFETY: A's first jump passes the live `Duel`, whose main A has set.
    unsafe { duel(transfer.data as *mut Duel, transfer.context) }
}

/// A jumps straight to B and B to A: `count` jumps in all.
pub(super) fn switch(count: u64) -> Result<(), String> {
    let (stack_a, stack_b) = (stack()?, stack()?);
    let mut state = Duel {
        main: None,
        // SAFETY: `stack_b` outlives the duel (both sides are abandoned, never
        // resumed, once it is over).
        b: Some(unsafe { Context::new(&stack_b, duel_b) }),
        left: count,
    };
    // SAFETY: as above for `stack_a`; `state` outlives the duel, which ends
    // by jumping back here.
    unsafe {
        let a = Context::new(&stack_a, duel_a);
        a.resume(&mut state as *mut Duel as usize);
    }
    black_box(state.left);
    Ok(())
}

/// Jumps back once with the word plus one: its end (it is never resumed).
extern "C" fn once(transfer: Transfer) -> ! {
    // SAFETY: `transfer.context` just jumped here and is alive.
    unsafe { transfer.context.resume(transfer.data + 1) };
    unreachable!("a finished context is never resumed");
}

/// A context made on one reused stack, run to its last jump out, dropped.
pub(super) fn create(count: u64) -> Result<(), String> {
    let stack = stack()?;
    for _ in 0..count {
        // SAFETY: `stack` outlives the context; the previous one on it has
        // made its last jump and is never resumed.
        let transfer = unsafe { Context::new(&stack, once).resume(black_box(1)) };
        black_box(transfer.data);
    }
    Ok(())
}

/// Contexts suspended in their first jump out, each with its stack.
pub(super) struct Suspended(Vec<(Context, ProtectedFixedSizeStack)>);

impl Suspended {
    pub(super) fn with_capacity(capacity: usize) -> Self {
        Suspended(Vec::with_capacity(capacity))
    }
}

impl Crowd for Suspended {
    fn add(&mut self) -> Result<(), String> {
        let stack = stack()?;
        // SAFETY: the stack is kept with the context, in the same entry.
        let transfer = unsafe { Context::new(&stack, echo).resume(0) };
        self.0.push((transfer.context, stack));
        Ok(())
    }
}
