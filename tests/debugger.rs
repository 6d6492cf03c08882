//! gdb's `bt`, taken inside a greenlet and inside a hub green thread, ends
//! at the coroutine's root within a few dozen frames: the root trampoline's
//! call-frame information stops the walk there, instead of letting gdb read
//! on past the top of the greenlet's stack.
//!
//! The program under gdb is this test binary itself, re-run with an
//! environment variable that makes its ignored target tests stop at a
//! breakpoint instruction inside the greenlet. Skipped, with a message,
//! where gdb is not installed.

use std::hint::black_box;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use greenlet::{Greenlet, Value};

/// The variable that lets the target tests run (they stop the process at
/// a breakpoint instruction, which only a debugger survives).
const TARGET: &str = "GREENLET_DEBUGGER_TARGET";

/// How long gdb may take (it takes a few seconds).
const HANG: Duration = Duration::from_secs(120);

/// More frames than any sane backtrace from these targets has: the
/// stopping function, the body, the crate's frames between the body and
/// the coroutine's root.
const FEW_DOZEN: usize = 40;

/// Where gdb stops: a breakpoint instruction in a frame of its own.
#[inline(never)]
fn stop_here(depth: u32) -> u32 {
    if depth > 0 {
        return black_box(stop_here(black_box(depth - 1))) + 1;
    }
    // SAFETY: a breakpoint trap, run only under gdb (`TARGET` set by
    // `backtrace_of`), which stops there and kills the process after.
    unsafe { std::arch::asm!("int3") };
    0
}

/// Run `test` of this binary under `gdb -batch`, stopped at [`stop_here`],
/// and return `bt`'s frame lines; `None` without gdb.
fn backtrace_of(test: &str) -> Option<Vec<String>> {
    let available = Command::new("gdb")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !available {
        eprintln!("gdb is not installed: skipping");
        return None;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut gdb = Command::new("gdb")
        .args(["-nx", "-batch"])
        .args(["-iex", "set debuginfod enabled off"])
        .args(["-ex", "run", "-ex", "bt 200", "-ex", "kill"])
        .arg("--args")
        .arg(exe)
        .args([
            "--exact",
            test,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(TARGET, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run gdb");
    // Watchdog: gdb and its target end within seconds; kill them if not.
    let started = Instant::now();
    while gdb.try_wait().expect("wait for gdb").is_none() {
        if started.elapsed() > HANG {
            let _ = gdb.kill();
            panic!("watchdog: gdb did not finish within {HANG:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = gdb.wait_with_output().expect("gdb's output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("SIGTRAP"),
        "gdb did not stop at the breakpoint:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(
        stdout
            .lines()
            .filter(|line| line.starts_with('#'))
            .map(str::to_owned)
            .collect(),
    )
}

/// `bt` ends at the coroutine's root, within a few dozen frames, starts
/// in `stop_here`, and passes through a frame naming `through` (the body
/// itself is inlined into the crate's frame that calls it).
fn assert_ends_at_the_root(frames: &[String], through: &str) {
    let listing = frames.join("\n");
    assert!(
        frames.len() <= FEW_DOZEN,
        "{} frames, more than {FEW_DOZEN}:\n{listing}",
        frames.len()
    );
    let last = frames.last().expect("at least one frame");
    assert!(
        last.contains("greenlet_coroutine_root"),
        "the last frame is not the coroutine's root:\n{listing}"
    );
    assert!(frames[0].contains("stop_here"), "{listing}");
    assert!(
        listing.contains(through),
        "no frame names {through}:\n{listing}"
    );
    assert!(
        !frames.iter().any(|frame| frame.contains(" ?? ")),
        "a frame gdb cannot name:\n{listing}"
    );
}

#[test]
fn gdb_backtrace_in_a_greenlet_ends_at_its_root() {
    if let Some(frames) = backtrace_of("target_greenlet") {
        assert_ends_at_the_root(&frames, "greenlet::coroutine::");
    }
}

#[cfg(feature = "hub")]
#[test]
fn gdb_backtrace_in_a_hub_green_thread_ends_at_its_root() {
    if let Some(frames) = backtrace_of("target_hub") {
        assert_ends_at_the_root(&frames, "greenlet::hub::");
    }
}

/// The target of [`gdb_backtrace_in_a_greenlet_ends_at_its_root`]: stops
/// inside a greenlet (a no-op without `TARGET`).
#[test]
#[ignore = "run by gdb_backtrace_in_a_greenlet_ends_at_its_root"]
fn target_greenlet() {
    if std::env::var_os(TARGET).is_none() {
        return;
    }
    let g = Greenlet::new(|_| Ok(Value::new(stop_here(3))));
    assert_eq!(
        g.switch(()).expect("g ends").downcast::<u32>().ok(),
        Some(3)
    );
}

/// The target of [`gdb_backtrace_in_a_hub_green_thread_ends_at_its_root`]:
/// stops inside a hub green thread (a no-op without `TARGET`).
#[cfg(feature = "hub")]
#[test]
#[ignore = "run by gdb_backtrace_in_a_hub_green_thread_ends_at_its_root"]
fn target_hub() {
    if std::env::var_os(TARGET).is_none() {
        return;
    }
    let out = greenlet::hub::run(|| greenlet::hub::spawn(|| stop_here(3)).join());
    assert_eq!(out.expect("the runtime").expect("the green thread"), 3);
}
