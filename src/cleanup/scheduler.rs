//! How a drain gets run: the [`Scheduler`] trait and the schedulers that need
//! no host (inline, manual, a reaper thread). The CPython model provides its
//! own, built on its `Py_AddPendingCall`.
//!
//! Owns: [`Scheduler`], [`ScheduleError`], [`Inline`], [`Manual`],
//! [`Reaper`]. Uses only [`CleanupQueue::drain`](super::CleanupQueue::drain)
//! of the queue, `std` threads and channels, and `parking_lot`.

use std::sync::mpsc;
use std::sync::Arc;

use parking_lot::Mutex;

use super::CleanupQueue;

/// A scheduler refused to run a drain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {scheduler} scheduler could not schedule a cleanup drain: {reason}")]
pub struct ScheduleError {
    /// The scheduler's [`Scheduler::name`].
    pub scheduler: String,
    /// Why, in words.
    pub reason: String,
}

/// Decides how and where [`CleanupQueue::drain`] runs.
///
/// `schedule` is called by a dying thread, possibly from its thread-local
/// destructors, with no lock of the queue held. It must not block for long
/// and must not run the drain's user code while holding locks of its own.
///
/// # Example
/// ```
/// use std::sync::Arc;
/// use greenlet::cleanup::{CleanupQueue, Policy, Remains, ScheduleError, Scheduler};
///
/// /// Refuses everything: states stay queued until someone drains by hand.
/// struct Never;
/// impl Scheduler for Never {
///     fn schedule(&self, _queue: &Arc<CleanupQueue>) -> Result<(), ScheduleError> {
///         Err(ScheduleError { scheduler: self.name().into(), reason: "never".into() })
///     }
///     fn name(&self) -> &str { "never" }
/// }
///
/// struct Note;
/// impl Remains for Note {
///     fn destroy(self: Box<Self>) {}
///     fn label(&self) -> String { "a note".into() }
/// }
///
/// let queue = CleanupQueue::new(Policy::Scheduled, Arc::new(Never));
/// queue.push(Box::new(Note));
/// assert_eq!(queue.metrics().schedules_failed, 1);
/// queue.drain();
/// assert_eq!(queue.metrics().states_destroyed, 1);
/// ```
pub trait Scheduler: Send + Sync + 'static {
    /// Arrange for `queue.drain()` to run later (or now). An `Err` means no
    /// drain was arranged; the queue's policy decides whether to retry. A
    /// panic is caught by the queue and taken as such a refusal.
    fn schedule(&self, queue: &Arc<CleanupQueue>) -> Result<(), ScheduleError>;

    /// Run one destruction in the protected context the host offers
    /// (used by [`Policy::Shielded`](super::Policy::Shielded) and
    /// [`Policy::Robust`](super::Policy::Robust)). The default
    /// offers none and just calls `destroy`. A panic is caught by the drain,
    /// reported, and the state destroyed without the shield.
    fn shield(&self, destroy: &mut dyn FnMut()) {
        destroy()
    }

    /// A short name for reports and errors.
    fn name(&self) -> &str;
}

/// Drains on the thread that pushed, before `push` returns: for a dying
/// thread, inside its thread-local destructors. The default for plain Rust
/// programs: finalizers have run by the time `JoinHandle::join` returns.
#[derive(Debug, Default, Clone, Copy)]
pub struct Inline;

impl Scheduler for Inline {
    fn schedule(&self, queue: &Arc<CleanupQueue>) -> Result<(), ScheduleError> {
        queue.drain();
        Ok(())
    }
    fn name(&self) -> &str {
        "inline"
    }
}

/// Schedules nothing by itself: the application calls
/// [`CleanupQueue::drain`] at its own safe points. Every request succeeds and
/// stays outstanding until then.
#[derive(Debug, Default, Clone, Copy)]
pub struct Manual;

impl Scheduler for Manual {
    fn schedule(&self, _queue: &Arc<CleanupQueue>) -> Result<(), ScheduleError> {
        Ok(())
    }
    fn name(&self) -> &str {
        "manual"
    }
}

/// A background thread ("greenlet-reaper") that runs every scheduled drain.
/// It stops when the scheduler is dropped.
#[derive(Debug)]
pub struct Reaper {
    sender: Mutex<mpsc::Sender<Arc<CleanupQueue>>>,
}

impl Reaper {
    /// Starts the reaper thread.
    ///
    /// # Errors
    /// The OS refused to start a thread.
    pub fn spawn() -> std::io::Result<Self> {
        let (sender, receiver) = mpsc::channel::<Arc<CleanupQueue>>();
        std::thread::Builder::new()
            .name("greenlet-reaper".into())
            .spawn(move || {
                for queue in receiver {
                    queue.drain();
                }
            })?;
        Ok(Reaper {
            sender: Mutex::new(sender),
        })
    }
}

impl Scheduler for Reaper {
    fn schedule(&self, queue: &Arc<CleanupQueue>) -> Result<(), ScheduleError> {
        self.sender
            .lock()
            .send(Arc::clone(queue))
            .map_err(|_| ScheduleError {
                scheduler: self.name().into(),
                reason: "the reaper thread has stopped".into(),
            })
    }
    fn name(&self) -> &str {
        "reaper"
    }
}
