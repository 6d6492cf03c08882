//! The CPython model (`interp_shim`): the live interpreter, pending calls,
//! signals, threading, greenlets on it, the cleanup queue's scheduler, the
//! seed's hang, and the explorer's verdicts and their live replays; with the
//! `hub` feature also the explorer's model of the hub's pending-call slot.

#[path = "../common/mod.rs"]
mod common;

mod churn;
mod cleanup_scheduler;
mod explorer_replay;
mod explorer_verdicts;
mod greenlets;
#[cfg(feature = "hub")]
mod hub_pending_slot;
mod interpreter;
mod pending_calls;
mod seed;
mod signals;
mod threading;
