//! A runtime's blocking pool ([`BlockingPool`]): the queue of blocking
//! calls and the count of the OS threads that run them, under one lock,
//! and the shutdown that empties it. Generic over the call, so that the
//! runtime's shared state can hold it without this file knowing tasks; the
//! threads themselves (started on demand, each running queued calls until
//! it has waited [`KEEP_ALIVE`] for work) are `blocking`'s.
//!
//! Owns: the pool's state and its shutdown. Uses `parking_lot`.

use std::collections::VecDeque;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

/// How long an idle pool thread waits for work before it exits.
pub(crate) const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// The pool's state, under its lock.
pub(crate) struct PoolState<J> {
    /// Calls waiting for a thread.
    pub(crate) jobs: VecDeque<J>,
    /// Threads running (busy or idle).
    pub(crate) threads: usize,
    /// Threads waiting for a call.
    pub(crate) idle: usize,
    /// Set at the runtime's shutdown: no call is taken any more.
    pub(crate) shutdown: bool,
    /// Threads started so far (for their names).
    pub(crate) started: usize,
}

/// A runtime's blocking threads, running calls of type `J`.
pub(crate) struct BlockingPool<J> {
    pub(crate) state: Mutex<PoolState<J>>,
    /// Signalled when a call is queued (and at the shutdown).
    pub(crate) work: Condvar,
    /// Threads at most.
    pub(crate) max: usize,
}

impl<J> BlockingPool<J> {
    pub(crate) fn new(max: usize) -> BlockingPool<J> {
        BlockingPool {
            state: Mutex::new(PoolState {
                jobs: VecDeque::new(),
                threads: 0,
                idle: 0,
                shutdown: false,
                started: 0,
            }),
            work: Condvar::new(),
            max,
        }
    }

    /// Refuse new calls, cancel the queued ones, let idle threads go; how
    /// many calls are still running.
    pub(crate) fn shutdown(&self) -> usize {
        let mut st = self.state.lock();
        st.shutdown = true;
        let queued: Vec<J> = st.jobs.drain(..).collect();
        let running = st.threads - st.idle;
        self.work.notify_all();
        drop(st);
        drop(queued);
        running
    }
}
