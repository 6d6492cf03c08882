//! One worker OS thread: its hub (the scheduler loop, on the thread's own
//! stack, the thread's main greenlet), its ready queue, its unstarted
//! tasks, its timers and its poller.
//!
//! The files, in the order a green thread meets them:
//! - `state`: the worker's thread-local state ([`Worker`]) and its start
//!   ([`Seed`]);
//! - `remote`: the part other threads reach ([`Remote`]: the remote wake
//!   queue, the poller's waker, the stealer, the newest-spawn slot, the
//!   watchdog's counters);
//! - `current`: which worker and green thread the calling thread runs;
//! - `placement`: where an unstarted task waits and which worker starts it
//!   (the newest-spawn slot, the deque, stealing);
//! - `deal`: which worker starts an accepted connection's handler (by
//!   turn, passing over a stalled or loaded worker), and the load each
//!   worker publishes for it;
//! - `scheduler`: the loop ([`main`]), its idle step and the poller;
//! - `switch`: starting and resuming a green thread, and what a switch
//!   that came back through the full protocol leaves to record;
//! - `handoff`: a parking green thread resuming the next one without the
//!   loop ([`Next`]);
//! - `held`: the reference to the running green thread the worker keeps;
//! - `wake`: routing a wake ([`push_ready`](wake::push_ready)) and the task's `Waker`;
//! - `teardown`: cancelling at the shutdown and emptying the worker at its
//!   end.
//!
//! `Worker` is one type whose methods are spread over these files, one
//! concern each (they share its fields, visible to this folder only);
//! every other type of the folder lives in one file.
//!
//! Uses the coroutine API (`Greenlet::builder` with the hub as parent,
//! `throw`, `kill`; a start, a resume and a park take the lean
//! `coroutine::direct` path), `crossbeam-deque` for the unstarted tasks,
//! `mio` for idle sleep, and the hub's queues, timers and idle policy.

mod current;
mod deal;
mod gate;
mod handoff;
mod held;
mod placement;
mod remote;
mod scheduler;
mod state;
mod switch;
mod teardown;
#[cfg(test)]
pub(crate) mod tests;
mod wake;

pub(crate) use self::current::{
    current, current_runtime, current_task, hub_ended, with_current, with_current_task,
};
pub(crate) use self::handoff::Next;
pub(crate) use self::placement::SLOT_AGE;
pub(crate) use self::remote::Remote;
pub(crate) use self::scheduler::main;
pub(crate) use self::state::{Seed, Worker};
pub(crate) use self::wake::wake_task;
