//! The chat example as a user runs it with its built-in clients: every
//! talker gets every other talker's lines, `/who` lists them all, each one
//! gets the server's goodbye at the stop; silent clients are told and
//! disconnected after `--idle-ms`. A bad value names its flag.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

/// The `RESULT` line of one bounded run of the example with `args`.
fn result(args: &[&str]) -> String {
    let example = common::example("chat");
    let start = Instant::now();
    let out = Command::new(example)
        .args(args)
        .args(["--stop-after-ms", "60000"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Stopped by its clients, long before the 60 s timer.
    assert!(
        start.elapsed() < Duration::from_secs(50),
        "{args:?}: {stdout}"
    );
    stdout.lines().last().unwrap_or_default().to_string()
}

#[test]
fn the_chat_example_broadcasts_and_says_goodbye_to_every_talker() {
    assert_eq!(
        result(&["--clients", "12", "--lines", "4", "--workers", "2"]),
        "RESULT clients=12 chat_lines=528 expected=528 who_ok=1 idle_kicked=0 goodbyes=12 \
         dropped=0 connections=12 failed=0"
    );
}

#[test]
fn the_chat_example_disconnects_silent_clients() {
    assert_eq!(
        result(&["--silent", "3", "--idle-ms", "200"]),
        "RESULT clients=3 chat_lines=0 expected=0 who_ok=0 idle_kicked=3 goodbyes=0 \
         dropped=0 connections=3 failed=0"
    );
}

#[test]
fn the_chat_example_names_a_bad_value() {
    let out = Command::new(common::example("chat"))
        .args(["--idle-ms", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--idle-ms"), "{err}");
}
