//! Thread-exit cleanup, measured: a thread's exit with greenlet state (0, 1,
//! 10, 100 suspended greenlets, each with a finalizer) against a bare
//! thread's; the drain per state under each scheduler (inline, manual,
//! reaper, the CPython model's pending call); and 1,000 short-lived threads
//! that each use greenlets, against 1,000 bare ones.
//!
//! Run: `cargo bench --bench cleanup`. Targets: a drain at most
//! 1 µs per state; a thread exit with 10 suspended greenlets at most 10 µs
//! more than a bare thread's. `benches/python/run.sh --kv` gives the same
//! short-lived-thread load on CPython's greenlet (`thread_*` lines).
#![allow(missing_docs)] // criterion_group! defines an undocumented `pub fn`

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use greenlet::cleanup::{set_thread_queue, CleanupQueue, Inline, Manual, Policy, Reaper, Remains};
use greenlet::interp_shim::{Interpreter, PendingCallScheduler, PyVersion, Watchdog};
use greenlet::{getcurrent, Greenlet, Value};

/// States per timed drain.
const STATES: u64 = 100;

/// Start `count` greenlets on this thread, each suspended in a switch back
/// to main and holding the only handle to itself on its own stack (so that
/// no handle is dropped before the thread exits: the thread's teardown is
/// what kills them), each with a finalizer counting into `finalized`.
fn leave_suspended(count: usize, finalized: &Arc<AtomicU64>) {
    let main = getcurrent();
    for _ in 0..count {
        let main = main.clone();
        let g = Greenlet::new(move |me: Value| {
            let _me = me.downcast::<Greenlet>()?;
            main.switch(())?;
            Ok(Value::unit())
        });
        let counter = Arc::clone(finalized);
        g.on_finalize(move || {
            counter.fetch_add(1, Ordering::Relaxed);
        });
        g.switch(Value::new(g.clone())).expect("start a greenlet");
    }
}

/// The time from the end of a thread's closure to its `join` returning:
/// its thread-local teardown (and, with the default inline queue, the drain
/// of its state), plus the join's wake-up, which a bare thread pays too.
/// `greenlets` is `None` for a thread that never touches greenlets.
fn exit_time(greenlets: Option<usize>) -> Duration {
    let finalized = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&finalized);
    let worker = thread::spawn(move || {
        if let Some(count) = greenlets {
            black_box(getcurrent());
            leave_suspended(count, &counter);
        }
        Instant::now()
    });
    let closure_end = worker.join().expect("the worker thread");
    let elapsed = closure_end.elapsed();
    let expected = greenlets.unwrap_or(0) as u64;
    assert_eq!(
        finalized.load(Ordering::Relaxed),
        expected,
        "finalizers run by join"
    );
    elapsed
}

fn thread_exit(c: &mut Criterion) {
    let mut group = c.benchmark_group("thread exit");
    group.bench_function("bare thread (no greenlet state)", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| exit_time(None)).sum())
    });
    for count in [0, 1, 10, 100] {
        group.bench_function(
            format!("greenlet state, {count} suspended (finalizer each)"),
            |b| b.iter_custom(|iters| (0..iters).map(|_| exit_time(Some(count))).sum()),
        );
    }
    group.finish();
}

/// A queued state with one finalizer, as a dying thread's remains carry.
struct Note(Box<dyn FnOnce() + Send>);

impl Remains for Note {
    fn destroy(self: Box<Self>) {
        (self.0)()
    }
    fn label(&self) -> String {
        "a benchmark state".into()
    }
}

fn note(destroyed: &Arc<AtomicU64>) -> Box<dyn Remains> {
    let counter = Arc::clone(destroyed);
    Box::new(Note(Box::new(move || {
        counter.fetch_add(1, Ordering::Relaxed);
    })))
}

/// `STATES` dying threads' real remains (one suspended greenlet with a
/// finalizer each) queued on a fresh manual queue, not drained yet.
fn thread_remains(finalized: &Arc<AtomicU64>) -> Arc<CleanupQueue> {
    let queue = CleanupQueue::new(Policy::default(), Arc::new(Manual));
    for _ in 0..STATES {
        let (queue, counter) = (Arc::clone(&queue), Arc::clone(finalized));
        thread::spawn(move || {
            set_thread_queue(Some(queue));
            leave_suspended(1, &counter);
        })
        .join()
        .expect("a worker thread");
    }
    queue
}

fn drain_per_state(c: &mut Criterion) {
    let mut group = c.benchmark_group("drain per state");
    // Inline: each push drains its own state before it returns.
    group.bench_function("inline (push + drain of one)", |b| {
        let destroyed = Arc::new(AtomicU64::new(0));
        let queue = CleanupQueue::new(Policy::default(), Arc::new(Inline));
        b.iter(|| queue.push(note(&destroyed)))
    });
    group.bench_function(format!("manual ({STATES} states, one drain)"), |b| {
        b.iter_custom(|iters| {
            let destroyed = Arc::new(AtomicU64::new(0));
            let queue = CleanupQueue::new(Policy::default(), Arc::new(Manual));
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                for _ in 0..STATES {
                    queue.push(note(&destroyed));
                }
                let start = Instant::now();
                queue.drain();
                total += start.elapsed();
            }
            assert_eq!(destroyed.load(Ordering::Relaxed), iters * STATES);
            total / STATES as u32
        })
    });
    // The reaper: from the first push to the last state destroyed on the
    // reaper thread (one wake-up per batch, the drain taking every state).
    group.bench_function(format!("reaper ({STATES} pushes until destroyed)"), |b| {
        let reaper = Reaper::spawn().expect("the reaper thread");
        let queue = CleanupQueue::new(Policy::default(), Arc::new(reaper));
        let destroyed = Arc::new(AtomicU64::new(0));
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let target = destroyed.load(Ordering::Relaxed) + STATES;
                let start = Instant::now();
                for _ in 0..STATES {
                    queue.push(note(&destroyed));
                }
                while destroyed.load(Ordering::Acquire) < target {
                    std::hint::spin_loop();
                }
                total += start.elapsed();
            }
            total / STATES as u32
        })
    });
    // The model's pending call: the pushes (on the model's main thread)
    // add one pending call, which the main thread's next check runs.
    group.bench_function(
        format!("pending call, Python 3.12 model ({STATES} states)"),
        |b| {
            b.iter_custom(|iters| {
                let rt = Interpreter::new(PyVersion::V3_12);
                let queue =
                    CleanupQueue::new(Policy::default(), Arc::new(PendingCallScheduler::new(&rt)));
                let destroyed = Arc::new(AtomicU64::new(0));
                let (q, counter) = (Arc::clone(&queue), Arc::clone(&destroyed));
                let outcome = rt
                    .run(Watchdog::Report(Duration::from_secs(120)), move |py| {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            for _ in 0..STATES {
                                q.push(note(&counter));
                            }
                            let start = Instant::now();
                            py.make_pending_calls()?;
                            total += start.elapsed();
                        }
                        Ok(total)
                    })
                    .expect("the model runs");
                assert_eq!(destroyed.load(Ordering::Relaxed), iters * STATES);
                match outcome {
                    greenlet::interp_shim::Outcome::Finished(Ok(total)) => total / STATES as u32,
                    other => panic!("the model's run did not finish: {other:?}"),
                }
            })
        },
    );
    group.finish();
}

/// The drain of real remains: each iteration first makes `STATES` threads
/// die (untimed, ~100 times the drain's own time), so this group runs a
/// fixed, small number of iterations.
fn drain_thread_remains(c: &mut Criterion) {
    let mut group = c.benchmark_group("drain per state");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_millis(20));
    group.bench_function(
        format!("manual, real thread remains ({STATES} dead threads, one drain)"),
        |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let finalized = Arc::new(AtomicU64::new(0));
                    let queue = thread_remains(&finalized);
                    assert_eq!(queue.len() as u64, STATES);
                    let start = Instant::now();
                    queue.drain();
                    total += start.elapsed();
                    assert_eq!(finalized.load(Ordering::Relaxed), STATES);
                }
                total / STATES as u32
            })
        },
    );
    group.finish();
}

/// Threads per sample of the short-lived-threads benchmarks.
const THREADS: usize = 1_000;

fn short_lived_threads(c: &mut Criterion) {
    let mut group = c.benchmark_group("1,000 short-lived threads");
    group.sample_size(10);
    group.bench_function("bare (spawn + join, one after another)", |b| {
        b.iter(|| {
            for _ in 0..THREADS {
                thread::spawn(|| black_box(0)).join().expect("a thread");
            }
        })
    });
    group.bench_function("each leaves 10 suspended greenlets (finalizer each)", |b| {
        let finalized = Arc::new(AtomicU64::new(0));
        b.iter(|| {
            for _ in 0..THREADS {
                let counter = Arc::clone(&finalized);
                thread::spawn(move || leave_suspended(10, &counter))
                    .join()
                    .expect("a thread");
            }
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = thread_exit, drain_per_state, drain_thread_remains, short_lived_threads
}
criterion_main!(benches);
