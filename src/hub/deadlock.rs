//! The deadlock report: when a worker about to sleep with no timer finds
//! every green thread of its runtime parked where only another green thread
//! of the runtime can wake it (see [`is_certain_wait`]), every worker
//! asleep with no timer and no queued work, and a root `Runtime::block_on`
//! waiting (a runtime driven only through handles from plain threads, which
//! can wake its green threads, is not checked), it calls [`report`], which logs
//! the deadlock with every green thread's stack (at `error` level through
//! the crate's diagnostics: the `log` facade, or stderr with no logger), and, if
//! the builder asked ([`Builder::fail_on_deadlock`](super::Builder::fail_on_deadlock)),
//! fails the root `block_on` calls waiting in it.
//!
//! What it cannot see: a plain OS thread (or a signal handler, or a green
//! thread of another runtime) holding a `Sender`, an `Event`, a `Mutex`, a
//! `Semaphore` or a `Handle` of the runtime may still wake a green thread.
//! A join of another runtime's task is left out by its state
//! (`Wait::JoinElsewhere`, not a certain wait): that runtime finishes it. So the report says "likely", and
//! failing the root calls is an opt-in for programs whose green threads
//! are woken only by each other.
//!
//! Owns: [`report`], [`is_certain_wait`]. Uses the dump with stacks, the
//! latch in `Shared` and the crate's diagnostics (`diag`).

use std::sync::Arc;

use super::shared::Shared;
use super::stacks;
use super::task_info::TaskInfo;
use super::task_state::{TaskState, Wait};
use crate::diag::diag_error;

/// Whether a green thread in `state` waits for something only another
/// green thread (or a plain thread holding a handle) can give it: a
/// channel, a join, a lock, an event. Sleeps, yields, socket I/O and
/// futures (which signals, child processes and any outside source wake)
/// can end on their own.
pub(crate) fn is_certain_wait(state: TaskState) -> bool {
    matches!(
        state,
        TaskState::Parked(
            Wait::Join
                | Wait::Recv
                | Wait::Send
                | Wait::Select
                | Wait::Mutex
                | Wait::Semaphore
                | Wait::Event
        )
    )
}

/// Report the deadlock of `tasks` (every green thread of `shared`'s
/// runtime, each in a certain wait), off the worker: on a thread of its
/// own, which takes the dump with stacks (the workers capture them), logs
/// it, and fails the root calls if the builder asked.
pub(crate) fn report(shared: &Arc<Shared>, tasks: &[TaskInfo]) {
    let shared = Arc::clone(shared);
    let names: Vec<String> = tasks.iter().map(ToString::to_string).collect();
    let ids: Vec<u64> = tasks.iter().map(|t| t.id).collect();
    let count = ids.len();
    let spawned = std::thread::Builder::new()
        .name("hub-deadlock-report".into())
        .spawn(move || {
            let dump = stacks::dump_of(&shared);
            diag_error!(
                "hub: deadlock (likely): all {} green threads are parked waiting for each other, \
                 no timer is pending, no socket, future or blocking call can wake one, and no \
                 worker has work; only a plain thread holding a handle of the runtime could still \
                 wake one. Their stacks:\n{dump}",
                ids.len()
            );
            let latch = &shared.deadlock;
            if latch.fail {
                latch.fail_roots(&ids, &names, &dump);
            }
        });
    if let Err(e) = spawned {
        diag_error!("hub: deadlock (likely) among {count} green threads; no thread to report it with their stacks: {e}");
    }
}
