//! [`TaskInfo`]: one green thread (or blocking call) as a dump, a shutdown
//! report and the watchdog show it.
//!
//! Owns: [`TaskInfo`] and its display. Uses the task states; the task
//! header makes one (`Task::info`).

use std::fmt;

use super::task_state::TaskState;

/// One green thread (or blocking call) as [`dump`](super::tasks()) sees it.
///
/// ```
/// greenlet::hub::run(|| {
///     let me = greenlet::hub::tasks().unwrap().into_iter().find(|t| t.name == "block_on").unwrap();
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

impl fmt::Display for TaskInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {} [{}]", self.id, self.name, self.state)?;
        if let Some(w) = self.worker {
            write!(f, " on worker {w}")?;
        }
        write!(f, ", spawned at {}", self.spawned_at)
    }
}
