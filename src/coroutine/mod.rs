//! Greenlets on corosensei: per-thread main greenlets, symmetric switching
//! through a dispatcher on the thread's own stack, the parent chain, throw
//! and kill, kill on drop, thread affinity, thread-exit unwinding, tracing.
//!
//! Owns everything greenlet-shaped; uses [`crate::cleanup`] (only to hand a
//! dying thread's finalizers to its queue) and nothing of the CPython model.
//!
//! Modules: `value` (the dynamically typed payload), `error` (the
//! one error type), `stack` (pooled guard-paged stacks, also usable for raw
//! corosensei coroutines through [`acquire_stack`]), `thread_state`
//! (per-thread state and its teardown), `dispatch` (the switch protocol),
//! `greenlet` (handles, records, builder), `trace` (hooks).
//!
//! # When finalizers run
//! A greenlet is finalized once, and its [`Greenlet::on_finalize`] callbacks
//! run then, on the thread where it happens:
//! - a non-main greenlet, when it is dead and its last handle is dropped
//!   (a greenlet that dies with no handle left: right after it finished, in
//!   the greenlet that receives control);
//! - a greenlet that is still alive when its thread exits: when the thread
//!   unwinds it, as part of the thread's remains (below);
//! - a main greenlet: when its thread exits. Its finalizers, and those of
//!   the greenlets unwound with it, are packaged as one
//!   [`Remains`](crate::cleanup::Remains) and pushed onto the cleanup queue
//!   that was current when the thread's greenlet state was created; with the
//!   default queue they run on the dying thread before `join` returns.
//!
//! # Thread exit
//! The thread's greenlet state is destroyed by a thread-local destructor,
//! which first kills every suspended greenlet of the thread (throwing
//! `GreenletExit`, so their destructors run), falling back to corosensei's
//! forced unwind for greenlets that ignore the exit three times (a switch
//! from a greenlet during its forced unwind fails with `GreenletExit`: it
//! cannot suspend mid-unwind); then marks
//! every greenlet of the thread as belonging to an exited thread; then
//! hands the finalizers to the cleanup queue. Greenlets that keep running
//! even through that are leaked (never resumed, their memory kept) rather
//! than looped on. So is the greenlet that called `exit()`, which runs the
//! thread-local destructors (and so the teardown) on that greenlet's stack;
//! there the other greenlets are force-unwound without a thrown exit first,
//! since one that caught it could switch to main and resume main's code in
//! the middle of `exit()`.
//!
//! # Differences from Python's greenlet
//! - A greenlet belongs to the thread that created it, and its parent must
//!   belong to the same thread (greenlet lets an unstarted greenlet pick a
//!   parent elsewhere); its stack and closure never leave that thread.
//! - A thread's suspended greenlets are unwound when it exits, so their
//!   destructors run (greenlet frees them without running `finally`).
//! - [`Greenlet::kill`] returns control to the caller, like greenlet's kill
//!   on garbage collection; a `throw` still goes to the parent chain.
//! - Throwing into an unstarted greenlet kills it without switching to it,
//!   so no trace event names it as a target.
//! - A greenlet whose stack cannot be mapped dies without running, and the
//!   [`GreenletError::StackAllocation`] error goes up its parent chain.
//! - Values and errors are thread-bound (`Value` may hold `Rc`), so
//!   [`GreenletError`] is not `Send`; convert it to a string to cross threads.
//! - Tracing has a process-wide hook besides the per-thread one, and hooks
//!   are not traced (switches made inside a hook fire no events).

mod dispatch;
mod error;
mod greenlet;
mod stack;
mod thread_state;
mod trace;
mod value;

pub use self::error::{GreenletError, GreenletExit};
pub use self::greenlet::{getcurrent, live_greenlets, Greenlet, GreenletBuilder};
pub use self::stack::{
    acquire as acquire_stack, default_stack_size, set_default_stack_size, set_stack_guard,
    stack_guard, stack_stats, trim_stack_pool, PooledStack, StackGuard, StackStats,
    DEFAULT_STACK_SIZE,
};
pub use self::trace::{gettrace, set_global_trace, settrace, TraceEvent, TraceHook};
pub use self::value::Value;
