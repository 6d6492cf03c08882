//! The greenlets: switching, throw and kill, threads and thread exit,
//! conformance with Python's greenlet, tracing, weak references and stack
//! overflow, one module per behaviour. Tests that end their process (an
//! exit, an abort, a stack overflow) run themselves again as a child.

#[path = "../common/mod.rs"]
mod common;

mod fp_state;
mod kill_conformance;
mod python_conformance;
mod stack_overflow;
mod switching;
mod threads;
mod throw_and_kill;
mod tracing;
mod weak_refs;
