//! The watchdog's report names the green thread that holds its worker (name,
//! id, spawn site) with its stack (its spinning function's name is in it)
//! and, once the worker comes back, a second line says it recovered and
//! after how long. A std mutex held across a park by one green thread and
//! wanted by another of the same worker stalls that worker for ever: the
//! report (seen in a child process, which is then killed) names both, the
//! waiter's stack ending in its lock call and the holder's in its park.
//! Bounded by a watchdog of the test's own (`HANG`); nothing depends on
//! timing beyond the runtime's threshold being shorter than `HANG`.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use greenlet::hub::{self, Runtime};

const HANG: Duration = Duration::from_secs(60);

/// Poll the captured diagnostics until one line contains `needle`.
fn wait_for_line(needle: &str) -> String {
    let start = Instant::now();
    loop {
        let lines = common::take_diagnostics();
        if let Some(l) = lines.into_iter().find(|l| l.contains(needle)) {
            return l;
        }
        assert!(start.elapsed() < HANG, "no diagnostic with {needle:?}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// Holds its worker without parking until `release` is set (or `HANG`
/// passes): the frame the report must show.
#[inline(never)]
fn spins_without_parking_until_released(release: &AtomicBool) {
    let start = Instant::now();
    while !release.load(Ordering::SeqCst) && start.elapsed() < HANG {
        std::hint::spin_loop();
    }
}

/// Joins `hog`: the frame the report shows for the green thread waiting
/// for it.
#[inline(never)]
fn joins_the_hog(hog: hub::JoinHandle<()>) {
    hog.join().unwrap();
}

/// A green thread named `name`, spawned from another on `rt`, that holds
/// its worker without parking until `release` is set (or `HANG` passes);
/// the handle of the green thread that joins it.
fn spawn_hog(rt: &Runtime, name: &'static str, release: &Arc<AtomicBool>) -> hub::JoinHandle<()> {
    let r = Arc::clone(release);
    rt.handle().spawn(move || {
        joins_the_hog(
            hub::task()
                .name(name)
                .spawn(move || spins_without_parking_until_released(&r))
                .unwrap(),
        );
    })
}

#[test]
fn the_watchdog_names_the_blocker_and_logs_its_recovery() {
    let _serial = common::serial();
    common::take_diagnostics();
    let rt = common::hub::watched_rt();
    let release = Arc::new(AtomicBool::new(false));
    let hog = spawn_hog(&rt, "spinning-hog", &release);
    let report = wait_for_line("has not come back");
    assert!(
        report.starts_with("WARN greenlet::hub::watchdog"),
        "{report}"
    );
    assert!(report.contains("'spinning-hog'"), "{report}");
    assert!(report.contains("id "), "{report}");
    assert!(report.contains("tests/hub/watchdog_reports.rs"), "{report}");
    if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        // Its stack, read off the worker's thread: the spinning function,
        // in the block of the green thread holding the worker (the first).
        let blocks: Vec<&str> = report.split("green thread #").skip(1).collect();
        assert!(
            blocks
                .first()
                .is_some_and(|b| b.contains("spinning-hog [running]")
                    && b.contains("spins_without_parking_until_released")),
            "{report}"
        );
        // The green thread joining it, parked on the same worker, with
        // its own stack.
        assert!(
            blocks
                .iter()
                .any(|b| b.contains("[parked on join]") && b.contains("joins_the_hog")),
            "{report}"
        );
    }
    release.store(true, Ordering::SeqCst);
    hog.join().unwrap();
    let recovered = wait_for_line("recovered");
    assert!(
        recovered.contains("came back to its hub after"),
        "{recovered}"
    );
    assert!(recovered.contains("'spinning-hog'"), "{recovered}");
    let ms: u64 = recovered
        .split("after ")
        .nth(1)
        .and_then(|rest| rest.split(" ms").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no duration in {recovered}"));
    // The stall lasted at least the threshold (it was reported).
    assert!(ms >= 20, "{recovered}");
}

#[test]
fn the_default_threshold_is_100_ms() {
    // A worker held for several times the default threshold is reported
    // without any setting.
    let _serial = common::serial();
    common::take_diagnostics();
    let rt = Runtime::builder().worker_threads(1).build().unwrap();
    let release = Arc::new(AtomicBool::new(false));
    let hog = spawn_hog(&rt, "default-hog", &release);
    let report = wait_for_line("has not come back");
    assert!(report.contains("for over 100 ms"), "{report}");
    assert!(report.contains("'default-hog'"), "{report}");
    release.store(true, Ordering::SeqCst);
    hog.join().unwrap();
    let recovered = wait_for_line("recovered");
    assert!(recovered.contains("'default-hog'"), "{recovered}");
}

/// Takes the lock, then parks while holding it (until the process ends).
#[inline(never)]
fn holds_the_lock_across_a_park(lock: &std::sync::Mutex<u32>, parked: &AtomicBool) {
    let guard = lock.lock().unwrap();
    parked.store(true, Ordering::SeqCst);
    hub::sleep(HANG);
    drop(guard);
}

/// Blocks its worker's thread in the std lock.
#[inline(never)]
fn waits_for_the_lock(lock: &std::sync::Mutex<u32>) -> u32 {
    *lock.lock().unwrap()
}

/// The child of [`a_std_lock_held_across_a_park_is_reported_with_both_stacks`]:
/// one worker, `holder` parked holding a std mutex, `waiter` blocked in
/// it; prints every diagnostic on stdout (then a line `END`) until it is
/// killed. Run only as that child (ignored otherwise).
#[test]
#[ignore = "the child process of a_std_lock_held_across_a_park_is_reported_with_both_stacks"]
fn lock_child() {
    static LOCK: std::sync::Mutex<u32> = std::sync::Mutex::new(7);
    common::take_diagnostics();
    let rt = common::hub::watched_rt();
    let parked = Arc::new(AtomicBool::new(false));
    let p = Arc::clone(&parked);
    let holder = rt
        .handle()
        .spawn(move || {
            hub::task()
                .name("holder")
                .spawn(move || holds_the_lock_across_a_park(&LOCK, &p))
                .unwrap()
        })
        .join()
        .unwrap();
    while !(parked.load(Ordering::SeqCst) && matches!(holder.state(), hub::TaskState::Parked(_))) {
        thread::yield_now();
    }
    let _waiter = rt.handle().spawn(move || {
        hub::task()
            .name("waiter")
            .spawn(|| waits_for_the_lock(&LOCK))
            .unwrap()
    });
    let start = Instant::now();
    while start.elapsed() < HANG {
        for line in common::take_diagnostics() {
            println!("{line}\nEND");
        }
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_std_lock_held_across_a_park_is_reported_with_both_stacks() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        return;
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &common::test_path(module_path!(), "lock_child"),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Bounded: the child ends on its own after `HANG`, closing its stdout.
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut report = String::new();
    let mut record = String::new();
    for line in stdout.lines() {
        let line = line.unwrap();
        if line == "END" {
            if record.contains("has not come back") {
                report = record;
                break;
            }
            record.clear();
        } else {
            record.push_str(&line);
            record.push('\n');
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!report.is_empty(), "the child reported the stall");
    let blocks: Vec<&str> = report.split("green thread #").skip(1).collect();
    let waiter = blocks
        .iter()
        .find(|b| b.contains(" waiter [running]"))
        .unwrap_or_else(|| panic!("the waiter holds the worker: {report}"));
    assert!(waiter.contains("waits_for_the_lock"), "{report}");
    assert!(
        blocks[0].contains(" waiter [running]"),
        "the worker's holder comes first: {report}"
    );
    let holder = blocks
        .iter()
        .find(|b| b.contains(" holder [parked on sleep]"))
        .unwrap_or_else(|| panic!("the lock's holder is listed: {report}"));
    assert!(holder.contains("holds_the_lock_across_a_park"), "{report}");
}
