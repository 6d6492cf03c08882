//! The hub's pending-call slot (`src/hub/pending.rs`, rules 1-7): as a host
//! of the explorer, every cleanup policy over every interleaving of every
//! scenario on the hub, and each rule broken on purpose caught with a
//! counterexample (these need `cpython-model`, which gates the explorer);
//! and, live, what the explorer found: a full slot must not refuse the
//! cleanup queue's call (rule 7), or `robust` strands the state.
//! Run in release (`cargo test --release --test model hub_pending_slot`).

use crate::common;

use std::sync::mpsc;
use std::sync::Arc;

use common::hub::HANG;
use greenlet::cleanup::{CleanupQueue, Policy, Remains};
use greenlet::hub::{self, HubError};

/// A state whose destruction reports the thread it ran on.
struct Note(mpsc::Sender<String>);

impl Remains for Note {
    fn destroy(self: Box<Self>) {
        let name = std::thread::current().name().unwrap_or("").to_string();
        let _ = self.0.send(name);
    }
    fn label(&self) -> String {
        "a note".into()
    }
}

/// A one-worker runtime whose slot holds `capacity` calls, with its drain
/// parked in a first call (popped: the ring is empty) until the returned
/// gate's sender sends or is dropped.
fn drain_parked(capacity: usize) -> (hub::Runtime, hub::Sender<()>) {
    let rt = hub::Runtime::builder()
        .worker_threads(1)
        .pending_call_capacity(capacity)
        .watchdog(None)
        .build()
        .expect("runtime");
    let (gate_tx, gate_rx) = hub::channel::<()>(1);
    let (started_tx, started_rx) = mpsc::channel();
    rt.handle()
        .add_pending_call(move || {
            started_tx.send(()).unwrap();
            let _ = gate_rx.recv();
        })
        .unwrap();
    started_rx
        .recv_timeout(HANG)
        .expect("the first call never ran");
    (rt, gate_tx)
}

/// The explorer's `drain-parks` under `cleanup-counted`, live: the slot is
/// full (a call parked on the drain, another queued) when a thread's state
/// is pushed. The cleanup queue's call is still taken (rule 7), so the
/// state is destroyed on the hub once the parked call returns; with the
/// capacity counted, the schedule failed, `robust` gave up (no later push)
/// and the state stayed queued.
#[test]
fn a_full_slot_still_takes_the_cleanup_queues_call() {
    let (rt, gate_tx) = drain_parked(1);
    let handle = rt.handle();
    // The drain popped the first call and is parked in it: one more fills
    // the slot, a third is refused.
    handle.add_pending_call(|| {}).unwrap();
    assert!(matches!(
        handle.add_pending_call(|| {}),
        Err(HubError::PendingCallsFull { capacity: 1 })
    ));

    let queue = CleanupQueue::new(Policy::Robust, Arc::new(handle.cleanup_scheduler()));
    let (tx, rx) = mpsc::channel();
    queue.push(Box::new(Note(tx)));
    let (m, outstanding) = (queue.metrics(), queue.outstanding());
    // Open the gate before asserting, so that a failure does not leave the
    // drain parked under the runtime's shutdown.
    gate_tx.send(()).unwrap();
    assert_eq!((m.schedules_requested, m.schedules_failed), (1, 0), "{m:?}");
    assert_eq!(outstanding, 1);
    let thread = rx
        .recv_timeout(HANG)
        .expect("the state was never destroyed");
    assert!(thread.starts_with("hub-worker"), "destroyed on {thread:?}");
    // The drain's own call ends after the destruction; wait for it, bounded.
    let start = std::time::Instant::now();
    while queue.outstanding() != 0 {
        assert!(start.elapsed() < HANG, "the cleanup drain never returned");
        std::thread::yield_now();
    }
    assert_eq!(queue.metrics().states_destroyed, 1);
}

/// The explorer's `drain-at-shutdown`, live: shutdown begins while a
/// drain is parked in a call with another call queued behind it. The
/// parked drain is cancelled; no new drain may start (the worker would drop
/// each unrun and start another, for ever); the queued call runs once, and
/// the shutdown returns.
#[test]
fn a_shutdown_with_calls_queued_runs_them_and_returns() {
    // The gate never opens: the shutdown cancels the parked call.
    let (rt, gate_tx) = drain_parked(2);
    let handle = rt.handle();
    let (ran_tx, ran_rx) = mpsc::channel();
    handle
        .add_pending_call(move || {
            let name = std::thread::current().name().unwrap_or("").to_string();
            ran_tx.send(name).unwrap();
        })
        .unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("shutter".into())
        .spawn(move || {
            let report = rt.shutdown_timeout(std::time::Duration::from_secs(5));
            done_tx.send(report.pending_calls_run_at_shutdown).unwrap();
        })
        .unwrap();
    let run_at_shutdown = done_rx.recv_timeout(HANG).expect("the shutdown hung");
    // The shutdown's cancellation ends the drain (it is not caught as the
    // parked call's panic, after which the drain went on with the queued
    // call on the worker): rule 6 runs the queued call on `shutter`.
    let ran_on = ran_rx.try_recv().expect("the queued call never ran");
    assert_eq!((run_at_shutdown, ran_on.as_str()), (1, "shutter"));
    assert!(ran_rx.try_recv().is_err(), "ran twice");
    drop(gate_tx);
}

#[cfg(feature = "cpython-model")]
mod explorer {
    use greenlet::cleanup::Policy;
    use greenlet::interp_shim::explore::{
        explore_cells, explore_hub, Counterexample, HubCell, HubScenario, ScenarioName, SlotRules,
        Verdict, DEFAULT_BOUND,
    };

    fn verdict(scenario: HubScenario, policy: Policy, rules: SlotRules) -> Verdict<HubCell> {
        explore_hub(HubCell { scenario, policy }, rules, DEFAULT_BOUND).expect("fits the bound")
    }

    fn steps(c: &Counterexample) -> Vec<&str> {
        c.steps.iter().map(|(step, _)| step.as_str()).collect()
    }

    /// Every policy on every hub scenario, the slot's rules as they are:
    /// no livelock, no leak, no broken slot rule, every state can still
    /// reach quiescence — `robust` included, and here the weaker policies
    /// too, since the hub's slot never refuses a cleanup drain.
    #[test]
    fn no_policy_livelocks_or_leaks_on_the_hub() {
        let cells = HubCell::all();
        assert_eq!(cells.len(), HubScenario::ALL.len() * Policy::ALL.len());
        for v in explore_cells(&cells, DEFAULT_BOUND, 2) {
            let v = v.expect("every hub cell fits the bound");
            assert!(!v.livelock_reachable(), "{}", v.summary());
            assert!(!v.leak_reachable(), "{}", v.summary());
            assert!(v.violation.is_none(), "{}", v.summary());
            assert!(v.stuck.is_none(), "{}", v.summary());
            assert_eq!((v.traps, v.inconsistent), (0, 0), "{}", v.summary());
            assert!(v.states > 10, "{}", v.summary());
        }
    }

    /// The slot before rule 7 (the cleanup queue's call counted against
    /// the capacity): on `full-ring` the policies behave as on CPython
    /// (only `robust` retries the refused schedule that a push relied on);
    /// on `drain-parks`, where no push follows the refusal, every policy
    /// strands P1's state, `robust` included, and P2 (which waits for P1's
    /// finalizer) never finishes: no state reaches quiescence.
    #[test]
    fn counting_the_cleanup_call_strands_states_under_every_policy() {
        for scenario in HubScenario::ALL {
            for policy in Policy::ALL {
                let v = verdict(scenario, policy, SlotRules::CleanupCounted);
                let full_ring = scenario == HubScenario::Shared(ScenarioName::FullRing);
                let want = (
                    scenario == HubScenario::DrainParks,
                    full_ring && policy != Policy::Robust,
                );
                let got = (v.livelock_reachable(), v.leak_reachable());
                assert_eq!(got, want, "{}", v.summary());
                assert!(v.violation.is_none(), "{}", v.summary());
            }
        }
        let robust = verdict(
            HubScenario::DrainParks,
            Policy::Robust,
            SlotRules::CleanupCounted,
        );
        let schedule = robust.livelock.expect("robust strands P1 there");
        let s = steps(&schedule);
        assert!(
            s.iter()
                .any(|l| l.starts_with("T1 P1:") && l.contains("add(drain) under the lock -> full")),
            "{schedule}"
        );
        assert!(
            s.iter().filter(|l| l.contains("-> GiveUp")).count() >= 1,
            "{schedule}"
        );
        assert!(schedule.conclusion.contains("NO PROGRESS"), "{schedule}");
    }

    /// Rule 2 without the CAS on `busy`: a second drain starts while the
    /// first one runs — on two workers at once, and on one worker while
    /// the first drain is parked.
    #[test]
    fn no_busy_flag_is_caught() {
        for scenario in [
            HubScenario::DrainParks,
            HubScenario::Shared(ScenarioName::Churn),
        ] {
            let v = verdict(scenario, Policy::Robust, SlotRules::NoBusyFlag);
            let c = v.violation.expect("two drains at once");
            assert!(c.conclusion.contains("two drains at once"), "{c}");
            let claims = steps(&c)
                .iter()
                .filter(|l| l.contains("CAS busy false->true -> ok"))
                .count();
            assert_eq!(claims, 2, "{c}");
        }
        let one_worker = verdict(
            HubScenario::Shared(ScenarioName::Churn),
            Policy::Robust,
            SlotRules::NoBusyFlag,
        );
        let c = one_worker.violation.unwrap();
        assert!(steps(&c).iter().any(|l| l.contains("parks")), "{c}");
    }

    /// Rule 3's clear of `has_calls` moved after the lock: an add lands
    /// between the empty pop and the clear, and its call waits with
    /// `has_calls` clear.
    #[test]
    fn clearing_has_calls_outside_the_lock_is_caught() {
        let v = verdict(
            HubScenario::Shared(ScenarioName::FullRing),
            Policy::Robust,
            SlotRules::ClearOutsideLock,
        );
        let c = v
            .violation
            .clone()
            .expect("a call behind a clear has_calls");
        assert!(c.conclusion.contains("has_calls clear"), "{c}");
        let s = steps(&c);
        let empty_pop = s
            .iter()
            .rposition(|l| l.contains("pop under the lock -> None"))
            .expect("the drain's empty pop");
        let add = s
            .iter()
            .rposition(|l| l.contains("add(drain) under the lock -> ok"))
            .expect("the add");
        assert!(empty_pop < add, "{c}");
        assert!(
            s.last()
                .unwrap()
                .contains("clears has_calls after the lock"),
            "{c}"
        );
        // The stranded call also keeps the scenario from quiescence.
        assert!(v.livelock_reachable(), "{}", v.summary());
    }

    /// Rule 2's sleep test without `busy`: a drain parks in a call, and a
    /// worker with nothing to run stays awake (`has_calls` is still set):
    /// it spins for as long as the call parks. With `busy` in the test no
    /// wake is lost (the first test: no trap, no violation).
    #[test]
    fn spinning_while_a_drain_parks_is_caught() {
        let v = verdict(
            HubScenario::Shared(ScenarioName::Churn),
            Policy::Robust,
            SlotRules::SpinWhileBusy,
        );
        let c = v
            .violation
            .clone()
            .expect("a worker spins while the drain parks");
        assert!(c.conclusion.contains("spins"), "{c}");
        let s = steps(&c);
        assert!(
            s.iter().any(|l| l.contains("G drain#0 (green): parks")),
            "{c}"
        );
        assert!(s.last().unwrap().contains("does not sleep"), "{c}");
        assert!(
            !v.livelock_reachable() && !v.leak_reachable(),
            "{}",
            v.summary()
        );
    }

    /// Rule 2 still starting drains at shutdown: the worker's start drops
    /// each unrun (rule 5's release), `has_calls` stays set, and the next
    /// round starts another: the worker never leaves its loop. Live, a
    /// runtime dropped with a call queued hung in its drop.
    #[test]
    fn starting_drains_at_shutdown_is_caught() {
        let scenario = HubScenario::Shared(ScenarioName::Finalization);
        let v = verdict(scenario, Policy::Robust, SlotRules::DrainAtShutdown);
        let c = v.livelock.clone().expect("the worker loops at shutdown");
        assert!(c.conclusion.contains("NO PROGRESS"), "{c}");
        assert!(
            steps(&c)
                .last()
                .unwrap()
                .contains("add(drain) under the lock -> ok"),
            "{c}"
        );
        assert!(v.traps > 0, "{}", v.summary());
    }

    /// Rule 6 without the close: a dying thread's add passes the
    /// shutting-down check before shutdown begins and takes the lock after
    /// the shutdown drain's last pop: accepted, never run.
    #[test]
    fn no_close_at_shutdown_is_caught() {
        let scenario = HubScenario::Shared(ScenarioName::Finalization);
        let v = verdict(scenario, Policy::Robust, SlotRules::NoCloseAtShutdown);
        let c = v.violation.expect("a call accepted after the last pop");
        assert!(c.conclusion.contains("never run"), "{c}");
        let s = steps(&c);
        let last_pop = s
            .iter()
            .position(|l| l.contains("shutdown: pop under the lock -> None"))
            .expect("the shutdown drain's last pop");
        let add = s
            .iter()
            .position(|l| l.contains("add(drain) under the lock -> ok"))
            .expect("the late add");
        assert!(last_pop < add, "{c}");
        let real = verdict(scenario, Policy::Robust, SlotRules::Real);
        assert!(real.violation.is_none(), "{}", real.summary());
    }
}
