//! The typed [`JoinHandle`]: waiting for a green thread's result (parking
//! a green thread, blocking a plain one, or as a [`Future`] polled by any
//! executor), cancelling it, and giving its spent task to the worker's
//! pool.
//!
//! Owns: [`JoinHandle`]. Uses the task header (its joiners and outcome),
//! `park`, the current worker and the task pool's recycling.

use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::ptr;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::error::JoinError;
use super::park::{current_waker, park, park_green};
use super::task_header::{Slot, Task};
use super::task_state::{TaskState, Wait};
use super::worker;

/// Owns the right to wait for a green thread's result (or a blocking call's).
///
/// Dropping it detaches the green thread: it runs on, its result dropped.
///
/// It is also a [`Future`] of the same result, which any executor may poll
/// (its waker joins the task's joiners): async code waits for a green
/// thread without blocking its executor thread. See
/// [`poll`](JoinHandle::poll).
///
/// # Example
/// ```
/// use greenlet::hub;
/// let sum = hub::run(|| {
///     let a = hub::spawn(|| 20);
///     let b = hub::spawn(|| 22);
///     a.join().unwrap() + b.join().unwrap()
/// })
/// .unwrap();
/// assert_eq!(sum, 42);
/// ```
pub struct JoinHandle<T> {
    pub(crate) task: Arc<Task>,
    pub(crate) slot: Slot<T>,
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        self.task.abandon_output(self.slot);
    }
}

impl<T> JoinHandle<T> {
    /// Wait for it to finish and take its result. Parks a green thread;
    /// blocks a plain thread. A parking point (so a cancellation point).
    ///
    /// # Errors
    /// [`JoinError`] if it panicked, was cancelled, or could not start;
    /// [`JoinError::JoinedSelf`] (at once) when a green thread joins its
    /// own handle.
    ///
    /// ```
    /// let v = greenlet::hub::run(|| greenlet::hub::spawn(|| "done").join().unwrap()).unwrap();
    /// assert_eq!(v, "done");
    /// ```
    pub fn join(self) -> Result<T, JoinError> {
        self.wait_done()?;
        let result = self.take_result();
        // Done, so no value comes later: the handle goes without `Drop`'s
        // `abandon_output` (a lock taken for nothing), its task to the
        // worker's pool of spent tasks if this was the last reference.
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again, so its `Arc` is
        // moved out (and given up) exactly once.
        recycle(unsafe { ptr::read(&this.task) });
        result
    }

    /// Park (block, on a plain thread) until the task is done, keeping the
    /// handle: a cancel or timeout that unwinds the wait leaves the result
    /// where a later wait or [`join`](Self::join) takes it. A parking point.
    ///
    /// # Errors
    /// [`JoinError::JoinedSelf`] (at once) when a green thread waits for
    /// its own task.
    pub(crate) fn wait_done(&self) -> Result<(), JoinError> {
        if !self.task.is_done() {
            // On a green thread, its worker and task are looked up once for
            // the waker and the park.
            let green = worker::with_current_task(|w, me| {
                if Arc::ptr_eq(&self.task, me) {
                    return false;
                }
                // A task of another runtime finishes out of this one's
                // sight: its deadlock check must not count the wait.
                let wait = if self.task.runtime.same_as(&me.runtime) {
                    Wait::Join
                } else {
                    Wait::JoinElsewhere
                };
                while self.task.add_green_joiner(w.index, me) {
                    park_green(w, me, wait, None);
                    if self.task.is_done() {
                        break;
                    }
                }
                true
            });
            if green == Some(false) {
                return Err(JoinError::JoinedSelf {
                    name: self.task.name(),
                });
            }
            if green.is_none() {
                while !self.task.is_done() {
                    if !self.task.add_join_waiter(current_waker()) {
                        break;
                    }
                    park(Wait::Join, None);
                }
            }
        }
        Ok(())
    }

    /// The result of a finished task (call only once this thread saw it
    /// done, and once).
    fn take_result(&self) -> Result<T, JoinError> {
        self.task.take_outcome(self.slot)
    }

    /// Whether it has finished (its result can be taken without waiting).
    ///
    /// ```
    /// greenlet::hub::run(|| {
    ///     let h = greenlet::hub::spawn(|| ());
    ///     while !h.is_finished() {
    ///         greenlet::hub::yield_now();
    ///     }
    ///     h.join().unwrap();
    /// })
    /// .unwrap();
    /// ```
    pub fn is_finished(&self) -> bool {
        self.task.is_done()
    }

    /// Cancel it: if it has not started it never will; if it is parked,
    /// `GreenletExit` is raised at its parking point (the blocking call it is
    /// parked in unwinds its stack, so its destructors run); if it is running
    /// it is cancelled at its next parking point. Parking points are the
    /// only cancellation points: a green thread that never parks runs to
    /// its end. Its `join` then returns [`JoinError::Cancelled`]. A running
    /// blocking-pool call cannot be cancelled.
    ///
    /// ```
    /// use greenlet::hub;
    /// let err = hub::run(|| {
    ///     let h = hub::spawn(|| hub::sleep(std::time::Duration::from_secs(3600)));
    ///     hub::yield_now(); // let it start and park
    ///     h.cancel();
    ///     h.join().unwrap_err()
    /// })
    /// .unwrap();
    /// assert!(err.is_cancelled());
    /// ```
    pub fn cancel(&self) {
        self.task.request_cancel();
    }

    /// Its id (unique in the process).
    ///
    /// ```
    /// greenlet::hub::run(|| {
    ///     let (a, b) = (greenlet::hub::spawn(|| ()), greenlet::hub::spawn(|| ()));
    ///     assert_ne!(a.id(), b.id());
    /// })
    /// .unwrap();
    /// ```
    pub fn id(&self) -> u64 {
        self.task.id
    }

    /// Its name (`task-<id>` unless named through [`task()`](super::task)).
    ///
    /// ```
    /// greenlet::hub::run(|| {
    ///     let h = greenlet::hub::task().name("fetch").spawn(|| ()).unwrap();
    ///     assert_eq!(h.name(), "fetch");
    /// })
    /// .unwrap();
    /// ```
    pub fn name(&self) -> String {
        self.task.name()
    }

    /// Its state now (see [`TaskState`]).
    ///
    /// ```
    /// use greenlet::hub::{self, TaskState, Wait};
    /// hub::run(|| {
    ///     let h = hub::spawn(|| hub::sleep(std::time::Duration::from_secs(3600)));
    ///     while h.state() != TaskState::Parked(Wait::Sleep) {
    ///         hub::yield_now();
    ///     }
    ///     h.cancel();
    /// })
    /// .unwrap();
    /// ```
    pub fn state(&self) -> TaskState {
        self.task.state()
    }
}

// Nothing in it is pinned: the handle is a reference-counted pointer to
// the task and a type token.
impl<T> Unpin for JoinHandle<T> {}

/// Waiting for the green thread from async code: ready with what
/// [`join`](JoinHandle::join) returns once it finishes; until then the
/// waker of each poll is registered with the task's joiners (a waker that
/// [`will_wake`](std::task::Waker::will_wake) as one registered already is
/// not added again) and woken when it finishes. Polling never parks or
/// blocks, so any executor may poll it, on any thread. Polled again after
/// it returned `Ready`, it returns [`JoinError::Cancelled`] (the result is
/// gone).
///
/// # Errors
/// As [`join`](JoinHandle::join); [`JoinError::JoinedSelf`] when polled
/// on the green thread it waits for (it would never finish).
///
/// # Example
/// A tokio task waits for a green thread, and a green thread for a tokio
/// task (through [`block_on`](super::block_on)):
/// ```
/// use greenlet::hub;
/// let tokio_rt = tokio::runtime::Runtime::new().unwrap();
/// let rt = hub::Runtime::new().unwrap();
/// let green = rt.handle().spawn(|| {
///     hub::sleep(std::time::Duration::from_millis(5));
///     6 * 7
/// });
/// assert_eq!(tokio_rt.block_on(async { green.await }).unwrap(), 42);
///
/// let from_tokio = tokio_rt.spawn(async { "from tokio" });
/// let green = rt.handle().spawn(move || hub::block_on(from_tokio).unwrap());
/// assert_eq!(green.join().unwrap(), "from tokio");
/// ```
impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if !this.task.is_done() {
            if worker::with_current_task(|_, me| Arc::ptr_eq(&this.task, me)) == Some(true) {
                return Poll::Ready(Err(JoinError::JoinedSelf {
                    name: this.task.name(),
                }));
            }
            // `false`: it finished meanwhile, nothing registered.
            if this.task.add_join_waiter(cx.waker().clone()) {
                return Poll::Pending;
            }
        }
        Poll::Ready(this.take_result())
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("task", &*self.task)
            .finish()
    }
}

/// `task`'s last handle is done with it: on a worker of its runtime it may
/// go to that worker's pool (see [`TaskPool`](super::task_pool::TaskPool)), elsewhere it is dropped.
fn recycle(task: Arc<Task>) {
    worker::with_current(|w| match w {
        Some(w) if w.owns(&task) => w.pool.give(task),
        _ => drop(task),
    });
}
