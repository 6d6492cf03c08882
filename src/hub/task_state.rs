//! What a parked green thread waits for ([`Wait`]) and where a green
//! thread is in its life ([`TaskState`]), as a dump and a join handle show
//! them; and the one-byte code of a `Wait` that the task header stores.
//!
//! Owns: [`Wait`] and [`TaskState`]. Uses nothing.

use std::fmt;

/// What a parked green thread waits for, as [`dump`](super::dump) shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Wait {
    /// `sleep` / `sleep_until`.
    Sleep,
    /// `yield_now` (it is also on the ready queue).
    Yield,
    /// Joining another green thread or a blocking call of its runtime (or
    /// a task group's next result).
    Join,
    /// Receiving on a channel.
    Recv,
    /// Sending on a full bounded channel.
    Send,
    /// `select` over several receivers.
    Select,
    /// Locking a hub `Mutex`.
    Mutex,
    /// Acquiring a `Semaphore` permit.
    Semaphore,
    /// Waiting for an `Event`.
    Event,
    /// A future polled by `block_on`.
    Future,
    /// A socket of [`net`](super::net) becoming readable or writable.
    Io,
    /// Joining a green thread or a blocking call of another runtime, which
    /// this runtime's deadlock check cannot see into (so it is never part
    /// of a deadlock this runtime reports).
    JoinElsewhere,
}

impl Wait {
    pub(crate) const ALL: [Wait; 12] = [
        Wait::Sleep,
        Wait::Yield,
        Wait::Join,
        Wait::Recv,
        Wait::Send,
        Wait::Select,
        Wait::Mutex,
        Wait::Semaphore,
        Wait::Event,
        Wait::Future,
        Wait::Io,
        Wait::JoinElsewhere,
    ];

    /// The wait whose [`code`](Self::code) is `code`.
    pub(crate) fn from_code(code: u8) -> Wait {
        Wait::ALL
            .get(usize::from(code))
            .copied()
            .unwrap_or(Wait::Sleep)
    }

    /// Its one-byte code: its place in the declaration, which is its place
    /// in [`ALL`](Self::ALL).
    #[inline]
    pub(crate) fn code(self) -> u8 {
        self as u8
    }

    fn label(self) -> &'static str {
        match self {
            Wait::Sleep => "sleep",
            Wait::Yield => "yield",
            Wait::Join => "join",
            Wait::Recv => "channel receive",
            Wait::Send => "channel send",
            Wait::Select => "select",
            Wait::Mutex => "mutex",
            Wait::Semaphore => "semaphore",
            Wait::Event => "event",
            Wait::Future => "future",
            Wait::Io => "socket I/O",
            Wait::JoinElsewhere => "join of another runtime's task",
        }
    }
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Where a green thread is in its life, as [`dump`](super::dump) shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskState {
    /// Spawned, not started yet (its closure may still move to any worker).
    Queued,
    /// Started and on its worker's ready queue.
    Ready,
    /// Running on its worker now.
    Running,
    /// Parked, waiting for the given thing.
    Parked(Wait),
    /// A `spawn_blocking` call running on a blocking-pool thread.
    Blocking,
    /// Finished (returned, panicked, or cancelled).
    Finished,
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskState::Queued => f.write_str("queued"),
            TaskState::Ready => f.write_str("ready"),
            TaskState::Running => f.write_str("running"),
            TaskState::Parked(w) => write!(f, "parked on {w}"),
            TaskState::Blocking => f.write_str("blocking"),
            TaskState::Finished => f.write_str("finished"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Wait;

    #[test]
    fn a_waits_code_is_its_place_in_all_and_comes_back() {
        for (i, w) in Wait::ALL.iter().enumerate() {
            assert_eq!(usize::from(w.code()), i, "{w:?}");
            assert_eq!(Wait::from_code(w.code()), *w);
        }
    }
}
