//! Instructions per operation, exact: this binary's `op` mode run under
//! `valgrind --tool=callgrind` with a count of N and of 2N; the difference
//! of the two totals is N operations, with start-up and teardown cancelled.
//!
//! Uses `valgrind` from PATH and `std::process`.

use std::path::Path;
use std::process::Command;

use crate::systems::{Op, System};

/// Whether valgrind can be run.
pub(crate) fn available() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success())
}

/// The total instruction count of one run of `op` on `system`, `count` times.
fn total(system: System, op: Op, count: u64, scratch: &Path) -> Result<u64, String> {
    let args = ["op", system.arg(), op.arg(), &count.to_string()].map(String::from);
    total_of(&args, scratch)
}

/// The total instruction count of one run of this binary with `args`.
pub(crate) fn total_of(args: &[String], scratch: &Path) -> Result<u64, String> {
    let exe = std::env::current_exe().map_err(|err| format!("this binary's path: {err}"))?;
    let out = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!(
            "--callgrind-out-file={}",
            scratch.join("callgrind.out.%p").display()
        ))
        .arg(exe)
        .args(args)
        .output()
        .map_err(|err| format!("running valgrind: {err}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "valgrind on `{}` failed ({}): {}",
            args.join(" "),
            out.status,
            stderr.trim()
        ));
    }
    stderr
        .lines()
        .find_map(|line| {
            let (_, rest) = line.split_once("Collected :")?;
            rest.trim().parse::<u64>().ok()
        })
        .ok_or_else(|| format!("no 'Collected :' line in valgrind's output: {stderr}"))
}

/// Instructions per operation of `op` on `system`: (total(2N) - total(N)) / N.
pub(crate) fn per_op(system: System, op: Op, scratch: &Path) -> Result<f64, String> {
    let n = op.batch();
    let once = total(system, op, n, scratch)?;
    let twice = total(system, op, 2 * n, scratch)?;
    Ok(twice.saturating_sub(once) as f64 / n as f64)
}
