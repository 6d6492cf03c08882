//! [`NotStarted`], the one token that may run or drop an unstarted task's
//! closure (its [`Body`](super::task_body::Body)), and [`Launch`], the
//! token moved into the task's greenlet, as that greenlet's body.
//!
//! Owns the token's rules: the token is made with the task, only its
//! holder touches the body, and it either runs the closure
//! ([`NotStarted::run`]), drops it and finishes the task as cancelled
//! (dropped unstarted), or gives it up to an error the caller records
//! ([`NotStarted::into_task`]). A `Send` closure's token is `Send` (it
//! moves between workers); a `spawn_local` one's is not. Uses the task's
//! body and `finish`, and the coroutine's value and error types (the
//! greenlet body's signature).

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ptr;
use std::sync::Arc;

use crate::coroutine::{GreenletError, Value};

use super::error::JoinError;
use super::spawn_slot::Token;
use super::task_header::Task;

/// Marks a [`NotStarted`] whose closure is `Send`.
#[derive(Debug)]
pub(crate) enum Sendable {}

/// Marks a [`NotStarted`] whose closure may not be `Send` (a `spawn_local`
/// task's, or the pending-call drain's).
#[derive(Debug)]
pub(crate) struct Local(PhantomData<*const ()>);

/// The right to start a task: to run its closure, or to drop it. Dropped
/// unstarted (a worker's deque at exit, a refused spawn, a cancellation),
/// it drops the closure, then finishes the task as cancelled: no task is
/// left unjoinable.
pub(crate) struct NotStarted<K> {
    task: Arc<Task>,
    _kind: PhantomData<K>,
}

/// A spawned `Send` task: it may start on any worker.
pub(crate) type Unstarted = NotStarted<Sendable>;

/// A `spawn_local` task: it starts on the worker that spawned it.
pub(crate) type LocalUnstarted = NotStarted<Local>;

impl<K> NotStarted<K> {
    /// The token of `task`, made with its body.
    ///
    /// # Safety
    /// `task` was made just now with its body, and no other token of it
    /// exists; for a [`Sendable`] token, with [`Body::new`](super::task_body::Body::new).
    pub(crate) unsafe fn new(task: Arc<Task>) -> Self {
        NotStarted {
            task,
            _kind: PhantomData,
        }
    }

    pub(crate) fn task(&self) -> &Arc<Task> {
        &self.task
    }

    /// Run the closure here (it records the task's outcome), then let the
    /// token go.
    pub(crate) fn run(self) {
        let task = self.into_arc();
        // SAFETY: the token, consumed just now, was the only way to the body.
        unsafe { task.body.run(&task) };
    }

    /// Drop the closure without running it and give the task back, for the
    /// caller to finish with its own error.
    pub(crate) fn into_task(self) -> Arc<Task> {
        let task = self.into_arc();
        // SAFETY: as in `run`.
        unsafe { task.body.drop_closure() };
        task
    }

    /// The task, the token gone without its `Drop` (the body untouched).
    fn into_arc(self) -> Arc<Task> {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again, so the `Arc` is
        // moved out exactly once.
        unsafe { ptr::read(&this.task) }
    }
}

impl Unstarted {
    /// The same token kept to the calling thread (a `Send` closure may run
    /// wherever a local one may): a task placed on a worker starts there.
    pub(crate) fn into_local(self) -> LocalUnstarted {
        NotStarted {
            task: self.into_arc(),
            _kind: PhantomData,
        }
    }
}

/// A worker's newest-spawn slot holds the token as its task's pointer.
impl Token for Unstarted {
    type Target = Task;

    fn into_raw(self) -> *mut Task {
        Arc::into_raw(self.into_arc()).cast_mut()
    }

    unsafe fn from_raw(p: *mut Task) -> Unstarted {
        NotStarted {
            // SAFETY: `p` is `Arc::into_raw` of a token's reference, not
            // turned back since (the caller's contract): this takes that
            // count back, once.
            task: unsafe { Arc::from_raw(p) },
            _kind: PhantomData,
        }
    }
}

/// A token moved into its task's greenlet: it runs the closure when the
/// greenlet starts. Dropped unrun (the greenlet could not start, or was
/// killed first), it drops the closure and leaves the task's outcome to
/// the worker, which knows why.
///
/// It holds no count of the task: [`Launch::new`] hands the token's count
/// to the worker's `live` entry, which holds it with the greenlet and lets
/// it go only after the greenlet is gone or dead (see `Launch::new`'s
/// contract). That saves the count's two atomic read-modify-writes per
/// spawn (the entry's clone at the start, the launch's drop at the end).
pub(crate) struct Launch<K> {
    task: ptr::NonNull<Task>,
    _kind: PhantomData<K>,
}

impl<K> Launch<K> {
    /// The launch of `u`'s task, and the token's count of it, for the
    /// greenlet's entry.
    ///
    /// # Safety
    /// The `Arc` returned outlives the launch and whatever its closure
    /// runs: it is dropped only after the greenlet the launch is moved into
    /// is dead (its body returned or unwound) or has dropped the launch
    /// unrun.
    pub(crate) unsafe fn new(u: NotStarted<K>) -> (Launch<K>, Arc<Task>) {
        let task = u.into_arc();
        let launch = Launch {
            task: ptr::NonNull::from(&*task),
            _kind: PhantomData,
        };
        (launch, task)
    }

    /// The body of the task's greenlet: it runs the closure (which records
    /// the task's outcome) and ends with the unit value.
    pub(crate) fn greenlet_body(self) -> impl FnOnce(Value) -> Result<Value, GreenletError>
    where
        K: 'static,
    {
        move |_| {
            self.run();
            Ok(Value::unit())
        }
    }

    /// Run the closure (it records the task's outcome).
    fn run(self) {
        let this = ManuallyDrop::new(self);
        // SAFETY: the entry's count keeps the task alive while the greenlet
        // runs this (`new`'s contract).
        let task = unsafe { this.task.as_ref() };
        // SAFETY: the launch (the token it was made of), consumed just now,
        // was the only way to the body.
        unsafe { task.body.run(task) };
    }
}

impl<K> Drop for Launch<K> {
    fn drop(&mut self) {
        // SAFETY: alive (`new`'s contract); dropped unrun, the launch is
        // the token, the only way to the body.
        unsafe { self.task.as_ref().body.drop_closure() };
    }
}

impl<K> Drop for NotStarted<K> {
    fn drop(&mut self) {
        // SAFETY: the token, being dropped, is the only way to the body.
        if unsafe { self.task.body.drop_closure() } {
            self.task.finish(Some(JoinError::Cancelled {
                name: self.task.name(),
            }));
        }
    }
}
