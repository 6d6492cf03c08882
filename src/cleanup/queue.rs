//! The live queue: a [`QueueCore`] behind a lock, a scheduler, and the drain
//! that destroys states with the lock released.
//!
//! Owns: [`CleanupQueue`], the [`Remains`] trait, the drain probe
//! ([`DrainProbe`], [`DrainPoint`]) and the per-thread queue
//! ([`default_queue`], [`set_thread_queue`], [`current_queue`]). Uses
//! [`QueueCore`] for every policy decision and a [`Scheduler`] to get
//! drains run; `parking_lot` for the lock.

use std::cell::RefCell;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::policy::{Metrics, Policy, PushAction, QueueCore, Retry};
use super::scheduler::{Inline, ScheduleError, Scheduler};
use crate::diag::diag_error;

/// What a dying thread leaves behind for a drain to destroy.
///
/// `destroy` runs user code (finalizers); it is called exactly once, by a
/// drain, never under the queue's lock. A state that is leaked on purpose
/// (after [`CleanupQueue::finalize`]) is forgotten without being destroyed.
pub trait Remains: Send + 'static {
    /// Destroy the state, running its finalizers.
    fn destroy(self: Box<Self>);
    /// What it is, for reports ("main greenlet of thread 'worker-3'").
    fn label(&self) -> String;
}

/// A shared deferred-destruction queue (greenlet's `thread_states_to_destroy`
/// with a choice of [`Policy`] and [`Scheduler`]).
///
/// # Example
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use greenlet::cleanup::{CleanupQueue, Manual, Policy, Remains};
///
/// static DESTROYED: AtomicUsize = AtomicUsize::new(0);
/// struct State;
/// impl Remains for State {
///     fn destroy(self: Box<Self>) { DESTROYED.fetch_add(1, Ordering::SeqCst); }
///     fn label(&self) -> String { "a state".into() }
/// }
///
/// let queue = CleanupQueue::new(Policy::Scheduled, Arc::new(Manual));
/// queue.push(Box::new(State));
/// queue.push(Box::new(State));
/// assert_eq!(queue.metrics().schedules_requested, 1); // one drain covers both
/// queue.drain(); // the application's safe point
/// assert_eq!(DESTROYED.load(Ordering::SeqCst), 2);
/// assert!(queue.is_empty());
/// ```
pub struct CleanupQueue {
    state: Mutex<QueueCore<Box<dyn Remains>>>,
    scheduler: Arc<dyn Scheduler>,
    finalizer_panics: AtomicU64,
    /// Whether a probe is installed: the only cost of the probe points
    /// when none is (one relaxed load each).
    probed: AtomicBool,
    probe: Mutex<Option<DrainProbe>>,
}

impl fmt::Debug for CleanupQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("CleanupQueue");
        out.field("scheduler", &self.scheduler.name());
        // Not waited for: the queue may be printed while its lock is held.
        match self.state.try_lock() {
            Some(state) => out
                .field("policy", &state.policy())
                .field("queued", &state.len())
                .field("metrics", &state.metrics()),
            None => out.field("state", &"<locked>"),
        };
        out.field("finalizer_panics", &self.finalizer_panics())
            .field("probed", &self.probed.load(Ordering::Relaxed))
            .finish()
    }
}

/// A test probe called at each [`DrainPoint`]; see
/// [`CleanupQueue::set_drain_probe`].
pub type DrainProbe = Arc<dyn Fn(DrainPoint) + Send + Sync>;

/// A point of the queue's protocol where an installed probe is called, on
/// the thread that reached it, with no lock of the queue held. Tests pause
/// there to force one interleaving (the explorer's counterexamples, replayed
/// on the live shim).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DrainPoint {
    /// On a pushing thread: its scheduler refused the drain, and the queue
    /// has not been told yet.
    ScheduleRefused,
    /// A drain has started.
    Begin,
    /// A drain popped a state and is about to destroy it (before the shield).
    BeforeDestroy,
    /// A state's destruction returned (after the shield).
    AfterDestroy,
    /// A drain found the queue empty and released the policy's flags; it has
    /// not returned to whoever ran it yet.
    Empty,
}

impl CleanupQueue {
    /// A new, empty queue.
    pub fn new(policy: Policy, scheduler: Arc<dyn Scheduler>) -> Arc<Self> {
        Arc::new(CleanupQueue {
            state: Mutex::new(QueueCore::new(policy)),
            scheduler,
            finalizer_panics: AtomicU64::new(0),
            probed: AtomicBool::new(false),
            probe: Mutex::new(None),
        })
    }

    /// Install (or remove, with `None`) a test probe called at every
    /// [`DrainPoint`] this queue reaches. For tests that replay one
    /// interleaving: a probe may block to hold its thread at that point.
    /// Without a probe each point costs one relaxed atomic load.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use parking_lot::Mutex;
    /// use greenlet::cleanup::{CleanupQueue, DrainPoint, Manual, Policy, Remains};
    ///
    /// struct State;
    /// impl Remains for State {
    ///     fn destroy(self: Box<Self>) {}
    ///     fn label(&self) -> String { "a state".into() }
    /// }
    ///
    /// let queue = CleanupQueue::new(Policy::default(), Arc::new(Manual));
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = Arc::clone(&seen);
    /// queue.set_drain_probe(Some(Arc::new(move |point| log.lock().push(point))));
    /// queue.push(Box::new(State));
    /// queue.drain();
    /// assert_eq!(
    ///     *seen.lock(),
    ///     [DrainPoint::Begin, DrainPoint::BeforeDestroy, DrainPoint::AfterDestroy, DrainPoint::Empty]
    /// );
    /// ```
    pub fn set_drain_probe(&self, probe: Option<DrainProbe>) {
        let mut slot = self.probe.lock();
        self.probed.store(probe.is_some(), Ordering::Relaxed);
        *slot = probe;
    }

    fn reached(&self, point: DrainPoint) {
        if self.probed.load(Ordering::Relaxed) {
            let probe = self.probe.lock().clone();
            if let Some(probe) = probe {
                probe(point);
            }
        }
    }

    /// The policy this queue follows.
    pub fn policy(&self) -> Policy {
        self.state.lock().policy()
    }

    /// States waiting for a drain.
    pub fn len(&self) -> usize {
        self.state.lock().len()
    }

    /// Whether no state is waiting.
    pub fn is_empty(&self) -> bool {
        self.state.lock().is_empty()
    }

    /// Drains scheduled and not yet finished.
    pub fn outstanding(&self) -> u64 {
        self.state.lock().outstanding()
    }

    /// The counters so far.
    pub fn metrics(&self) -> Metrics {
        self.state.lock().metrics()
    }

    /// Finalizers, [`Remains::label`]s and [`Scheduler::shield`]s that
    /// panicked during a drain (each reported on stderr; the drain went on).
    pub fn finalizer_panics(&self) -> u64 {
        self.finalizer_panics.load(Ordering::Relaxed)
    }

    /// Enqueue a state (greenlet's `AddToCleanupQueue`), scheduling a drain
    /// if the policy says so. Runs no user code under the lock. A scheduler
    /// that panics is reported and counted as a refusal, so a scheduler must
    /// not panic after it has arranged the drain (that drain would then be
    /// counted twice as gone: harmless, but the counters would be off).
    pub fn push(self: &Arc<Self>, state: Box<dyn Remains>) {
        let action = self.state.lock().push(state);
        match action {
            PushAction::Nothing => {}
            PushAction::Schedule => loop {
                // A scheduler that panics is a refusal: the queue must hear
                // of it, or the claimed flag would never be released.
                let err = match catch_unwind(AssertUnwindSafe(|| self.scheduler.schedule(self))) {
                    Ok(Ok(())) => break,
                    Ok(Err(err)) => err,
                    Err(_) => ScheduleError {
                        scheduler: self.scheduler.name().into(),
                        reason: "the scheduler panicked".into(),
                    },
                };
                self.reached(DrainPoint::ScheduleRefused);
                if self.state.lock().schedule_failed() == Retry::GiveUp {
                    diag_error!(
                        "greenlet: {err}; queued thread states may leak until a later push"
                    );
                    break;
                }
                // Robust: a push relied on this schedule meanwhile; again.
            },
            PushAction::Leaked(state) => {
                // Leaked on purpose: the host is finalizing and must not run
                // user code any more.
                std::mem::forget(state);
            }
        }
    }

    /// Destroy every queued state, newest first, with the lock released while
    /// each one is destroyed (greenlet's `PendingCallback_DestroyQueue`).
    /// States pushed meanwhile are taken by this same drain. A finalizer
    /// that panics is reported and the drain goes on.
    pub fn drain(&self) {
        let shield = {
            let mut state = self.state.lock();
            state.drain_begin();
            state.policy().shields()
        };
        self.reached(DrainPoint::Begin);
        loop {
            let next = self.state.lock().drain_next();
            let Some(state) = next else { break };
            self.reached(DrainPoint::BeforeDestroy);
            let mut slot = Some(state);
            let mut destroy = || {
                if let Some(state) = slot.take() {
                    self.destroy_one(state);
                }
            };
            if shield {
                // The shield is the scheduler's code: a panic in it must not
                // unwind out of the drain with the flags held.
                if catch_unwind(AssertUnwindSafe(|| self.scheduler.shield(&mut destroy))).is_err() {
                    self.finalizer_panics.fetch_add(1, Ordering::Relaxed);
                    diag_error!(
                        "greenlet: the {} scheduler's shield panicked; the cleanup drain goes on",
                        self.scheduler.name()
                    );
                    // Not destroyed yet: destroy it without the shield
                    // rather than lose it.
                    destroy();
                }
            } else {
                destroy();
            }
            self.reached(DrainPoint::AfterDestroy);
        }
        self.reached(DrainPoint::Empty);
        self.state.lock().drain_end();
    }

    /// `label` is user code too: taken before `destroy` consumes the state,
    /// and a panic in it is caught like a finalizer's (the state is still
    /// destroyed).
    fn destroy_one(&self, state: Box<dyn Remains>) {
        let label = catch_unwind(AssertUnwindSafe(|| state.label())).unwrap_or_else(|_| {
            self.finalizer_panics.fetch_add(1, Ordering::Relaxed);
            diag_error!(
                "greenlet: the label() of a queued state panicked; the cleanup drain goes on"
            );
            "a state whose label() panicked".into()
        });
        if catch_unwind(AssertUnwindSafe(|| state.destroy())).is_err() {
            self.finalizer_panics.fetch_add(1, Ordering::Relaxed);
            diag_error!("greenlet: a finalizer of {label} panicked; the cleanup drain goes on");
        }
    }

    /// The host is going away: no drain may run user code any more. Queued
    /// states and every later push are leaked on purpose (never destroyed)
    /// and counted in [`Metrics::states_leaked`].
    pub fn finalize(&self) {
        let stranded = self.state.lock().finalize();
        for state in stranded {
            std::mem::forget(state);
        }
    }
}

static DEFAULT_QUEUE: OnceLock<Arc<CleanupQueue>> = OnceLock::new();

thread_local! {
    static THREAD_QUEUE: RefCell<Option<Arc<CleanupQueue>>> = const { RefCell::new(None) };
}

/// The process-wide default queue: [`Policy::default`] with the [`Inline`]
/// scheduler, so a plain Rust program's finalizers run on the dying thread
/// before its `join` returns.
pub fn default_queue() -> Arc<CleanupQueue> {
    Arc::clone(DEFAULT_QUEUE.get_or_init(|| CleanupQueue::new(Policy::default(), Arc::new(Inline))))
}

/// Choose the queue that the calling thread's state will go to when it exits
/// (`None`: the default queue). Takes effect for greenlet state created after
/// the call; call it first thing in a new thread.
pub fn set_thread_queue(queue: Option<Arc<CleanupQueue>>) {
    THREAD_QUEUE.with(|q| *q.borrow_mut() = queue);
}

/// The queue the calling thread's state goes to: the one set with
/// [`set_thread_queue`], else [`default_queue`]. During thread-local teardown,
/// when the setting may be gone, the default queue.
pub fn current_queue() -> Arc<CleanupQueue> {
    THREAD_QUEUE
        .try_with(|q| q.borrow().clone())
        .ok()
        .flatten()
        .unwrap_or_else(default_queue)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::sync::Weak;

    use super::*;

    /// Refuses its first `refusals` requests, then accepts (and leaves the
    /// drain to the test).
    struct Flaky {
        refusals: AtomicU64,
        accepted: AtomicU64,
    }

    impl Scheduler for Flaky {
        fn schedule(&self, _queue: &Arc<CleanupQueue>) -> Result<(), ScheduleError> {
            let refuse = self
                .refusals
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if refuse {
                return Err(ScheduleError {
                    scheduler: self.name().into(),
                    reason: "the ring is full".into(),
                });
            }
            self.accepted.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn name(&self) -> &str {
            "flaky"
        }
    }

    struct Note;
    impl Remains for Note {
        fn destroy(self: Box<Self>) {}
        fn label(&self) -> String {
            "a note".into()
        }
    }

    /// The explorer's full-ring counterexample on the live queue: a push
    /// lands between a refused schedule and the queue hearing of it.
    #[test]
    fn a_push_racing_a_refused_schedule_is_retried_only_by_robust() {
        for policy in [Policy::Scheduled, Policy::Shielded, Policy::Robust] {
            let flaky = Arc::new(Flaky {
                refusals: AtomicU64::new(1),
                accepted: AtomicU64::new(0),
            });
            let queue = CleanupQueue::new(policy, Arc::clone(&flaky) as Arc<dyn Scheduler>);
            let weak: Weak<CleanupQueue> = Arc::downgrade(&queue);
            let raced = AtomicBool::new(false);
            queue.set_drain_probe(Some(Arc::new(move |point| {
                if point == DrainPoint::ScheduleRefused && !raced.swap(true, Ordering::SeqCst) {
                    if let Some(queue) = weak.upgrade() {
                        queue.push(Box::new(Note));
                    }
                }
            })));
            queue.push(Box::new(Note));
            assert_eq!(queue.len(), 2, "{policy}");
            let m = queue.metrics();
            assert_eq!(m.schedules_failed, 1, "{policy}");
            if policy == Policy::Robust {
                assert_eq!(flaky.accepted.load(Ordering::SeqCst), 1);
                assert_eq!(queue.outstanding(), 1);
                queue.drain();
                assert_eq!(queue.metrics().states_destroyed, 2);
                assert_eq!(queue.outstanding(), 0);
            } else {
                // Stranded: nothing outstanding, nothing will schedule.
                assert_eq!(flaky.accepted.load(Ordering::SeqCst), 0, "{policy}");
                assert_eq!(queue.outstanding(), 0, "{policy}");
            }
        }
    }

    /// Panics on its first request, then leaves drains to the test.
    struct PanicsOnce(AtomicBool);
    impl Scheduler for PanicsOnce {
        fn schedule(&self, _queue: &Arc<CleanupQueue>) -> Result<(), ScheduleError> {
            if !self.0.swap(true, Ordering::SeqCst) {
                panic!("the scheduler panicked");
            }
            Ok(())
        }
        fn name(&self) -> &str {
            "panics-once"
        }
    }

    /// A scheduler that panics is a refusal: before, the panic unwound out
    /// of `push` with the flag claimed and the drain counted outstanding, so
    /// every later push relied on a drain nobody had arranged.
    #[test]
    fn a_panicking_scheduler_counts_as_a_refusal() {
        for policy in [Policy::Scheduled, Policy::Shielded, Policy::Robust] {
            let queue = CleanupQueue::new(policy, Arc::new(PanicsOnce(AtomicBool::new(false))));
            let pushed = catch_unwind(AssertUnwindSafe(|| queue.push(Box::new(Note))));
            assert!(pushed.is_ok(), "{policy}: the panic escaped push");
            let m = queue.metrics();
            assert_eq!(
                (m.schedules_requested, m.schedules_failed),
                (1, 1),
                "{policy}"
            );
            assert_eq!(queue.outstanding(), 0, "{policy}");
            queue.push(Box::new(Note));
            assert_eq!(queue.metrics().schedules_requested, 2, "{policy}");
            assert_eq!(queue.outstanding(), 1, "{policy}");
            queue.drain();
            assert_eq!(queue.metrics().states_destroyed, 2, "{policy}");
        }
    }

    /// Accepts every request; its shield panics before destroying.
    struct BrokenShield;
    impl Scheduler for BrokenShield {
        fn schedule(&self, _queue: &Arc<CleanupQueue>) -> Result<(), ScheduleError> {
            Ok(())
        }
        fn shield(&self, _destroy: &mut dyn FnMut()) {
            panic!("the shield panicked");
        }
        fn name(&self) -> &str {
            "broken-shield"
        }
    }

    /// Counts its destruction; its `label` (user code too) panics when asked.
    struct Counted(Arc<AtomicU64>, bool);
    impl Remains for Counted {
        fn destroy(self: Box<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn label(&self) -> String {
            assert!(!self.1, "label() of a state panicked");
            "a counted state".into()
        }
    }

    /// Push one state whose destruction meets one panic (from `scheduler`
    /// or, with `label_panics`, from the state's label) and drain: the panic
    /// must not escape the drain, the state must still be destroyed and the
    /// panic counted, and the queue must not be stranded (the next push
    /// asks for a drain of its own).
    fn drain_survives_one_panic(policy: Policy, scheduler: Arc<dyn Scheduler>, label_panics: bool) {
        let destroyed = Arc::new(AtomicU64::new(0));
        let queue = CleanupQueue::new(policy, scheduler);
        queue.push(Box::new(Counted(Arc::clone(&destroyed), label_panics)));
        let drained = catch_unwind(AssertUnwindSafe(|| queue.drain()));
        assert!(drained.is_ok(), "{policy}: the panic escaped the drain");
        assert_eq!(destroyed.load(Ordering::SeqCst), 1, "{policy}");
        assert_eq!(queue.finalizer_panics(), 1, "{policy}");
        assert_eq!(queue.outstanding(), 0, "{policy}");
        queue.push(Box::new(Note));
        assert_eq!(queue.metrics().schedules_requested, 2, "{policy}");
        queue.drain();
        assert!(queue.is_empty(), "{policy}");
    }

    /// A shield that panics must not unwind out of the drain (which left the
    /// flag held and the drain outstanding for good); the state is still
    /// destroyed, unshielded.
    #[test]
    fn a_panicking_shield_neither_escapes_the_drain_nor_loses_the_state() {
        for policy in [Policy::Shielded, Policy::Robust] {
            drain_survives_one_panic(policy, Arc::new(BrokenShield), false);
        }
    }

    /// A panicking `label` must not unwind out of the drain: that left the
    /// flag held and the drain outstanding for good, so every later push
    /// relied on a drain that would never come (and under `Reaper` it
    /// killed the reaper thread).
    #[test]
    fn a_panicking_label_neither_escapes_the_drain_nor_strands_the_queue() {
        for policy in Policy::ALL {
            drain_survives_one_panic(policy, Arc::new(crate::cleanup::Manual), true);
        }
    }

    #[test]
    fn the_probe_is_called_at_each_point_and_can_be_removed() {
        let queue = CleanupQueue::new(Policy::default(), Arc::new(crate::cleanup::Manual));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        queue.set_drain_probe(Some(Arc::new(move |p| log.lock().push(p))));
        queue.push(Box::new(Note));
        queue.push(Box::new(Note));
        queue.drain();
        use DrainPoint::*;
        assert_eq!(
            *seen.lock(),
            [
                Begin,
                BeforeDestroy,
                AfterDestroy,
                BeforeDestroy,
                AfterDestroy,
                Empty
            ]
        );
        queue.set_drain_probe(None);
        queue.push(Box::new(Note));
        queue.drain();
        assert_eq!(seen.lock().len(), 6);
    }
}
