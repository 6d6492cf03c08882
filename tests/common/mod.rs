//! Helpers shared by the integration tests.

use std::process::{Command, Output};

/// Run the ignored test `test` of the calling test binary in a child
/// process with `var=value` in its environment, and wait for it. For
/// behaviour that ends the process (exit, abort, a stack overflow) or that
/// shows on stderr, which the test harness captures in-process.
pub fn run_child_test(test: &str, var: &str, value: &str) -> Output {
    let exe = std::env::current_exe().expect("test binary path");
    Command::new(exe)
        .args([
            "--exact",
            test,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(var, value)
        .output()
        .expect("run the child")
}
