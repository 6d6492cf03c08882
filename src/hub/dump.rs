//! Observability: [`dump`] / [`Handle::dump`] list every green thread of a
//! runtime as [`TaskInfo`] (id, name, state, worker, spawn site).
//!
//! Owns: [`TaskInfo`] and the dump functions. Uses the registry.

use std::fmt;

use super::error::HubError;
use super::runtime::Handle;
use super::task::{Task, TaskState, NO_OWNER};

/// One green thread (or blocking call) as [`dump`] sees it.
///
/// ```
/// greenlet::hub::run(|| {
///     let me = greenlet::hub::dump().unwrap().into_iter().find(|t| t.name == "block_on").unwrap();
///     assert!(me.to_string().starts_with(&format!("#{} block_on [running]", me.id)));
/// })
/// .unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskInfo {
    /// Its id.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// Its state at the time of the dump.
    pub state: TaskState,
    /// The worker it runs on (`None` before it starts, and for blocking
    /// calls).
    pub worker: Option<usize>,
    /// Where it was spawned (`file:line:column`).
    pub spawned_at: String,
}

impl TaskInfo {
    pub(crate) fn of(task: &Task) -> TaskInfo {
        let owner = task.owner();
        TaskInfo {
            id: task.id,
            name: task.name(),
            state: task.state(),
            worker: (owner != NO_OWNER).then_some(owner),
            spawned_at: task.site.to_string(),
        }
    }
}

impl fmt::Display for TaskInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {} [{}]", self.id, self.name, self.state)?;
        if let Some(w) = self.worker {
            write!(f, " on worker {w}")?;
        }
        write!(f, ", spawned at {}", self.spawned_at)
    }
}

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
        self.shared.registry.snapshot(TaskInfo::of)
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
