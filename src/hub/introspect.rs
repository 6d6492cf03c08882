//! Observability: [`dump`] / [`Handle::dump`] give every green thread of a
//! runtime with its stack where it waits (a [`Dump`], captured by
//! `stacks`); [`tasks`] / [`Handle::tasks`] the cheap list without stacks
//! ([`TaskInfo`]: id, name, state, worker, spawn site).
//!
//! Owns: the dump functions. Uses the registry, [`TaskInfo`] and `stacks`.

use super::error::HubError;
use super::runtime::Handle;
use super::stack_dump::Dump;
use super::stacks;
use super::task_header::Task;
use super::task_info::TaskInfo;

impl Handle {
    /// Every green thread of this runtime that has not finished, by id,
    /// without stacks: a walk of the registry (a lock per shard and a
    /// `TaskInfo` per green thread), cheap enough to poll. [`dump`](Handle::dump)
    /// adds each one's stack.
    ///
    /// ```
    /// use greenlet::hub::{self, TaskState, Wait};
    /// let rt = hub::Runtime::new().unwrap();
    /// let h = rt.handle().spawn(|| hub::sleep(std::time::Duration::from_secs(3600)));
    /// while h.state() != TaskState::Parked(Wait::Sleep) {
    ///     std::thread::yield_now();
    /// }
    /// let tasks = rt.handle().tasks();
    /// assert!(tasks.iter().any(|t| t.id == h.id() && t.state == TaskState::Parked(Wait::Sleep)));
    /// ```
    pub fn tasks(&self) -> Vec<TaskInfo> {
        self.shared.registry.snapshot(Task::info)
    }

    /// Every green thread of this runtime with its stack where it waits
    /// (see [`Dump`]); its `Display` prints one block per green thread.
    /// Called from a green thread, that green thread is in the dump too,
    /// running, with its own stack ([`TaskStack::current`](super::TaskStack::current)).
    ///
    /// Costs a switch into every started green thread and back, and the
    /// symbolisation of their stacks (milliseconds to a first dump, which
    /// loads the debug information); called from a green thread, it parks
    /// while the workers capture. A worker held by a green thread that
    /// does not park is waited for at most
    /// [`DUMP_ANSWER_WITHIN`](super::DUMP_ANSWER_WITHIN), then listed as
    /// silent. For a cheap list without stacks, see [`tasks`](Handle::tasks).
    ///
    /// ```
    /// use greenlet::hub::{self, TaskState, Wait};
    /// let rt = hub::Runtime::new().unwrap();
    /// let h = rt.handle().spawn(|| hub::sleep(std::time::Duration::from_secs(3600)));
    /// while h.state() != TaskState::Parked(Wait::Sleep) {
    ///     std::thread::yield_now();
    /// }
    /// let dump = rt.handle().dump();
    /// let t = dump.tasks.iter().find(|t| t.info.id == h.id()).unwrap();
    /// assert_eq!(t.info.state, TaskState::Parked(Wait::Sleep), "{dump}");
    /// ```
    #[track_caller]
    pub fn dump(&self) -> Dump {
        stacks::dump_of(&self.shared)
    }
}

/// [`Handle::tasks`] of the current runtime: every green thread, without
/// stacks.
///
/// # Errors
/// [`HubError::NoRuntime`] outside a runtime.
///
/// ```
/// greenlet::hub::run(|| {
///     let me = greenlet::hub::tasks().unwrap();
///     assert!(me.iter().any(|t| t.name == "block_on"));
/// })
/// .unwrap();
/// ```
pub fn tasks() -> Result<Vec<TaskInfo>, HubError> {
    Ok(Handle::current()?.tasks())
}

/// [`Handle::dump`] of the current runtime: every green thread with its
/// stack, the calling one's included.
///
/// # Errors
/// [`HubError::NoRuntime`] outside a runtime.
///
/// ```
/// #[inline(never)]
/// fn waits_here(rx: &greenlet::hub::Receiver<u8>) -> u8 {
///     rx.recv().unwrap()
/// }
/// greenlet::hub::run(|| {
///     let (tx, rx) = greenlet::hub::channel(1);
///     let h = greenlet::hub::spawn(move || waits_here(&rx));
///     greenlet::hub::yield_now();
///     let dump = greenlet::hub::dump().unwrap();
///     print!("{dump}");
///     assert!(dump.tasks.iter().any(|t| t.current && t.info.name == "block_on"));
///     tx.send(1).unwrap();
///     assert_eq!(h.join().unwrap(), 1);
/// })
/// .unwrap();
/// ```
#[track_caller]
pub fn dump() -> Result<Dump, HubError> {
    Ok(Handle::current()?.dump())
}
