//! Starting green threads: [`spawn`], [`spawn_local`], and the [`task()`]
//! builder (name, stack size), plus the body that runs a closure, catches
//! its panic or cancellation, and records the outcome.
//!
//! Owns: the spawn paths and [`TaskBuilder`]. Uses the runtime's shared
//! state (registry, injector), the current worker (its deque and local
//! queue), and the task's `finish`.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::sync::Arc;

use super::error::{HubError, JoinError};
use super::park::CancelUnwind;
use super::runtime::{Handle, Shared};
use super::task::{JoinHandle, Slot, Task};
use super::worker::{self, Unstarted};

/// The message of the panic of [`spawn`] outside a runtime.
const NO_RUNTIME: &str = "greenlet::hub::spawn called outside a hub runtime: call it from a green \
                          thread (inside Runtime::block_on or greenlet::hub::run), use \
                          Handle::spawn, or hub::task().spawn(..) which returns the error";

/// Run `f` on a new green thread of the current runtime; it may start on
/// any worker (only a closure that has not started moves). Its name is
/// `task-<id>`; its spawn site (the caller) shows in [`dump`](super::dump).
///
/// # Panics
/// Outside a runtime (not on a green thread, a worker or a blocking-pool
/// thread), with a message saying what to do; [`task()`]`.spawn(f)`
/// returns that as an error instead.
///
/// ```
/// let v = greenlet::hub::run(|| greenlet::hub::spawn(|| 6 * 7).join().unwrap()).unwrap();
/// assert_eq!(v, 42);
/// ```
#[track_caller]
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let site = Location::caller();
    match Handle::current() {
        Ok(h) => h.spawn_at(f, None, None, site),
        Err(_) => panic!("{NO_RUNTIME}"),
    }
}

/// Run `f` (which need not be `Send`) on a new green thread of the calling
/// worker thread; it never runs elsewhere.
///
/// # Panics
/// When the caller is not on a worker thread; [`task()`]`.spawn_local(f)`
/// returns [`HubError::NotOnWorker`] instead.
///
/// ```
/// use std::rc::Rc;
/// greenlet::hub::run(|| {
///     let shared = Rc::new(5); // not Send
///     let s = Rc::clone(&shared);
///     let v = greenlet::hub::spawn_local(move || *s + 1).join().unwrap();
///     assert_eq!(v, 6);
/// })
/// .unwrap();
/// ```
#[track_caller]
pub fn spawn_local<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + 'static,
    T: 'static,
{
    match task().spawn_local(f) {
        Ok(h) => h,
        Err(e) => panic!("greenlet::hub::spawn_local: {e}"),
    }
}

/// Options for one green thread: see [`task()`].
#[derive(Debug, Default, Clone)]
pub struct TaskBuilder {
    name: Option<String>,
    stack_size: Option<usize>,
}

/// Configure a green thread before spawning it.
///
/// ```
/// greenlet::hub::run(|| {
///     let h = greenlet::hub::task().name("parser").stack_size(64 * 1024).spawn(|| 1).unwrap();
///     assert_eq!(h.name(), "parser");
///     assert_eq!(h.join().unwrap(), 1);
/// })
/// .unwrap();
/// ```
pub fn task() -> TaskBuilder {
    TaskBuilder::default()
}

impl TaskBuilder {
    /// Its name, for [`dump`](super::dump), the watchdog and [`JoinError`].
    ///
    /// ```
    /// let b = greenlet::hub::task().name("io");
    /// # drop(b);
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Its stack size in bytes (default: the runtime's).
    ///
    /// ```
    /// let b = greenlet::hub::task().stack_size(32 * 1024);
    /// # drop(b);
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Spawn `f` on the current runtime, like [`spawn`].
    ///
    /// # Errors
    /// [`HubError::NoRuntime`] outside a runtime.
    ///
    /// ```
    /// // Outside a runtime the error says what to do instead of panicking.
    /// let err = greenlet::hub::task().spawn(|| ()).unwrap_err();
    /// assert!(err.to_string().contains("not inside a hub runtime"));
    /// ```
    #[track_caller]
    pub fn spawn<F, T>(self, f: F) -> Result<JoinHandle<T>, HubError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let site = Location::caller();
        let h = Handle::current()?;
        Ok(h.spawn_at(f, self.name, self.stack_size, site))
    }

    /// Spawn `f` on the calling worker thread, like [`spawn_local`].
    ///
    /// # Errors
    /// [`HubError::NotOnWorker`] when not called on a worker thread.
    ///
    /// ```
    /// let err = greenlet::hub::task().spawn_local(|| ()).unwrap_err();
    /// assert!(matches!(err, greenlet::hub::HubError::NotOnWorker));
    /// ```
    #[track_caller]
    pub fn spawn_local<F, T>(self, f: F) -> Result<JoinHandle<T>, HubError>
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        let site = Location::caller();
        let w = worker::current().ok_or(HubError::NotOnWorker)?;
        let (task, slot) = new_task(&w.shared, self.name, self.stack_size, site, w.index);
        let body = Box::new(local_body(Arc::clone(&task), slot, f));
        w.push_local(Arc::clone(&task), body);
        Ok(JoinHandle { task, slot })
    }
}

/// A registered task and the token of its value's type.
pub(crate) fn new_task<T>(
    shared: &Arc<Shared>,
    name: Option<String>,
    stack_size: Option<usize>,
    site: &'static Location<'static>,
    shard: usize,
) -> (Arc<Task>, Slot<T>) {
    let task = Arc::new(Task::new(
        Arc::clone(shared),
        name.map(String::into_boxed_str),
        site,
        stack_size.unwrap_or(shared.stack_size),
        shard,
    ));
    shared.registry.insert(&task);
    (task, Slot::new())
}

/// The closure a green thread (or blocking call) runs: `f`, with its panic
/// or cancellation caught, and the outcome recorded.
pub(crate) fn body<F, T>(task: Arc<Task>, slot: Slot<T>, f: F) -> impl FnOnce()
where
    F: FnOnce() -> T,
    T: Send,
{
    move || match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => {
            task.put_output(slot, v);
            task.finish(None);
        }
        Err(payload) => fail(&task, payload),
    }
}

/// [`body`] for a `spawn_local` task, whose value need not be `Send`.
fn local_body<F, T>(task: Arc<Task>, slot: Slot<T>, f: F) -> impl FnOnce()
where
    F: FnOnce() -> T,
{
    move || match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => {
            task.put_local_output(slot, v);
            task.finish(None);
        }
        Err(payload) => fail(&task, payload),
    }
}

/// The body panicked or was cancelled: that is its outcome.
fn fail(task: &Task, payload: Box<dyn Any + Send>) {
    let err = join_error(task, &*payload);
    drop(payload);
    task.finish(Some(err));
}

fn join_error(task: &Task, payload: &(dyn Any + Send)) -> JoinError {
    if payload.is::<CancelUnwind>() {
        return JoinError::Cancelled { name: task.name() };
    }
    let message = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    };
    JoinError::Panicked {
        name: task.name(),
        message,
    }
}

impl Handle {
    /// Spawn from this handle, anywhere: onto the calling worker's deque if
    /// it is one of this runtime's workers, else onto the injector.
    pub(crate) fn spawn_at<F, T>(
        &self,
        f: F,
        name: Option<String>,
        stack_size: Option<usize>,
        site: &'static Location<'static>,
    ) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let shared = &self.shared;
        let here = worker::current().filter(|w| Arc::ptr_eq(&w.shared, shared));
        let shard = here.as_ref().map_or(shared.workers.len(), |w| w.index);
        let (task, slot) = new_task(shared, name, stack_size, site, shard);
        let u = Unstarted::new(
            Arc::clone(&task),
            Box::new(body(Arc::clone(&task), slot, f)),
        );
        if shared.is_shutting_down() {
            drop(u);
        } else if let Some(w) = here {
            w.push_unstarted(u);
        } else {
            shared.injector.push(u);
            shared.notify_idle();
        }
        JoinHandle { task, slot }
    }
}
