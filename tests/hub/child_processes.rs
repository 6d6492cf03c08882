//! `hub::process`: a child's output is read and its exit waited for while
//! the green thread parks (its worker runs others), big outputs on both
//! streams do not deadlock, and a program that cannot start is named.

use crate::common;

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use common::hub::{bounded, rt, until_parked};
use greenlet::hub::process::{Command, ProcessError};
use greenlet::hub::{self, Wait};

/// `output` captures both streams and the exit code.
#[test]
fn output_captures_both_streams_and_the_code() {
    let out = bounded(30, || {
        rt(1)
            .block_on(|| {
                Command::new("sh")
                    .args(["-c", "echo out; echo err >&2; exit 3"])
                    .output()
                    .unwrap()
            })
            .unwrap()
    });
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");
}

/// `wait` parks on the child's exit (the state says so, and the worker's
/// other green threads run); a kill from elsewhere ends the wait.
#[test]
fn wait_parks_until_the_child_exits() {
    let (signal, other) = bounded(30, || {
        rt(1)
            .block_on(|| {
                let mut child = Command::new("sleep").arg("30").spawn().unwrap();
                let pid = child.id();
                let waiter = hub::spawn(move || child.wait().unwrap());
                until_parked(&waiter, Wait::Io);
                let other = hub::spawn(|| 40 + 2).join().unwrap();
                // SAFETY: kill(2) on our own, not yet reaped, child.
                assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
                (waiter.join().unwrap().signal(), other)
            })
            .unwrap()
    });
    assert_eq!(signal, Some(libc::SIGKILL));
    assert_eq!(other, 42);
}

/// A MiB on each of stdout and stderr: both pipes are drained while the
/// child runs, so neither fills and blocks it.
#[test]
fn big_output_on_both_streams_does_not_deadlock() {
    let out = bounded(60, || {
        rt(1)
            .block_on(|| {
                Command::new("sh")
                    .args([
                        "-c",
                        "head -c 1048576 /dev/zero; head -c 1048576 /dev/zero >&2; echo done >&2",
                    ])
                    .output()
                    .unwrap()
            })
            .unwrap()
    });
    assert!(out.status.success());
    assert_eq!(out.stdout.len(), 1 << 20);
    assert_eq!(out.stderr.len(), (1 << 20) + 5);
    assert!(out.stderr.ends_with(b"done\n"));
}

/// Writing to the child's stdin and reading its stdout through the parking
/// pipes: `cat` echoes 256 KiB, more than a pipe holds.
#[test]
fn stdin_and_stdout_pipes_park() {
    const N: usize = 256 * 1024;
    let got = bounded(60, || {
        rt(1)
            .block_on(|| {
                let mut child = Command::new("cat")
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap();
                let mut stdin = child.stdin.take().unwrap();
                let writer = hub::spawn_local(move || {
                    stdin.write_all(&vec![b'z'; N]).unwrap();
                });
                let mut back = Vec::new();
                child.stdout.take().unwrap().read_to_end(&mut back).unwrap();
                writer.join().unwrap();
                assert!(child.wait().unwrap().success());
                back
            })
            .unwrap()
    });
    assert_eq!(got.len(), N);
    assert!(got.iter().all(|&b| b == b'z'));
}

/// A program that does not exist: `NotFound`, naming it.
#[test]
fn a_missing_program_is_named() {
    let err = bounded(30, || {
        rt(1)
            .block_on(|| Command::new("/no/such/program-xyz").output().unwrap_err())
            .unwrap()
    });
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().contains("/no/such/program-xyz"), "{err}");
    assert!(matches!(
        err.get_ref().and_then(|e| e.downcast_ref::<ProcessError>()),
        Some(ProcessError::Spawn { .. })
    ));
}

/// On a plain thread the same calls block, as std's do.
#[test]
fn plain_thread_output() {
    let out = bounded(30, || {
        Command::new("sh")
            .args(["-c", "echo plain; echo e >&2"])
            .output()
            .unwrap()
    });
    assert_eq!(
        (out.stdout, out.stderr),
        (b"plain\n".to_vec(), b"e\n".to_vec())
    );
}

/// `output` leaves the caller's stdio settings alone: a stdout set to
/// null stays null (nothing captured).
#[test]
fn output_respects_settings_the_caller_made() {
    let out = bounded(30, || {
        rt(1)
            .block_on(|| {
                Command::new("echo")
                    .arg("dropped")
                    .stdout(Stdio::null())
                    .output()
                    .unwrap()
            })
            .unwrap()
    });
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
}

/// A green thread parked in `wait` is a cancellation point: `cancel` ends
/// it with `Cancelled`, and the child runs on (std's rule: dropping a
/// `Child` neither kills nor reaps it) until it is killed here.
#[test]
fn wait_is_a_cancellation_point() {
    let (cancelled, alive) = bounded(30, || {
        rt(1)
            .block_on(|| {
                let mut child = Command::new("sleep").arg("30").spawn().unwrap();
                let pid = child.id() as i32;
                let h = hub::spawn(move || child.wait().unwrap());
                until_parked(&h, Wait::Io);
                h.cancel();
                let cancelled = h.join().unwrap_err().is_cancelled();
                // SAFETY: signal 0 only checks that the process exists.
                let alive = unsafe { libc::kill(pid, 0) } == 0;
                // SAFETY: our own child, then reaped.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, std::ptr::null_mut(), 0);
                }
                (cancelled, alive)
            })
            .unwrap()
    });
    assert!(cancelled);
    assert!(alive);
}
