//! A panic in a green thread is printed under the green thread's name, id
//! and spawn site, and a panic hook the program installed before keeps
//! running. Each case runs in a child process (this test binary re-run
//! with `PANIC_NAME_CASE` set) whose stderr the parent reads; the child's
//! run is bounded by its own runtime's join, the parent's wait by `HANG`.

use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use greenlet::hub::{self, Runtime};

const HANG: Duration = Duration::from_secs(60);
const CASE: &str = "PANIC_NAME_CASE";

/// Run this binary's `test` alone in a child with `CASE=case`; its stderr.
fn child_stderr(test: &str, case: &str) -> String {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &crate::common::test_path(module_path!(), test),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CASE, case)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > HANG {
            let _ = child.kill();
            panic!("the child of {test} did not finish within {HANG:?}");
        }
        thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "child failed: {out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// In the child: a runtime whose green thread `boom` panics with
/// `kaboom`; its join reports the panic.
fn panic_in_a_named_green_thread() {
    let rt = Runtime::builder().worker_threads(1).build().unwrap();
    let err = rt
        .block_on(|| {
            hub::task()
                .name("boom")
                .spawn(|| panic!("kaboom"))
                .unwrap()
                .join()
        })
        .unwrap()
        .unwrap_err();
    assert!(err.is_panic());
}

#[test]
fn a_panic_names_its_green_thread() {
    if std::env::var_os(CASE).is_some() {
        panic_in_a_named_green_thread();
        return;
    }
    let err = child_stderr("a_panic_names_its_green_thread", "plain");
    let line = err
        .lines()
        .find(|l| l.starts_with("green thread 'boom'"))
        .unwrap_or_else(|| panic!("no identity line in {err}"));
    assert!(line.contains("(id "), "{line}");
    assert!(
        line.contains("spawned at tests/hub/panic_names.rs:"),
        "{line}"
    );
    assert!(
        line.contains("panicked at tests/hub/panic_names.rs:"),
        "{line}"
    );
    // The standard hook still prints the message.
    assert!(err.contains("kaboom"), "{err}");
}

#[test]
fn a_hook_installed_before_keeps_running() {
    if std::env::var_os(CASE).is_some() {
        std::panic::set_hook(Box::new(|info| {
            eprintln!("user hook: {}", info.payload_as_str().unwrap_or("?"));
        }));
        panic_in_a_named_green_thread();
        return;
    }
    let err = child_stderr("a_hook_installed_before_keeps_running", "user-hook");
    let identity = err.find("green thread 'boom'");
    let user = err.find("user hook: kaboom");
    assert!(identity.is_some() && user.is_some(), "{err}");
    assert!(identity < user, "identity line first: {err}");
}

#[test]
fn a_cancellation_prints_no_panic() {
    if std::env::var_os(CASE).is_some() {
        let rt = Runtime::builder().worker_threads(1).build().unwrap();
        rt.block_on(|| {
            let h = hub::task()
                .name("sleeper")
                .spawn(|| hub::sleep(Duration::from_secs(3600)))
                .unwrap();
            hub::yield_now();
            h.cancel();
            assert!(h.join().unwrap_err().is_cancelled());
        })
        .unwrap();
        return;
    }
    let err = child_stderr("a_cancellation_prints_no_panic", "cancel");
    assert!(!err.contains("panicked"), "{err}");
}
