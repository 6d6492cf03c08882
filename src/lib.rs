//! Stackful greenlets for Rust, with Python greenlet's semantics, a deferred
//! thread-exit cleanup queue, and a model of CPython's pending calls.
//!
//! - [`coroutine`]: greenlets on the crate's own stack switch (on x86_64
//!   Unix; `corosensei` elsewhere) (per-thread main greenlet,
//!   symmetric switch, parent chain, throw/kill, tracing, thread affinity).
//! - [`cleanup`]: the interpreter-agnostic deferred-destruction queue that a
//!   dying thread hands its remaining state to.
//! - `interp_shim` (the `cpython-model` feature, on by default): a model of
//!   CPython 3.11/3.12/3.13 pending calls, GIL, eval breaker and tracing,
//!   used to reproduce and fix greenlet's livelock.
//! - `hub` (the `hub` feature, on by default): green threads scheduled over
//!   OS threads (spawn, join, sleep, channels, sync, timeouts, a blocking
//!   pool, a watchdog, networking, shutdown).
//!
//! Built with `--no-default-features`, the crate is the greenlets and the
//! cleanup queue alone.
//!
//! # Example
//! A generator: the greenlet yields by switching to its parent.
//! ```
//! use greenlet::{getcurrent, Greenlet, GreenletError, Value};
//!
//! let squares = Greenlet::new(|_| {
//!     let parent = getcurrent().parent().expect("a greenlet has a parent");
//!     for n in 1..=3u32 {
//!         parent.switch(n * n)?; // yield; `?` passes a kill on
//!     }
//!     Ok(Value::unit())
//! });
//! let mut seen = Vec::new();
//! while let Some(n) = squares.switch(())?.try_downcast::<u32>().ok() {
//!     seen.push(n);
//! }
//! assert_eq!(seen, [1, 4, 9]);
//! assert!(squares.is_dead());
//! # Ok::<(), GreenletError>(())
//! ```
//!
//! Library diagnostics (a greenlet that refused to die, a finalizer that
//! panicked) go through the `log` facade; see [`set_stderr_fallback`] for
//! where they go while no logger is configured.

pub mod cleanup;
pub mod coroutine;
mod diag;
mod erased;
#[cfg(feature = "hub")]
pub mod hub;
#[cfg(feature = "cpython-model")]
pub mod interp_shim;

pub use diag::set_stderr_fallback;

pub use coroutine::{
    getcurrent, gettrace, live_greenlets, set_global_trace, settrace, stack_stats, ErrorKind,
    Greenlet, GreenletBuilder, GreenletError, GreenletExit, StackStats, ThreadTraceHook,
    TraceEvent, TraceHook, Value, WeakGreenlet, DEFAULT_STACK_SIZE,
};

/// The README's Rust examples, compiled and run as doctests (they use every
/// default feature).
#[doc = include_str!("../README.md")]
#[cfg(all(doctest, feature = "hub", feature = "cpython-model"))]
pub struct ReadmeDoctests;
