//! Faults found in review that do not touch the scheduler: runtime
//! settings too large to honour, a semaphore counted past `usize`, a green
//! thread joining itself. Each test fails with its fix reverted.

use crate::common;

use common::hub::{bounded, rt};
use greenlet::hub::{self, HubError, JoinError, Runtime, Semaphore};

/// `worker_threads(usize::MAX)` is a setting error naming the limit, not a
/// "capacity overflow" panic.
#[test]
fn worker_threads_past_the_limit_is_invalid_config() {
    let err = Runtime::builder()
        .worker_threads(usize::MAX)
        .build()
        .unwrap_err();
    assert!(matches!(err, HubError::InvalidConfig(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("worker_threads"), "{text}");
    assert!(
        text.contains(&hub::MAX_WORKER_THREADS.to_string()),
        "{text}"
    );
    // The limit itself is no error of this check.
    let err = Runtime::builder()
        .worker_threads(hub::MAX_WORKER_THREADS + 1)
        .build()
        .unwrap_err();
    assert!(matches!(err, HubError::InvalidConfig(_)), "{err:?}");
}

/// `pending_call_capacity(usize::MAX)` panicked and `(1 << 40)` aborted the
/// process allocating the ring: both are setting errors naming the limit.
#[test]
fn pending_call_capacity_past_the_limit_is_invalid_config() {
    for n in [usize::MAX, 1 << 40, hub::MAX_PENDING_CALL_CAPACITY + 1] {
        let err = Runtime::builder()
            .worker_threads(1)
            .pending_call_capacity(n)
            .build()
            .unwrap_err();
        assert!(matches!(err, HubError::InvalidConfig(_)), "{n}: {err:?}");
        let text = err.to_string();
        assert!(text.contains("pending_call_capacity"), "{text}");
        assert!(
            text.contains(&hub::MAX_PENDING_CALL_CAPACITY.to_string()),
            "{text}"
        );
    }
    let rt = Runtime::builder()
        .worker_threads(1)
        .watchdog(None)
        .pending_call_capacity(hub::MAX_PENDING_CALL_CAPACITY)
        .build()
        .unwrap();
    assert_eq!(rt.block_on(|| 7).unwrap(), 7);
}

/// `Semaphore::new(usize::MAX).add_permits(1)` wrapped the count to zero in
/// release builds (and panicked in debug ones): every later acquire would
/// park for ever. The count now stops at `MAX_PERMITS`.
#[test]
fn semaphore_add_past_the_maximum_loses_no_permit() {
    let s = Semaphore::new(usize::MAX);
    assert_eq!(s.available(), Semaphore::MAX_PERMITS);
    s.add_permits(1);
    assert_eq!(s.available(), Semaphore::MAX_PERMITS);
    assert!(s.try_acquire().is_some());
    let err = s.try_add_permits(1).unwrap_err();
    assert!(
        matches!(err, HubError::TooManyPermits { added: 0, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("at most"), "{err}");
}

/// Taking one permit, adding one, then returning the held one: the held
/// permit's return must not overflow the count.
#[test]
fn semaphore_take_add_return_at_the_maximum() {
    let s = Semaphore::new(usize::MAX);
    let held = s.try_acquire().expect("a permit");
    assert_eq!(s.available(), Semaphore::MAX_PERMITS - 1);
    // Free and held together are at the maximum: nothing is added.
    assert!(s.try_add_permits(1).is_err());
    drop(held);
    assert_eq!(s.available(), Semaphore::MAX_PERMITS);
    // Every permit is still there to take.
    let a = s.try_acquire();
    let b = s.try_acquire();
    assert!(a.is_some() && b.is_some());
    assert_eq!(s.available(), Semaphore::MAX_PERMITS - 2);
}

/// A partial add reports how many permits it added, and they are usable.
#[test]
fn semaphore_partial_add_reports_what_it_added() {
    let s = Semaphore::new(Semaphore::MAX_PERMITS - 3);
    let err = s.try_add_permits(5).unwrap_err();
    assert!(
        matches!(
            err,
            HubError::TooManyPermits {
                asked: 5,
                added: 3,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(s.available(), Semaphore::MAX_PERMITS);
}

/// A green thread that joins its own handle gets `JoinedSelf` at once
/// instead of parking for ever.
#[test]
fn joining_its_own_handle_is_an_error() {
    let err = bounded(30, || {
        rt(1)
            .block_on(|| {
                let (handle_tx, handle_rx) = hub::oneshot::<hub::JoinHandle<()>>();
                let (out_tx, out_rx) = hub::oneshot();
                let h = hub::task()
                    .name("narcissus")
                    .spawn(move || {
                        let me = handle_rx.recv().unwrap();
                        let _ = out_tx.send(me.join());
                    })
                    .unwrap();
                handle_tx.send(h).unwrap();
                out_rx.recv().unwrap()
            })
            .unwrap()
    });
    let err = err.unwrap_err();
    assert!(
        matches!(err, JoinError::JoinedSelf { ref name } if name == "narcissus"),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("joined its own JoinHandle"),
        "{err}"
    );
}
