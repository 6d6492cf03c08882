//! The interpreter-agnostic deferred-destruction queue.
//!
//! Owns: [`CleanupQueue`] (where dying threads leave their state), the
//! scheduling [`Policy`] as a pure state machine (`QueueCore`, crate-private,
//! shared with the explorer), the [`Scheduler`] trait and the host-free schedulers
//! ([`Inline`], [`Manual`], [`Reaper`]), and the per-queue [`Metrics`].
//!
//! Uses nothing else of this crate: it knows neither greenlets nor Python.

mod policy;
mod queue;
mod scheduler;

pub use self::policy::{Metrics, Policy, UnknownPolicy};
#[cfg(feature = "cpython-model")]
pub(crate) use self::policy::{PushAction, QueueCore, Retry};
pub use self::queue::{
    current_queue, default_queue, set_thread_queue, CleanupQueue, DrainPoint, DrainProbe, Remains,
};
pub use self::scheduler::{Inline, Manual, Reaper, ScheduleError, Scheduler};
