//! The hub, the green-thread runtime: spawn, join, sleep, channels, sync,
//! placement, wakes from other threads, hand-offs, idle workers, runtime
//! services and shutdown, one module per behaviour.

#[path = "../common/mod.rs"]
mod common;

mod basics;
mod channel_waits;
mod child_processes;
mod cross_thread_spawns;
mod deadlock_reports;
mod dump_stacks;
mod handoffs;
mod idle_workers;
mod join_futures;
mod join_values;
mod limits_and_misuse;
mod metrics;
mod observed_switches;
mod overflow_names;
mod panic_names;
mod remote_wakes;
mod runtime_services;
mod select_sources;
mod shutdown_from_inside;
mod shutdown_timeouts;
mod signals;
mod spawn_placement;
mod sync;
mod task_locals;
mod task_references;
mod time;
mod watchdog_reports;
