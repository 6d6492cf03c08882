//! Greenlets: per-thread main greenlets, symmetric switching
//! (straight from one greenlet's stack to another's, or through a
//! dispatcher on the thread's own stack), the parent chain, throw and kill,
//! kill on drop, thread affinity, thread-exit unwinding, tracing.
//!
//! Owns everything greenlet-shaped; uses [`crate::cleanup`] (only to hand a
//! dying thread's finalizers to its queue) and nothing of the CPython model.
//!
//! # Reading order
//! One greenlet's path, from its creation through a switch and a kill to
//! its thread's exit and the cleanup queue's drain, file by file:
//! 1. `handle.rs`: [`Greenlet`], [`GreenletBuilder`], [`getcurrent`]; a
//!    greenlet is created here (a spare record reused, or a new one
//!    registered) and every public operation starts here.
//! 2. `record.rs`: the record behind the handles: its flags, ids,
//!    handle count, parent, finalizers, reuse, and the counts behind
//!    [`live_greenlets`]; `run.rs`: the closure it stores.
//! 3. `thread_state.rs`: the thread's state (main and current greenlet,
//!    registry, value slot, deferred work) and which thread owns a
//!    greenlet; `thread_link.rs`: the part other threads touch.
//! 4. `switch.rs`: the switch protocol (send, the dispatcher loop, a
//!    greenlet's root and finish, settling in the receiving context), with
//!    `payload.rs` (what crosses a switch) and `trace.rs` (hooks fired
//!    after a switch, with `trace_event.rs`: what a hook is given, and
//!    `thread_trace.rs`: installing a thread's hook); `context.rs` (the stack switch as the protocol
//!    sees it) over `arch/` (the machine's: the crate's own on x86_64 Unix,
//!    corosensei's elsewhere); `fiber.rs` (a coroutine with its stack, which
//!    outlives the greenlets that run on it: a finished body's coroutine
//!    parks for the next one) and `kept.rs` (the fiber a thread keeps for
//!    its next start); `direct.rs` (with the `hub` feature), the hub's lean
//!    park and resume on the same pieces, which falls back to the full
//!    protocol.
//! 5. `lifecycle.rs`: kill, kill on drop, the deferred work, the forced
//!    unwind.
//! 6. `thread_exit.rs`: the teardown when the thread exits, which hands the
//!    finalizers to the cleanup queue; then `cleanup/queue.rs` (push and
//!    drain) and `cleanup/policy.rs` (when a push drains).
//!
//! Beside the handle: `weak.rs` ([`WeakGreenlet`], which observes without
//! keeping alive).
//! Below them: `value.rs` ([`Value`]'s methods), `error.rs`
//! ([`GreenletError`]), `value_repr.rs` (the value's struct and layout,
//! below the error, which carries a value) and
//! `stack.rs` (pooled guard-paged stacks, which other coroutine libraries
//! can run on too, through [`acquire_stack`]).
//!
//! Files import only files below them. Two calls go up, through function
//! pointers the thread state is given when it is created
//! (`thread_state::Upcalls`, the one value `thread_exit::UPCALLS`): its
//! thread-local guard runs the teardown of `thread_exit.rs`, and its pending
//! work (run when a context gets control) the lifecycle's deferred kills,
//! which switch. Types are placed below the files that use them: the
//! handle's struct ([`Greenlet`]) is defined with the record (a record holds
//! its parent's handle; the handle's methods are in `handle.rs`), the thread
//! link is generic over its inbox's item (the record), and the trace event
//! and hook types are in `trace_event.rs`, below the thread state that holds
//! a thread's hook, and the value's struct is in `value_repr.rs`, below the
//! error that carries one (the value's methods, whose downcast fails with an
//! error, are above it). From the bottom: `value_repr`, `error`, `value`,
//! `payload`; `thread_link`, `record`, `trace_event`, `thread_state`,
//! `trace`, `switch`, `lifecycle`, `thread_exit`, then `weak`,
//! `thread_trace` and `handle`.
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
//! `GreenletExit`, so their destructors run), falling back to a forced
//! unwind for greenlets that ignore the exit three times (a switch
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
//!   on garbage collection (the caller is the victim's parent for the
//!   throw); a `throw` still goes to the parent chain.
//! - Throwing into an unstarted greenlet kills it without switching to it,
//!   so no trace event names it as a target.
//! - A greenlet ending with `GreenletExit` carrying a value hands its parent
//!   the value, not the exit (greenlet hands the exception object).
//! - An unstarted greenlet whose last handle goes on another thread dies on
//!   its own thread (its closure is dropped there), like a started one.
//! - A Rust temporary lives to the end of its statement: suspended in
//!   `getcurrent().parent().unwrap().switch(v)`, a greenlet holds itself
//!   through the temporary `getcurrent()` and outlives its other handles
//!   until it is killed or its thread exits (Python drops its temporary
//!   before the switch). Bind the parent first.
//! - A greenlet whose stack cannot be mapped dies without running, and the
//!   [`ErrorKind::StackAllocation`] error goes up its parent chain.
//! - Values and errors are thread-bound (`Value` may hold `Rc`), so
//!   [`GreenletError`] is not `Send`; convert it to a string to cross threads.
//! - Tracing has a process-wide hook besides the per-thread one, and hooks
//!   are not traced (switches made inside a hook fire no events).
//!
//! `docs/greenlets.md`'s "Where it differs from Python's greenlet, and why" has the
//! full list, each with the differential tester's name for it.

mod arch;
mod context;
#[cfg(feature = "hub")]
pub(crate) mod direct;
mod error;
mod fiber;
mod handle;
mod kept;
mod lifecycle;
mod payload;
mod record;
pub(crate) mod run;
mod stack;
#[cfg(feature = "hub")]
pub(crate) use self::stack::running_on_valgrind;
mod switch;
mod thread_exit;
mod thread_link;
mod thread_state;
mod thread_trace;
mod trace;
mod trace_event;
mod value;
mod value_repr;
mod weak;

pub use self::error::{ErrorKind, GreenletError, GreenletExit};
pub use self::handle::{getcurrent, GreenletBuilder};
pub use self::record::{live_greenlets, Greenlet};
pub use self::stack::{
    acquire as acquire_stack, default_stack_size, set_default_stack_size, set_stack_guard,
    stack_guard, stack_stats, PooledStack, StackGuard, StackStats, DEFAULT_STACK_SIZE,
};
pub use self::thread_state::trim_stack_pool;
pub use self::thread_trace::{gettrace, settrace};
pub use self::trace::set_global_trace;
pub use self::trace_event::{ThreadTraceHook, TraceEvent, TraceHook};
pub use self::value_repr::Value;
pub use self::weak::WeakGreenlet;
