//! Faults found in review in the shutdown and the task builder: a green
//! thread that catches its cancellation around a parking point in a loop
//! held the shutdown past its timeout (or forever), `task().stack_size(0)`
//! was accepted, and a task's greenlet had a name of its own. Each test
//! fails with its fix reverted.

use crate::common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::hub::{bounded, rt, until_parked};
use greenlet::hub::{self, Wait};

/// Start a green thread that catches its cancellation around a long sleep,
/// `rounds` times (`None`: forever), and wait until it sleeps.
fn refuser(rt: &hub::Runtime, rounds: Option<usize>, caught: Arc<AtomicUsize>) {
    let h = rt.handle().spawn(move || {
        let mut n = 0;
        while rounds.is_none_or(|r| n < r) {
            let _ = catch_unwind(AssertUnwindSafe(|| hub::sleep(Duration::from_secs(10))));
            caught.fetch_add(1, Ordering::SeqCst);
            n += 1;
        }
    });
    rt.block_on(move || until_parked(&h, Wait::Sleep)).unwrap();
}

/// The shape of a supervisor, four rounds: `shutdown_timeout(1 s)` took
/// eleven seconds (the force-unwind parked the worker's OS thread).
#[test]
fn shutdown_timeout_holds_for_a_green_thread_catching_its_cancellation() {
    let timeout = Duration::from_millis(500);
    let (elapsed, caught, refused) = bounded(60, move || {
        let rt = rt(1);
        let caught = Arc::new(AtomicUsize::new(0));
        refuser(&rt, Some(4), Arc::clone(&caught));
        let start = Instant::now();
        let report = rt.shutdown_timeout(timeout);
        (
            start.elapsed(),
            caught.load(Ordering::SeqCst),
            report.refused.len(),
        )
    });
    assert!(
        elapsed < timeout * 5,
        "shutdown_timeout({timeout:?}) took {elapsed:?}"
    );
    assert_eq!(caught, 4, "every round ran");
    assert_eq!(refused, 1, "the refusing green thread is reported");
}

/// An endless loop of that shape: the shutdown never returned.
#[test]
fn shutdown_timeout_holds_for_an_endless_refusal() {
    let timeout = Duration::from_millis(500);
    let (elapsed, refused, detached) = bounded(60, move || {
        let rt = rt(2);
        refuser(&rt, None, Arc::new(AtomicUsize::new(0)));
        let start = Instant::now();
        let report = rt.shutdown_timeout(timeout);
        (
            start.elapsed(),
            report.refused.len(),
            report.workers_detached,
        )
    });
    let bound = (timeout + hub::TEARDOWN_GRACE) * 3;
    assert!(
        elapsed < bound,
        "shutdown_timeout({timeout:?}) took {elapsed:?}"
    );
    assert_eq!(refused, 1);
    assert_eq!(
        detached, 1,
        "the worker held by the endless refusal is detached"
    );
}

/// `task().stack_size(0)` was accepted (the task ran on a few KiB, and a
/// panic there could overflow and abort): the spawn is a setting error, as
/// the runtime builder's is.
#[test]
fn task_stack_size_below_the_minimum_is_invalid_config() {
    let rt = rt(1);
    rt.block_on(|| {
        for bytes in [0, 1, hub::MIN_STACK_SIZE - 1] {
            let err = hub::task().stack_size(bytes).spawn(|| ()).unwrap_err();
            assert!(matches!(err, hub::HubError::InvalidConfig(_)), "{err:?}");
            let text = err.to_string();
            assert!(text.contains(&format!("stack_size {bytes} ")), "{text}");
            assert!(text.contains(&hub::MIN_STACK_SIZE.to_string()), "{text}");
            let err = hub::task()
                .stack_size(bytes)
                .spawn_local(|| ())
                .unwrap_err();
            assert!(matches!(err, hub::HubError::InvalidConfig(_)), "{err:?}");
        }
        let h = hub::task()
            .stack_size(hub::MIN_STACK_SIZE)
            .spawn(|| 3)
            .unwrap();
        assert_eq!(h.join().unwrap(), 3);
    })
    .unwrap();
}
