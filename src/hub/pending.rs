//! The hub's native pending-call slot: its rules, and the live slot a
//! runtime holds. The drain on a hub, `Handle::add_pending_call` and the
//! cleanup queue's scheduler on the slot are `pending_drain`'s.
//!
//! Owns: the rules as pure steps ([`Ring`], [`Flags`], [`wants_drain`],
//! [`drain_goes_on`], [`end_drain`]), [`PendingCalls`] (the live slot built
//! on them: the ring under a lock, atomic flags) and the running of one
//! call. Uses nothing of the scheduler.
//! The explorer's Hub host (`interp_shim::explore::hub`) calls the same
//! pure steps over every interleaving; this module knows nothing of it.
//!
//! # The rules (a host for the explorer, beside CPython 3.11/3.12/3.13)
//! State, per runtime: `ring` (FIFO, at most `capacity` calls), `has_calls`
//! (a flag) and `busy` (a flag). All of `ring` and `has_calls` change under
//! one lock; `busy` is an atomic.
//! 1. **add(f)**, from any thread, with no other condition (CPython 3.12+'s
//!    `_PyEval_AddPendingCall` also needs no GIL): under the lock, if the
//!    ring holds `capacity` calls, fail with
//!    [`HubError::PendingCallsFull`] and change nothing; else push `f`
//!    at the back and set `has_calls`. After the lock: wake one idle worker.
//! 2. **Scheduling point**: the top of each round of a worker's loop (before
//!    any task is started or resumed, so also before a worker sleeps). If
//!    `has_calls` is set and a compare-and-swap of `busy` from false to true
//!    succeeds, the worker starts the **drain** as a green thread ahead of
//!    every other task; otherwise it goes on (a drain runs elsewhere or
//!    nothing waits). A worker about to sleep re-reads the flags and does
//!    not sleep while `has_calls` is set and `busy` is clear (a drain could
//!    start). While `busy` is set it may sleep: the drain's end wakes a
//!    worker if calls wait (rule 3). Not sleeping while `busy` is set would
//!    make every idle worker spin for as long as a call parks, since
//!    `has_calls` stays set until the drain's next pop (the explorer's
//!    `spin-while-busy`). Once the runtime is shutting down no drain starts
//!    (the worker drops every task started then, unrun: a drain started
//!    each round and dropped each round kept `has_calls` set and the worker
//!    in its loop for ever, the explorer's `drain-at-shutdown`); rule 6
//!    runs what is queued.
//! 3. **Drain**: up to `capacity` times: under the lock pop the front call;
//!    if there is none, clear `has_calls` (still under the lock) and stop;
//!    else run the call outside the lock (a panic is caught and reported).
//!    Then clear `busy`. A drain that ran `capacity` calls leaves
//!    `has_calls` set, so the next scheduling point starts a new drain:
//!    calls added while draining cannot keep one drain going forever.
//! 4. **Re-entry**: a call runs on the drain's green thread, so it may park;
//!    the worker then reaches scheduling points while `busy` is set, and by
//!    rule 2 starts no second drain: calls never nest, on any worker.
//! 5. **Failure to start**: if the drain's greenlet cannot get a stack, its
//!    closure is dropped unrun, which clears `busy` (the calls stay queued
//!    for the next point).
//! 6. **Shutdown**: calls still queued when the workers have exited run on
//!    the thread that shuts the runtime down, in order; the pop that finds
//!    the ring empty also closes it (under the lock), and an add to a
//!    closed ring fails with [`HubError::ShuttingDown`]. Without the close,
//!    an add that passed the shutting-down check before shutdown began and
//!    took the lock after the last pop would be accepted and never run
//!    (the explorer's `no-close` counterexample).
//! 7. **The cleanup queue's call** (added by [`HubScheduler`](super::HubScheduler)) is rule 1
//!    without the capacity check: it is refused only by a closed slot. Its
//!    count is bounded by the policy instead (one outstanding per queue
//!    under `Scheduled`, `Shielded`, `Robust`). With the capacity counted, a
//!    slot full of other calls when the last thread dies strands its state
//!    under every policy, `Robust` included (a retry needs a later push;
//!    the explorer's `drain-parks` under `cleanup-counted`).
//!
//! Safety: no call is lost (only the drain pops, and it clears `has_calls`
//! only under the lock with the ring empty) and none runs twice; liveness:
//! with any worker alive, a queued call runs after at most one scheduling
//! point past the end of the running drain.
//!
//! The cleanup queue of [`Handle::cleanup_queue`](super::Handle::cleanup_queue) (policy `Robust`)
//! schedules its drains here: `schedule(queue)` adds a call that runs
//! `queue.drain()` (rule 7: a full slot does not refuse it). Once the
//! runtime is shutting down (or gone), `schedule` drains
//! on the calling thread instead, as the `Inline` scheduler does: a thread
//! that outlives the runtime (a blocking call still running at shutdown)
//! still has its state cleaned up.

use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::diag::diag_error;

use super::error::HubError;
use super::unwind::CancelUnwind;

pub(crate) type Call = Box<dyn FnOnce() + Send>;

/// The slot's two flags as the rules see them: read without the lock,
/// `has_calls` written only under it. [`AtomicFlags`] is the live slot's;
/// the explorer's Hub host keeps plain booleans (and, to show that the
/// explorer catches a broken rule, flags that bend one).
pub(crate) trait Flags {
    /// `has_calls`.
    fn has_calls(&self) -> bool;
    /// Write `has_calls` (under the lock: rules 1, 3 and 6).
    fn set_has_calls(&mut self, to: bool);
    /// Compare-and-swap `busy` from false to true: whether it succeeded.
    fn claim_busy(&mut self) -> bool;
    /// Clear `busy`.
    fn release_busy(&mut self);
    /// `busy`.
    fn busy(&self) -> bool;
}

/// Why [`Ring::add`] refused a call; the call is handed back.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused<C> {
    /// Rule 1: the ring holds its capacity.
    Full(C),
    /// Rule 6: the shutdown drain found the ring empty and closed it.
    Closed(C),
}

/// The part of the slot that changes under its lock: the calls, the
/// capacity, and whether the shutdown drain closed it. Each method is one
/// rule's step under the lock; the live slot and the explorer's Hub host
/// both call these, so the explorer checks this code, not a copy.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Ring<C> {
    calls: VecDeque<C>,
    capacity: usize,
    closed: bool,
}

impl<C> Ring<C> {
    /// An empty, open ring of `capacity` calls.
    pub(crate) fn new(capacity: usize) -> Ring<C> {
        Ring {
            calls: VecDeque::with_capacity(capacity),
            capacity,
            closed: false,
        }
    }

    /// Calls waiting (the explorer's Hub host reads it).
    #[cfg(feature = "cpython-model")]
    pub(crate) fn len(&self) -> usize {
        self.calls.len()
    }

    /// How many calls it holds at most (and one drain runs at most).
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Rule 1, under the lock: refuse when full (or closed, rule 6), else
    /// queue `call` at the back and set `has_calls`.
    pub(crate) fn add(&mut self, flags: &mut impl Flags, call: C) -> Result<(), Refused<C>> {
        if self.calls.len() >= self.capacity && !self.closed {
            return Err(Refused::Full(call));
        }
        self.add_cleanup(flags, call)
    }

    /// Rule 7, under the lock: rule 1 without the capacity check.
    pub(crate) fn add_cleanup(
        &mut self,
        flags: &mut impl Flags,
        call: C,
    ) -> Result<(), Refused<C>> {
        if self.closed {
            return Err(Refused::Closed(call));
        }
        self.calls.push_back(call);
        flags.set_has_calls(true);
        Ok(())
    }

    /// Rule 3, under the lock: pop the front call, or clear `has_calls`
    /// when there is none.
    pub(crate) fn pop(&mut self, flags: &mut impl Flags) -> Option<C> {
        let call = self.calls.pop_front();
        if call.is_none() {
            flags.set_has_calls(false);
        }
        call
    }

    /// Rule 6, under the lock: [`pop`](Ring::pop), and close the ring when
    /// it is empty, so that no call can be accepted after the last one ran.
    pub(crate) fn pop_at_shutdown(&mut self, flags: &mut impl Flags) -> Option<C> {
        let call = self.pop(flags);
        if call.is_none() {
            self.closed = true;
        }
        call
    }
}

/// Rule 2's first read: whether a scheduling point should try to start a
/// drain (and whether a worker may not sleep).
pub(crate) fn wants_drain(flags: &impl Flags) -> bool {
    flags.has_calls()
}

/// Rule 2's last read: whether a worker with nothing to run may sleep.
pub(crate) fn may_sleep(flags: &impl Flags) -> bool {
    !flags.has_calls() || flags.busy()
}

/// Rule 3's bound: whether a drain that ran `ran` calls pops another.
pub(crate) fn drain_goes_on(ran: usize, capacity: usize) -> bool {
    ran < capacity
}

/// Rules 3 and 5: the drain ended (or its closure was dropped unrun):
/// clear `busy`; whether calls wait, so an idle worker must be woken.
pub(crate) fn end_drain(flags: &mut impl Flags) -> bool {
    flags.release_busy();
    flags.has_calls()
}

/// The live slot's flags.
struct AtomicFlags {
    has_calls: AtomicBool,
    busy: AtomicBool,
}

impl Flags for &AtomicFlags {
    fn has_calls(&self) -> bool {
        self.has_calls.load(Ordering::SeqCst)
    }
    fn set_has_calls(&mut self, to: bool) {
        self.has_calls.store(to, Ordering::SeqCst);
    }
    fn claim_busy(&mut self) -> bool {
        self.busy
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }
    fn release_busy(&mut self) {
        self.busy.store(false, Ordering::SeqCst);
    }
    fn busy(&self) -> bool {
        self.busy.load(Ordering::SeqCst)
    }
}

/// A runtime's pending-call slot (see the module doc for its rules).
pub(crate) struct PendingCalls {
    ring: Mutex<Ring<Call>>,
    flags: AtomicFlags,
}

impl PendingCalls {
    pub(crate) fn new(capacity: usize) -> PendingCalls {
        PendingCalls {
            ring: Mutex::new(Ring::new(capacity)),
            flags: AtomicFlags {
                has_calls: AtomicBool::new(false),
                busy: AtomicBool::new(false),
            },
        }
    }

    /// Rule 2's first read, the worker loop's cheap test before it enters
    /// [`scheduling_point`](super::pending_drain::scheduling_point).
    #[inline]
    pub(crate) fn wants_drain(&self) -> bool {
        wants_drain(&&self.flags)
    }

    /// Rule 2: whether a worker with nothing to run may sleep.
    pub(crate) fn may_sleep(&self) -> bool {
        may_sleep(&&self.flags)
    }

    /// Rule 1, or rule 7 for the cleanup queue's call (`cleanup`).
    pub(crate) fn add(&self, call: Call, cleanup: bool) -> Result<(), HubError> {
        let mut ring = self.ring.lock();
        let added = if cleanup {
            ring.add_cleanup(&mut &self.flags, call)
        } else {
            ring.add(&mut &self.flags, call)
        };
        match added {
            Ok(()) => Ok(()),
            Err(Refused::Full(_)) => Err(HubError::PendingCallsFull {
                capacity: ring.capacity(),
            }),
            Err(Refused::Closed(_)) => Err(HubError::ShuttingDown),
        }
    }

    /// Rule 3: pop one call, or clear `has_calls` when there is none.
    pub(crate) fn pop(&self) -> Option<Call> {
        self.ring.lock().pop(&mut &self.flags)
    }

    /// Rule 2's claim: whether this worker starts a drain (calls wait and
    /// no drain runs; `busy` is set then).
    pub(crate) fn claim_drain(&self) -> bool {
        wants_drain(&&self.flags) && (&self.flags).claim_busy()
    }

    /// Rule 5: the drain ended; whether calls wait for another.
    pub(crate) fn end_drain(&self) -> bool {
        end_drain(&mut &self.flags)
    }

    /// How many calls the slot holds at most.
    pub(crate) fn capacity(&self) -> usize {
        self.ring.lock().capacity()
    }

    /// Rule 6: run what is left on this thread, then close the slot; how
    /// many ran.
    pub(crate) fn run_all_here(&self) -> usize {
        let mut n = 0;
        loop {
            let next = self.ring.lock().pop_at_shutdown(&mut &self.flags);
            let Some(call) = next else { return n };
            run_call(call);
            n += 1;
        }
    }
}

pub(crate) fn run_call(call: Call) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(call)) {
        if payload.is::<CancelUnwind>() {
            // The drain's green thread was cancelled (a shutdown) while a
            // call parked: the cancellation ends the drain, and the calls
            // still queued run at shutdown (rule 6), not here.
            resume_unwind(payload);
        }
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-string payload".into());
        diag_error!("hub: a pending call panicked: {message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain flags, as a test (and the explorer) keeps them.
    #[derive(Default)]
    struct Plain {
        has_calls: bool,
        busy: bool,
    }

    impl Flags for Plain {
        fn has_calls(&self) -> bool {
            self.has_calls
        }
        fn set_has_calls(&mut self, to: bool) {
            self.has_calls = to;
        }
        fn claim_busy(&mut self) -> bool {
            !std::mem::replace(&mut self.busy, true)
        }
        fn release_busy(&mut self) {
            self.busy = false;
        }
        fn busy(&self) -> bool {
            self.busy
        }
    }

    #[test]
    fn add_refuses_a_full_ring_but_the_cleanup_call_is_taken() {
        let (mut ring, mut flags) = (Ring::new(1), Plain::default());
        assert_eq!(ring.add(&mut flags, 'a'), Ok(()));
        assert!(wants_drain(&flags));
        assert_eq!(ring.add(&mut flags, 'b'), Err(Refused::Full('b')));
        assert_eq!(ring.add_cleanup(&mut flags, 'c'), Ok(()));
        assert_eq!(ring.calls, ['a', 'c']);
    }

    #[test]
    fn pop_clears_has_calls_only_when_it_finds_nothing() {
        let (mut ring, mut flags) = (Ring::new(2), Plain::default());
        ring.add(&mut flags, 1).unwrap();
        assert_eq!(ring.pop(&mut flags), Some(1));
        assert!(
            flags.has_calls,
            "cleared by the pop that found none, not this one"
        );
        assert_eq!(ring.pop(&mut flags), None);
        assert!(!flags.has_calls);
    }

    #[test]
    fn one_drain_at_a_time_bounded_by_the_capacity() {
        let mut flags = Plain {
            has_calls: true,
            busy: false,
        };
        assert!(wants_drain(&flags) && flags.claim_busy());
        assert!(
            !flags.claim_busy(),
            "a second scheduling point starts no drain"
        );
        assert!(drain_goes_on(1, 2) && !drain_goes_on(2, 2));
        assert!(may_sleep(&flags), "the running drain's end wakes a worker");
        assert!(end_drain(&mut flags), "has_calls still set: wake a worker");
        assert!(!may_sleep(&flags), "a drain can start: stay awake");
        assert!(flags.claim_busy());
    }

    #[test]
    fn the_shutdown_drain_closes_the_ring_when_empty() {
        let (mut ring, mut flags) = (Ring::new(2), Plain::default());
        ring.add(&mut flags, 1).unwrap();
        assert_eq!(ring.pop_at_shutdown(&mut flags), Some(1));
        assert_eq!(ring.add(&mut flags, 2), Ok(()), "still open");
        assert_eq!(ring.pop_at_shutdown(&mut flags), Some(2));
        assert_eq!(ring.pop_at_shutdown(&mut flags), None);
        assert_eq!(ring.add(&mut flags, 3), Err(Refused::Closed(3)));
        assert_eq!(ring.add_cleanup(&mut flags, 4), Err(Refused::Closed(4)));
    }
}
