//! What a dump is: [`Dump`], every green thread of a runtime with its
//! stack ([`TaskStack`]), and its `Display`, one block per green thread.
//! The data alone, so that errors and the deadlock latch can carry a dump
//! without naming the code that gathers one (`stacks`, `stall_stacks`).
//!
//! Owns: [`Dump`], [`TaskStack`], [`DUMP_ANSWER_WITHIN`]. Uses
//! [`TaskInfo`] only.

use std::fmt;
use std::time::Duration;

use super::task_info::TaskInfo;

/// How long a dump waits for each worker to capture its green threads'
/// stacks: a worker held by a green thread that does not park cannot.
/// Longer makes a dump of a stalled runtime slower; shorter may miss a
/// worker that runs a long slice of a busy green thread.
pub const DUMP_ANSWER_WITHIN: Duration = Duration::from_secs(1);

/// One green thread in a [`Dump`]: its state and, when it was captured,
/// its stack where it waits.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskStack {
    /// Its id, name, state, worker and spawn site.
    pub info: TaskInfo,
    /// Its frames, innermost first, as `function` or `function at
    /// file:line:column`, the runtime's own frames folded into the
    /// outermost of each run (the call the green thread's code made).
    /// Empty when no stack was captured (see `note`).
    pub frames: Vec<String>,
    /// Why there are no frames, when there are none.
    pub note: Option<String>,
    /// Whether this is the green thread that took the dump (listed as
    /// running, with its stack where it called the dump).
    pub current: bool,
}

impl TaskStack {
    /// `info` with `frames` (folded) and why there are none (`note`), not
    /// the green thread taking a dump.
    pub(crate) fn new(info: TaskInfo, frames: Vec<String>, note: Option<String>) -> TaskStack {
        TaskStack {
            info,
            frames,
            note,
            current: false,
        }
    }
}

/// Every green thread of a runtime with its stack: what
/// [`Handle::dump`](super::Handle::dump) returns. Its `Display` prints one
/// block per green thread, as Go prints goroutines, the current one marked
/// `(this one, taking the dump)`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Dump {
    /// The green threads, by id.
    pub tasks: Vec<TaskStack>,
    /// Workers that did not answer within [`DUMP_ANSWER_WITHIN`].
    pub silent_workers: Vec<usize>,
}

impl fmt::Display for Dump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for t in &self.tasks {
            let marker = if t.current {
                " (this one, taking the dump)"
            } else {
                ""
            };
            writeln!(f, "green thread {}{marker}:", t.info)?;
            for frame in &t.frames {
                writeln!(f, "    {frame}")?;
            }
            if let Some(note) = &t.note {
                writeln!(f, "    ({note})")?;
            }
            writeln!(f)?;
        }
        for w in &self.silent_workers {
            writeln!(
                f,
                "worker {w} did not answer within {DUMP_ANSWER_WITHIN:?}: a green thread holds it \
                 without parking"
            )?;
        }
        Ok(())
    }
}
