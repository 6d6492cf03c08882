//! Unit tests of stack-overflow reporting: the message, and the fault
//! handler seen from a child process that overflows a greenlet's stack (or
//! faults otherwise) and dies of it.

use std::cell::Cell;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;

use corosensei::Coroutine;

use super::tests::OnPool;
use super::*;

#[test]
fn the_overflow_message_names_the_label_and_the_size() {
    let stack = acquire(64 * 1024).expect("acquire");
    stack.set_label("'worker' (id 7)");
    let mut message = overflow::Message::new();
    overflow::compose(&mut message, stack.raw.header(), stack.limit() + 8);
    let text = std::str::from_utf8(message.as_bytes()).expect("UTF-8");
    let size = stack.size();
    assert_eq!(
        text,
        format!(
            "\ngreenlet 'worker' (id 7) has overflowed its stack (stack size {size} bytes = {} KiB; fault at {:#x} \
             in the guard page)\nfatal runtime error: stack overflow in a greenlet, aborting\n",
            size / 1024,
            stack.limit() + 8
        )
    );
    let unnamed = acquire(64 * 1024).expect("acquire");
    let mut message = overflow::Message::new();
    overflow::compose(&mut message, unnamed.raw.header(), unnamed.limit());
    assert!(
        String::from_utf8_lossy(message.as_bytes()).contains("greenlet <unnamed> has overflowed")
    );
}

/// Environment variable telling `child_process` what to do.
const CHILD_MODE: &str = "GREENLET_STACK_TEST_CHILD";

/// Re-runs this test binary's `child_process` test with `mode` and returns
/// the signal that killed it and its stderr.
fn run_child(mode: &str) -> (Option<i32>, String) {
    let exe = std::env::current_exe().expect("test binary path");
    let output = Command::new(exe)
        .args([
            "--exact",
            "coroutine::stack::overflow_tests::child_process",
            "--ignored",
            "--test-threads=1",
        ])
        .env(CHILD_MODE, mode)
        .output()
        .expect("run the child");
    (
        output.status.signal(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Recurses without end (a 512-byte frame per call) to overflow the stack.
#[inline(never)]
fn overflow(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth as u8; 512]);
    if depth == u64::MAX {
        return 0;
    }
    overflow(depth + 1) + frame[3] as u64
}

thread_local! {
    /// The stack `overflow_in_coroutine` runs on, for its finder.
    static TEST_RUNNING: Cell<Running> = const { Cell::new(Running::NONE) };
}

/// The finder `overflow_in_coroutine` installs (the child process makes no
/// greenlet, so it is the first).
fn test_running() -> Running {
    TEST_RUNNING.with(Cell::get)
}

/// Overflows a labelled 64 KiB stack in a coroutine.
fn overflow_in_coroutine() {
    let stack = acquire(64 * 1024).expect("acquire");
    stack.set_label("'overflow-test'");
    find_running_with(test_running);
    // The coroutine owns the stack next.
    TEST_RUNNING.with(|running| running.set(stack.as_running()));
    let mut coroutine =
        Coroutine::with_stack(OnPool(stack), |_: &corosensei::Yielder<(), ()>, ()| {
            overflow(0)
        });
    coroutine.resume(());
    TEST_RUNNING.with(|running| running.set(Running::NONE));
}

/// Started by `run_child` only (it is ignored in normal runs): performs the
/// crash named by the environment variable.
#[test]
#[ignore = "child process of the overflow tests; does nothing without GREENLET_STACK_TEST_CHILD"]
fn child_process() {
    match std::env::var(CHILD_MODE).as_deref() {
        Ok("greenlet") => overflow_in_coroutine(),
        Ok("greenlet-on-foreign-thread") => {
            // A thread not made by Rust's std: it has no alternate signal
            // stack until `acquire` gives it one.
            extern "C" fn start(_: *mut libc::c_void) -> *mut libc::c_void {
                overflow_in_coroutine();
                ptr::null_mut()
            }
            let mut thread: libc::pthread_t = 0;
            // SAFETY: `thread` is writable, default attributes (null), and
            // `start` has the signature pthread_create expects.
            unsafe {
                assert_eq!(
                    libc::pthread_create(&mut thread, ptr::null(), start, ptr::null_mut()),
                    0
                );
                libc::pthread_join(thread, ptr::null_mut());
            }
        }
        Ok("null-pointer") => {
            let _stack = acquire(64 * 1024).expect("acquire"); // installs the handler
                                                               // SAFETY: deliberately not safe: reading address 8 faults, which
                                                               // is what this child exists to do.
            let value = unsafe { ptr::read_volatile(8 as *const u8) };
            println!("unreachable: {value}");
        }
        Ok("thread-overflow") => {
            let _stack = acquire(64 * 1024).expect("acquire"); // installs the handler
            std::thread::Builder::new()
                .name("plain-thread".into())
                .stack_size(256 * 1024)
                .spawn(|| overflow(0))
                .expect("spawn")
                .join()
                .expect("join");
        }
        _ => {}
    }
}

#[test]
fn a_greenlet_overflow_names_the_greenlet_and_its_size_then_aborts() {
    let expected_size = acquire(64 * 1024).expect("acquire").size();
    let (signal, stderr) = run_child("greenlet");
    assert_eq!(signal, Some(libc::SIGABRT), "stderr: {stderr}");
    let wanted = format!(
        "greenlet 'overflow-test' has overflowed its stack (stack size {expected_size} bytes"
    );
    assert!(stderr.contains(&wanted), "stderr: {stderr}");
}

#[test]
fn an_overflow_on_a_thread_without_alternate_stack_is_still_reported() {
    let (signal, stderr) = run_child("greenlet-on-foreign-thread");
    assert_eq!(signal, Some(libc::SIGABRT), "stderr: {stderr}");
    assert!(
        stderr.contains("greenlet 'overflow-test' has overflowed its stack"),
        "stderr: {stderr}"
    );
}

#[test]
fn other_faults_keep_their_usual_outcome() {
    let (signal, stderr) = run_child("null-pointer");
    assert_eq!(signal, Some(libc::SIGSEGV), "stderr: {stderr}");
    assert!(!stderr.contains("greenlet"), "stderr: {stderr}");

    // Rust's own handler (installed before ours) still reports thread overflows.
    let (signal, stderr) = run_child("thread-overflow");
    assert_eq!(signal, Some(libc::SIGABRT), "stderr: {stderr}");
    assert!(stderr.contains("thread 'plain-thread'"), "stderr: {stderr}");
    assert!(
        stderr.contains("has overflowed its stack"),
        "stderr: {stderr}"
    );
    assert!(!stderr.contains("greenlet"), "stderr: {stderr}");
}

#[test]
fn acquire_gives_a_foreign_thread_an_alternate_signal_stack() {
    /// Whether the calling thread has an enabled alternate signal stack.
    fn has_alt_stack() -> bool {
        let mut current = std::mem::MaybeUninit::<libc::stack_t>::zeroed();
        // SAFETY: querying into a writable stack_t.
        let queried = unsafe { libc::sigaltstack(ptr::null(), current.as_mut_ptr()) };
        assert_eq!(queried, 0);
        // SAFETY: filled in by the successful query.
        unsafe { current.assume_init() }.ss_flags & libc::SS_DISABLE == 0
    }
    extern "C" fn start(result: *mut libc::c_void) -> *mut libc::c_void {
        let before = has_alt_stack();
        drop(acquire(64 * 1024).expect("acquire"));
        let after = has_alt_stack();
        // SAFETY: `result` points to the `[bool; 2]` the spawning thread
        // keeps alive until it has joined this thread.
        unsafe { result.cast::<[bool; 2]>().write([before, after]) };
        ptr::null_mut()
    }
    let mut result = [true, false];
    let mut thread: libc::pthread_t = 0;
    // SAFETY: `thread` is writable, attributes default (null), `start` has
    // the expected signature and `result` outlives the thread (joined below).
    unsafe {
        let arg = (&mut result as *mut [bool; 2]).cast();
        assert_eq!(
            libc::pthread_create(&mut thread, ptr::null(), start, arg),
            0
        );
        assert_eq!(libc::pthread_join(thread, ptr::null_mut()), 0);
    }
    assert_eq!(result, [false, true], "[had one before, has one after]");
}
