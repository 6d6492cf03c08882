//! The hub's error types: [`JoinError`] (how a green thread ended when it did
//! not return), [`HubError`] (what a hub call could not do) and [`Elapsed`]
//! (a deadline passed).
//!
//! Owns only the types and their messages; uses nothing else of the hub
//! but the [`Dump`] a deadlock error carries.

use super::stack_dump::Dump;

/// Why [`JoinHandle::join`](super::JoinHandle::join) has no value.
///
/// # Example
/// ```
/// let rt = greenlet::hub::Runtime::builder().worker_threads(1).build().unwrap();
/// let err = rt
///     .block_on(|| greenlet::hub::task().name("doomed").spawn(|| panic!("no luck")).unwrap().join())
///     .unwrap()
///     .unwrap_err();
/// assert!(err.is_panic());
/// assert_eq!(err.to_string(), "green thread 'doomed' panicked: no luck");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JoinError {
    /// The green thread's closure panicked; the panic was caught at its root.
    #[error("green thread '{name}' panicked: {message}")]
    Panicked {
        /// The green thread's name.
        name: String,
        /// The panic message (or a note that it was not a string).
        message: String,
    },
    /// It was cancelled (by [`JoinHandle::cancel`](super::JoinHandle::cancel),
    /// a task group, or the runtime's shutdown) before it returned.
    #[error("green thread '{name}' was cancelled before it finished")]
    Cancelled {
        /// The green thread's name.
        name: String,
    },
    /// It was spawned after its runtime's shutdown began, so it never ran.
    #[error(
        "green thread '{name}' never ran: the hub runtime has shut down (or is shutting down) and \
         starts no new green threads; spawn it on a running runtime"
    )]
    RuntimeShutDown {
        /// The green thread's name.
        name: String,
    },
    /// No stack could be mapped for it, so it never ran.
    #[error(
        "green thread '{name}' could not start: no {size}-byte stack could be mapped ({reason}); each \
         guarded stack takes two kernel memory mappings, so the default vm.max_map_count (65530) allows \
         about 32k live green threads: raise it (sysctl -w vm.max_map_count=262144) or keep fewer \
         green threads alive at once"
    )]
    NoStack {
        /// The green thread's name.
        name: String,
        /// The stack size asked for.
        size: usize,
        /// What the OS said.
        reason: String,
    },
    /// The green thread called `join` on its own handle, which would wait
    /// for itself for ever.
    #[error(
        "green thread '{name}' joined its own JoinHandle, which would never return: join it from \
         another green thread or drop the handle"
    )]
    JoinedSelf {
        /// The green thread's name.
        name: String,
    },
    /// A root [`Runtime::block_on`](super::Runtime::block_on) green
    /// thread was stopped because every green thread of its runtime was
    /// parked waiting for another (see
    /// [`Builder::fail_on_deadlock`](super::Builder::fail_on_deadlock)).
    /// Where it becomes a [`HubError`] (`?`, [`run`](super::run)) it is
    /// [`HubError::Deadlock`].
    #[error(
        "green thread '{name}' was stopped by a deadlock: every green thread of the runtime was \
         parked waiting for another ({}). {DEADLOCK_ADVICE}",
        green_threads.join("; ")
    )]
    Deadlock {
        /// The root green thread's name.
        name: String,
        /// The green threads of the deadlock, as the dump shows them.
        green_threads: Vec<String>,
        /// Every green thread's stack when the deadlock was found.
        stacks: Box<Dump>,
    },
    /// The blocking pool could not start a thread for it.
    #[error("blocking call '{name}' could not run: the blocking pool could not start a thread ({reason})")]
    NoThread {
        /// The blocking call's name.
        name: String,
        /// What the OS said.
        reason: String,
    },
}

impl JoinError {
    /// Whether the green thread was cancelled.
    ///
    /// ```
    /// let e = greenlet::hub::JoinError::Cancelled { name: "t".into() };
    /// assert!(e.is_cancelled() && !e.is_panic());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self, JoinError::Cancelled { .. })
    }

    /// Whether it never ran because its runtime had shut down.
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::new().unwrap();
    /// let handle = rt.handle().clone();
    /// drop(rt);
    /// assert!(handle.spawn(|| ()).join().unwrap_err().is_runtime_shut_down());
    /// ```
    pub fn is_runtime_shut_down(&self) -> bool {
        matches!(self, JoinError::RuntimeShutDown { .. })
    }

    /// Whether it was stopped by a deadlock (see
    /// [`Builder::fail_on_deadlock`](super::Builder::fail_on_deadlock)).
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::builder().fail_on_deadlock(true).build().unwrap();
    /// let err = rt.block_on(|| greenlet::hub::channel::<u8>(1).1.recv()).unwrap_err();
    /// assert!(err.is_deadlock(), "{err}");
    /// ```
    pub fn is_deadlock(&self) -> bool {
        matches!(self, JoinError::Deadlock { .. })
    }

    /// Whether the green thread panicked.
    ///
    /// ```
    /// let e = greenlet::hub::JoinError::Panicked { name: "t".into(), message: "m".into() };
    /// assert!(e.is_panic());
    /// ```
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Panicked { .. })
    }
}

/// What a hub call could not do.
///
/// # Example
/// ```
/// // No runtime runs on this thread.
/// let err = greenlet::hub::Handle::current().unwrap_err();
/// assert!(matches!(err, greenlet::hub::HubError::NoRuntime));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HubError {
    /// Called outside a runtime where one is needed.
    #[error(
        "not inside a hub runtime: call this from a green thread (inside Runtime::block_on, \
         greenlet::hub::run or a spawned green thread) or from a blocking-pool thread, or go \
         through a Runtime's Handle"
    )]
    NoRuntime,
    /// `spawn_local` needs the calling thread to be one of the runtime's workers.
    #[error(
        "spawn_local must be called on a hub worker thread (from a green thread): its closure is \
         not Send, so it can only run on the thread that spawns it; use spawn for Send closures"
    )]
    NotOnWorker,
    /// The runtime is shutting down and takes no new green threads.
    #[error("the hub runtime is shutting down and starts no new green threads")]
    ShuttingDown,
    /// The pending-call slot is full.
    #[error(
        "the hub's pending-call slot is full ({capacity} calls waiting): retry after the hub has \
         run some (it runs them at its next scheduling point)"
    )]
    PendingCallsFull {
        /// How many calls the slot holds.
        capacity: usize,
    },
    /// A builder setting was out of range.
    #[error("invalid runtime setting: {0}")]
    InvalidConfig(String),
    /// The OS refused a resource the runtime needs (a thread, a poller).
    #[error("could not {what}: {source}")]
    Os {
        /// What the runtime was doing.
        what: &'static str,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// [`Semaphore::try_add_permits`](super::Semaphore::try_add_permits)
    /// could not add every permit asked for without passing the maximum.
    #[error(
        "a semaphore counts at most {max} permits (free and held): {added} of the {asked} asked \
         for were added"
    )]
    TooManyPermits {
        /// Permits asked for.
        asked: usize,
        /// Permits added.
        added: usize,
        /// [`Semaphore::MAX_PERMITS`](super::Semaphore::MAX_PERMITS).
        max: usize,
    },
    /// Every green thread of the runtime was parked waiting for another,
    /// and the runtime was built to fail on it
    /// ([`Builder::fail_on_deadlock`](super::Builder::fail_on_deadlock)):
    /// a root [`JoinError::Deadlock`] passed on as a `HubError` (by `?` or
    /// [`run`](super::run)).
    ///
    /// ```
    /// fn main_loop() -> Result<(), greenlet::hub::HubError> {
    ///     let rt = greenlet::hub::Runtime::builder().fail_on_deadlock(true).build()?;
    ///     rt.block_on(|| greenlet::hub::channel::<u8>(1).1.recv())?.ok();
    ///     Ok(())
    /// }
    /// let err = main_loop().unwrap_err();
    /// let greenlet::hub::HubError::Deadlock { green_threads, stacks, .. } = &err else {
    ///     panic!("{err}");
    /// };
    /// assert!(green_threads[0].contains("block_on [parked on channel receive]"), "{err}");
    /// assert_eq!(stacks.tasks.len(), 1);
    /// ```
    #[error(
        "deadlock: green thread '{name}' was stopped because every green thread of the runtime was \
         parked waiting for another ({}). {DEADLOCK_ADVICE}",
        green_threads.join("; ")
    )]
    Deadlock {
        /// The root green thread's name.
        name: String,
        /// The green threads of the deadlock, as the dump shows them.
        green_threads: Vec<String>,
        /// Every green thread's stack when the deadlock was found.
        stacks: Box<Dump>,
    },
    /// The green thread run by [`run`](super::run) did not return a value
    /// (for a deadlock, see [`HubError::Deadlock`]).
    #[error(transparent)]
    Join(JoinError),
}

/// What a deadlock's message tells the reader to do.
const DEADLOCK_ADVICE: &str = "Their stacks are in the error's `stacks` and in the log: look \
     there for the wait nobody can end (a channel whose senders are kept but never send, a join of \
     a green thread that waits for its joiner, locks taken in opposite orders). If a plain thread \
     or a signal would have woken one, build the runtime without fail_on_deadlock";

impl From<JoinError> for HubError {
    /// [`JoinError::Deadlock`] becomes [`HubError::Deadlock`], anything
    /// else [`HubError::Join`].
    fn from(e: JoinError) -> HubError {
        match e {
            JoinError::Deadlock {
                name,
                green_threads,
                stacks,
            } => HubError::Deadlock {
                name,
                green_threads,
                stacks,
            },
            other => HubError::Join(other),
        }
    }
}

/// A deadline passed before the operation finished (see
/// [`timeout`](super::timeout)).
///
/// ```
/// assert_eq!(greenlet::hub::Elapsed.to_string(), "the deadline elapsed before the operation finished");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the deadline elapsed before the operation finished")]
pub struct Elapsed;
