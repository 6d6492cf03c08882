//! The blocking pool: a bounded set of OS threads for calls that block
//! ([`spawn_blocking`]). A green thread joins the result by parking, so its
//! hub keeps running other green threads meanwhile.
//!
//! Owns: [`spawn_blocking`]; the pool itself is `blocking_pool`'s. Uses
//! the task header (a
//! blocking call is a task without a greenlet, so it has a `JoinHandle`,
//! shows in `dump`, and can be cancelled before it starts), the runtime's
//! thread-local context, and the cleanup queue (each pool thread's greenlet
//! state goes to the runtime's queue when the thread exits).

use std::panic::Location;
use std::sync::Arc;
use std::thread;

use crate::cleanup::set_thread_queue;

use super::blocking_pool::KEEP_ALIVE;
use super::error::JoinError;
use super::join::JoinHandle;
use super::runtime::Handle;
use super::shared::{enter, Shared};
use super::spawning::NewTask;
use super::unstarted::Unstarted;

/// Run the blocking `f` on the runtime's blocking pool (a bounded set of OS
/// threads, started on demand); join its handle from a green thread to
/// park until it is done without holding up the hub. Calls beyond the
/// pool's threads ([`Builder::max_blocking_threads`](super::Builder::max_blocking_threads),
/// default 16) wait in its queue. `cancel()` on the handle only stops a
/// call that has not started.
///
/// A join that stops waiting (its green thread cancelled, or a
/// [`timeout`](super::timeout) around it elapsed) detaches the call, which
/// runs on to its end. So a bound on the calls held by the joiner (a
/// [`Semaphore`](super::Semaphore) permit taken around the join) comes back
/// while its call still runs: move an
/// [`OwnedSemaphorePermit`](super::OwnedSemaphorePermit) into the call
/// instead ([`Semaphore::acquire_owned`](super::Semaphore::acquire_owned)
/// shows how).
///
/// # Panics
/// Outside a runtime; [`Handle::spawn_blocking`] never does.
///
/// ```
/// let v = greenlet::hub::run(|| {
///     let h = greenlet::hub::spawn_blocking(|| std::fs::metadata("/").is_ok());
///     h.join().unwrap()
/// })
/// .unwrap();
/// assert!(v);
/// ```
#[track_caller]
pub fn spawn_blocking<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let site = Location::caller();
    match Handle::current() {
        Ok(h) => h.spawn_blocking_at(f, site),
        Err(e) => panic!("greenlet::hub::spawn_blocking: {e}"),
    }
}

impl Handle {
    /// Run `f` on this runtime's blocking pool (see [`spawn_blocking`]).
    ///
    /// ```
    /// let rt = greenlet::hub::Runtime::new().unwrap();
    /// assert_eq!(rt.handle().spawn_blocking(|| 2 + 2).join().unwrap(), 4);
    /// ```
    #[track_caller]
    pub fn spawn_blocking<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn_blocking_at(f, Location::caller())
    }

    fn spawn_blocking_at<F, T>(&self, f: F, site: &'static Location<'static>) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let shared = &self.shared;
        let (job, handle) = NewTask {
            shared,
            name: Some("blocking".into()),
            stack_size: None,
            site,
            shard: shared.workers.len(),
        }
        .build(f);
        submit(shared, job);
        handle
    }
}

/// Queue the blocking call `job` on `shared`'s pool, starting a thread for
/// it when none is idle and the pool is below its size.
fn submit(shared: &Arc<Shared>, job: Unstarted) {
    let pool = &shared.blocking;
    let mut st = pool.state.lock();
    if st.shutdown {
        drop(st);
        drop(job);
        return;
    }
    st.jobs.push_back(job);
    if st.idle > 0 {
        pool.work.notify_one();
        return;
    }
    if st.threads >= pool.max {
        return;
    }
    st.threads += 1;
    st.started += 1;
    let n = st.started;
    drop(st);
    let s = Arc::clone(shared);
    let spawned = thread::Builder::new()
        .name(format!("hub-blocking-{n}"))
        .spawn(move || pool_thread(s));
    if let Err(e) = spawned {
        let mut st = pool.state.lock();
        st.threads -= 1;
        if st.threads == 0 {
            let failed: Vec<Unstarted> = st.jobs.drain(..).collect();
            drop(st);
            for job in failed {
                let task = job.into_task();
                task.finish(Some(JoinError::NoThread {
                    name: task.name(),
                    reason: e.to_string(),
                }));
            }
        }
    }
}

/// A pool thread: runs queued calls until the shutdown, or until it waited
/// [`KEEP_ALIVE`] for one.
fn pool_thread(shared: Arc<Shared>) {
    set_thread_queue(shared.cleanup.get().cloned());
    enter(&shared);
    let pool = &shared.blocking;
    loop {
        let job = {
            let mut st = pool.state.lock();
            loop {
                if let Some(job) = st.jobs.pop_front() {
                    break Some(job);
                }
                if st.shutdown {
                    break None;
                }
                st.idle += 1;
                let timed_out = pool.work.wait_for(&mut st, KEEP_ALIVE).timed_out();
                st.idle -= 1;
                if timed_out && st.jobs.is_empty() {
                    break None;
                }
            }
        };
        let Some(job) = job else { break };
        if job.task().cancel_requested() {
            drop(job);
            continue;
        }
        job.task().set_blocking();
        job.run();
    }
    pool.state.lock().threads -= 1;
}
