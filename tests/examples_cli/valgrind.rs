//! Under valgrind, switching onto greenlet stacks is not mistaken for stack
//! corruption: every pooled stack is registered with valgrind
//! (`VALGRIND_STACK_REGISTER`), so valgrind prints no "client switching
//! stacks?" warning and finds no errors.
//!
//! Runs two examples, built by `common::example`: the raw corosensei one
//! (`stack_pool`, a profiling driver) and a greenlet one (`ping_pong`).
//! Checked to fail when the registration is disabled. Skipped, with a message, when valgrind is not installed.

use crate::common;

use std::process::Command;

/// Whether `valgrind` runs here (the valgrind tests skip, saying so, when not).
pub(crate) fn valgrind_available() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success())
}

fn check_under_valgrind(name: &str) {
    let path = common::example(name);
    assert!(
        path.exists(),
        "{} is missing: build the examples (`cargo test` does)",
        path.display()
    );
    let output = Command::new("valgrind")
        .arg("--error-exitcode=99")
        .arg(&path)
        .output()
        .expect("run valgrind");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("switching stacks"), "{name}: {stderr}");
    assert!(
        output.status.success(),
        "{name}: {} {stderr}",
        output.status
    );
}

#[test]
fn valgrind_sees_no_stack_switch_warnings_or_errors() {
    if !valgrind_available() {
        eprintln!("valgrind is not installed: skipping");
        return;
    }
    check_under_valgrind("stack_pool");
    check_under_valgrind("ping_pong");
}
