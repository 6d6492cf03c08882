//! The main demo (`examples/demo.rs`) run in-process: its three parts
//! behave as predicted and its output shows what the README promises; a
//! bound the explorer cannot finish under is a typed error, not a wrong
//! verdict.

use std::time::Duration;

use greenlet::interp_shim::demo::{run, DemoConfig, DemoError};
use parking_lot::Mutex;

/// One demo at a time: its hang spins a core.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn the_demo_shows_the_hang_the_fix_and_the_proof() {
    let _serial = SERIAL.lock();
    let config = DemoConfig {
        hang_after: Duration::from_secs(2),
        ..DemoConfig::default()
    };
    let mut out = Vec::new();
    let outcome = run(&config, &mut out).expect("the demo runs");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(outcome.as_predicted(), "{:?}\n{text}", outcome.surprises);
    for heading in [
        "(a) THE HANG",
        "(b) THE FIX",
        "(c) THE PROOF",
        "(c') the shortest livelock of `scheduled` in churn",
        "SUMMARY",
    ] {
        assert!(text.contains(heading), "missing {heading:?}:\n{text}");
    }
    // (a) the watchdog's faulthandler-style dump, stuck at <lambda>.
    assert!(text.contains("Timeout (0:00:02)!"), "{text}");
    assert!(text.contains("File \"<simulated>\", in <lambda>"), "{text}");
    assert!(
        text.contains("busy=1 calls_to_do=1 eval_breaker(main)=1"),
        "{text}"
    );
    assert!(text.contains("livelock predicate (3.11 traced RESUME): true"));
    // (b) the fix.
    assert!(text.contains("GREEN True\n"), "{text}");
    assert!(text.contains("policy (robust)"), "{text}");
    // (c) fifteen verdicts, all as predicted, and the window narrated.
    let rows = text.lines().filter(|l| l.ends_with("  yes")).count();
    assert_eq!(rows, 15, "{text}");
    assert!(text.contains("-> the window: at step"), "{text}");
    assert!(text.contains("LIVELOCK"), "{text}");
    assert!(text.contains("everything behaved as predicted"), "{text}");
}

#[test]
fn an_explorer_bound_too_small_is_an_error_naming_the_cell() {
    let _serial = SERIAL.lock();
    let config = DemoConfig {
        hang_after: Duration::from_millis(200),
        bound: 100,
        ..DemoConfig::default()
    };
    let err = run(&config, &mut std::io::sink()).expect_err("100 states are not enough");
    assert!(matches!(err, DemoError::Bound(_)), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("seed python 3.11 policy legacy"),
        "{message}"
    );
    assert!(message.contains("--max-states"), "{message}");
}
