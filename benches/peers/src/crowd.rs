//! Memory per suspended coroutine and the most that can be alive at once,
//! each measured in a child process of its own (a fresh address space per
//! system, and a system that panics or aborts at its limit takes only its
//! child down).
//!
//! The child side prints one `key value` line per fact; the parent side
//! runs the child with a time limit and reads them. Uses [`crate::systems`]'s
//! crowds, `/proc/self/statm`, and `std::process`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::systems::{crowd, System};

/// How many are alive when the memory is measured.
pub(crate) const RSS_COUNT: usize = 10_000;

/// Resident bytes of this process.
pub(crate) fn resident_bytes() -> Result<u64, String> {
    let statm = std::fs::read_to_string("/proc/self/statm")
        .map_err(|err| format!("reading /proc/self/statm: {err}"))?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .ok_or_else(|| format!("unexpected /proc/self/statm: {statm}"))?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Ok(pages * page as u64)
}

/// Child: `count` suspended coroutines of `system`; prints `rss_per BYTES`.
pub(crate) fn rss_child(system: System, count: usize) -> Result<(), String> {
    let mut crowd = crowd(system, count);
    // One first, so that per-thread state and pools exist before `before`.
    crowd.add()?;
    let before = resident_bytes()?;
    for _ in 1..count {
        crowd.add()?;
    }
    let after = resident_bytes()?;
    println!("rss_per {}", (after - before) as f64 / (count - 1) as f64);
    // No teardown: the process ends with all of them suspended.
    std::io::stdout().flush().map_err(|err| err.to_string())?;
    std::process::exit(0);
}

/// Child: suspended coroutines of `system` until one fails or `cap` are
/// alive. Prints `alive N` every thousand (the last one stands if the child
/// dies), then `alive N` and `stopped REASON` (or `cap`).
pub(crate) fn alive_child(system: System, cap: usize) -> Result<(), String> {
    // A system that panics at its limit is caught and its message reported
    // below; the default hook would try to print (and allocate for) a
    // backtrace with no address space left.
    std::panic::set_hook(Box::new(|_| {}));
    let mut crowd = crowd(system, cap);
    let mut out = std::io::stdout().lock();
    let mut alive = 0;
    let stopped = loop {
        if alive == cap {
            break None;
        }
        match crowd.add() {
            Ok(()) => alive += 1,
            Err(reason) => break Some(reason),
        }
        if alive.is_multiple_of(1000) {
            writeln!(out, "alive {alive}")
                .and_then(|()| out.flush())
                .map_err(|e| e.to_string())?;
        }
    };
    writeln!(out, "alive {alive}").map_err(|e| e.to_string())?;
    match stopped {
        Some(reason) => writeln!(out, "stopped {}", first_clause(&reason)),
        None => writeln!(out, "cap"),
    }
    .and_then(|()| out.flush())
    .map_err(|e| e.to_string())?;
    std::process::exit(0);
}

/// The reason up to its first `;` (the advice that follows is for users).
fn first_clause(reason: &str) -> String {
    reason
        .split(';')
        .next()
        .unwrap_or(reason)
        .replace('\n', " ")
        .trim()
        .to_string()
}

/// What a child reported, line by line, and how it ended.
pub(crate) struct ChildReport {
    pub(crate) lines: Vec<(String, String)>,
    /// `None` when it exited with status 0.
    pub(crate) failure: Option<String>,
}

impl ChildReport {
    /// The last value reported under `key`.
    pub(crate) fn last(&self, key: &str) -> Option<&str> {
        self.lines
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Run this binary with `args`, reading its `key value` lines, killing it
/// after `limit`.
pub(crate) fn run_child(args: &[String], limit: Duration) -> Result<ChildReport, String> {
    let exe = std::env::current_exe().map_err(|err| format!("this binary's path: {err}"))?;
    run_program(&exe, args, limit)
}

/// Run `program` with `args`, reading its `key value` lines, killing it
/// after `limit`.
pub(crate) fn run_program(
    program: &Path,
    args: &[String],
    limit: Duration,
) -> Result<ChildReport, String> {
    let mut child = Command::new(program)
        .env_remove("RUST_BACKTRACE")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| format!("starting a child: {err}"))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let stderr = child.stderr.take().expect("piped stderr");
    let (sender, receiver) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if text.len() < 2000 {
                text.push_str(&line);
                text.push(' ');
            }
        }
        text
    });
    let deadline = Instant::now() + limit;
    let mut lines = Vec::new();
    let mut timed_out = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match receiver.recv_timeout(left.max(Duration::from_millis(1))) {
            Ok(line) => {
                // A bare word (`cap`) is a key with an empty value.
                let (k, v) = line.split_once(' ').unwrap_or((line.as_str(), ""));
                lines.push((k.to_string(), v.to_string()));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if Instant::now() >= deadline {
                    timed_out = true;
                    // The child is ours: end it by its own handle.
                    let _ = child.kill();
                    break;
                }
            }
        }
    }
    let status = child
        .wait()
        .map_err(|err| format!("waiting for a child: {err}"))?;
    let _ = reader.join();
    let stderr = errors.join().unwrap_or_default();
    let failure = if timed_out {
        Some(format!("killed after {} s", limit.as_secs()))
    } else if status.success() {
        None
    } else {
        Some(format!("{status}: {}", stderr.trim()))
    };
    Ok(ChildReport { lines, failure })
}
