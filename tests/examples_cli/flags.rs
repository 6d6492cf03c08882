//! Every example behaves like a Rust command-line tool: `--help` prints its
//! usage and exits 0, an unknown flag is a clear error with exit 2, and a
//! bad value names the flag and what it expected. The examples are found in
//! `examples/` (a new one is covered without editing this file) and built
//! once per run.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

/// Every example with the features Cargo.toml requires for it: those
/// Cargo finds in `examples/` (`NAME.rs`, `NAME/main.rs`) and those
/// Cargo.toml's `[[example]]` entries declare (the profiling drivers live
/// beside the benches).
fn examples() -> Vec<(String, Vec<String>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found: Vec<(String, Vec<String>)> = std::fs::read_dir(root.join("examples"))
        .expect("read examples/")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            if path.extension().is_some_and(|e| e == "rs") {
                return Some(path.file_stem()?.to_str()?.to_string());
            }
            if path.join("main.rs").is_file() {
                return Some(path.file_name()?.to_str()?.to_string());
            }
            None
        })
        .map(|name| (name, Vec::new()))
        .collect();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("read Cargo.toml");
    for block in manifest.split("[[example]]").skip(1) {
        let block = block.split("\n[").next().unwrap_or_default();
        let value = |key: &str| {
            block
                .lines()
                .find_map(|l| l.trim().strip_prefix(key)?.trim().strip_prefix('='))
                .map(str::trim)
        };
        let name = value("name")
            .expect("every [[example]] has a name")
            .trim_matches('"')
            .to_string();
        let features: Vec<String> = value("required-features")
            .unwrap_or("[]")
            .trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .map(|f| f.trim().trim_matches('"').to_string())
            .filter(|f| !f.is_empty())
            .collect();
        match found.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = features,
            None => found.push((name, features)),
        }
    }
    found.sort();
    found
}

fn run(name: &str, args: &[&str]) -> Output {
    Command::new(common::example(name))
        .args(args)
        .output()
        .unwrap_or_else(|err| panic!("run example {name}: {err}"))
}

/// The examples this build has: those whose required features are on.
fn built_examples() -> Vec<String> {
    let all = examples();
    assert!(all.len() >= 10, "examples: {all:?}");
    let on = |feature: &str| match feature {
        "hub" => cfg!(feature = "hub"),
        "cpython-model" => cfg!(feature = "cpython-model"),
        other => panic!("an example requires unknown feature {other}"),
    };
    all.into_iter()
        .filter(|(_, features)| features.iter().all(|f| on(f)))
        .map(|(name, _)| name)
        .collect()
}

#[test]
fn every_example_answers_help_and_rejects_a_bogus_flag() {
    for name in built_examples() {
        let help = run(&name, &["--help"]);
        let text = String::from_utf8_lossy(&help.stdout);
        assert_eq!(help.status.code(), Some(0), "{name} --help: {help:?}");
        assert!(text.contains("Usage: "), "{name} --help:\n{text}");
        assert!(text.contains(&name), "{name} --help names it:\n{text}");

        let bad = run(&name, &["--no-such-flag"]);
        let err = String::from_utf8_lossy(&bad.stderr);
        assert_eq!(bad.status.code(), Some(2), "{name} --no-such-flag: {bad:?}");
        assert!(
            err.contains("error: unexpected argument '--no-such-flag'"),
            "{name}:\n{err}"
        );
        assert!(err.contains("--help"), "{name} points to --help:\n{err}");
        assert!(bad.stdout.is_empty(), "{name} ran anyway: {bad:?}");
    }
}

#[cfg(feature = "cpython-model")]
#[test]
fn a_bad_value_names_the_flag_and_what_was_expected() {
    for (name, args, says) in [
        (
            "reproduce",
            &["--python", "3.10"][..],
            "3.11, 3.12 and 3.13",
        ),
        ("reproduce", &["--policy", "fast"], "\"fast\""),
        ("reproduce", &["--mode", "off"], "expected trace, ctrace"),
        (
            "reproduce",
            &["--timeout", "0"],
            "positive number of seconds",
        ),
        ("reproduce", &["--python"], "a value is required"),
        (
            "reproduce",
            &["--exit-order", "idle"],
            "expected settled or racing",
        ),
        (
            "churn",
            &["--early-verdict", "0"],
            "positive number of re-dispatches or off",
        ),
        (
            "matrix",
            &["--exit-order", "fast"],
            "expected settled or racing",
        ),
        ("churn", &["--runs", "0"], "expected a positive integer"),
        (
            "churn",
            &["--threads", "many"],
            "expected a positive integer",
        ),
        (
            "matrix",
            &["--format", "csv"],
            "possible values: table, tsv",
        ),
        ("explore", &["--scenario", "nope"], "nope"),
        ("explore", &["--format", "tsv"], "--table"),
        (
            "explore",
            &["--churn-threads", "2", "--table"],
            "cannot be used with",
        ),
        (
            "explore",
            &["--scenario", "seed", "--churn-threads", "2"],
            "churn only",
        ),
        (
            "explore",
            &["--scenario", "churn", "--churn-threads", "9"],
            "at most 8",
        ),
        ("demo", &["--workers", "0"], "expected a positive integer"),
    ] {
        assert_rejected(name, args, says);
    }
}

/// Example `name` run with `args` exits 2 and says `says` on stderr.
#[cfg(any(feature = "cpython-model", feature = "hub"))]
fn assert_rejected(name: &str, args: &[&str], says: &str) {
    let out = run(name, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{name} {args:?}: {err}");
    assert!(
        err.contains(says),
        "{name} {args:?} should say {says:?}:\n{err}"
    );
}

#[cfg(feature = "hub")]
#[test]
fn a_bad_value_of_a_hub_driver_names_what_was_expected() {
    assert_rejected("hot_loops", &["spin"], "possible values: round-trip");
    assert_rejected("hot_loops", &["create", "0"], "0");
}

#[cfg(all(feature = "cpython-model", feature = "hub"))]
#[test]
fn a_bad_value_of_the_explorers_hub_host_names_what_was_expected() {
    assert_rejected("explore", &["--python", "4.0"], "or hub");
    assert_rejected(
        "explore",
        &["--python", "hub", "--mode", "trace"],
        "CPython hosts only",
    );
    assert_rejected("explore", &["--slot-rules", "no-busy"], "--python hub only");
    assert_rejected(
        "explore",
        &["--python", "hub", "--slot-rules", "loose"],
        "cleanup-counted",
    );
}

#[cfg(feature = "cpython-model")]
#[test]
fn good_values_reach_the_run() {
    let out = run(
        "reproduce",
        &[
            "--python",
            "3.12",
            "--mode",
            "pyprofile",
            "--timeout",
            "20.5",
            "--exit-order",
            "racing",
            "--early-verdict",
            "off",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        text.starts_with("python=3.12 policy=robust mode=pyprofile exit_order=racing\n"),
        "{text}"
    );
    assert!(text.contains("GREEN True"), "{text}");
}
