//! Runs the `reproduce` example in subprocesses over versions × policies ×
//! modes and prints the table of outcomes: the seed report's
//! observations, on the CPython model, in one command.
//!
//! ```text
//! cargo build --release --examples && target/release/examples/matrix --runs 1 --timeout 3
//! ```
//! The cells: every version (3.11, 3.12, 3.13) × every policy (legacy,
//! draining, scheduled, shielded, robust — the default) × every mode (trace,
//! ctrace, profile, pyprofile, none), 75 in all; about six seconds on two
//! cores with the defaults (`--runs 1 --timeout 3`). Cells run two at a time. A cell "hangs" when the watchdog killed the
//! subprocess (exit status 1 with its report); "green" counts `GREEN True`.
//! `--format tsv` prints `python policy mode runs hangs green` rows for
//! scripts. `--help` for the flags; exits 2 on a bad flag or a missing
//! `reproduce` binary.

mod common;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::{Arc, Mutex};

use clap::{Parser, ValueEnum};
use greenlet::cleanup::Policy;
use greenlet::interp_shim::scenarios::TraceMode;
use greenlet::interp_shim::PyVersion;

/// Runs the `reproduce` example (built beside this one) in subprocesses
/// over every CPython version x cleanup policy x trace mode, 75 cells, and
/// prints how many runs of each hung and how many printed `GREEN True`.
#[derive(Parser, Debug)]
#[command(name = "matrix")]
struct Cli {
    /// Runs per cell.
    #[arg(long, value_name = "N", default_value = "1", value_parser = common::positive)]
    runs: usize,
    /// Seconds until a run's watchdog dumps its threads and exits 1 (passed
    /// to `reproduce --timeout`).
    #[arg(long, value_name = "SECONDS", default_value = "3", value_parser = timeout_text)]
    timeout: String,
    #[command(flatten)]
    run: common::RunFlags,
    /// Output: an aligned table, or `python policy mode runs hangs green`
    /// rows separated by tabs for scripts.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// How the results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Aligned columns with the queue metrics' ranges.
    Table,
    /// Tab-separated rows with a header.
    Tsv,
}

/// A valid `--timeout`, kept as written so that `reproduce` gets it as is.
fn timeout_text(value: &str) -> Result<String, String> {
    common::seconds(value).map(|_| value.to_string())
}

#[derive(Clone, Copy)]
struct Cell {
    version: PyVersion,
    policy: Policy,
    mode: TraceMode,
}

#[derive(Default)]
struct Tally {
    hangs: usize,
    green: usize,
    other: usize,
    scheduled: Vec<u64>,
    destroyed: Vec<u64>,
    outstanding: Vec<u64>,
    failures: Vec<String>,
}

fn field(text: &str, key: &str) -> Option<u64> {
    let start = text.rfind(&format!("{key}="))? + key.len() + 1;
    let digits: String = text[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn run_cell(exe: &Path, cell: Cell, timeout: &str, run: &common::RunFlags, tally: &mut Tally) {
    let output = Command::new(exe)
        .args(["--exit-order", run.exit_order.name()])
        .args(["--early-verdict", &run.early_verdict])
        .args(["--python", cell.version.name()])
        .args(["--policy", cell.policy.name()])
        .args(["--mode", cell.mode.name()])
        .args(["--timeout", timeout])
        .output();
    let output = match output {
        Ok(output) => output,
        Err(err) => {
            tally
                .failures
                .push(format!("could not run {}: {err}", exe.display()));
            tally.other += 1;
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let all = format!("{stdout}\n{stderr}");
    match output.status.code() {
        Some(0) if stdout.contains("GREEN True") => tally.green += 1,
        Some(1) if stderr.contains("Timeout (") => tally.hangs += 1,
        _ => {
            tally.other += 1;
            tally
                .failures
                .push(format!("status {:?}: {}", output.status.code(), all.trim()));
        }
    }
    if let Some(n) = field(&all, "schedules_requested") {
        tally.scheduled.push(n);
    }
    if let Some(n) = field(&all, "states_destroyed") {
        tally.destroyed.push(n);
    }
    if let Some(n) = field(&all, "max_outstanding") {
        tally.outstanding.push(n);
    }
}

fn range(values: &[u64]) -> String {
    match (values.iter().min(), values.iter().max()) {
        (Some(lo), Some(hi)) if lo == hi => lo.to_string(),
        (Some(lo), Some(hi)) => format!("{lo}-{hi}"),
        _ => "-".into(),
    }
}

fn reproduce_path() -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot locate myself: {e}"))?;
    let path = me.with_file_name(format!("reproduce{}", std::env::consts::EXE_SUFFIX));
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{} not found: build it first (cargo build --examples, with the same profile)",
            path.display()
        ))
    }
}

/// The next cell to run (the lock is released before the cell runs).
fn next_cell(work: &Mutex<VecDeque<(usize, usize)>>) -> Option<usize> {
    let (cell, _run) = work.lock().ok()?.pop_front()?;
    Some(cell)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (runs, timeout, tsv, flags) = (cli.runs, cli.timeout, cli.format == Format::Tsv, cli.run);
    let exe = match reproduce_path() {
        Ok(exe) => exe,
        Err(err) => {
            eprintln!("matrix: {err}");
            return ExitCode::from(2);
        }
    };
    let mut cells = Vec::new();
    for version in PyVersion::ALL {
        for policy in Policy::ALL {
            for mode in TraceMode::ALL {
                cells.push(Cell {
                    version,
                    policy,
                    mode,
                });
            }
        }
    }
    let work: Arc<Mutex<VecDeque<(usize, usize)>>> = Arc::new(Mutex::new(
        (0..cells.len())
            .flat_map(|c| (0..runs).map(move |r| (c, r)))
            .collect(),
    ));
    let tallies: Arc<Mutex<Vec<Tally>>> =
        Arc::new(Mutex::new(cells.iter().map(|_| Tally::default()).collect()));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (work, tallies, cells, exe, timeout, flags) = (
                Arc::clone(&work),
                Arc::clone(&tallies),
                cells.clone(),
                exe.clone(),
                timeout.clone(),
                flags.clone(),
            );
            std::thread::spawn(move || {
                while let Some(c) = next_cell(&work) {
                    let mut tally = Tally::default();
                    run_cell(&exe, cells[c], &timeout, &flags, &mut tally);
                    if let Ok(mut all) = tallies.lock() {
                        let t = &mut all[c];
                        t.hangs += tally.hangs;
                        t.green += tally.green;
                        t.other += tally.other;
                        t.scheduled.extend(tally.scheduled);
                        t.destroyed.extend(tally.destroyed);
                        t.outstanding.extend(tally.outstanding);
                        t.failures.extend(tally.failures);
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        if worker.join().is_err() {
            eprintln!("matrix: a worker thread panicked");
            return ExitCode::FAILURE;
        }
    }
    let tallies = match tallies.lock() {
        Ok(t) => t,
        Err(_) => return ExitCode::FAILURE,
    };
    if tsv {
        println!("python\tpolicy\tmode\truns\thangs\tgreen");
    } else {
        println!(
            "reproduce matrix: {runs} run(s) per cell, watchdog {timeout} s, exit order {}, early verdict {}",
            flags.exit_order, flags.early_verdict
        );
        println!(
            "{:<6} {:<9} {:<9} {:>4} {:>5} {:>5} {:>5} {:>10} {:>9} {:>15}",
            "python",
            "policy",
            "mode",
            "runs",
            "hang",
            "green",
            "other",
            "scheduled",
            "destroyed",
            "max_outstanding"
        );
    }
    let mut other = 0;
    for (cell, t) in cells.iter().zip(tallies.iter()) {
        other += t.other;
        if tsv {
            println!(
                "{}\t{}\t{}\t{}\t{}\t{}",
                cell.version, cell.policy, cell.mode, runs, t.hangs, t.green
            );
        } else {
            println!(
                "{:<6} {:<9} {:<9} {:>4} {:>5} {:>5} {:>5} {:>10} {:>9} {:>15}",
                cell.version.name(),
                cell.policy.name(),
                cell.mode.name(),
                runs,
                t.hangs,
                t.green,
                t.other,
                range(&t.scheduled),
                range(&t.destroyed),
                range(&t.outstanding)
            );
        }
        for failure in &t.failures {
            eprintln!(
                "{} {} {}: unexpected outcome: {failure}",
                cell.version, cell.policy, cell.mode
            );
        }
    }
    if other == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
