//! Thread exit: unwind the thread's suspended greenlets, mark every
//! greenlet as belonging to an exited thread, and hand the finalizers to
//! the cleanup queue.
//!
//! Owns the teardown of a [`ThreadState`] (run by its thread-local guard),
//! the thread's [`Remains`] (`ThreadRemains`), and [`UPCALLS`] (what every
//! thread state calls above it: this teardown and the lifecycle's deferred
//! work). Uses the lifecycle (kill, forced unwind, deferred work), the
//! thread state's pending work and registry sweeps,
//! and [`crate::cleanup`], where the remains go: read
//! `cleanup/queue.rs` next for what happens to them.

use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::lifecycle;
use super::record::{run_finalizers, Finalizer, Record};
use super::thread_link::ThreadLink;
use super::thread_state::{self, ThreadState, Upcalls};
use crate::cleanup::Remains;

/// How many times thread exit throws `GreenletExit` into survivors before it
/// falls back to a forced unwind (`Fiber::force_unwind`).
const EXIT_KILL_ROUNDS: usize = 3;

/// What a thread leaves behind: the finalizers of its main greenlet and of
/// the greenlets that were finalized with it.
/// Its label is spelled out only when asked for (once per drain).
struct ThreadRemains {
    link: Arc<ThreadLink<Arc<Record>>>,
    finalizers: Vec<Finalizer>,
}

impl Remains for ThreadRemains {
    fn destroy(self: Box<Self>) {
        // Every finalizer ran; re-raise the first panic so that the queue
        // counts it.
        let ThreadRemains { link, finalizers } = *self;
        if let Some(panic) = run_finalizers(finalizers, || remains_label(&link)) {
            std::panic::resume_unwind(panic);
        }
    }
    fn label(&self) -> String {
        remains_label(&self.link)
    }
}

/// The label of the remains of `link`'s thread.
fn remains_label(link: &ThreadLink<Arc<Record>>) -> String {
    format!("main greenlet of thread {}", link.label)
}

/// What every thread's state calls above it: this file's teardown, and the
/// lifecycle's deferred work. Given to the state where it is created
/// (`handle.rs`, `thread_trace.rs`).
pub(crate) static UPCALLS: Upcalls = Upcalls {
    teardown,
    deferred_work: lifecycle::do_deferred_work,
};

/// Thread exit: unwind the suspended greenlets in this thread, mark every
/// greenlet as belonging to an exited thread, hand the finalizers to the
/// cleanup queue, free the state.
///
/// # Safety
/// `ts` is this thread's live state, and the caller is its thread-local
/// guard (`thread_state`), once.
pub(crate) unsafe fn teardown(ts: *mut ThreadState) {
    // SAFETY: (whole function) `ts` is live until the `Box::from_raw` at the
    // end; every access below is a short-lived one through the pointer.
    unsafe {
        let mut finalized: Vec<Arc<Record>> = Vec::new();
        // The stack this teardown runs on (a greenlet's, from `exit()`: then
        // leaked with it), reported by the overflow handler after `detach`.
        let running_on = thread_state::running_stack();
        // `exit()` called from a greenlet runs this teardown on that
        // greenlet's stack, with main suspended in the middle of its code: a
        // victim that caught a thrown exit and switched to main would resume
        // main's code inside `exit()`. There the greenlets are only
        // force-unwound (their destructors run; a switch meanwhile fails).
        let first_round = if ptr::eq((*ts).current, Arc::as_ptr(&(*ts).main)) {
            0
        } else {
            EXIT_KILL_ROUNDS
        };
        for round in first_round..=EXIT_KILL_ROUNDS {
            thread_state::do_pending_work(ts);
            let victims = ThreadState::registered(ts, false);
            if victims.is_empty() {
                break;
            }
            for record in victims {
                if !record.flags().is_dead() {
                    if round < EXIT_KILL_ROUNDS && !record.flags().is_leaked() {
                        // The outcome is checked by the next round.
                        let _ = lifecycle::kill(ts, &record);
                    } else {
                        lifecycle::force_unwind(ts, &record);
                    }
                }
                finalized.push(record);
            }
        }
        // Survivors made during the last round: one last forced sweep.
        let late = ThreadState::registered(ts, false);
        for record in late {
            lifecycle::force_unwind(ts, &record);
            finalized.push(record);
        }
        thread_state::do_pending_work(ts);
        // Dead greenlets whose handles outlive the thread now live by those
        // handles only; spare records go (records recycled later in this
        // teardown are dropped after the state is unreachable, below).
        ThreadState::drain_spare(ts);
        ThreadState::release_dead_registered(ts);

        // From now on, every greenlet of this thread is "of an exited thread".
        let mail = {
            let mut inbox = ThreadState::link(ts).inbox.lock();
            ThreadState::link(ts).alive.store(false, Ordering::Release);
            std::mem::take(&mut *inbox)
        };
        finalized.extend(mail);
        (*ts).main.mark_dead();

        let link = Arc::clone(&(*ts).link);
        let mut finalizers: Vec<Finalizer> = (*ts).main.take_finalizers().into_iter().collect();
        for record in &finalized {
            finalizers.extend(record.take_finalizers());
        }
        drop(finalized);
        let queue = Arc::clone(&(*ts).queue);

        thread_state::detach(running_on);
        // Their drop is counted globally now, the state being unreachable.
        ThreadState::drain_spare(ts);
        (*ts).records.retire();
        // Fields may hold user values (trace hook, slot): dropped with the
        // state already unreachable.
        drop(Box::from_raw(ts));
        queue.push(Box::new(ThreadRemains { link, finalizers }));
    }
}
