//! Unit tests of the semantic core: each version's sequences, step by step.

use super::*;

const B: ThreadIdx = 1;

/// The seed's sequence up to the stuck RESUME, on every version.
fn seed_sequence(version: PyVersion) -> InterpCore<u8> {
    let mut py = InterpCore::new(version);
    let b = py.add_thread();
    assert_eq!(b, B);
    py.set_trace(MAIN_THREAD, true);
    // Thread A died: call #1 queued by a thread without the GIL.
    py.add_pending_push(1).unwrap();
    py.add_pending_signal(2);
    // M picks it up at its next take_gil (after a sleep).
    assert!(py.drop_gil(MAIN_THREAD));
    assert!(py.take_gil(MAIN_THREAD));
    assert!(py.breaker_set(MAIN_THREAD));
    assert!(py.wants_pending_calls(MAIN_THREAD));
    assert_eq!(py.make_pending_calls_begin(MAIN_THREAD), MakeBegin::Started);
    assert_eq!(py.make_pending_calls_pop(0), Some(1));
    // Callback #1 runs Python code; it sleeps; B dies and queues #2.
    assert!(py.drop_gil(MAIN_THREAD));
    py.add_pending_push(2).unwrap();
    py.add_pending_signal(B);
    assert!(py.take_gil(MAIN_THREAD));
    py
}

#[test]
fn v311_traced_resume_livelocks() {
    let mut py = seed_sequence(PyVersion::V3_11);
    assert!(py.resume_livelocked());
    // One round of the spin changes nothing.
    let before = py.clone();
    assert!(py.breaker_set(MAIN_THREAD));
    assert!(!py.take_signals(MAIN_THREAD));
    assert!(py.wants_pending_calls(MAIN_THREAD));
    assert_eq!(
        py.make_pending_calls_begin(MAIN_THREAD),
        MakeBegin::Recursive
    );
    assert!(!py.drop_requested(MAIN_THREAD));
    py.handle_pending_end(MAIN_THREAD);
    assert_eq!(
        py.continuation(MAIN_THREAD, CheckSite::Resume),
        Continuation::Redispatch
    );
    assert_eq!(py, before);
}

#[test]
fn v311_untraced_or_shielded_resume_continues() {
    let mut py = seed_sequence(PyVersion::V3_11);
    py.enter_tracing(MAIN_THREAD);
    assert!(!py.resume_livelocked());
    assert_eq!(
        py.continuation(MAIN_THREAD, CheckSite::Resume),
        Continuation::Continue
    );
    assert!(py.leave_tracing(MAIN_THREAD));
    assert!(!py.leave_tracing(MAIN_THREAD));
}

#[test]
fn v312_keeps_tripping_but_continues() {
    let mut py = seed_sequence(PyVersion::V3_12);
    assert!(!py.resume_livelocked());
    assert_eq!(
        py.make_pending_calls_begin(MAIN_THREAD),
        MakeBegin::Recursive
    );
    py.handle_pending_end(MAIN_THREAD);
    // The final recompute sets the breaker again: every check site trips.
    assert!(py.breaker_set(MAIN_THREAD));
    assert_eq!(
        py.continuation(MAIN_THREAD, CheckSite::Resume),
        Continuation::Continue
    );
}

#[test]
fn v313_recursive_call_clears_own_bit() {
    let mut py = seed_sequence(PyVersion::V3_13);
    assert!(py.breaker_set(MAIN_THREAD));
    assert_eq!(
        py.make_pending_calls_begin(MAIN_THREAD),
        MakeBegin::Recursive
    );
    assert!(!py.breaker_set(MAIN_THREAD));
    assert!(!py.resume_livelocked());
}

/// 3.13's `take_gil` ends with `update_eval_breaker_for_thread`: the
/// main thread's `CALLS_TO_DO` bit is set again whenever the main-thread
/// queue holds calls, so while call #2 waits behind a running call #1,
/// every GIL take costs one more recursive make. Checked on 3.13.0 with
/// gdb (`probes/recursive_trips_after_take_gil.py`): 55 entries into
/// `make_pending_calls` for 50 sleeps of the running call, 3 without #2.
#[test]
fn v313_take_gil_sets_calls_to_do_while_calls_are_queued() {
    let mut py = seed_sequence(PyVersion::V3_13);
    assert_eq!(
        py.make_pending_calls_begin(MAIN_THREAD),
        MakeBegin::Recursive
    );
    assert!(!py.breaker_set(MAIN_THREAD));
    assert!(py.drop_gil(MAIN_THREAD));
    assert!(py.take_gil(MAIN_THREAD));
    assert!(py.calls_to_do() && py.breaker_set(MAIN_THREAD));
    // A non-main thread only looks at the interpreter's own queue.
    assert!(py.drop_gil(MAIN_THREAD));
    assert!(py.take_gil(B));
    assert!(!py.breaker_set(B));
    // Once the ring is empty nothing is set.
    assert_eq!(py.make_pending_calls_pop(1), Some(2));
    py.make_pending_calls_end(MAIN_THREAD, false);
    assert!(py.drop_gil(B));
    assert_eq!(py.make_pending_calls_begin(MAIN_THREAD), MakeBegin::Started);
    py.make_pending_calls_end(MAIN_THREAD, false);
    assert!(py.take_gil(MAIN_THREAD));
    assert!(!py.breaker_set(MAIN_THREAD));
}

#[test]
fn non_main_adder_does_not_set_main_breaker_on_shared_versions() {
    for version in [PyVersion::V3_11, PyVersion::V3_12] {
        let mut py: InterpCore<u8> = InterpCore::new(version);
        let b = py.add_thread();
        py.add_pending_push(1).unwrap();
        py.add_pending_signal(b);
        assert!(py.calls_to_do());
        assert!(!py.breaker_set(MAIN_THREAD), "{version}");
    }
    let mut py: InterpCore<u8> = InterpCore::new(PyVersion::V3_13);
    let b = py.add_thread();
    py.add_pending_push(1).unwrap();
    py.add_pending_signal(b);
    assert!(py.breaker_set(MAIN_THREAD));
}

#[test]
fn ring_capacity_per_version() {
    for (version, cap) in [
        (PyVersion::V3_11, 31),
        (PyVersion::V3_12, 31),
        (PyVersion::V3_13, 32),
    ] {
        let mut py: InterpCore<usize> = InterpCore::new(version);
        for i in 0..cap {
            py.add_pending_push(i).unwrap();
        }
        assert_eq!(
            py.add_pending_push(cap),
            Err(RingFull { capacity: cap }),
            "{version}"
        );
    }
}

#[test]
fn drop_request_forces_a_switch() {
    let mut py: InterpCore<u8> = InterpCore::new(PyVersion::V3_11);
    let b = py.add_thread();
    assert!(py.request_drop(b));
    assert!(py.breaker_set(MAIN_THREAD));
    assert!(py.drop_requested(MAIN_THREAD));
    assert!(py.drop_gil(MAIN_THREAD));
    assert!(!py.can_take_gil(MAIN_THREAD));
    assert!(py.take_gil(b));
    assert!(!py.drop_requested(b));
    assert!(py.drop_gil(b));
    assert!(py.take_gil(MAIN_THREAD));
}

/// 32 calls queued while a call runs: the make's bound (32 iterations,
/// the running call included) leaves one behind. Only 3.13 re-signals
/// for it (probed on 3.11.7/3.12.1/3.13.0, where 3.11/3.12's ring of 31
/// cannot exceed the bound this way).
#[test]
fn only_313_resignals_when_the_bound_leaves_calls() {
    for version in PyVersion::ALL {
        let mut py: InterpCore<u32> = InterpCore::new(version);
        py.add_pending_push(0).unwrap();
        py.add_pending_signal(MAIN_THREAD);
        assert_eq!(py.make_pending_calls_begin(MAIN_THREAD), MakeBegin::Started);
        assert_eq!(py.make_pending_calls_pop(0), Some(0));
        let mut queued = 0;
        while py.add_pending_push(queued + 1).is_ok() {
            py.add_pending_signal(MAIN_THREAD);
            queued += 1;
        }
        let mut iteration = 1;
        while py.make_pending_calls_pop(iteration).is_some() {
            iteration += 1;
        }
        let left = py.ring_len();
        let v313 = version == PyVersion::V3_13;
        assert_eq!(left, usize::from(v313), "{version}");
        if v313 {
            // A check site during the loop: the recursive make clears the
            // bit that the adds set, so only the end can set it again.
            assert_eq!(
                py.make_pending_calls_begin(MAIN_THREAD),
                MakeBegin::Recursive
            );
            assert!(!py.calls_to_do());
            py.make_pending_calls_end(MAIN_THREAD, false);
            assert!(py.calls_to_do() && py.breaker_set(MAIN_THREAD));
        } else {
            py.make_pending_calls_end(MAIN_THREAD, false);
        }
        assert!(!py.busy());
    }
}

#[test]
fn call_event_order_per_version() {
    for (version, first) in [
        (PyVersion::V3_11, false),
        (PyVersion::V3_12, true),
        (PyVersion::V3_13, true),
    ] {
        let py: InterpCore<u8> = InterpCore::new(version);
        assert_eq!(py.call_event_before_check(), first, "{version}");
    }
}

#[test]
fn failed_signal_handler_resignals() {
    for version in PyVersion::ALL {
        let mut py: InterpCore<u8> = InterpCore::new(version);
        py.signal_received(MAIN_THREAD);
        assert!(py.take_signals(MAIN_THREAD));
        assert!(!py.breaker_set(MAIN_THREAD), "{version}");
        py.resignal_signals(MAIN_THREAD);
        assert!(py.breaker_set(MAIN_THREAD), "{version}");
        assert!(py.take_signals(MAIN_THREAD), "{version}");
    }
}

/// Probed on 3.11.7/3.12.1/3.13.0 (`probes/signal_on_other_thread.py`).
#[test]
fn a_signal_received_on_another_thread_waits_for_main_take_gil_before_313() {
    for version in PyVersion::ALL {
        let mut py: InterpCore<u8> = InterpCore::new(version);
        let b = py.add_thread();
        py.signal_received(b);
        let v313 = version == PyVersion::V3_13;
        assert_eq!(py.breaker_set(MAIN_THREAD), v313, "{version}");
        assert!(py.drop_gil(MAIN_THREAD));
        assert!(py.take_gil(MAIN_THREAD));
        assert!(py.breaker_set(MAIN_THREAD), "{version}");
        assert!(py.take_signals(MAIN_THREAD), "{version}");
    }
}

#[test]
fn signals_are_taken_by_the_main_thread_only() {
    for version in PyVersion::ALL {
        let mut py: InterpCore<u8> = InterpCore::new(version);
        let b = py.add_thread();
        py.signal_received(MAIN_THREAD);
        assert!(!py.take_signals(b));
        assert!(py.take_signals(MAIN_THREAD));
        assert!(!py.take_signals(MAIN_THREAD));
    }
}
