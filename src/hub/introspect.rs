//! Observability: [`dump`] / [`Handle::dump`] list every green thread of a
//! runtime as [`TaskInfo`] (id, name, state, worker, spawn site).
//!
//! Owns: the dump functions. Uses the registry and [`TaskInfo`].

use super::error::HubError;
use super::runtime::Handle;
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
