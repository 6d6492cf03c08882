//! Starting green threads: [`spawn`], [`spawn_local`], and the [`task()`]
//! builder (name, stack size), plus making a task ([`NewTask`]) with the
//! body that runs its closure, catches its panic or cancellation, and
//! records the outcome.
//!
//! Owns: the spawn paths, [`TaskBuilder`] and [`NewTask`]. Uses the
//! runtime's shared state (registry, injector), the current worker (its
//! deque and local queue), `unstarted` (the closure kept in the task, and the
//! token that starts it), and the task's `finish`.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::sync::Arc;

use super::error::{HubError, JoinError};
use super::join::JoinHandle;
use super::shared::Shared;
use super::task_body::Body;
use super::task_header::{Slot, Task};
use super::task_pool::Spent;
use super::unstarted::{LocalUnstarted, Unstarted};
use super::unwind::CancelUnwind;
use super::worker;

/// The message of the panic of [`spawn`] outside a runtime.
const NO_RUNTIME: &str = "greenlet::hub::spawn called outside a hub runtime: call it from a green \
                          thread (inside Runtime::block_on or greenlet::hub::run), use \
                          Handle::spawn, or hub::task().spawn(..) which returns the error";

/// Run `f` on a new green thread of the current runtime; it may start on
/// any worker (only a closure that has not started moves). Called on a
/// green thread of a runtime of several workers, it starts on the
/// caller's worker when the caller next parks or yields, unless the
/// caller spawns again first (then it may be stolen) or keeps its worker
/// for long (see [where green threads run](crate::hub#where-green-threads-run)).
/// Its name is `task-<id>`; its spawn site (the caller) shows in [`dump`](super::dump).
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
    // On a worker, its runtime is at hand: no `Handle` (an `Arc` clone),
    // and no second look-up of the worker.
    worker::with_current(|here| match here {
        Some(w) => spawn_on(w, f, None, None, site),
        None => match worker::current_runtime() {
            Some(shared) => shared.spawn_at(f, None, None, site),
            None => panic!("{NO_RUNTIME}"),
        },
    })
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

/// The smallest stack a green thread runs on, in bytes: a panic's
/// unwinding (with `RUST_BACKTRACE` set, its backtrace) needs about this
/// much, so a smaller stack overflows in the panic handler and aborts.
pub const MIN_STACK_SIZE: usize = 16 * 1024;

/// A stack size below [`MIN_STACK_SIZE`], as the setting error.
pub(crate) fn check_stack_size(bytes: usize) -> Result<(), HubError> {
    if bytes < MIN_STACK_SIZE {
        return Err(HubError::InvalidConfig(format!(
            "stack_size {bytes} is below the minimum of {MIN_STACK_SIZE} bytes (16 KiB); ask for at \
             least that much"
        )));
    }
    Ok(())
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

    /// Its stack size in bytes (default: the runtime's); at least
    /// [`MIN_STACK_SIZE`], or the spawn fails with
    /// [`HubError::InvalidConfig`].
    ///
    /// ```
    /// greenlet::hub::run(|| {
    ///     let err = greenlet::hub::task().stack_size(0).spawn(|| ()).unwrap_err();
    ///     assert!(err.to_string().contains("stack_size 0"));
    /// })
    /// .unwrap();
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Spawn `f` on the current runtime, like [`spawn`].
    ///
    /// # Errors
    /// [`HubError::NoRuntime`] outside a runtime; [`HubError::InvalidConfig`]
    /// for a stack size below [`MIN_STACK_SIZE`].
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
        let shared = worker::current_runtime().ok_or(HubError::NoRuntime)?;
        self.stack_size.map_or(Ok(()), check_stack_size)?;
        Ok(shared.spawn_at(f, self.name, self.stack_size, site))
    }

    /// Spawn `f` on the calling worker thread, like [`spawn_local`].
    ///
    /// # Errors
    /// [`HubError::NotOnWorker`] when not called on a worker thread;
    /// [`HubError::InvalidConfig`] for a stack size below
    /// [`MIN_STACK_SIZE`].
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
        self.stack_size.map_or(Ok(()), check_stack_size)?;
        let (u, handle) = NewTask {
            shared: &w.shared,
            name: self.name,
            stack_size: self.stack_size,
            site,
            shard: w.index,
        }
        .build_local(f);
        w.push_local(u);
        Ok(handle)
    }
}

/// What a new task is made with (its runtime, name, stack size, spawn
/// site and registry shard): [`build`](Self::build) and
/// [`build_local`](Self::build_local) make and register it.
pub(crate) struct NewTask<'a> {
    pub(crate) shared: &'a Arc<Shared>,
    pub(crate) name: Option<String>,
    pub(crate) stack_size: Option<usize>,
    pub(crate) site: &'static Location<'static>,
    pub(crate) shard: usize,
}

impl NewTask<'_> {
    /// A registered task that runs the `Send` closure `f` (with its panic
    /// or cancellation caught, and its outcome recorded), the token that
    /// starts it, and its handle.
    pub(crate) fn build<F, T>(self, f: F) -> (Unstarted, JoinHandle<T>)
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let spent = take_spent(self.shared);
        self.build_from(f, spent)
    }

    /// [`build`](Self::build) in `spent`'s allocation if one is given.
    fn build_from<F, T>(self, f: F, spent: Option<Spent>) -> (Unstarted, JoinHandle<T>)
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let slot = Slot::<T>::new();
        let body = Body::new(move |task: &Task| {
            let out = catch_unwind(AssertUnwindSafe(f));
            task.locals.clear();
            match out {
                Ok(v) => task.finish_with_output(slot, v),
                Err(payload) => fail(task, payload),
            }
        });
        let task = self.make(body, spent);
        // SAFETY: made just now, with a `Send` body; this is its only token.
        let u = unsafe { Unstarted::new(Arc::clone(&task)) };
        (u, JoinHandle { task, slot })
    }

    /// [`build`](Self::build) for a closure (and value) that need not be
    /// `Send`: its token stays on the calling thread.
    pub(crate) fn build_local<F, T>(self, f: F) -> (LocalUnstarted, JoinHandle<T>)
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        let slot = Slot::<T>::new();
        let run = move |task: &Task| {
            let out = catch_unwind(AssertUnwindSafe(f));
            task.locals.clear();
            match out {
                Ok(v) => task.finish_with_local_output(slot, v),
                Err(payload) => fail(task, payload),
            }
        };
        // SAFETY: its token is the `LocalUnstarted` made below.
        let body = unsafe { Body::local(run) };
        let spent = take_spent(self.shared);
        let task = self.make(body, spent);
        // SAFETY: made just now; this is its only token.
        let u = unsafe { LocalUnstarted::new(Arc::clone(&task)) };
        (u, JoinHandle { task, slot })
    }

    /// The task, registered: `spent` (a spent task of a worker's pool of
    /// this runtime) made new (see [`TaskPool`](super::task_pool::TaskPool)), else allocated once with
    /// its header and `body` in it.
    fn make(self, body: Body<Task>, spent: Option<Spent>) -> Arc<Task> {
        let shared = self.shared;
        let name = self.name.map(String::into_boxed_str);
        let stack_size = self.stack_size.unwrap_or(shared.stack_size);
        let task = match spent {
            Some(spent) => spent.renew(name, self.site, stack_size, self.shard, body),
            None => Task::allocate(shared.link(), name, self.site, stack_size, self.shard, body),
        };
        shared.registry.insert(&task);
        task
    }
}

/// A spent task of the calling worker's pool, if it is a worker of
/// `shared`'s runtime and keeps one.
fn take_spent(shared: &Arc<Shared>) -> Option<Spent> {
    worker::with_current(|w| {
        w.filter(|w| Arc::ptr_eq(&w.shared, shared))
            .and_then(|w| w.pool.take())
    })
}

/// Spawn on `w`, a worker of the runtime, from its thread: into its
/// newest-spawn slot or its one-worker stack (see
/// `Worker::push_unstarted`), in a spent task of its pool if it keeps one.
fn spawn_on<F, T>(
    w: &worker::Worker,
    f: F,
    name: Option<String>,
    stack_size: Option<usize>,
    site: &'static Location<'static>,
) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (u, handle) = NewTask {
        shared: &w.shared,
        name,
        stack_size,
        site,
        shard: w.index,
    }
    .build_from(f, w.pool.take());
    if w.shared.is_shutting_down() {
        refuse_at_shutdown(u);
    } else {
        w.push_unstarted(u);
    }
    handle
}

/// A task spawned once its runtime's shutdown began: it never starts, and
/// its handle says why.
#[cold]
pub(crate) fn refuse_at_shutdown(u: Unstarted) {
    let task = u.task();
    task.finish(Some(JoinError::RuntimeShutDown { name: task.name() }));
    drop(u);
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

impl Shared {
    /// Spawn on this runtime from anywhere: as [`spawn`] does on the
    /// calling worker if it is one of this runtime's workers, else onto
    /// the injector.
    pub(crate) fn spawn_at<F, T>(
        self: &Arc<Shared>,
        f: F,
        name: Option<String>,
        stack_size: Option<usize>,
        site: &'static Location<'static>,
    ) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        worker::with_current(|w| match w.filter(|w| Arc::ptr_eq(&w.shared, self)) {
            Some(w) => spawn_on(w, f, name, stack_size, site),
            None => {
                let (u, handle) = NewTask {
                    shared: self,
                    name,
                    stack_size,
                    site,
                    shard: self.workers.len(),
                }
                .build_from(f, None);
                if self.is_shutting_down() {
                    refuse_at_shutdown(u);
                } else {
                    self.injector.push(u);
                    self.notify_idle();
                }
                handle
            }
        })
    }
}
