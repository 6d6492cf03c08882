//! Exact counts of live greenlet records and stacks before and after:
//! leaks, record reuse and the coroutine a thread keeps for its next start.
//!
//! A binary of its own: the counters are process-wide and exact only while
//! no other thread makes or drops greenlets, so every test here runs alone
//! (`common::serial`) and no other part's tests share the process.

#[path = "../common/mod.rs"]
mod common;

mod kept_coroutine;
mod leaks;
mod record_reuse;
