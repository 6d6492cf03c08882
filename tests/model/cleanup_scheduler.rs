//! The cleanup queue on the CPython model and on every scheduler: a full
//! pending-call ring, finalization, panicking finalizers, and every
//! `Scheduler` implementation destroying every state.

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use greenlet::cleanup::{CleanupQueue, Inline, Manual, Policy, Reaper, Remains, Scheduler};
use greenlet::interp_shim::scenarios::{
    finalization, panicking_finalizers, ring_full, RingFullConfig, ScenarioReport,
};
use greenlet::interp_shim::{Interpreter, Outcome, PendingCallScheduler, PyVersion, Watchdog};

const WATCHDOG: Watchdog = Watchdog::Report(Duration::from_secs(30));

/// Runs the full-ring scenario on every version under each of `policies`;
/// each run must finish without a hang or an error, then `check` gets the
/// report and its cell's name ("3.11 legacy").
fn for_each_ring_full(policies: [Policy; 2], check: impl Fn(&ScenarioReport, &str)) {
    let _serial = common::serial();
    for version in PyVersion::ALL {
        for policy in policies {
            let r = ring_full(RingFullConfig {
                version,
                policy,
                watchdog: WATCHDOG,
            })
            .unwrap();
            let cell = format!("{version} {policy}");
            assert!(!r.hung() && r.error.is_none(), "{cell}: {r:?}");
            check(&r, &cell);
        }
    }
}

#[test]
fn full_ring_strands_legacy_and_draining_forever() {
    for_each_ring_full([Policy::Legacy, Policy::Draining], |r, cell| {
        assert_eq!(r.runtime.pending_calls_rejected, 1, "{cell}");
        assert_eq!(r.queue.schedules_requested, 1, "{cell}: never retried");
        assert_eq!(r.queue.schedules_failed, 1, "{cell}");
        assert_eq!(r.queue.drains_run, 0, "{cell}");
        assert_eq!(r.queue.states_destroyed, 0, "{cell}");
        assert_eq!(r.states_created, 3, "{cell}");
        // Still queued at finalization: leaked on purpose and counted.
        assert_eq!(r.queue.states_leaked, 3, "{cell}");
        assert_eq!(r.states_never_destroyed, 3, "{cell}");
    });
}

#[test]
fn full_ring_recovers_under_scheduled_and_shielded() {
    for_each_ring_full([Policy::Scheduled, Policy::Shielded], |r, cell| {
        assert_eq!(r.queue.schedules_failed, 1, "{cell}");
        // C's push retried; every state was destroyed, none leaked.
        assert!(r.queue.schedules_requested >= 2, "{cell}");
        assert_eq!(r.queue.states_destroyed, 3, "{cell}");
        assert_eq!(r.queue.states_leaked, 0, "{cell}");
        assert_eq!(r.states_never_destroyed, 0, "{cell}");
    });
}

#[test]
fn finalization_leaks_on_purpose_and_counts_it() {
    let _serial = common::serial();
    for version in PyVersion::ALL {
        for policy in Policy::ALL {
            let r = finalization(version, policy, WATCHDOG).unwrap();
            let cell = format!("{version} {policy}");
            assert!(!r.hung(), "{cell}");
            assert_eq!(r.error, None, "{cell}: no finalizer may run");
            assert_eq!(r.states_created, 1, "{cell}");
            assert_eq!(r.queue.states_destroyed, 0, "{cell}");
            assert_eq!(r.queue.states_leaked, 1, "{cell}");
        }
    }
}

#[test]
fn panicking_finalizers_are_reported_and_the_drain_goes_on() {
    let _serial = common::serial();
    for policy in Policy::ALL {
        let r = panicking_finalizers(PyVersion::V3_12, policy, 6, WATCHDOG).unwrap();
        assert!(!r.hung() && r.error.is_none(), "{policy}: {r:?}");
        assert_eq!(r.finalizer_panics, 3, "{policy}");
        assert_eq!(r.queue.states_destroyed, 6, "{policy}");
        assert_eq!(r.states_never_destroyed, 0, "{policy}");
    }
}

struct Counted(Arc<AtomicU64>);

impl Remains for Counted {
    fn destroy(self: Box<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn label(&self) -> String {
        "a counted state".into()
    }
}

const THREADS: u64 = 8;

/// Pushes one state from each of `THREADS` OS threads, then returns the
/// queue and the destruction counter.
fn push_from_threads(queue: &Arc<CleanupQueue>) -> Arc<AtomicU64> {
    let destroyed = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (q, d) = (Arc::clone(queue), Arc::clone(&destroyed));
            std::thread::spawn(move || q.push(Box::new(Counted(d))))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    destroyed
}

/// Waits (bounded) for `done`: the reaper drains on its own thread.
fn eventually(done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn every_host_free_scheduler_destroys_every_state() {
    let schedulers: Vec<Arc<dyn Scheduler>> = vec![
        Arc::new(Inline),
        Arc::new(Manual),
        Arc::new(Reaper::spawn().unwrap()),
    ];
    for scheduler in schedulers {
        for policy in Policy::ALL {
            let queue = CleanupQueue::new(policy, Arc::clone(&scheduler));
            let destroyed = push_from_threads(&queue);
            if scheduler.name() == "manual" {
                queue.drain();
            }
            eventually(|| queue.metrics().states_destroyed == THREADS && queue.outstanding() == 0);
            let cell = format!("{} {policy}", scheduler.name());
            assert_eq!(destroyed.load(Ordering::SeqCst), THREADS, "{cell}");
            assert_eq!(queue.metrics().states_destroyed, THREADS, "{cell}");
            assert!(queue.is_empty(), "{cell}");
        }
    }
}

#[test]
fn pending_call_scheduler_destroys_every_state_from_model_and_foreign_threads() {
    let _serial = common::serial();
    for version in PyVersion::ALL {
        for policy in Policy::ALL {
            let rt = Interpreter::new(version);
            let queue = CleanupQueue::new(policy, Arc::new(PendingCallScheduler::new(&rt)));
            let (q, d) = (Arc::clone(&queue), Arc::new(AtomicU64::new(0)));
            let destroyed = Arc::clone(&d);
            let outcome = rt
                .run(WATCHDOG, move |py| {
                    // Foreign OS threads (no Python thread state) push too.
                    for _ in 0..THREADS / 2 {
                        let (q, d) = (Arc::clone(&q), Arc::clone(&d));
                        std::thread::spawn(move || q.push(Box::new(Counted(d))))
                            .join()
                            .unwrap();
                    }
                    let mut threads = Vec::new();
                    for _ in 0..THREADS / 2 {
                        let (q, d) = (Arc::clone(&q), Arc::clone(&d));
                        threads.push(
                            py.spawn("push", move |py| py.c_call(|| q.push(Box::new(Counted(d)))))?,
                        );
                    }
                    for t in &threads {
                        py.join(t)?;
                    }
                    while py.c_call(|| q.metrics().states_destroyed)? < THREADS {
                        py.sleep(Duration::from_millis(1))?;
                        py.loop_iter()?;
                    }
                    Ok(())
                })
                .unwrap();
            let cell = format!("{version} {policy}");
            assert!(
                matches!(outcome, Outcome::Finished(Ok(()))),
                "{cell}: {outcome:?}"
            );
            assert_eq!(destroyed.load(Ordering::SeqCst), THREADS, "{cell}");
            assert_eq!(queue.metrics().states_leaked, 0, "{cell}");
        }
    }
}

#[test]
fn pending_call_scheduler_refuses_once_finalizing() {
    let rt = Interpreter::new(PyVersion::V3_11);
    let queue = CleanupQueue::new(Policy::Scheduled, Arc::new(PendingCallScheduler::new(&rt)));
    let outcome = rt.run(WATCHDOG, |_| Ok(())).unwrap();
    assert!(matches!(outcome, Outcome::Finished(Ok(()))));
    assert!(rt.is_finalizing());
    let scheduler = PendingCallScheduler::new(&rt);
    let err = scheduler.schedule(&queue).unwrap_err();
    assert!(err.to_string().contains("finalizing"), "{err}");
    assert_eq!(rt.stats().pending_calls_added, 0);
}

#[test]
fn pending_call_scheduler_reports_a_full_ring() {
    for version in PyVersion::ALL {
        let rt = Interpreter::new(version);
        // Fill the ring from this (foreign) OS thread: no interpreter runs it.
        let capacity = version.spec().ring_capacity;
        for _ in 0..capacity {
            rt.add_pending_call(|_| Ok(())).unwrap();
        }
        let queue = CleanupQueue::new(Policy::Scheduled, Arc::new(PendingCallScheduler::new(&rt)));
        let err = PendingCallScheduler::new(&rt).schedule(&queue).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("pending-call"), "{text}");
        assert!(
            text.contains(&format!("ring is full ({capacity} calls)")),
            "{text}"
        );
        assert!(text.contains(version.name()), "{text}");
        assert_eq!(rt.stats().pending_calls_rejected, 1);
        // Through the queue: counted as a failed schedule, the state stays.
        let destroyed = Arc::new(AtomicU64::new(0));
        queue.push(Box::new(Counted(Arc::clone(&destroyed))));
        assert_eq!(queue.metrics().schedules_failed, 1);
        assert_eq!(queue.len(), 1);
    }
}
