//! The main demo (`examples/demo/`) run as the user runs it, as a binary:
//! its three parts behave as predicted and its output shows what the
//! README promises; a bound the explorer cannot finish under is a typed
//! error naming the cell, not a wrong verdict.

use crate::common;

use std::process::Command;

#[test]
fn the_demo_shows_the_hang_the_fix_and_the_proof() {
    let _serial = common::serial();
    let out = Command::new(common::example("demo"))
        .args(["--hang-after", "2"])
        .output()
        .expect("run the demo");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let errors = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{errors}\n{text}");
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
    let _serial = common::serial();
    let out = Command::new(common::example("demo"))
        .args(["--hang-after", "0.2", "--max-states", "100"])
        .output()
        .expect("run the demo");
    let message = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{message}");
    assert!(
        message.contains("demo: the explorer could not finish: "),
        "{message}"
    );
    assert!(
        message.contains("seed python 3.11 policy legacy"),
        "{message}"
    );
    assert!(message.contains("--max-states"), "{message}");
}
