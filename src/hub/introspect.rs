//! Observability: [`dump`] / [`Handle::dump`] list every green thread of a
//! runtime as [`TaskInfo`] (id, name, state, worker, spawn site);
//! [`dump_stacks`] / [`Handle::dump_stacks`] add each one's stack where it
//! waits (captured by `stacks`).
//!
//! Owns: the dump functions. Uses the registry, [`TaskInfo`] and `stacks`.

use super::error::HubError;
use super::runtime::Handle;
use super::stacks::{self, Dump};
use super::task_header::Task;
use super::task_info::TaskInfo;

impl Handle {
    /// Every green thread of this runtime that has not finished, by id.
    ///
    /// ```
    /// use greenlet::hub::{self, TaskState, Wait};
    /// let rt = hub::Runtime::new().unwrap();
    /// let h = rt.handle().spawn(|| hub::sleep(std::time::Duration::from_secs(3600)));
    /// while h.state() != TaskState::Parked(Wait::Sleep) {
    ///     std::thread::yield_now();
    /// }
    /// let dump = rt.handle().dump();
    /// assert!(dump.iter().any(|t| t.id == h.id() && t.state == TaskState::Parked(Wait::Sleep)));
    /// ```
    pub fn dump(&self) -> Vec<TaskInfo> {
        self.shared.registry.snapshot(Task::info)
    }
}

/// [`Handle::dump`] of the current runtime.
///
/// # Errors
/// [`HubError::NoRuntime`] outside a runtime.
///
/// ```
/// greenlet::hub::run(|| {
///     let me = greenlet::hub::dump().unwrap();
///     assert!(me.iter().any(|t| t.name == "block_on"));
/// })
/// .unwrap();
/// ```
pub fn dump() -> Result<Vec<TaskInfo>, HubError> {
    Ok(Handle::current()?.dump())
}

impl Handle {
    /// [`dump`](Handle::dump) with each suspended green thread's stack where
    /// it waits (see [`Dump`]). Costs a switch into every started green
    /// thread and back, and the symbolisation of their stacks; called from
    /// a green thread, it parks while the workers capture. A worker held by
    /// a green thread that does not park is waited for at most
    /// [`DUMP_ANSWER_WITHIN`](super::DUMP_ANSWER_WITHIN), then listed as silent.
    ///
    /// ```
    /// use greenlet::hub::{self, TaskState, Wait};
    /// let rt = hub::Runtime::new().unwrap();
    /// let h = rt.handle().spawn(|| hub::sleep(std::time::Duration::from_secs(3600)));
    /// while h.state() != TaskState::Parked(Wait::Sleep) {
    ///     std::thread::yield_now();
    /// }
    /// let dump = rt.handle().dump_stacks();
    /// let t = dump.tasks.iter().find(|t| t.info.id == h.id()).unwrap();
    /// assert_eq!(t.info.state, TaskState::Parked(Wait::Sleep), "{dump}");
    /// ```
    #[track_caller]
    pub fn dump_stacks(&self) -> Dump {
        stacks::dump_of(&self.shared)
    }
}

/// [`Handle::dump_stacks`] of the current runtime.
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
///     let dump = greenlet::hub::dump_stacks().unwrap();
///     print!("{dump}");
///     tx.send(1).unwrap();
///     assert_eq!(h.join().unwrap(), 1);
/// })
/// .unwrap();
/// ```
#[track_caller]
pub fn dump_stacks() -> Result<Dump, HubError> {
    Ok(Handle::current()?.dump_stacks())
}
