//! The deadlock report: two green threads each waiting to receive from the
//! other are reported through the crate's diagnostics (the log facade,
//! or stderr with no logger: checked in a child process) with both their
//! stacks, and with `fail_on_deadlock` the root `block_on` returns the
//! error naming them. Not timing-based: the report comes when the workers go to sleep
//! with nothing to wake them; the watchdog only bounds a hang.

use std::time::{Duration, Instant};

use crate::common;

use greenlet::hub::{self, HubError, JoinError, Receiver, Sender};

/// The first library report (through the `log` facade, captured by the
/// test binary's logger) that `wanted` picks, waited for a bounded time.
fn report_where(wanted: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    let mut seen = Vec::new();
    loop {
        seen.extend(common::take_diagnostics());
        if let Some(line) = seen.iter().find(|l| wanted(l)) {
            return line.clone();
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no such report among {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[inline(never)]
fn first_waits_for_second(rx: Receiver<u8>, tx: Sender<u8>) {
    if rx.recv().is_ok() {
        let _ = tx.send(1);
    }
}

#[inline(never)]
fn second_waits_for_first(rx: Receiver<u8>, tx: Sender<u8>) {
    if rx.recv().is_ok() {
        let _ = tx.send(2);
    }
}

/// Two green threads named `first` and `second`, each receiving from the
/// other before it sends; the caller joins both.
fn two_thread_deadlock() {
    let (to_first, first_rx) = hub::channel::<u8>(1);
    let (to_second, second_rx) = hub::channel::<u8>(1);
    let a = hub::task()
        .name("first")
        .spawn(move || first_waits_for_second(first_rx, to_second))
        .unwrap();
    let b = hub::task()
        .name("second")
        .spawn(move || second_waits_for_first(second_rx, to_first))
        .unwrap();
    drop(a.join());
    drop(b.join());
}

#[test]
fn a_two_thread_channel_deadlock_is_reported_with_both_stacks_and_fails_the_root() {
    let _dog = common::hub::watchdog(120);
    let _serial = common::serial();
    common::take_diagnostics();
    let rt = hub::Runtime::builder()
        .worker_threads(2)
        .fail_on_deadlock(true)
        .build()
        .unwrap();
    let err = rt.block_on(two_thread_deadlock).unwrap_err();
    let JoinError::Deadlock {
        green_threads,
        stacks,
        ..
    } = &err
    else {
        panic!("expected a deadlock, got {err}");
    };
    // The error carries the stacks (for a program without a logger).
    for frame in ["first_waits_for_second", "second_waits_for_first"] {
        assert!(
            stacks.to_string().contains(frame),
            "{frame} is in the error's stacks: {stacks}"
        );
    }
    for name in ["first", "second", "block_on"] {
        assert!(
            green_threads
                .iter()
                .any(|t| t.contains(&format!(" {name} ["))),
            "{name} is named: {err}"
        );
    }
    // (The binary's tests share the logger: this test's report is the one
    // that names its green threads.)
    let report = report_where(|r| r.contains("hub: deadlock") && r.contains(" first ["));
    for frame in ["first_waits_for_second", "second_waits_for_first"] {
        assert!(report.contains(frame), "{frame} is in the report: {report}");
    }
    // Shut down cleanly: the two green threads are cancelled.
    assert!(rt
        .shutdown_timeout(Duration::from_secs(10))
        .refused
        .is_empty());
}

#[test]
fn a_lone_root_waiting_on_its_own_channel_is_failed_and_named() {
    let _dog = common::hub::watchdog(120);
    let rt = hub::Runtime::builder()
        .worker_threads(1)
        .fail_on_deadlock(true)
        .build()
        .unwrap();
    let err = rt
        .block_on(|| {
            let (_tx, rx) = hub::channel::<u8>(1);
            let _ = rx.recv();
        })
        .unwrap_err();
    assert!(err.is_deadlock(), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with("green thread 'block_on' was stopped by a deadlock"),
        "{text}"
    );
    assert!(
        text.contains("block_on [parked on channel receive]"),
        "{text}"
    );
    assert!(text.contains("without fail_on_deadlock"), "{text}");
    // Passed on as a `HubError` (by `?`, as `hub::run` does), it is the
    // deadlock variant, naming the same green thread, with its stack.
    let as_hub: HubError = err.into();
    let HubError::Deadlock {
        name,
        green_threads,
        stacks,
    } = &as_hub
    else {
        panic!("expected HubError::Deadlock, got {as_hub:?}");
    };
    assert_eq!(name, "block_on");
    assert_eq!(green_threads.len(), 1, "{as_hub}");
    assert_eq!(stacks.tasks.len(), 1, "{as_hub}");
    assert!(
        as_hub
            .to_string()
            .starts_with("deadlock: green thread 'block_on'"),
        "{as_hub}"
    );
}

#[test]
fn a_sleeping_green_thread_is_no_deadlock() {
    let _dog = common::hub::watchdog(120);
    let rt = hub::Runtime::builder()
        .worker_threads(1)
        .fail_on_deadlock(true)
        .build()
        .unwrap();
    let out = rt.block_on(|| {
        let (tx, rx) = hub::channel::<u8>(1);
        hub::spawn(move || {
            hub::sleep(Duration::from_millis(50));
            tx.send(7).unwrap();
        });
        rx.recv().unwrap()
    });
    assert_eq!(out.unwrap(), 7);
}

/// A green thread joining a green thread or a blocking call of another
/// runtime waits for that runtime, which this one's check cannot see
/// into: no deadlock, though it is the only green thread and no timer of
/// its runtime is pending.
#[test]
fn joining_a_task_of_another_runtime_is_no_deadlock() {
    let _dog = common::hub::watchdog(120);
    let other = hub::Runtime::builder().worker_threads(1).build().unwrap();
    let there = other.handle().clone();
    let rt = hub::Runtime::builder()
        .worker_threads(1)
        .fail_on_deadlock(true)
        .build()
        .unwrap();
    let out = rt.block_on(move || {
        let green = there.spawn(|| {
            hub::sleep(Duration::from_millis(100));
            7
        });
        let blocking = there.spawn_blocking(|| {
            std::thread::sleep(Duration::from_millis(100));
            8
        });
        (green.join().unwrap(), blocking.join().unwrap())
    });
    assert_eq!(out.unwrap(), (7, 8));
    // The same runtime's own join is still a certain wait: the check is
    // narrowed to other runtimes only.
    let err = rt
        .block_on(|| {
            let (_keep, rx) = hub::channel::<u8>(1);
            hub::spawn(move || rx.recv()).join()
        })
        .unwrap_err();
    assert!(err.is_deadlock(), "{err}");
}

/// The variable that makes this binary, re-run as a child, run
/// [`child_without_a_logger`].
const NO_LOGGER: &str = "DEADLOCK_REPORT_NO_LOGGER";

/// In a child with no logger installed: a root waiting on a semaphore
/// nothing releases, failed by `fail_on_deadlock` after the report.
#[test]
#[ignore = "run as a child by a_deadlock_report_reaches_stderr_without_a_logger"]
fn child_without_a_logger() {
    if std::env::var_os(NO_LOGGER).is_none() {
        return;
    }
    assert_eq!(log::max_level(), log::LevelFilter::Off, "no logger here");
    let rt = hub::Runtime::builder()
        .worker_threads(1)
        .fail_on_deadlock(true)
        .build()
        .unwrap();
    let outcome = rt.block_on(|| {
        let permits = hub::Semaphore::new(0);
        drop(permits.acquire());
    });
    println!(
        "deadlock error: {}",
        outcome.is_err_and(|e| e.is_deadlock())
    );
}

#[test]
fn a_deadlock_report_reaches_stderr_without_a_logger() {
    let out = common::run_child_test(module_path!(), "child_without_a_logger", NO_LOGGER, "1");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("deadlock error: true"), "{stdout}");
    assert!(stderr.contains("hub: deadlock (likely)"), "{stderr}");
    assert!(
        stderr.contains("block_on [parked on semaphore]"),
        "{stderr}"
    );
}
