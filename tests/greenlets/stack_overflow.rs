//! A stack overflow inside a greenlet is reported with the greenlet's name,
//! id and stack size, then the process aborts (like Rust's own message for
//! threads), instead of dying of a bare SIGSEGV.
//!
//! The overflow happens in a child process: this test binary re-executes
//! itself to run the ignored `child_process` test with an environment
//! variable saying what to do.

use crate::common;

use common::recurse;

use std::io::Write;
use std::os::unix::process::ExitStatusExt;

use greenlet::coroutine::acquire_stack;
use greenlet::{Greenlet, Value};

const CHILD_MODE: &str = "GREENLET_OVERFLOW_TEST_CHILD";

/// Stack size the child's greenlets ask for.
const SIZE: usize = 64 * 1024;

fn run_child(mode: &str) -> (Option<i32>, String) {
    let output = common::run_child_test(module_path!(), "child_process", CHILD_MODE, mode);
    (
        output.status.signal(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Run by `run_child` only: overflows a greenlet's stack as the mode says.
#[test]
#[ignore = "child process of the overflow tests; does nothing without GREENLET_OVERFLOW_TEST_CHILD"]
fn child_process() {
    match std::env::var(CHILD_MODE).as_deref() {
        Ok("named") => {
            let g = Greenlet::builder()
                .name("deep-recursion")
                .stack_size(SIZE)
                .spawn(|_| Ok(Value::new(recurse(0))))
                .expect("spawn");
            let _ = g.switch(());
        }
        Ok("unnamed") => {
            // Its label is spelled out by the overflow handler itself.
            let g = Greenlet::builder()
                .stack_size(SIZE)
                .spawn(|_| Ok(Value::new(recurse(0))))
                .expect("spawn");
            // Straight to the stream: the test harness captures `eprintln!`,
            // and the abort would lose it.
            let _ = writeln!(std::io::stderr(), "unnamed greenlet id {}", g.id());
            let _ = g.switch(());
        }
        Ok("nested") => {
            // The overflow happens in a greenlet that another greenlet
            // switched to: the report names the one that overflowed.
            let outer = Greenlet::builder()
                .name("outer")
                .spawn(|_| {
                    let inner = Greenlet::builder()
                        .name("inner")
                        .stack_size(SIZE)
                        .spawn(|_| Ok(Value::new(recurse(0))))?;
                    inner.switch(())
                })
                .expect("spawn");
            let _ = outer.switch(());
        }
        _ => {}
    }
}

#[test]
fn an_overflowing_greenlet_is_named_with_its_stack_size() {
    let size = acquire_stack(SIZE).expect("stack").size();
    let (signal, stderr) = run_child("named");
    assert_eq!(signal, Some(libc::SIGABRT), "stderr: {stderr}");
    assert!(
        stderr.contains("greenlet 'deep-recursion' (id "),
        "stderr: {stderr}"
    );
    let wanted = format!("has overflowed its stack (stack size {size} bytes");
    assert!(stderr.contains(&wanted), "stderr: {stderr}");
    assert!(
        stderr.contains("fatal runtime error: stack overflow in a greenlet"),
        "stderr: {stderr}"
    );
}

#[test]
fn the_report_names_the_greenlet_that_overflowed_not_its_caller() {
    let (signal, stderr) = run_child("nested");
    assert_eq!(signal, Some(libc::SIGABRT), "stderr: {stderr}");
    assert!(stderr.contains("greenlet 'inner' (id "), "stderr: {stderr}");
    assert!(!stderr.contains("'outer'"), "stderr: {stderr}");
}

#[test]
fn an_unnamed_greenlet_is_reported_by_its_default_name_and_id() {
    let (signal, stderr) = run_child("unnamed");
    assert_eq!(signal, Some(libc::SIGABRT), "stderr: {stderr}");
    let id: u64 = stderr
        .lines()
        .find_map(|line| line.strip_prefix("unnamed greenlet id "))
        .and_then(|id| id.trim().parse().ok())
        .unwrap_or_else(|| panic!("the child printed its greenlet's id; stderr: {stderr}"));
    let wanted = format!("greenlet 'greenlet-{id}' (id {id}) has overflowed its stack");
    assert!(stderr.contains(&wanted), "stderr: {stderr}");
}
