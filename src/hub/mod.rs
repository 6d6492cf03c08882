//! The hub: green threads scheduled over OS threads.
//!
//! A [`Runtime`] runs worker OS threads, each with one hub: a scheduler loop
//! on the thread's own stack (its main greenlet). Green threads are
//! greenlets whose parent is their hub; they run blocking-style code, and
//! wherever they would block — [`sleep`], a channel receive, a join, a
//! [`Mutex`], a future in [`block_on`] — they **park**: switch to their hub,
//! which runs another. A **wake** (a [`std::task::Waker`], `Send + Sync`)
//! puts the green thread back on its hub's ready queue: directly from its
//! own worker, through the worker's remote queue (and an unpark of its
//! poller, if it sleeps) from anywhere else.
//!
//! ```
//! use greenlet::hub;
//! let total = hub::run(|| {
//!     let (tx, rx) = hub::channel(16);
//!     for i in 0..4u64 {
//!         let tx = tx.clone();
//!         hub::spawn(move || {
//!             hub::sleep(std::time::Duration::from_millis(1));
//!             tx.send(i).unwrap();
//!         });
//!     }
//!     drop(tx);
//!     rx.iter().sum::<u64>()
//! })
//! .unwrap();
//! assert_eq!(total, 6);
//! ```
//!
//! # Where green threads run
//! **A started green thread never leaves its worker thread**, so its stack
//! may hold `Rc`s, `RefCell` borrows and thread-local references. Only
//! closures that have not started move: [`spawn`] takes a `Send` closure.
//! On a runtime of several workers, a green thread's newest spawn waits in
//! its worker's newest-spawn slot, and starts there at the spawner's next
//! park or yield, so a task and the task it spawned to talk to or to join
//! share a worker; a newer spawn moves the older one to the worker's
//! `crossbeam-deque`, where idle workers steal in batches, and an idle
//! worker takes the slot's task too once the spawner has not come back to
//! its hub for a few tens of microseconds (it spins or computes; about a
//! millisecond on a crowded machine). Except a spawn after an accept: the
//! first spawn of a green thread after it accepted a connection is dealt
//! out over the workers in turn (passing over a stalled or clearly more
//! loaded worker), so an accept loop ([`net::serve`] or
//! one written by hand) spreads its handlers. From outside the runtime a spawn goes to
//! the runtime's injector.
//! [`spawn_local`] takes any closure and starts it on the calling worker.
//!
//! # Parking points and cancellation
//! The parking points are: [`sleep`], [`sleep_until`], [`yield_now`],
//! [`JoinHandle::join`], [`TaskGroup::join_next`]/[`join_all`](TaskGroup::join_all),
//! channel `recv`/`recv_timeout`/`send` (when a bounded channel is full),
//! [`select`] (over channels, joins, events, semaphores, deadlines,
//! signals and socket readiness), [`Event::wait`], [`Mutex::lock`], [`Semaphore::acquire`] (and `acquire_owned`),
//! [`block_on`] while its future is pending, every wait of a [`net`] socket
//! or [`net::Fd`], [`signal::Signals::recv`], and [`process::Child::wait`]
//! (with the `process` calls built on it). They are the **only**
//! cancellation points: [`JoinHandle::cancel`] (a kill) raises
//! `GreenletExit` at the green thread's parking point, which unwinds its
//! stack (its destructors run) and ends it with [`JoinError::Cancelled`]; a
//! green thread that never parks is never interrupted. A [`timeout`]
//! elapses the same way, at a parking point inside it. A destructor run by
//! that unwind may itself park (to lock a `Mutex`, say): it is not
//! cancelled again.
//!
//! A green thread that holds its worker without parking (a blocking system
//! call, a long computation) stops every other green thread of that worker;
//! move such work to [`spawn_blocking`]. The watchdog
//! ([`Builder::watchdog`], 100 ms by default) reports it through the log
//! facade, naming the green thread and where it was spawned, and reports
//! again when the worker comes back, saying after how long. A panic in a
//! green thread is printed under the green thread's name, id and spawn
//! site (see `panic_name`). [`Handle::metrics`] takes a [`Metrics`]
//! snapshot: green threads by state, each worker's counters, the blocking
//! pool. The watchdog's reports, the deadlock report and the network
//! layer's warnings go through the `log` facade, or to stderr while no
//! logger is installed (see [`crate::set_stderr_fallback`]); a
//! [`Builder::fail_on_deadlock`] runtime also returns its
//! [`JoinError::Deadlock`].
//!
//! # Timers and the poller
//! Each worker has its own timers (a hierarchical timing wheel with a 1 ms
//! tick: a deadline fires at the first scheduling point after the end of
//! its millisecond, never early; see `timer`) and its own poller (epoll
//! through a `mio::Poll`, or an io_uring ring: see [`IoDriver`]). An
//! idle worker sleeps in its poller until the next timer's deadline or a wake;
//! a busy one polls without waiting every 61 rounds so I/O sources
//! registered with it are not starved. The network layer
//! registers sockets with the poller of the worker their green thread lives
//! on.
//!
//! # Errors
//! A green thread whose stack cannot be mapped (the kernel's
//! `vm.max_map_count` caps guarded stacks near 32k) ends with
//! [`JoinError::NoStack`], which names the limit and the sysctl; the
//! runtime keeps running. A panic in a green thread is caught at its root
//! and reaches its [`JoinHandle`] as [`JoinError::Panicked`], never the
//! worker. Functions that need a runtime return [`HubError::NoRuntime`]
//! outside one (`task().spawn(..)`, [`Handle::current`], [`dump`]); those
//! whose signature cannot carry it ([`spawn`], [`spawn_local`],
//! [`spawn_blocking`]) panic with a message saying what to call instead.
//! Parking functions work on plain threads too (they block the thread).
//!
//! # Shutdown
//! [`Runtime::shutdown_timeout`] (and dropping the runtime) cancels every
//! green thread, waits for them to unwind, kills what is left after the
//! timeout (reported, not dropped silently), and joins the workers.
//! The timeout holds whatever a green thread does at a parking point (a
//! park on a worker whose loop has ended raises the cancellation at once;
//! a worker still held [`TEARDOWN_GRACE`] past the deadline is detached
//! and reported). [`Handle::shutdown`] begins the same shutdown from
//! inside, without waiting: [`net::serve`] then returns `Ok(())`, and the
//! runtime's owner finishes it.
//!
//! # The pending-call slot
//! [`Handle::add_pending_call`] queues a call from any thread to run at a
//! hub's next scheduling point, and the runtime's cleanup queue drains on
//! it; see `pending` for the rules.
//!
//! # Where things are
//! From the bottom up; a file uses only files listed before it, with one
//! exception: the calls the worker's loop makes into layers above it (at a scheduling
//! point the pending-call drain, `pending_drain::scheduling_point`, and
//! the poller's readiness events, `net::dispatch`; before a sleep with no
//! timer, the deadlock check's `deadlock::is_certain_wait` and
//! `deadlock::report`):
//! - building blocks that know no task: `error`, `spin_lock` (the lock of
//!   a task's outcome, the registry and the sync types), `ready` (a
//!   worker's ready queue), `inbox` (its remote wake queue), `spawn_slot`
//!   (its newest-spawn slot), `idle` (its idle policy), `output` (a task's
//!   value), `scopes` (`timeout` deadlines), `unwind` (the cancellation and
//!   timeout payloads), `task_state`, `task_info`, `local_table` (a green
//!   thread's task-local values), `pending` (the pending-call slot's
//!   rules), `blocking_pool` (its state), `counters` (a worker's metric
//!   counters), `deadlock_latch` (what a runtime remembers of deadlocks);
//! - the task's data: `task_body` (its closure until it starts, generic in
//!   the closure's argument), `registry` (every task of a runtime, generic
//!   in the task it lists), `task_header` (the `Task` header, which holds
//!   its runtime's shared state with the type erased: that state lists and
//!   queues tasks), `unstarted` (the token that runs the closure),
//!   `worker::remote` (the part of a worker other threads reach) and
//!   `shared` (what a runtime's workers, handles and tasks share);
//! - `timer`, `task_pool`, then `worker` (the scheduler: its loop,
//!   placement and stealing, the switch into a green thread, hand-offs,
//!   wakes, teardown);
//! - what green threads call: `stack_capture` (both sides of a dump's
//!   capture of a parked stack), `park`, `time`, `wait` (wait lists), `join`
//!   ([`JoinHandle`]), `spawning` ([`spawn`], [`task()`]), `task_local`
//!   ([`LocalKey`]), `pending_drain`, `channel`, `sync`, `future`, `stacks`
//!   (the [`Dump`] with stacks, and the dump on a signal, which uses
//!   [`signal`], itself using only `future`), `deadlock` (the deadlock
//!   report), `watchdog` (with `stall_stacks`, the stacks of a stalled
//!   worker's green threads, read off its thread by `stall_sample`, a
//!   signal taking its registers, and `stall_unwind`, an unwinder reading
//!   this process's memory through the kernel), `panic_name` (the panic hook), `runtime`
//!   ([`Runtime`], [`Handle`]), `blocking`, `group`, `introspect`
//!   ([`dump`], [`tasks`]), `metrics` ([`Metrics`]), and the public
//!   [`net`]
//!   (TCP, UDP and Unix sockets and any descriptor, parking), [`signal`]
//!   (Unix signals received by parking) and [`process`] (child processes
//!   waited for and read by parking);
//! - `selecting` ([`select`] over every source above that parks).
//!
//! Uses [`crate::coroutine`] (its public API, and the crate-private lean
//! switch of `coroutine::direct`), the crate's closure store
//! (`crate::erased`) and [`crate::cleanup`]; knows nothing of the CPython
//! model.

mod blocking;
mod blocking_pool;
mod channel;
mod counters;
mod deadlock;
mod deadlock_latch;
mod driver;
mod error;
mod frame_fold;
mod future;
mod group;
mod idle;
mod inbox;
mod introspect;
mod join;
mod local_table;
mod metrics;
pub mod net;
mod output;
mod panic_name;
mod park;
pub(crate) mod pending;
mod pending_drain;
pub mod process;
mod ready;
mod registry;
mod runtime;
mod scopes;
mod selecting;
mod shared;
pub mod signal;
mod spawn_slot;
mod spawning;
mod spin_lock;
mod stack_capture;
mod stack_dump;
mod stacks;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod stall_sample;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod stall_stacks;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod stall_unwind;
mod sync;
mod task_body;
mod task_header;
mod task_info;
mod task_local;
mod task_pool;
mod task_state;
mod time;
mod timer;
mod unstarted;
mod unwind;
mod wait;
mod watchdog;
mod worker;

pub use self::blocking::spawn_blocking;
pub use self::channel::{
    channel, oneshot, unbounded, IntoIter, Iter, OneshotReceiver, OneshotSender, Receiver,
    RecvError, RecvTimeoutError, SendError, Sender, TryRecvError, TrySendError,
};
pub use self::driver::{IoDriver, IO_DRIVER_ENV};
pub use self::error::{Elapsed, HubError, JoinError};
pub use self::future::block_on;
pub use self::group::TaskGroup;
pub use self::introspect::{dump, tasks};
pub use self::join::JoinHandle;
pub use self::metrics::{metrics, Metrics, WorkerMetrics};
pub use self::pending_drain::HubScheduler;
pub use self::runtime::{
    run, Builder, Handle, Runtime, ShutdownReport, DROP_SHUTDOWN_TIMEOUT,
    MAX_PENDING_CALL_CAPACITY, MAX_WORKER_THREADS, TEARDOWN_GRACE,
};
pub use self::selecting::{select, Selectable, Watch};
pub use self::spawning::{spawn, spawn_local, task, TaskBuilder, MIN_STACK_SIZE};
pub use self::stack_dump::{Dump, TaskStack, DUMP_ANSWER_WITHIN};
pub use self::sync::{Event, Mutex, MutexGuard, OwnedSemaphorePermit, Semaphore, SemaphorePermit};
pub use self::task_info::TaskInfo;
pub use self::task_local::LocalKey;
pub use self::task_state::{TaskState, Wait};
pub use self::time::{sleep, sleep_until, timeout, timeout_at, yield_now, Deadline};
/// Declare task-local keys: see [`LocalKey`].
pub use crate::task_local;
