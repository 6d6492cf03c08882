//! The hub under valgrind memcheck: the `hub_demo` example (two workers,
//! green threads parking on channels, sleeping, being dumped and cancelled,
//! then a shutdown) runs with no errors and no "client switching stacks?"
//! warning, like the `valgrind` module checks for `ping_pong`. Also checks
//! that the example answers `--help` and rejects a bad flag, and that
//! io_uring forced under valgrind is refused with a message rather than
//! left to stop the process (valgrind holds its lock while a worker waits
//! in its ring). The example is
//! built by `common::example`. Skipped, with a message, when valgrind is
//! not installed.

use crate::common;
use crate::valgrind::valgrind_available;

use std::path::PathBuf;
use std::process::Command;

fn demo() -> PathBuf {
    let path = common::example("hub_demo");
    assert!(
        path.exists(),
        "{} is missing: build the examples (`cargo test` does)",
        path.display()
    );
    path
}

#[test]
fn hub_demo_answers_help_and_rejects_a_bad_flag() {
    let help = Command::new(demo()).arg("--help").output().unwrap();
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("sleepers"));
    let bad = Command::new(demo()).arg("--workers=0").output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--workers"));
}

#[test]
fn hub_demo_runs_clean_under_valgrind() {
    if !valgrind_available() {
        eprintln!("valgrind is not installed: skipping");
        return;
    }
    for args in [
        &["pipeline", "--items", "300", "--stages", "4"][..],
        &["dump"][..],
        &["sleepers", "--count", "200", "--sleep-ms", "1"][..],
    ] {
        // The example's driver is the default (epoll under valgrind),
        // whatever driver this run forces on the others.
        let output = Command::new("valgrind")
            .env_remove(greenlet::hub::IO_DRIVER_ENV)
            .args(["--error-exitcode=99", "--fair-sched=yes"])
            .arg(demo())
            .args(args)
            .output()
            .expect("run valgrind");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("switching stacks"), "{args:?}: {stderr}");
        assert!(
            output.status.success(),
            "{args:?}: {} {stderr}",
            output.status
        );
    }
}

/// `GREENLET_IO_DRIVER=io_uring` under valgrind: the runtime's build
/// fails, saying why and what to ask for instead.
#[test]
fn io_uring_under_valgrind_is_refused() {
    if !valgrind_available() {
        eprintln!("valgrind is not installed: skipping");
        return;
    }
    let demo = demo();
    // Bounded: a worker waiting in its ring under valgrind would stop the
    // process for good.
    let output = common::hub::bounded(120, move || {
        Command::new("valgrind")
            .env(greenlet::hub::IO_DRIVER_ENV, "io_uring")
            .args(["-q", "--fair-sched=yes"])
            .arg(demo)
            .args(["sleepers", "--count", "2", "--sleep-ms", "1"])
            .output()
            .expect("run valgrind")
    });
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("under valgrind") && stderr.contains("ask for epoll or auto"),
        "{stderr}"
    );
}
