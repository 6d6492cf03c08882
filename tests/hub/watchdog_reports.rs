//! The watchdog's report names the green thread that holds its worker (name,
//! id, spawn site) and, once the worker comes back, a second line says it
//! recovered and after how long. Bounded by a watchdog of the test's own
//! (`HANG`); nothing depends on timing beyond the runtime's threshold being
//! shorter than `HANG`.

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

/// A green thread named `name`, spawned from another on `rt`, that holds
/// its worker without parking until `release` is set (or `HANG` passes);
/// the handle of the green thread that joins it.
fn spawn_hog(rt: &Runtime, name: &'static str, release: &Arc<AtomicBool>) -> hub::JoinHandle<()> {
    let r = Arc::clone(release);
    rt.handle().spawn(move || {
        hub::task()
            .name(name)
            .spawn(move || {
                let start = Instant::now();
                while !r.load(Ordering::SeqCst) && start.elapsed() < HANG {
                    std::hint::spin_loop();
                }
            })
            .unwrap()
            .join()
            .unwrap();
    })
}

#[test]
fn the_watchdog_names_the_blocker_and_logs_its_recovery() {
    let _serial = common::serial();
    common::take_diagnostics();
    let rt = Runtime::builder()
        .worker_threads(1)
        .watchdog(Some(Duration::from_millis(20)))
        .build()
        .unwrap();
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
