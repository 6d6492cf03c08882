//! Helpers shared by the integration tests.

#[cfg(feature = "hub")]
#[allow(dead_code)] // only the hub's test binaries use it
pub(crate) mod hub;

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The name the test harness gives test `test` of module `module` (the
/// caller's `module_path!()`): the module path without the test binary's
/// crate name, then the test's.
#[allow(dead_code)] // not every test binary uses every helper
pub(crate) fn test_path(module: &str, test: &str) -> String {
    match module.split_once("::") {
        Some((_, inner)) => format!("{inner}::{test}"),
        None => test.to_string(),
    }
}

/// Run the ignored test `test` of module `module` (the caller's
/// `module_path!()`) of the calling test binary in a child process with
/// `var=value` in its environment, and wait for it, at most
/// [`CHILD_HANG`] (then the child is killed and the test fails). For
/// behaviour that ends the process (exit, abort, a stack overflow) or that
/// shows on stderr, which the test harness captures in-process.
#[allow(dead_code)] // not every test binary uses every helper
pub(crate) fn run_child_test(module: &str, test: &str, var: &str, value: &str) -> Output {
    let exe = std::env::current_exe().expect("test binary path");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            &test_path(module, test),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(var, value)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the child");
    // Read both pipes meanwhile, so that a child writing more than a pipe
    // holds does not wait on us.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("the child's status") {
            break status;
        }
        if start.elapsed() > CHILD_HANG {
            let _ = child.kill();
            panic!("the child running {test} with {var}={value} did not end within {CHILD_HANG:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

/// How long [`run_child_test`] waits for its child.
#[allow(dead_code)] // not every test binary uses every helper
pub(crate) const CHILD_HANG: Duration = Duration::from_secs(120);

/// A started greenlet named `name`, suspended in a loop that swallows
/// everything thrown into it, `GreenletExit` included; it switches to its
/// parent each time.
#[allow(dead_code)] // not every test binary uses every helper
pub(crate) fn stubborn(name: &str) -> greenlet::Greenlet {
    stubborn_holding(name, ())
}

/// [`stubborn`], with `guard` as a local of its body: dropped only if its
/// stack is unwound.
#[allow(dead_code)]
pub(crate) fn stubborn_holding<T: 'static>(name: &str, guard: T) -> greenlet::Greenlet {
    let g = greenlet::Greenlet::builder()
        .name(name)
        .spawn(move |_| {
            let _guard = guard;
            let parent = greenlet::getcurrent().parent().unwrap();
            loop {
                let _ = parent.switch(());
            }
        })
        .unwrap();
    g.switch(()).unwrap();
    g
}

/// Recurses without end (a 512-byte frame per call): overflows the stack.
#[allow(dead_code)]
#[inline(never)]
pub(crate) fn recurse(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth as u8; 512]);
    if depth == u64::MAX {
        return 0;
    }
    recurse(depth + 1) + u64::from(frame[7])
}

/// Serialises the tests of one binary that touch process-wide state (the
/// default cleanup queue, live counts, the global trace hook): hold the
/// guard for the whole test. A test that panicked while holding it does
/// not poison the others.
#[allow(dead_code)]
pub(crate) fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The library's diagnostics, captured through the `log` facade: installs
/// a capturing logger on first use (once per test binary) and returns the
/// reports made since the last call, as `LEVEL target: message` lines.
/// Reports of every thread are kept (a greenlet's thread-exit report comes
/// from its own thread), so the tests of other modules running meanwhile
/// may add some: a test that checks a report is absent names its greenlets
/// and looks for their names.
#[allow(dead_code)]
pub(crate) fn take_diagnostics() -> Vec<String> {
    use std::sync::{Mutex, Once};
    static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());
    struct Capture;
    impl log::Log for Capture {
        fn enabled(&self, _: &log::Metadata<'_>) -> bool {
            true
        }
        fn log(&self, record: &log::Record<'_>) {
            LINES
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(format!(
                    "{} {}: {}",
                    record.level(),
                    record.target(),
                    record.args()
                ));
        }
        fn flush(&self) {}
    }
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        log::set_logger(&Capture).expect("no other logger in a test binary");
        log::set_max_level(log::LevelFilter::Trace);
    });
    std::mem::take(
        &mut *LINES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
}

/// The one line of [`take_diagnostics`]'s `lines` that contains every one
/// of `needles`; it must start with `prefix` (`LEVEL target`).
#[allow(dead_code)]
pub(crate) fn diagnostic<'a>(lines: &'a [String], prefix: &str, needles: &[&str]) -> &'a str {
    let line = lines
        .iter()
        .find(|l| needles.iter().all(|n| l.contains(n)))
        .unwrap_or_else(|| panic!("no diagnostic with {needles:?} in {lines:#?}"));
    assert!(line.starts_with(prefix), "{line}");
    line
}

/// The path of example `name`'s binary, built beside this test binary: the
/// first call in a test binary runs `cargo build --examples` once with this
/// build's profile and features (a no-op when `cargo test` just built them),
/// so a test never runs a stale example.
#[allow(dead_code)]
pub(crate) fn example(name: &str) -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["build", "--examples", "--quiet"]);
        if !cfg!(debug_assertions) {
            build.arg("--release");
        }
        build.arg("--no-default-features");
        let features: Vec<&str> = [
            ("hub", cfg!(feature = "hub")),
            ("cpython-model", cfg!(feature = "cpython-model")),
        ]
        .into_iter()
        .filter_map(|(name, on)| on.then_some(name))
        .collect();
        if !features.is_empty() {
            build.args(["--features", &features.join(",")]);
        }
        match build.status() {
            Ok(status) if status.success() => Ok(()),
            Ok(status) => Err(format!("cargo build --examples failed: {status}")),
            Err(err) => Err(format!("could not run cargo: {err}")),
        }
    });
    if let Err(err) = built {
        panic!("{err}");
    }
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(std::path::Path::parent)
        .expect("target/<profile>/deps/<test>");
    profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}
