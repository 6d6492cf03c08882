//! The part of a worker that other threads reach ([`Remote`]): its remote
//! wake queue and placed tasks (the inbox), its sleep flag and the poller's
//! unparker, its stealer, its newest-spawn slot, the watchdog's
//! counters, the idle policy's state and the metrics' counters.
//!
//! Owns: the cache-line layout of those parts and the unpark handshake of
//! the waker's side. Uses the inbox, the newest-spawn slot and the idle
//! policy; nothing of the worker's own thread.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_deque::Stealer;
use crossbeam_utils::CachePadded;

use crate::diag::diag_warn;

use super::super::counters::Counters;
use super::super::driver::Unparker;
use super::super::idle::Idle;
use super::super::inbox::Inbox;
use super::super::spawn_slot::Newest;
use super::super::task_header::Task;
use super::super::unstarted::Unstarted;

/// The part of a worker that other threads reach, laid out by who writes
/// what: a waker on another CPU writes the [`Inbox`] and reads the rest;
/// the owner writes `tick` and `running` at every resume and `idle` at
/// every spin. Each part has cache lines of its own (`CachePadded`), so a
/// cross-thread wake moves the inbox's line between the two CPUs and
/// nothing else of the worker's (the two-worker ping-pong crosses threads
/// twice per round trip), the lines other workers read in every round
/// (`stealer`) are never written, and the workers' `Remote`s, side by side
/// in one slice, share no line.
#[repr(C)]
pub(crate) struct Remote {
    /// Tasks woken for this worker and tasks placed on it by other threads
    /// (see [`super::super::inbox`]): one cache line.
    pub(super) inbox: CachePadded<Inbox<Task, Unstarted>>,
    /// In (or about to enter) a waiting poll; cleared by whoever unparks
    /// it. Not in the inbox's line: a waker reads it right after its push,
    /// when the owner, spinning, may already have taken that line back
    /// (the read then waited for it, a third of `push`'s samples).
    pub(super) sleeping: CachePadded<AtomicBool>,
    /// Bumped at every resume of a green thread (read by the watchdog).
    pub(crate) tick: CachePadded<AtomicU64>,
    /// The id of the green thread running now, 0 while in the hub.
    pub(crate) running: CachePadded<AtomicU64>,
    /// Read by other threads, written by nobody after the start: its line
    /// stays in every reader's cache (every round of every other worker's
    /// loop reads `stealer`).
    pub(super) waker: Unparker,
    pub(crate) stealer: Stealer<Unstarted>,
    /// The metrics' counters, written by the owner (off the switch path),
    /// read by a snapshot: lines of their own, behind a pointer, so that
    /// `Remote` keeps its size (a larger one moved the index arithmetic of
    /// every wake and park: `hub_hot_loops --op ping-pong` under callgrind
    /// shows it).
    pub(crate) counters: Box<CachePadded<Counters>>,
    /// The newest task a green thread of this worker spawned, which the
    /// worker starts at its next scheduling point; other workers take it
    /// only once it aged (see [`Worker::push_unstarted`](super::Worker::push_unstarted)). Written by the
    /// owner at a spawn and a start, read by idle workers at every look:
    /// a line of its own.
    pub(crate) newest: CachePadded<Newest<Unstarted>>,
    /// The idle policy's state (whether it spins, where it runs): written
    /// by the owner at every spin, so not on the line of `stealer`.
    pub(crate) idle: CachePadded<Idle>,
    /// Asleep with no timer (set by the owner before such a sleep, cleared
    /// after it): what the deadlock check reads of the other workers.
    pub(super) forever: AtomicBool,
}

impl Remote {
    pub(crate) fn new(waker: Unparker, stealer: Stealer<Unstarted>) -> Remote {
        Remote {
            inbox: CachePadded::new(Inbox::default()),
            sleeping: CachePadded::new(AtomicBool::new(false)),
            tick: CachePadded::new(AtomicU64::new(0)),
            running: CachePadded::new(AtomicU64::new(0)),
            waker,
            stealer,
            counters: Box::new(CachePadded::new(Counters::new())),
            newest: CachePadded::new(Newest::default()),
            idle: CachePadded::new(Idle::default()),
            forever: AtomicBool::new(false),
        }
    }

    /// Queue a woken task from another thread and unpark the worker if it
    /// sleeps. A worker that has ended takes no task: the task is dropped
    /// here (see [`close`](Self::close)).
    pub(super) fn push(&self, task: Arc<Task>) {
        if self.inbox.push(task).is_err() {
            return;
        }
        // No fence: the push's `SeqCst` announcement and the `SeqCst` load
        // of `sleeping` after it, against the owner's `SeqCst` store of
        // `sleeping` and its `SeqCst` loads of the inbox (see `idle`), are
        // all in the one total order of `SeqCst` operations, so at least
        // one side sees the other's (on x86 the announcement is a locked
        // instruction, a full barrier: a fence after it only cost time).
        self.unpark_if_marked_sleeping();
    }

    /// Queue an unstarted task that must start on this worker (another
    /// worker's accept loop spreading its connections, see
    /// `net::serve`), and unpark the worker if it sleeps. The worker moves
    /// it to its own line of new tasks, which no other worker steals
    /// from, so it starts here (unless the runtime shuts down first: then
    /// it is dropped unstarted, as a refused spawn is).
    ///
    /// # Errors
    /// The task back, unstarted, once the worker has ended (its inbox is
    /// [closed](Self::close)): the caller drops it (it finishes as
    /// cancelled) outside any lock of the inbox.
    pub(crate) fn place(&self, u: Unstarted) -> Result<(), Unstarted> {
        self.inbox.place(u)?;
        self.unpark_if_sleeping();
        Ok(())
    }

    /// The worker has ended: drop the woken and placed tasks it did not
    /// take, and refuse later ones (a task left here would hold the
    /// runtime's `Shared`, which holds this inbox: a leak of the task and
    /// of everything it holds). The placed ones finish as cancelled.
    pub(crate) fn close(&self) {
        self.inbox.close();
    }

    /// Wake the worker if it is in (or entering) its waiting poll. Only the
    /// caller that clears `sleeping` writes to the waker.
    pub(crate) fn unpark_if_sleeping(&self) -> bool {
        fence(Ordering::SeqCst);
        self.unpark_if_marked_sleeping()
    }

    /// [`unpark_if_sleeping`](Self::unpark_if_sleeping) for a caller whose
    /// announcement of work was a `SeqCst` store, ordered with the load of
    /// `sleeping` without a fence.
    #[inline]
    pub(super) fn unpark_if_marked_sleeping(&self) -> bool {
        let sleeping = &self.sleeping;
        if sleeping.load(Ordering::SeqCst)
            && sleeping
                .compare_exchange(true, false, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            self.unpark();
            return true;
        }
        false
    }

    /// Wake the worker's poll unconditionally.
    pub(crate) fn unpark(&self) {
        if let Err(e) = self.waker.wake() {
            diag_warn!("hub: could not wake a worker's poller: {e}");
        }
    }
}
