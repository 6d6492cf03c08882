//! The runtime: [`Builder`], [`Runtime`] (owns the worker threads, the
//! watchdog and the blocking pool; shuts them down), [`Handle`] (a cheap,
//! `Send + Sync` reference usable from any thread), and the state they
//! share ([`Shared`]).
//!
//! Owns: building, `block_on`, shutdown and its [`ShutdownReport`], and the
//! idle-worker notification. Uses the worker (threads, remote parts),
//! `crossbeam-deque`'s injector, `mio` (a poller and waker per worker),
//! the registry, the pending-call slot, the blocking pool, the watchdog.

use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_deque::{Injector, Steal};
use parking_lot::{Condvar, Mutex};

use crate::cleanup::{CleanupQueue, Policy};
use crate::coroutine::default_stack_size;
use crate::diag::diag_error;

use super::blocking_pool::BlockingPool;
use super::deadlock_latch::DeadlockLatch;
use super::driver::{self, IoDriver, PollerSeed, Unparker};
use super::error::{HubError, JoinError};
use super::join::JoinHandle;
use super::pending::PendingCalls;
use super::pending_drain::{add_call, HubScheduler};
use super::registry::Registry;
use super::shared::Shared;
use super::spawning::check_stack_size;
use super::stacks;
use super::task_info::TaskInfo;
use super::watchdog::Watchdog;
use super::worker::{self, Remote, Seed};

/// How long dropping a [`Runtime`] waits for cancelled green threads.
pub const DROP_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// How long past the shutdown deadline the shutdown waits for a worker's
/// teardown (the kills of what is left, their unwinds) before it leaves
/// that worker's OS thread running on, detached, and reports it. Longer
/// lets a refusing green thread's last unwind finish; shorter bounds how
/// far [`Runtime::shutdown_timeout`] may overshoot its timeout (the
/// `hub_faults2` tests measure both refusal shapes against a 500 ms
/// timeout).
pub const TEARDOWN_GRACE: Duration = Duration::from_secs(1);

/// The most worker threads a runtime runs: each has its own poller, queues
/// and OS thread, so a count past this is a mistake, not a machine.
pub const MAX_WORKER_THREADS: usize = 4096;

/// The largest pending-call slot: its ring is allocated up front, so a
/// capacity past this would take gigabytes (or abort the process).
pub const MAX_PENDING_CALL_CAPACITY: usize = 1 << 20;

/// Settings for a [`Runtime`]: see [`Runtime::builder`].
#[derive(Debug, Clone)]
pub struct Builder {
    workers: usize,
    stack_size: usize,
    blocking_threads: usize,
    watchdog: Option<Duration>,
    pending_capacity: usize,
    slot_age: Duration,
    fail_on_deadlock: bool,
    dump_signal: Option<i32>,
    io_driver: IoDriver,
}

impl Builder {
    /// Worker OS threads, each with its own hub (default: the number of
    /// CPUs).
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::builder().worker_threads(2).build().unwrap();
    /// assert_eq!(rt.handle().worker_threads(), 2);
    /// ```
    pub fn worker_threads(mut self, n: usize) -> Self {
        self.workers = n;
        self
    }

    /// Each green thread's stack size in bytes (default: the greenlet
    /// default, [`default_stack_size`]).
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::builder().stack_size(64 * 1024).build().unwrap();
    /// # drop(rt);
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes;
        self
    }

    /// Most OS threads the [`spawn_blocking`](super::spawn_blocking) pool
    /// runs at once (default 16).
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::builder().max_blocking_threads(2).build().unwrap();
    /// # drop(rt);
    /// ```
    pub fn max_blocking_threads(mut self, n: usize) -> Self {
        self.blocking_threads = n;
        self
    }

    /// Report a worker that has not come back to its hub for longer than
    /// `threshold` (default 100 ms; `None`: no watchdog thread), and its
    /// recovery when it comes back.
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::builder().watchdog(None).build().unwrap();
    /// # drop(rt);
    /// ```
    pub fn watchdog(mut self, threshold: Option<Duration>) -> Self {
        self.watchdog = threshold;
        self
    }

    /// Whether a deadlock fails the root calls waiting in it (default
    /// `false`: it is only logged). A deadlock is every green thread parked
    /// on a channel, a join, a lock or an event, with no timer pending, no
    /// socket, future or blocking call that could wake one, and no work
    /// queued (see the "Seeing inside" section of `docs/hub.md`); it is
    /// always reported through the log facade with every green thread's
    /// stack. A plain thread holding a `Sender`, an `Event` or a `Handle`
    /// can still wake a green thread of such a runtime: turn this on only
    /// where none does. A failed [`Runtime::block_on`] returns
    /// [`JoinError::Deadlock`], naming the green threads and holding their
    /// stacks; passed on as a [`HubError`] (by `?`) it is
    /// [`HubError::Deadlock`].
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::builder().fail_on_deadlock(true).build().unwrap();
    /// let err = rt
    ///     .block_on(|| {
    ///         let (_tx, rx) = greenlet::hub::channel::<u8>(1);
    ///         rx.recv()
    ///     })
    ///     .unwrap_err();
    /// assert!(matches!(err, greenlet::hub::JoinError::Deadlock { .. }), "{err}");
    /// assert!(matches!(greenlet::hub::HubError::from(err), greenlet::hub::HubError::Deadlock { .. }));
    /// ```
    pub fn fail_on_deadlock(mut self, fail: bool) -> Self {
        self.fail_on_deadlock = fail;
        self
    }

    /// Print the dump of every green thread with its stack
    /// ([`Handle::dump`]) to stderr whenever the process receives
    /// `signal` (say `libc::SIGQUIT`, as Go does, or `SIGUSR1`), while the
    /// runtime lives. The signal is taken over for the rest of the process
    /// (see [`signal`](super::signal)): its default action no longer
    /// happens. A thread waits for it; the first delivery after the
    /// runtime is gone ends that thread.
    ///
    /// # Errors
    /// [`build`](Self::build) returns [`HubError::InvalidConfig`] for a
    /// signal that cannot be caught (`SIGKILL`, `SIGSTOP`, one out of
    /// range).
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::builder()
    ///     .dump_on_signal(libc::SIGUSR1)
    ///     .build()
    ///     .unwrap();
    /// # drop(rt);
    /// let bad = greenlet::hub::Runtime::builder().dump_on_signal(libc::SIGKILL).build();
    /// assert!(bad.is_err());
    /// ```
    pub fn dump_on_signal(mut self, signal: i32) -> Self {
        self.dump_signal = Some(signal);
        self
    }

    /// How many calls the pending-call slot holds (default 32, as CPython's
    /// ring).
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::builder().pending_call_capacity(4).build().unwrap();
    /// # drop(rt);
    /// ```
    pub fn pending_call_capacity(mut self, n: usize) -> Self {
        self.pending_capacity = n;
        self
    }

    /// The kernel interface the workers wait on for I/O (default
    /// [`IoDriver::Auto`]: io_uring where a probe at start-up passes — a
    /// ring is set up and has the opcodes the driver uses — else epoll;
    /// epoll under valgrind).
    /// The environment variable [`IO_DRIVER_ENV`](super::IO_DRIVER_ENV)
    /// (`GREENLET_IO_DRIVER=epoll|io_uring|auto`) overrides this.
    /// [`Handle::io_driver`] says which one a runtime uses. Sockets, pipes,
    /// signals and child processes work the same under both; under
    /// io_uring a green thread's TCP reads and writes are submitted to its
    /// worker's ring and cost no readiness round trip (see `docs/io.md`).
    ///
    /// # Errors
    /// [`build`](Self::build) returns [`HubError::InvalidConfig`] when
    /// io_uring is asked for (here or by the variable) where the probe
    /// fails, and for an unknown value of the variable.
    ///
    /// ```
    /// use greenlet::hub::{IoDriver, Runtime};
    /// let rt = Runtime::builder().io_driver(IoDriver::Epoll).build().unwrap();
    /// # if std::env::var_os(greenlet::hub::IO_DRIVER_ENV).is_none() {
    /// assert_eq!(rt.handle().io_driver(), IoDriver::Epoll);
    /// # }
    /// ```
    pub fn io_driver(mut self, driver: IoDriver) -> Self {
        self.io_driver = driver;
        self
    }

    /// How long other workers leave a worker's newest spawn alone (a test
    /// that must see where it starts without a race sets an hour). Hidden:
    /// a knob for the crate's own placement tests, not a tuning a program
    /// should depend on.
    #[doc(hidden)]
    pub fn slot_age(mut self, age: Duration) -> Self {
        self.slot_age = age;
        self
    }

    /// Start the runtime: its workers, and its watchdog.
    ///
    /// # Errors
    /// [`HubError::InvalidConfig`] for zero workers, blocking threads or
    /// pending-call capacity, more than [`MAX_WORKER_THREADS`] workers or
    /// [`MAX_PENDING_CALL_CAPACITY`] pending calls, or a stack under [`MIN_STACK_SIZE`](super::MIN_STACK_SIZE);
    /// [`HubError::Os`] when a poller or thread cannot be created.
    ///
    /// ```
    /// let err = greenlet::hub::Runtime::builder().worker_threads(0).build().unwrap_err();
    /// assert!(err.to_string().contains("worker_threads"));
    /// ```
    pub fn build(self) -> Result<Runtime, HubError> {
        if self.workers == 0 {
            return Err(HubError::InvalidConfig(
                "worker_threads must be at least 1".into(),
            ));
        }
        if self.blocking_threads == 0 || self.pending_capacity == 0 {
            return Err(HubError::InvalidConfig(
                "max_blocking_threads and pending_call_capacity must be at least 1".into(),
            ));
        }
        if self.workers > MAX_WORKER_THREADS {
            return Err(HubError::InvalidConfig(format!(
                "worker_threads {} is above the limit of {MAX_WORKER_THREADS}",
                self.workers
            )));
        }
        if self.pending_capacity > MAX_PENDING_CALL_CAPACITY {
            return Err(HubError::InvalidConfig(format!(
                "pending_call_capacity {} is above the limit of {MAX_PENDING_CALL_CAPACITY}",
                self.pending_capacity
            )));
        }
        check_stack_size(self.stack_size)?;
        let os = |what| move |source| HubError::Os { what, source };
        let io_driver = driver::resolve(self.io_driver)?;
        let mut seeds = Vec::with_capacity(self.workers);
        let mut remotes = Vec::with_capacity(self.workers);
        for index in 0..self.workers {
            let waker = Unparker::new().map_err(os("create a worker's waker"))?;
            let poll =
                PollerSeed::new(io_driver, &waker).map_err(os("create a worker's poller"))?;
            let deque = crossbeam_deque::Worker::new_lifo();
            remotes.push(Remote::new(waker, deque.stealer()));
            seeds.push(Seed { index, poll, deque });
        }
        let shared = Arc::new(Shared {
            workers: remotes.into_boxed_slice(),
            injector: Injector::new(),
            idle: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            deadline: Mutex::new(None),
            stack_size: self.stack_size,
            registry: Registry::new(self.workers + 1),
            pending: PendingCalls::new(self.pending_capacity),
            blocking: BlockingPool::new(self.blocking_threads),
            cleanup: OnceLock::new(),
            refused: Mutex::new(Vec::new()),
            next_notify: AtomicUsize::new(0),
            slot_age: self.slot_age,
            deadlock: DeadlockLatch::new(self.fail_on_deadlock),
            io_driver,
        });
        let scheduler = Arc::new(HubScheduler::new(&shared));
        // A fresh OnceLock: this cannot fail.
        let _ = shared
            .cleanup
            .set(CleanupQueue::new(Policy::Robust, scheduler));
        let mut rt = Runtime {
            handle: Handle {
                shared: Arc::clone(&shared),
            },
            threads: Vec::with_capacity(self.workers),
            exited: Arc::new(Exited::default()),
            watchdog: None,
            done: false,
        };
        super::panic_name::install();
        for seed in seeds {
            let s = Arc::clone(&shared);
            let exited = Arc::clone(&rt.exited);
            let t = thread::Builder::new()
                .name(format!("hub-worker-{}", seed.index))
                .spawn(move || {
                    let index = seed.index;
                    worker::main(s, seed);
                    exited.note(index);
                })
                .map_err(os("start a worker thread"))?;
            rt.threads.push(t);
        }
        if let Some(signal) = self.dump_signal {
            stacks::dump_on_signal(Arc::downgrade(&shared), signal)?;
        }
        if let Some(threshold) = self.watchdog {
            rt.watchdog =
                Some(Watchdog::start(&shared, threshold).map_err(os("start the watchdog thread"))?);
        }
        Ok(rt)
    }
}

/// A green-thread runtime: worker OS threads, each with a hub scheduling
/// green threads on it. Dropping it shuts it down (see
/// [`shutdown_timeout`](Runtime::shutdown_timeout), with
/// [`DROP_SHUTDOWN_TIMEOUT`]).
///
/// # Example
/// ```
/// use greenlet::hub::{self, Runtime};
/// let rt = Runtime::builder().worker_threads(2).build().unwrap();
/// let total = rt
///     .block_on(|| {
///         let hs: Vec<_> = (0..10u64).map(|i| hub::spawn(move || i * i)).collect();
///         hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
///     })
///     .unwrap();
/// assert_eq!(total, 285);
/// let report = rt.shutdown_timeout(std::time::Duration::from_secs(5));
/// assert!(report.refused.is_empty());
/// ```
pub struct Runtime {
    handle: Handle,
    threads: Vec<thread::JoinHandle<()>>,
    exited: Arc<Exited>,
    watchdog: Option<Watchdog>,
    done: bool,
}

/// What a shutdown found.
///
/// ```
/// let rt = greenlet::hub::Runtime::new().unwrap();
/// let report = rt.shutdown_timeout(std::time::Duration::from_secs(1));
/// assert!(report.refused.is_empty() && report.blocking_still_running == 0);
/// ```
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Green threads still alive when the timeout passed after they were
    /// cancelled: killed then, force-unwound if they refused again (each
    /// also reported through the log facade).
    pub refused: Vec<TaskInfo>,
    /// Blocking-pool calls still running (their threads are detached).
    pub blocking_still_running: usize,
    /// Pending calls left in the slot, run on the shutting-down thread.
    pub pending_calls_run_at_shutdown: usize,
    /// Worker threads still held by a green thread [`TEARDOWN_GRACE`]
    /// after the deadline (it catches every cancellation in an endless
    /// loop): left running, detached (also reported through the log
    /// facade).
    pub workers_detached: usize,
}

/// The worker threads whose loop and teardown are over (set by each
/// thread as its last step, before its thread-locals go).
#[derive(Default)]
struct Exited {
    done: Mutex<Vec<usize>>,
    changed: Condvar,
}

impl Exited {
    fn note(&self, index: usize) {
        self.done.lock().push(index);
        self.changed.notify_all();
    }

    /// Wait until all of `count` workers are done or `until` passes;
    /// which are done.
    fn wait(&self, count: usize, until: Instant) -> Vec<usize> {
        let mut done = self.done.lock();
        while done.len() < count && !self.changed.wait_until(&mut done, until).timed_out() {}
        done.clone()
    }
}

impl Runtime {
    /// Settings for a new runtime.
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::builder().worker_threads(1).build().unwrap();
    /// assert_eq!(rt.block_on(|| 1 + 1).unwrap(), 2);
    /// ```
    pub fn builder() -> Builder {
        Builder {
            workers: thread::available_parallelism().map_or(1, usize::from),
            stack_size: default_stack_size(),
            blocking_threads: 16,
            watchdog: Some(super::watchdog::DEFAULT_THRESHOLD),
            pending_capacity: 32,
            slot_age: worker::SLOT_AGE,
            fail_on_deadlock: false,
            dump_signal: None,
            io_driver: IoDriver::default(),
        }
    }

    /// A runtime with the default settings.
    ///
    /// # Errors
    /// As [`Builder::build`].
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::new().unwrap();
    /// # drop(rt);
    /// ```
    pub fn new() -> Result<Runtime, HubError> {
        Runtime::builder().build()
    }

    /// A handle for spawning and inspecting from anywhere.
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::new().unwrap();
    /// let h = rt.handle().spawn(|| 3);
    /// assert_eq!(h.join().unwrap(), 3); // a plain thread: blocks
    /// ```
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Run `f` as a green thread and wait for its result (blocking the
    /// calling thread, or parking it if it is itself a green thread).
    ///
    /// # Errors
    /// [`JoinError`] if `f` panicked or was cancelled, or
    /// [`JoinError::Deadlock`] if a deadlock stopped it (only with
    /// [`Builder::fail_on_deadlock`]).
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::new().unwrap();
    /// assert!(rt.block_on(|| panic!("x")).unwrap_err().is_panic());
    /// ```
    #[track_caller]
    pub fn block_on<F, T>(&self, f: F) -> Result<T, JoinError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let shared = &self.handle.shared;
        let h = shared.spawn_at(f, Some("block_on".into()), None, Location::caller());
        let root = Arc::clone(&h.task);
        shared
            .deadlock
            .add_root(h.id(), Box::new(move || root.request_cancel()));
        let (id, out) = (h.id(), h.join());
        match (out, shared.deadlock.remove_root(id)) {
            (Err(e), Some((green_threads, stacks))) if e.is_cancelled() => {
                Err(JoinError::Deadlock {
                    name: "block_on".into(),
                    green_threads,
                    stacks,
                })
            }
            (out, _) => out,
        }
    }

    /// Shut down: cancel every green thread (unstarted ones never start;
    /// started ones get `GreenletExit` at their parking points, so their
    /// destructors run), wait up to `timeout` for them to finish, then kill
    /// what is left (reported as refused, through the log facade and in the
    /// report) and join the worker threads. Unstarted blocking calls are
    /// cancelled; running ones are left to finish on detached threads.
    /// Called from a green thread of this runtime (or dropping the runtime
    /// there), it cannot join that thread's own worker: the shutdown goes on
    /// in a thread of its own, this green thread is cancelled at its next
    /// parking point, and the report returned is empty.
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = greenlet::hub::Runtime::new().unwrap();
    /// let h = rt.handle().spawn(|| greenlet::hub::sleep(Duration::from_secs(3600)));
    /// let report = rt.shutdown_timeout(Duration::from_secs(5));
    /// assert!(report.refused.is_empty());
    /// assert!(h.join().unwrap_err().is_cancelled());
    /// ```
    pub fn shutdown_timeout(mut self, timeout: Duration) -> ShutdownReport {
        self.shutdown(timeout)
    }

    fn shutdown(&mut self, timeout: Duration) -> ShutdownReport {
        self.done = true;
        let shared = Arc::clone(&self.handle.shared);
        begin_shutdown(&shared, timeout);
        let on_own_worker = worker::current().is_some_and(|w| Arc::ptr_eq(&w.shared, &shared));
        if on_own_worker {
            // A worker cannot join itself: finish the shutdown on a thread
            // of its own, and let this green thread be cancelled with the
            // others at its next parking point.
            let threads = std::mem::take(&mut self.threads);
            let watchdog = self.watchdog.take();
            let exited = Arc::clone(&self.exited);
            let spawned = thread::Builder::new()
                .name("hub-shutdown".into())
                .spawn(move || finish_shutdown(&shared, threads, &exited, watchdog));
            if let Err(e) = spawned {
                diag_error!("hub: could not start the thread that finishes a shutdown begun on a worker: {e}");
            }
            return ShutdownReport::default();
        }
        let threads = std::mem::take(&mut self.threads);
        finish_shutdown(&shared, threads, &self.exited, self.watchdog.take())
    }
}

/// Set the shutdown's deadline (the earlier one if it began already) and
/// its flag, and wake every worker to cancel its green threads.
fn begin_shutdown(shared: &Shared, timeout: Duration) {
    let at = Instant::now() + timeout;
    {
        let mut deadline = shared.deadline.lock();
        *deadline = Some(deadline.map_or(at, |d| d.min(at)));
    }
    shared.shutdown.store(true, Ordering::SeqCst);
    for r in shared.workers.iter() {
        r.unpark();
    }
}

/// Join the workers (those done by [`TEARDOWN_GRACE`] past the deadline;
/// the others are detached) and settle what they left: queued tasks,
/// blocking calls, pending calls, the cleanup queue.
fn finish_shutdown(
    shared: &Arc<Shared>,
    threads: Vec<thread::JoinHandle<()>>,
    exited: &Exited,
    watchdog: Option<Watchdog>,
) -> ShutdownReport {
    let deadline = shared.shutdown_deadline().unwrap_or_else(Instant::now);
    let done = exited.wait(threads.len(), deadline + TEARDOWN_GRACE);
    let mut workers_detached = 0;
    for (index, t) in threads.into_iter().enumerate() {
        let name = t.thread().name().unwrap_or("hub-worker").to_string();
        if !done.contains(&index) && !t.is_finished() {
            diag_error!(
                "hub: worker thread {name} is still held {TEARDOWN_GRACE:?} after the shutdown \
                 deadline by a green thread that catches every cancellation; it is left running, \
                 detached (let `GreenletExit` and the hub's cancellation unwind)"
            );
            workers_detached += 1;
            continue;
        }
        if t.join().is_err() {
            diag_error!("hub: worker thread {name} panicked; its green threads are lost");
        }
    }
    loop {
        match shared.injector.steal() {
            Steal::Success(u) => drop(u),
            Steal::Retry => continue,
            Steal::Empty => break,
        }
    }
    for remote in shared.workers.iter() {
        remote.close();
    }
    let blocking_still_running = shared.blocking.shutdown();
    let pending_calls_run_at_shutdown = shared.pending.run_all_here();
    if let Some(q) = shared.cleanup.get() {
        q.drain();
    }
    if let Some(w) = watchdog {
        w.stop();
    }
    ShutdownReport {
        refused: std::mem::take(&mut *shared.refused.lock()),
        blocking_still_running,
        pending_calls_run_at_shutdown,
        workers_detached,
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if !self.done {
            self.shutdown(DROP_SHUTDOWN_TIMEOUT);
        }
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("workers", &self.handle.shared.workers.len())
            .finish()
    }
}

/// A reference to a runtime, usable from any thread: spawn, add pending
/// calls, dump, reach its cleanup queue.
///
/// ```
/// let rt = greenlet::hub::Runtime::new().unwrap();
/// let h = rt.handle().clone();
/// let v = std::thread::spawn(move || h.spawn(|| 5).join().unwrap()).join().unwrap();
/// assert_eq!(v, 5);
/// ```
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

impl Handle {
    /// The runtime of the calling green thread, worker or blocking-pool
    /// thread.
    ///
    /// # Errors
    /// [`HubError::NoRuntime`] elsewhere.
    ///
    /// ```
    /// greenlet::hub::run(|| assert!(greenlet::hub::Handle::current().is_ok())).unwrap();
    /// assert!(greenlet::hub::Handle::current().is_err());
    /// ```
    pub fn current() -> Result<Handle, HubError> {
        worker::current_runtime()
            .map(|shared| Handle { shared })
            .ok_or(HubError::NoRuntime)
    }

    /// Spawn `f` on this runtime from any thread (see [`spawn`](super::spawn)).
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::new().unwrap();
    /// assert_eq!(rt.handle().spawn(|| "hi").join().unwrap(), "hi");
    /// ```
    #[track_caller]
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.shared.spawn_at(f, None, None, Location::caller())
    }

    /// Stop the runtime from anywhere, a green thread of its own
    /// included, without waiting: its shutdown begins as
    /// [`Runtime::shutdown_timeout`]`(timeout)` begins it (every green
    /// thread is cancelled at its next parking point, unstarted ones never
    /// start, spawns from now on end with
    /// [`JoinError::RuntimeShutDown`]), and [`net::serve`](super::net::serve)
    /// loops return `Ok(())`. Whoever owns the [`Runtime`] finishes it: its
    /// [`block_on`](Runtime::block_on) returns (its green thread cancelled
    /// too, unless it returned first), and dropping it or
    /// [`Runtime::shutdown_timeout`] joins the workers, keeping the earlier
    /// of the two deadlines. Calling it again only keeps the earlier
    /// deadline.
    ///
    /// ```
    /// use std::time::Duration;
    /// use greenlet::hub::{self, Handle};
    /// let rt = hub::Runtime::new().unwrap();
    /// let out = rt.block_on(|| {
    ///     hub::spawn(|| Handle::current().unwrap().shutdown(Duration::from_secs(5)));
    ///     hub::sleep(Duration::from_secs(3600)); // cancelled by the shutdown
    /// });
    /// assert!(out.unwrap_err().is_cancelled());
    /// assert!(rt.handle().is_shutting_down());
    /// let report = rt.shutdown_timeout(Duration::from_secs(5));
    /// assert!(report.refused.is_empty());
    /// ```
    pub fn shutdown(&self, timeout: Duration) {
        begin_shutdown(&self.shared, timeout);
    }

    /// Whether this runtime's shutdown has begun ([`Handle::shutdown`],
    /// [`Runtime::shutdown_timeout`], or the runtime dropped).
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::new().unwrap();
    /// let h = rt.handle().clone();
    /// assert!(!h.is_shutting_down());
    /// drop(rt);
    /// assert!(h.is_shutting_down());
    /// ```
    pub fn is_shutting_down(&self) -> bool {
        self.shared.is_shutting_down()
    }

    /// The I/O driver its workers use: [`IoDriver::Epoll`] or
    /// [`IoDriver::IoUring`], never `Auto` (see [`Builder::io_driver`]).
    ///
    /// ```
    /// use greenlet::hub::{IoDriver, Runtime};
    /// let rt = Runtime::builder().worker_threads(1).build().unwrap();
    /// assert_ne!(rt.handle().io_driver(), IoDriver::Auto);
    /// ```
    pub fn io_driver(&self) -> IoDriver {
        self.shared.io_driver
    }

    /// How many worker threads it has.
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::builder().worker_threads(3).build().unwrap();
    /// assert_eq!(rt.handle().worker_threads(), 3);
    /// ```
    pub fn worker_threads(&self) -> usize {
        self.shared.workers.len()
    }

    /// The cleanup queue whose drains run on this runtime's pending-call
    /// slot ([`Policy::Robust`]). A thread that may die with greenlet state
    /// while the runtime runs calls
    /// [`set_thread_queue`](crate::cleanup::set_thread_queue)`(Some(q))`
    /// first; the blocking pool's threads do.
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::new().unwrap();
    /// assert_eq!(rt.handle().cleanup_queue().policy(), greenlet::cleanup::Policy::Robust);
    /// ```
    pub fn cleanup_queue(&self) -> Arc<CleanupQueue> {
        match self.shared.cleanup.get() {
            Some(q) => Arc::clone(q),
            None => crate::cleanup::default_queue(),
        }
    }
}

impl Handle {
    /// Queue `f` to run on one of this runtime's hubs at its next
    /// scheduling point, on a green thread of its own (so it may park).
    /// Callable from any thread. Calls run one at a time, in order, never
    /// nested (see the module doc's rules).
    ///
    /// # Errors
    /// [`HubError::PendingCallsFull`] when the slot holds its capacity.
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::new().unwrap();
    /// let (tx, rx) = greenlet::hub::channel(1);
    /// rt.handle().add_pending_call(move || tx.send("ran").unwrap()).unwrap();
    /// assert_eq!(rx.recv().unwrap(), "ran");
    /// ```
    pub fn add_pending_call(&self, f: impl FnOnce() + Send + 'static) -> Result<(), HubError> {
        add_call(&self.shared, Box::new(f), false)
    }

    /// A cleanup-queue scheduler that drains on this runtime's pending-call
    /// slot (the one [`cleanup_queue`](Handle::cleanup_queue) uses).
    ///
    /// ```
    /// use greenlet::cleanup::{CleanupQueue, Policy};
    /// let rt = greenlet::hub::Runtime::new().unwrap();
    /// let q = CleanupQueue::new(Policy::Robust, std::sync::Arc::new(rt.handle().cleanup_scheduler()));
    /// assert_eq!(q.metrics().drains_run, 0);
    /// ```
    pub fn cleanup_scheduler(&self) -> HubScheduler {
        HubScheduler::new(&self.shared)
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("workers", &self.shared.workers.len())
            .field("tasks", &self.shared.registry.len())
            .finish()
    }
}

/// Run `f` as a green thread on a new runtime with the default settings,
/// return its result, and shut the runtime down.
///
/// It is meant for a program's `main` or a test. Called from a green
/// thread it starts a second runtime: the caller parks while `f` runs,
/// then holds its own worker without parking while the second runtime's
/// workers stop (the watchdog may report that); inside a runtime,
/// [`spawn`](super::spawn) and [`join`](super::JoinHandle::join) run `f`
/// on the runtime already there.
///
/// # Errors
/// [`HubError`] if the runtime cannot start or `f` panicked.
///
/// ```
/// assert_eq!(greenlet::hub::run(|| 40 + 2).unwrap(), 42);
/// ```
#[track_caller]
pub fn run<F, T>(f: F) -> Result<T, HubError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let rt = Runtime::new()?;
    let out = rt.block_on(f)?;
    Ok(out)
}
