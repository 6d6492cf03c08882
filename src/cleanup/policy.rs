//! The scheduling policy as a pure state machine, shared by the live
//! [`CleanupQueue`](super::CleanupQueue) and the deterministic explorer.
//!
//! Every method here is one atomic step taken under the queue's lock. Nothing
//! here blocks, allocates beyond the item vector, or runs user code: the
//! caller performs the side effects (scheduling, destroying) that a step asks
//! for, outside the lock, and reports back.
//!
//! Owns: [`Policy`] (and [`UnknownPolicy`]), [`QueueCore`] with its answers
//! ([`PushAction`], [`Retry`]) and [`Metrics`]. Uses only `std`: no lock, no
//! scheduler, no thread.

use std::fmt;

/// How a queue decides when to schedule a drain.
///
/// All of them are kept: the weaker ones are how the bug is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// greenlet <= 3.5.6: schedule whenever a push makes the size exactly 1.
    /// Schedules a second drain while the first is destroying (the queue is
    /// empty then), and never retries after a failed schedule.
    Legacy,
    /// The seed report's patch: like `Legacy`, but not while a drain is
    /// destroying a state. Still never retries after a failed schedule.
    Draining,
    /// One drain outstanding or running whenever the queue is non-empty: the
    /// flag is claimed by the push that schedules, cleared by the drain when it
    /// finds the queue empty, and released again when scheduling fails, so the
    /// next push retries.
    Scheduled,
    /// `Scheduled`, and every destruction runs inside the scheduler's shield
    /// (in the CPython model: with tracing suspended on the draining thread,
    /// `PyThreadState_EnterTracing`), so user code run by a drain can never
    /// reach a traced function entry while a pending call is being handled.
    Shielded,
    /// `Shielded`, and a failed schedule is retried when a push relied on it
    /// meanwhile: a push that finds the flag held records that it did, and
    /// the failed schedule is then asked for again instead of the flag
    /// being released. Without this, a thread that dies
    /// between the failed `Py_AddPendingCall` and the flag's release (the
    /// ring having emptied meanwhile) strands both states for good — the
    /// explorer's `full-ring` counterexample against `Scheduled` and
    /// `Shielded`. Retries are bounded by the pushes that came in meanwhile.
    Robust,
}

impl Policy {
    /// Every policy, weakest first.
    pub const ALL: [Policy; 5] = [
        Policy::Legacy,
        Policy::Draining,
        Policy::Scheduled,
        Policy::Shielded,
        Policy::Robust,
    ];

    /// The name used on command lines and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Legacy => "legacy",
            Policy::Draining => "draining",
            Policy::Scheduled => "scheduled",
            Policy::Shielded => "shielded",
            Policy::Robust => "robust",
        }
    }

    /// Whether destructions run inside [`Scheduler::shield`](super::Scheduler::shield).
    pub fn shields(self) -> bool {
        matches!(self, Policy::Shielded | Policy::Robust)
    }

    fn uses_scheduled_flag(self) -> bool {
        matches!(self, Policy::Scheduled | Policy::Shielded | Policy::Robust)
    }
}

impl Default for Policy {
    /// The recommended policy, [`Policy::Robust`]: the only one for which
    /// the explorer (`interp_shim::explore`) finds neither a livelock nor a
    /// leak in any scenario on any modelled CPython version.
    fn default() -> Self {
        Policy::Robust
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A policy name that is not one of [`Policy::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown cleanup policy {given:?}: expected one of legacy, draining, scheduled, shielded, robust")]
pub struct UnknownPolicy {
    /// What was given.
    pub given: String,
}

impl std::str::FromStr for Policy {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownPolicy {
                given: s.to_string(),
            })
    }
}

/// Counters kept per queue. Tests and examples assert on them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Metrics {
    /// Pushes that asked the scheduler for a drain.
    pub schedules_requested: u64,
    /// Of those, how many the scheduler refused.
    pub schedules_failed: u64,
    /// Drains started.
    pub drains_run: u64,
    /// States handed out by drains for destruction.
    pub states_destroyed: u64,
    /// States that will never be destroyed: pushed after finalization began,
    /// or still queued when it began.
    pub states_leaked: u64,
    /// The most drains scheduled and not yet finished at any one time.
    pub max_outstanding: u64,
}

/// What the caller of [`QueueCore::push`] must do next, outside the lock.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PushAction<T> {
    /// Ask the scheduler for a drain; report a refusal with
    /// [`QueueCore::schedule_failed`]. The drain counts as outstanding from
    /// this step on, so that a drain that runs before the scheduler returns
    /// is accounted for.
    Schedule,
    /// Nothing: a drain is (believed to be) coming.
    Nothing,
    /// The queue is finalized: the item is handed back, counted as leaked.
    Leaked(T),
}

/// What the caller of [`QueueCore::schedule_failed`] must do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Retry {
    /// Ask the scheduler again: the drain still counts as outstanding.
    Schedule,
    /// Give up: no drain is outstanding for this push any more.
    GiveUp,
}

/// The queue's state: its items, the policy's flags and the metrics.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct QueueCore<T> {
    policy: Policy,
    items: Vec<T>,
    draining: bool,
    scheduled: bool,
    /// `Robust`: a push found the flag held since it was last claimed.
    missed: bool,
    outstanding: u64,
    finalized: bool,
    metrics: Metrics,
}

impl<T> QueueCore<T> {
    /// An empty queue under `policy`.
    pub(crate) fn new(policy: Policy) -> Self {
        QueueCore {
            policy,
            items: Vec::new(),
            draining: false,
            scheduled: false,
            missed: false,
            outstanding: 0,
            finalized: false,
            metrics: Metrics::default(),
        }
    }

    /// The policy this queue follows.
    pub(crate) fn policy(&self) -> Policy {
        self.policy
    }

    /// Items waiting for a drain.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether no item is waiting.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Drains scheduled and not yet finished.
    pub(crate) fn outstanding(&self) -> u64 {
        self.outstanding
    }

    /// Whether the `Scheduled`/`Shielded`/`Robust` flag is held.
    #[cfg(feature = "cpython-model")]
    pub(crate) fn scheduled_flag(&self) -> bool {
        self.scheduled
    }

    /// Whether the `Draining` flag is held.
    #[cfg(feature = "cpython-model")]
    pub(crate) fn draining_flag(&self) -> bool {
        self.draining
    }

    /// Whether finalization has begun.
    #[cfg(feature = "cpython-model")]
    pub(crate) fn is_finalized(&self) -> bool {
        self.finalized
    }

    /// The counters so far.
    pub(crate) fn metrics(&self) -> Metrics {
        self.metrics
    }

    /// A dying thread enqueues its state (greenlet's `AddToCleanupQueue`).
    pub(crate) fn push(&mut self, item: T) -> PushAction<T> {
        if self.finalized {
            self.metrics.states_leaked += 1;
            return PushAction::Leaked(item);
        }
        self.items.push(item);
        let schedule = match self.policy {
            Policy::Legacy => self.items.len() == 1,
            Policy::Draining => self.items.len() == 1 && !self.draining,
            Policy::Scheduled | Policy::Shielded | Policy::Robust => {
                let claim = !self.scheduled;
                self.scheduled = true;
                // Robust: a claim covers every item queued so far; a push
                // that finds the flag held relies on the claimant's drain.
                self.missed = !claim;
                claim
            }
        };
        if schedule {
            self.metrics.schedules_requested += 1;
            self.outstanding += 1;
            self.metrics.max_outstanding = self.metrics.max_outstanding.max(self.outstanding);
            PushAction::Schedule
        } else {
            PushAction::Nothing
        }
    }

    /// The scheduler refused the drain. `Scheduled`/`Shielded` release their
    /// flag so that the next push retries; `Legacy`/`Draining` never retry.
    /// `Robust` keeps the flag and answers [`Retry::Schedule`] if a push
    /// relied on this schedule since it was claimed (the caller then asks
    /// the scheduler again; the drain counts as outstanding again), else
    /// releases it like `Scheduled`.
    pub(crate) fn schedule_failed(&mut self) -> Retry {
        self.metrics.schedules_failed += 1;
        if self.policy == Policy::Robust && self.missed && !self.finalized {
            self.missed = false;
            self.metrics.schedules_requested += 1;
            return Retry::Schedule;
        }
        self.outstanding = self.outstanding.saturating_sub(1);
        if self.policy.uses_scheduled_flag() {
            self.scheduled = false;
            self.missed = false;
        }
        Retry::GiveUp
    }

    /// A drain starts (greenlet's `PendingCallback_DestroyQueue` entered).
    pub(crate) fn drain_begin(&mut self) {
        self.metrics.drains_run += 1;
    }

    /// The drain takes the next item, newest first as greenlet does, or finds
    /// the queue empty and releases the policy's flags.
    pub(crate) fn drain_next(&mut self) -> Option<T> {
        match self.items.pop() {
            Some(item) => {
                self.draining = true;
                self.metrics.states_destroyed += 1;
                Some(item)
            }
            None => {
                self.draining = false;
                self.scheduled = false;
                self.missed = false;
                None
            }
        }
    }

    /// The drain returns to whoever ran it.
    pub(crate) fn drain_end(&mut self) {
        self.outstanding = self.outstanding.saturating_sub(1);
    }

    /// The host is going away: no drain will run again. Queued items and every
    /// later push are leaked on purpose and counted; the items are handed back
    /// so that the caller can forget them without running user code.
    pub(crate) fn finalize(&mut self) -> Vec<T> {
        self.finalized = true;
        self.metrics.states_leaked += self.items.len() as u64;
        std::mem::take(&mut self.items)
    }

    /// A leak in the explorer's sense: items wait, and no drain is scheduled
    /// or running that would take them.
    #[cfg(any(test, feature = "cpython-model"))]
    pub(crate) fn is_stranded(&self) -> bool {
        !self.items.is_empty() && self.outstanding == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule_ok<T>(q: &mut QueueCore<T>, item: T) -> bool {
        match q.push(item) {
            PushAction::Schedule => true,
            PushAction::Nothing => false,
            PushAction::Leaked(_) => panic!("queue finalized"),
        }
    }

    #[test]
    fn legacy_schedules_again_while_destroying() {
        let mut q = QueueCore::new(Policy::Legacy);
        assert!(schedule_ok(&mut q, 1));
        q.drain_begin();
        assert_eq!(q.drain_next(), Some(1));
        // A thread dies while state 1 is destroyed: the size is 1 again.
        assert!(schedule_ok(&mut q, 2));
        assert_eq!(q.metrics().max_outstanding, 2);
    }

    #[test]
    fn draining_and_scheduled_do_not_schedule_while_destroying() {
        for policy in [
            Policy::Draining,
            Policy::Scheduled,
            Policy::Shielded,
            Policy::Robust,
        ] {
            let mut q = QueueCore::new(policy);
            assert!(schedule_ok(&mut q, 1));
            q.drain_begin();
            assert_eq!(q.drain_next(), Some(1));
            assert!(!schedule_ok(&mut q, 2), "{policy}");
            assert_eq!(q.drain_next(), Some(2));
            assert_eq!(q.drain_next(), None);
            q.drain_end();
            assert_eq!(q.metrics().max_outstanding, 1);
            assert!(!q.is_stranded());
        }
    }

    #[test]
    fn failed_schedule_strands_legacy_and_draining_but_scheduled_retries() {
        for policy in Policy::ALL {
            let mut q = QueueCore::new(policy);
            assert_eq!(q.push(1), PushAction::Schedule);
            q.schedule_failed();
            let retried = schedule_ok(&mut q, 2);
            assert_eq!(retried, policy.uses_scheduled_flag(), "{policy}");
            assert_eq!(q.is_stranded(), !retried, "{policy}");
        }
    }

    /// The explorer's `full-ring` counterexample against `Scheduled` and
    /// `Shielded`: X's schedule fails, Y pushes before X reports the failure
    /// (finding the flag held), then X releases the flag: both states are
    /// stranded. `Robust` retries instead.
    #[test]
    fn push_racing_a_failed_schedule() {
        for policy in Policy::ALL {
            let mut q = QueueCore::new(policy);
            assert_eq!(q.push('x'), PushAction::Schedule);
            // X's Py_AddPendingCall fails; before X reports it, Y dies.
            let y = q.push('y');
            let retry = q.schedule_failed();
            match policy {
                Policy::Robust => {
                    assert_eq!(y, PushAction::Nothing);
                    assert_eq!(retry, Retry::Schedule);
                    assert_eq!(q.outstanding(), 1);
                    // The retry fails too, with no push meanwhile: give up,
                    // and the next push claims again.
                    assert_eq!(q.schedule_failed(), Retry::GiveUp);
                    assert!(q.is_stranded());
                    assert_eq!(q.push('z'), PushAction::Schedule);
                }
                Policy::Scheduled | Policy::Shielded => {
                    assert_eq!(y, PushAction::Nothing);
                    assert_eq!(retry, Retry::GiveUp);
                    assert!(q.is_stranded(), "{policy}");
                }
                Policy::Legacy | Policy::Draining => {
                    assert_eq!(retry, Retry::GiveUp);
                    assert!(q.is_stranded(), "{policy}");
                }
            }
        }
    }

    #[test]
    fn finalize_leaks_and_counts() {
        let mut q = QueueCore::new(Policy::default());
        assert_eq!(q.push(1), PushAction::Schedule);
        assert_eq!(q.finalize(), vec![1]);
        assert_eq!(q.push(2), PushAction::Leaked(2));
        assert_eq!(q.metrics().states_leaked, 2);
    }

    #[test]
    fn policy_names_round_trip() {
        for p in Policy::ALL {
            assert_eq!(p.name().parse::<Policy>(), Ok(p));
        }
        let err = "fast".parse::<Policy>().unwrap_err();
        assert!(err.to_string().contains("fast"));
    }
}
