//! A green thread is called by one name everywhere: the stack-overflow
//! report, its greenlet's name and its `JoinHandle` agree (`task-<id>` for
//! an unnamed one, else the name given to `task()`). The overflows happen
//! in a child process (this test binary re-run with `OVERFLOW_NAME_CASE`
//! set), which aborts; the parent reads its stderr, its wait bounded by
//! `common::CHILD_HANG`.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;

use greenlet::hub::{self, Runtime};

use crate::common;

const CASE: &str = "OVERFLOW_NAME_CASE";

/// Run this binary's ignored `child_process` alone in a child with
/// `CASE=case` (bounded by `common::CHILD_HANG`); the signal that ended it
/// and its stderr.
fn run_child(case: &str) -> (Option<i32>, String) {
    let out = common::run_child_test(module_path!(), "child_process", CASE, case);
    (
        out.status.signal(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// In the child: a green thread (named `name`, if given) that waits until
/// its id is printed, then recurses until its stack overflows.
fn overflow_in_a_green_thread(name: Option<&'static str>) {
    let rt = Runtime::builder().worker_threads(1).build().unwrap();
    rt.block_on(move || {
        // A task that finishes first, so that task ids and greenlet ids
        // differ.
        hub::spawn(|| ()).join().unwrap();
        let (tx, rx) = hub::channel::<()>(1);
        let builder = match name {
            Some(name) => hub::task().name(name),
            None => hub::task(),
        };
        let handle = builder
            .spawn(move || {
                rx.recv().unwrap();
                common::recurse(0)
            })
            .unwrap();
        // Straight to the stream: the harness captures `eprintln!`, and
        // the abort would lose it.
        let _ = writeln!(std::io::stderr(), "task id {}", handle.id());
        tx.send(()).unwrap();
        let _ = handle.join();
    })
    .unwrap();
}

/// Run by `run_child` only.
#[test]
#[ignore = "child process of the overflow-name tests; does nothing without OVERFLOW_NAME_CASE"]
fn child_process() {
    match std::env::var(CASE).as_deref() {
        Ok("unnamed") => overflow_in_a_green_thread(None),
        Ok("named") => overflow_in_a_green_thread(Some("deep-task")),
        _ => {}
    }
}

/// The id the child printed for its overflowing green thread.
fn printed_task_id(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|line| line.strip_prefix("task id "))
        .and_then(|id| id.trim().parse().ok())
        .unwrap_or_else(|| panic!("the child printed its task's id; stderr: {stderr}"))
}

#[test]
fn an_unnamed_green_thread_overflows_as_task_and_its_handles_id() {
    let (signal, stderr) = run_child("unnamed");
    assert_eq!(signal, Some(libc::SIGABRT), "stderr: {stderr}");
    let id = printed_task_id(&stderr);
    let wanted = format!("greenlet 'task-{id}' (id ");
    let line = stderr
        .lines()
        .find(|line| line.contains("has overflowed its stack"))
        .unwrap_or_else(|| panic!("no overflow report; stderr: {stderr}"));
    assert!(line.starts_with(&wanted), "{line}");
}

#[test]
fn a_named_green_thread_overflows_under_its_name() {
    let (signal, stderr) = run_child("named");
    assert_eq!(signal, Some(libc::SIGABRT), "stderr: {stderr}");
    let line = stderr
        .lines()
        .find(|line| line.contains("has overflowed its stack"))
        .unwrap_or_else(|| panic!("no overflow report; stderr: {stderr}"));
    assert!(line.starts_with("greenlet 'deep-task' (id "), "{line}");
}

#[test]
fn a_green_threads_greenlet_bears_its_name() {
    let rt = Runtime::builder().worker_threads(1).build().unwrap();
    rt.block_on(|| {
        hub::spawn(|| ()).join().unwrap();
        let unnamed = hub::spawn(|| greenlet::getcurrent().name());
        let id = unnamed.id();
        assert_eq!(unnamed.name(), format!("task-{id}"));
        assert_eq!(unnamed.join().unwrap(), format!("task-{id}"));
        let named = hub::task()
            .name("io")
            .spawn(|| greenlet::getcurrent().name())
            .unwrap();
        assert_eq!(named.join().unwrap(), "io");
        // A plain greenlet made in a green thread after them keeps its
        // default name (the records are reused).
        let plain = hub::spawn(|| {
            let g = greenlet::Greenlet::new(|_| Ok(greenlet::Value::unit()));
            (g.id(), g.name())
        });
        let (gid, name) = plain.join().unwrap();
        assert_eq!(name, format!("greenlet-{gid}"));
    })
    .unwrap();
}
