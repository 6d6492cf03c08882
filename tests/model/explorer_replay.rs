//! The explorer's counterexamples replayed on the live shim (real OS threads,
//! the real GIL of `interp_shim::Interpreter`), each forced into the explorer's
//! interleaving by the cleanup queue's test probe ([`DrainPoint`]) and by
//! gates in the dying threads' thread-local destructors (where a dying
//! thread pushes its state, without the GIL; those runtimes run with
//! [`ExitOrder::Racing`], since the gates wait for the main thread's Python
//! code). Under the policy the explorer
//! convicts, each replay hangs and the watchdog reports it; under the
//! recommended policy ([`Policy::default`]) the same schedule finishes with
//! every state destroyed.

use crate::common;

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use greenlet::cleanup::{CleanupQueue, DrainPoint, Metrics, Policy, Remains};
use greenlet::interp_shim::scenarios::{seed, SeedConfig, TraceMode};
use greenlet::interp_shim::{
    ExitOrder, HangCause, HangReport, Hook, Interpreter, Outcome, PendingCallScheduler, Py, PyErr,
    PyEvent, PyVersion, QueueAtHang, Watchdog, EARLY_VERDICT_REDISPATCHES,
};
use parking_lot::Mutex;

/// A hang is reported after this long; a passing replay finishes far sooner.
const HANG: Duration = Duration::from_secs(2);
const PASS: Duration = Duration::from_secs(30);
/// How long a gate waits for its signal before giving up (never reached in
/// a replay that follows its schedule).
const GATE: Duration = Duration::from_secs(20);

type Callback = Box<dyn FnOnce() + Send>;

/// A dying thread's greenlet state, held in a thread-local: its destructor
/// is the thread's exit (no GIL), where it pushes the state onto the queue,
/// with test gates before and after the push.
struct ThreadState {
    queue: Arc<CleanupQueue>,
    name: &'static str,
    before_push: Option<Callback>,
    after_push: Option<Callback>,
    finalizer: Option<Callback>,
}

impl Drop for ThreadState {
    fn drop(&mut self) {
        if let Some(gate) = self.before_push.take() {
            gate();
        }
        self.queue.push(Box::new(Dead {
            name: self.name,
            finalizer: self.finalizer.take(),
        }));
        if let Some(done) = self.after_push.take() {
            done();
        }
    }
}

struct Dead {
    name: &'static str,
    finalizer: Option<Callback>,
}

impl Remains for Dead {
    fn destroy(self: Box<Self>) {
        if let Some(f) = self.finalizer {
            f();
        }
    }
    fn label(&self) -> String {
        format!("main greenlet of thread {}", self.name)
    }
}

thread_local! {
    static STATE: RefCell<Option<ThreadState>> = const { RefCell::new(None) };
}

/// Gives the calling (dying) thread its greenlet state, whose finalizer is
/// [`sleepy_finalizer`]: the state is pushed when the thread exits, between
/// the two gates.
fn dies_later(
    queue: Arc<CleanupQueue>,
    name: &'static str,
    before_push: Option<Callback>,
    after_push: Option<Callback>,
) {
    STATE.with(|s| {
        *s.borrow_mut() = Some(ThreadState {
            queue,
            name,
            before_push,
            after_push,
            finalizer: Some(sleepy_finalizer()),
        })
    });
}

/// The churn scenario's finalizer (a `WeakKeyDictionary` removal callback):
/// runs on the draining thread as Python code that sleeps (dropping the GIL;
/// `take_gil` recomputes the breaker as the main thread), then enters a
/// function.
fn sleepy_finalizer() -> Callback {
    Box::new(|| {
        let Some(py) = Py::current() else { return };
        let result = py.call("_remove", |py| {
            py.sleep(Duration::from_micros(200))?;
            py.call("_commit_removals", |_| Ok(()))
        });
        match result {
            Ok(()) | Err(PyErr::Cancelled) => {}
            Err(err) => eprintln!("Exception ignored in _remove: {err}"),
        }
    })
}

/// A gate: a hook that waits (bounded) for a message.
fn gate(rx: Receiver<()>) -> Callback {
    Box::new(move || {
        let _ = rx.recv_timeout(GATE);
    })
}

fn notify(tx: Sender<()>) -> Callback {
    Box::new(move || {
        let _ = tx.send(());
    })
}

fn new_queue(rt: &Interpreter, policy: Policy) -> Arc<CleanupQueue> {
    let queue = CleanupQueue::new(policy, Arc::new(PendingCallScheduler::new(rt)));
    rt.report_queue(&queue);
    let q = Arc::clone(&queue);
    rt.at_finalize(move || q.finalize());
    queue
}

/// The main thread's idle loop: call a function, sleep, loop, until `done`.
fn idle_until(py: &Py, done: impl Fn() -> bool) -> Result<(), PyErr> {
    while !py.c_call(&done)? {
        py.call("work", |_| Ok(()))?;
        py.sleep(Duration::from_millis(1))?;
        py.loop_iter()?;
    }
    Ok(())
}

struct Replay {
    outcome: Outcome<()>,
    /// The probe held a thread at its point: the schedule was replayed.
    held: bool,
    metrics: Metrics,
    destroyed: u64,
    len: usize,
}

impl Replay {
    /// What a replay left: its outcome, whether the probe held, the queue
    /// (when it hung: as the watchdog found it, before its cancel let the
    /// drains run).
    fn collect(outcome: Outcome<()>, held: &AtomicBool, queue: &CleanupQueue) -> Self {
        let seen = match &outcome {
            Outcome::Hung(report) => report.queue.expect("the queue is registered"),
            Outcome::Finished(_) => QueueAtHang::of(queue),
        };
        Replay {
            outcome,
            held: held.load(Ordering::SeqCst),
            destroyed: seen.metrics.states_destroyed,
            metrics: seen.metrics,
            len: seen.len,
        }
    }

    fn hang(&self) -> Option<&HangReport> {
        match &self.outcome {
            Outcome::Hung(report) => Some(report),
            Outcome::Finished(_) => None,
        }
    }

    /// The replay followed its schedule and finished, every one of its
    /// `states` destroyed and none left queued.
    fn assert_passed(&self, what: &str, states: u64) {
        assert!(self.held, "{what}: the probe never held the schedule");
        assert!(self.hang().is_none(), "{what}: {}", self.hang().unwrap());
        assert!(
            matches!(self.outcome, Outcome::Finished(Ok(()))),
            "{what}: {:?}",
            self.outcome
        );
        assert_eq!(self.destroyed, states, "{what}");
        assert_eq!(self.len, 0, "{what}");
    }
}

/// The churn counterexample of `draining` and `scheduled` (3.11, traced):
/// C1 dies, its drain runs; the drain finds the queue empty and releases its
/// flag — the probe holds it there — C2 dies and schedules a second drain;
/// the same busy `make_pending_calls` pops it; C2's finalizer sleeps
/// (`take_gil` sets the main thread's breaker: `calls_to_do` is 1) and
/// enters a traced function: the RESUME re-dispatches forever.
fn churn_replay(policy: Policy, timeout: Duration) -> Replay {
    let _serial = common::serial();
    let rt = Interpreter::new(PyVersion::V3_11);
    rt.set_exit_order(ExitOrder::Racing);
    let queue = new_queue(&rt, policy);
    let (go_tx, go_rx) = channel();
    let (pushed_tx, pushed_rx) = channel();
    let held = Arc::new(AtomicBool::new(false));
    let was_held = Arc::clone(&held);
    let go_tx = Mutex::new(Some(go_tx));
    let pushed_rx = Mutex::new(pushed_rx);
    queue.set_drain_probe(Some(Arc::new(move |point| {
        // The first drain, after it found the queue empty: C2 dies now.
        if point == DrainPoint::Empty && !held.swap(true, Ordering::SeqCst) {
            if let Some(tx) = go_tx.lock().take() {
                let _ = tx.send(());
            }
            let _ = pushed_rx.lock().recv_timeout(GATE);
        }
    })));
    let q = Arc::clone(&queue);
    let go_rx = Mutex::new(Some(go_rx));
    let pushed_tx = Mutex::new(Some(pushed_tx));
    let (c1_tx, c1_rx) = channel();
    let c1_rx = Mutex::new(Some(c1_rx));
    let outcome = rt
        .run(Watchdog::Report(timeout), move |py| {
            py.settrace(Hook::C)?;
            let (q1, q2) = (Arc::clone(&q), Arc::clone(&q));
            let c1_gate = c1_rx.lock().take();
            let c1 = py.spawn("C1", move |_| {
                dies_later(q1, "C1", c1_gate.map(gate), None);
                Ok(())
            })?;
            let (rx, tx) = (go_rx.lock().take(), pushed_tx.lock().take());
            let c2 = py.spawn("C2", move |_| {
                dies_later(q2, "C2", rx.map(gate), tx.map(notify));
                Ok(())
            })?;
            py.join(&c1)?;
            py.join(&c2)?;
            // Both bodies are done (the probe may then hold the GIL while C2
            // pushes): C1 may die now.
            py.c_call(|| c1_tx.send(())).map(|_| ())?;
            idle_until(py, || q.metrics().states_destroyed == 2)
        })
        .expect("the runtime starts");
    Replay::collect(outcome, &was_held, &queue)
}

fn assert_churn_livelock(replay: &Replay, policy: Policy) {
    let hang = replay.hang().unwrap_or_else(|| panic!("{policy}: no hang"));
    let main = hang.thread(0).expect("the main thread is alive");
    assert_eq!(main.frames.first(), Some(&"_commit_removals"), "{hang}");
    assert!(main.frames.contains(&"_remove"), "{hang}");
    assert!(hang.livelock_predicate, "{hang}");
    // Ended by the early verdict, long before the timeout.
    assert_eq!(
        hang.cause,
        HangCause::Livelock {
            redispatches: EARLY_VERDICT_REDISPATCHES
        },
        "{hang}"
    );
    assert!(main.redispatches >= EARLY_VERDICT_REDISPATCHES, "{hang}");
}

#[test]
fn churn_replay_livelocks_draining_and_scheduled() {
    for policy in [Policy::Draining, Policy::Scheduled] {
        let replay = churn_replay(policy, HANG);
        assert!(replay.held, "{policy}");
        assert_churn_livelock(&replay, policy);
    }
}

#[test]
fn churn_replay_passes_under_the_default_policy() {
    let replay = churn_replay(Policy::default(), PASS);
    replay.assert_passed("churn replay, default policy", 2);
    // C2 scheduled a second drain in the window, as in the counterexample.
    assert_eq!(replay.metrics.schedules_requested, 2);
    assert_eq!(replay.metrics.max_outstanding, 2);
}

/// The full-ring counterexample of every policy but `robust`: the ring is
/// full of the main thread's own pending calls when X dies, so X's
/// `Py_AddPendingCall` is refused — the probe holds X there, before the
/// queue hears of it — while the main thread runs its calls (the ring
/// empties) and Y dies (its push finds the flag held, or a size of 2, and
/// does nothing); then X reports the failure. Nothing will ever schedule a
/// drain: the main thread idles forever waiting for the two states.
fn full_ring_replay(policy: Policy, timeout: Duration) -> Replay {
    let _serial = common::serial();
    let version = PyVersion::V3_11;
    let rt = Interpreter::new(version);
    rt.set_exit_order(ExitOrder::Racing);
    let queue = new_queue(&rt, policy);
    let refused = PyEvent::new(&rt);
    let filled = PyEvent::new(&rt);
    let (y_go_tx, y_go_rx) = channel();
    let (y_pushed_tx, y_pushed_rx) = channel();
    let held = Arc::new(AtomicBool::new(false));
    let was_held = Arc::clone(&held);
    let signal = refused.clone();
    let y_go_tx = Mutex::new(Some(y_go_tx));
    let y_pushed_rx = Mutex::new(y_pushed_rx);
    queue.set_drain_probe(Some(Arc::new(move |point| {
        // X's schedule was refused: let the main thread and Y go, and hold X
        // until Y has pushed.
        if point == DrainPoint::ScheduleRefused && !held.swap(true, Ordering::SeqCst) {
            signal.set();
            if let Some(tx) = y_go_tx.lock().take() {
                let _ = tx.send(());
            }
            let _ = y_pushed_rx.lock().recv_timeout(GATE);
        }
    })));
    let q = Arc::clone(&queue);
    let runtime = rt.clone();
    let y_gate = Mutex::new(Some((y_go_rx, y_pushed_tx)));
    let fill_go = PyEvent::new(&rt);
    let outcome = rt
        .run(Watchdog::Report(timeout), move |py| {
            let capacity = version.spec().ring_capacity;
            let (rt2, f2, go) = (runtime.clone(), filled.clone(), fill_go.clone());
            let filler = py.spawn("fill_ring", move |py| {
                py.wait(&go)?;
                for _ in 0..capacity {
                    if rt2.add_pending_call(|_| Ok(())).is_err() {
                        break;
                    }
                }
                py.c_call(|| f2.set())
            })?;
            let (qx, f3) = (Arc::clone(&q), filled.clone());
            let x = py.spawn("X", move |py| {
                py.wait(&f3)?;
                dies_later(qx, "X", None, None);
                Ok(())
            })?;
            let (qy, rt3) = (Arc::clone(&q), runtime.clone());
            let (go, pushed) = y_gate.lock().take().expect("one run");
            let y = py.spawn("Y", move |_| {
                // Y dies once X was refused and the ring has emptied.
                let ring_empty: Callback = Box::new(move || {
                    let _ = go.recv_timeout(GATE);
                    let deadline = Instant::now() + GATE;
                    while rt3.summary().ring > 0 && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                });
                dies_later(qy, "Y", Some(ring_empty), Some(notify(pushed)));
                Ok(())
            })?;
            // Blocked (GIL released) until X's schedule was refused: the
            // main thread runs none of the ring's calls before that.
            py.c_call(|| fill_go.set())?;
            py.wait(&refused)?;
            py.join(&filler)?;
            py.join(&x)?;
            py.join(&y)?;
            idle_until(py, || q.metrics().states_destroyed == 2)
        })
        .expect("the runtime starts");
    Replay::collect(outcome, &was_held, &queue)
}

#[test]
fn full_ring_replay_leaks_under_legacy_and_shielded() {
    for policy in [Policy::Legacy, Policy::Shielded] {
        let replay = full_ring_replay(policy, HANG);
        let hang = replay
            .hang()
            .unwrap_or_else(|| panic!("{policy}: the states were destroyed"));
        // Not a livelock: the main thread idles, the queue is stranded.
        assert!(!hang.livelock_predicate, "{hang}");
        assert_eq!(hang.redispatches, 0, "{hang}");
        // The queue as the watchdog found it: stranded.
        let queue = hang.queue.expect("the queue is registered");
        assert_eq!((queue.len, queue.outstanding), (2, 0), "{policy}: {hang}");
        assert_eq!(hang.cause, HangCause::Timeout, "{hang}");
        assert!(replay.held, "{policy}");
        assert_eq!(replay.destroyed, 0, "{policy}");
    }
}

#[test]
fn full_ring_replay_passes_under_the_default_policy() {
    let replay = full_ring_replay(Policy::default(), PASS);
    replay.assert_passed("full-ring replay, default policy", 2);
    // X's schedule was refused, then retried because Y relied on it.
    assert_eq!(replay.metrics.schedules_failed, 1);
    assert_eq!(replay.metrics.schedules_requested, 2);
}

/// The full-ring counterexample of `legacy`, `draining` and `scheduled` on
/// 3.11 (traced) needs one dying thread only: X's `Py_AddPendingCall` lands
/// while the main thread's `make_pending_calls` is busy running other
/// pending calls, so `calls_to_do` is set again inside the busy loop, and
/// that same loop pops X's drain; X's finalizer sleeps (`take_gil` sets the
/// breaker) and enters a traced function. No flag can prevent it: only the
/// shield does. The other pending call here is C code that blocks (GIL
/// held) until X has added its drain.
fn busy_loop_replay(policy: Policy, timeout: Duration) -> Replay {
    let _serial = common::serial();
    let rt = Interpreter::new(PyVersion::V3_11);
    rt.set_exit_order(ExitOrder::Racing);
    let queue = new_queue(&rt, policy);
    let (x_go_tx, x_go_rx) = channel::<()>();
    let (x_added_tx, x_added_rx) = channel::<()>();
    let held = Arc::new(AtomicBool::new(false));
    let was_held = Arc::clone(&held);
    let q = Arc::clone(&queue);
    let runtime = rt.clone();
    let gates = Mutex::new(Some((x_go_tx, x_go_rx, x_added_tx, x_added_rx)));
    let outcome = rt
        .run(Watchdog::Report(timeout), move |py| {
            py.settrace(Hook::C)?;
            let (x_go_tx, x_go_rx, x_added_tx, x_added_rx) = gates.lock().take().expect("one run");
            let qx = Arc::clone(&q);
            let x = py.spawn("X", move |_| {
                dies_later(qx, "X", Some(gate(x_go_rx)), Some(notify(x_added_tx)));
                Ok(())
            })?;
            py.join(&x)?;
            // Another library's pending call: C code that, once running
            // (busy), lets X die and waits until X's drain is in the ring.
            let flag = Arc::clone(&held);
            runtime
                .add_pending_call(move |_| {
                    flag.store(true, Ordering::SeqCst);
                    let _ = x_go_tx.send(());
                    let _ = x_added_rx.recv_timeout(GATE);
                    Ok(())
                })
                .map_err(|full| PyErr::exception("RuntimeError", full.to_string()))?;
            idle_until(py, || q.metrics().states_destroyed == 1)
        })
        .expect("the runtime starts");
    Replay::collect(outcome, &was_held, &queue)
}

#[test]
fn busy_loop_replay_livelocks_every_flag_policy() {
    for policy in [Policy::Legacy, Policy::Draining, Policy::Scheduled] {
        let replay = busy_loop_replay(policy, HANG);
        assert!(replay.held, "{policy}");
        assert_churn_livelock(&replay, policy);
        // One drain only: no second schedule was needed.
        assert_eq!(replay.metrics.schedules_requested, 1, "{policy}");
    }
}

#[test]
fn busy_loop_replay_passes_under_the_default_policy() {
    let replay = busy_loop_replay(Policy::default(), PASS);
    replay.assert_passed("busy-loop replay, default policy", 1);
}

/// The seed counterexample of `legacy`: the scenario's own synchronization
/// (A's finalizer waits until B is queued) and the runtime's settled exit
/// order (B's pending call is added before the finalizer has the GIL back)
/// force the explorer's schedule.
#[test]
fn seed_replay_livelocks_legacy_and_passes_the_default_policy() {
    let _serial = common::serial();
    let run = |policy, timeout| {
        seed(SeedConfig {
            version: PyVersion::V3_11,
            policy,
            mode: TraceMode::Trace,
            watchdog: Watchdog::Report(timeout),
        })
        .expect("the runtime starts")
    };
    let legacy = run(Policy::Legacy, HANG);
    let hang = legacy.hang.as_ref().expect("legacy hangs");
    assert_eq!(hang.thread(0).unwrap().frames.first(), Some(&"<lambda>"));
    assert!(hang.livelock_predicate, "{hang}");
    let fixed = run(Policy::default(), PASS);
    assert!(!fixed.hung());
    assert_eq!(fixed.green_line(), "GREEN True");
    assert_eq!(fixed.queue.states_destroyed, 2);
}

/// The `foreign-call` counterexample on the live shim: A's finalizer,
/// inside greenlet's drain (shielded under `robust`), adds another
/// extension's Python-level pending call (`_testcapi._pending_threadfunc`:
/// a builtin); the drain ends and the same busy `make_pending_calls` pops
/// it; its traced entry spins on 3.11 under every policy, `robust`
/// included, as on real 3.11.7 (`probes/greenlet_switch_in_cleanup.py
/// --kick=testcapi`: `second_call <- threading.py wait <- ...`); 3.12 and
/// 3.13 finish.
#[test]
fn foreign_python_call_replay_livelocks_every_policy_on_311() {
    let _serial = common::serial();
    for version in PyVersion::ALL {
        for policy in Policy::ALL {
            let what = format!("{version} {policy}");
            let rt = Interpreter::new(version);
            let queue = new_queue(&rt, policy);
            let q = Arc::clone(&queue);
            let outcome = rt
                .run(Watchdog::Report(PASS), move |py| {
                    py.settrace(Hook::C)?;
                    let a = py.spawn("A", move |_| {
                        STATE.with(|s| {
                            *s.borrow_mut() = Some(ThreadState {
                                queue: q,
                                name: "A",
                                before_push: None,
                                after_push: None,
                                finalizer: Some(foreign_call_finalizer()),
                            })
                        });
                        Ok(())
                    })?;
                    py.join(&a)?;
                    idle_until(py, || queue_done(&py.runtime()))
                })
                .unwrap();
            let hangs = version == PyVersion::V3_11;
            match outcome {
                Outcome::Hung(report) => {
                    assert!(hangs, "{what}: {report}");
                    let main = report.thread(0).unwrap();
                    assert_eq!(
                        main.frames.first(),
                        Some(&"second_call"),
                        "{what}: {report}"
                    );
                    assert!(!main.frames.contains(&"after_a_destroyed"), "{report}");
                    assert!(
                        matches!(report.cause, HangCause::Livelock { .. }),
                        "{report}"
                    );
                    let seen = report.queue.expect("registered");
                    assert_eq!(
                        (seen.len, seen.metrics.states_destroyed),
                        (0, 1),
                        "{report}"
                    );
                }
                Outcome::Finished(result) => {
                    assert!(!hangs, "{what} should hang");
                    assert_eq!(result, Ok(()), "{what}");
                    assert_eq!(rt.stats().pending_calls_run, 2, "{what}");
                }
            }
        }
    }
}

fn foreign_call_finalizer() -> Callback {
    Box::new(|| {
        let Some(py) = Py::current() else { return };
        let _ = py.call("after_a_destroyed", |py| {
            py.c_call(|| py.add_pending_call(|py| py.call("second_call", |_| Ok(()))))?
                .map_err(|e| PyErr::exception("RuntimeError", e.to_string()))
        });
    })
}

/// Both pending calls ran: greenlet's drain and the foreign call.
fn queue_done(rt: &Interpreter) -> bool {
    rt.stats().pending_calls_run >= 2
}
