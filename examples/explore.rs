//! Explore every interleaving of the cleanup protocol over the CPython model.
//!
//! One cell, with its counterexamples:
//! `cargo run --release --example explore -- --scenario seed --python 3.11 --policy scheduled --mode trace`
//!
//! The whole table: `--table` (add `--format tsv` for `scenario\tpython\tpolicy\tmode\tlivelock\tleak`).
//! Modes: the explorer's `trace` stands for the live shim's `trace` and
//! `ctrace`, `profile` for its `profile` (a C profiler), `none` for `none`;
//! the live `pyprofile` is not modelled (see `explore::Mode`).
//! `--max-states N` bounds each cell (default 4000000); `--churn-threads N`
//! explores `churn` with N dying threads instead of 3 (one cell only).
//! `--help` for the flags; a bad flag exits 2.

use std::process::ExitCode;
use std::time::Instant;

use clap::{CommandFactory, Parser, ValueEnum};
use greenlet::cleanup::Policy;
use greenlet::interp_shim::explore::{
    explore_cells, explore_scenario, scenario::churn_with_threads, Mode, ScenarioName, TableCell,
    DEFAULT_BOUND, TSV_HEADER,
};
use greenlet::interp_shim::PyVersion;

/// Explores every interleaving of greenlet's thread-exit cleanup over the
/// CPython model: one cell (scenario x version x policy x mode) with its
/// shortest counterexamples, or `--table` for every cell.
#[derive(Parser, Debug)]
#[command(name = "explore")]
struct Cli {
    /// Scenario: seed, churn, full-ring, finalization, foreign-call or greenlet-switch.
    #[arg(long, default_value = "seed")]
    scenario: ScenarioName,
    /// CPython version modelled: 3.11, 3.12 or 3.13.
    #[arg(long = "python", value_name = "VERSION", default_value = "3.11")]
    version: PyVersion,
    /// Cleanup policy: legacy, draining, scheduled, shielded or robust.
    #[arg(long, default_value_t = Policy::default())]
    policy: Policy,
    /// trace (stands for the live trace and ctrace), profile (a C profiler)
    /// or none; the live pyprofile is not modelled.
    #[arg(long, default_value = "trace")]
    mode: Mode,
    /// Explore churn with N dying threads instead of 3 (one cell only).
    #[arg(long, value_name = "N", conflicts_with = "table")]
    churn_threads: Option<usize>,
    /// Every cell instead of one.
    #[arg(long)]
    table: bool,
    /// With --table: aligned text, or `scenario python policy mode livelock
    /// leak` rows separated by tabs.
    #[arg(long, value_enum, default_value_t = Format::Text, requires = "table")]
    format: Format,
    /// The most states explored per cell before it is an error.
    #[arg(long = "max-states", value_name = "N", default_value_t = DEFAULT_BOUND)]
    bound: usize,
}

/// How `--table` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Aligned columns with sizes and times.
    Text,
    /// Tab-separated verdicts with a header.
    Tsv,
}

/// A usage error about how flags combine: clap's message, exit 2.
fn usage(problem: impl std::fmt::Display) -> ExitCode {
    Cli::command()
        .error(clap::error::ErrorKind::ArgumentConflict, problem)
        .exit()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let cell = TableCell {
        scenario: cli.scenario,
        version: cli.version,
        policy: cli.policy,
        mode: cli.mode,
    };
    let (table, tsv, bound) = (cli.table, cli.format == Format::Tsv, cli.bound);
    if !table {
        let scenario = match (cell.scenario, cli.churn_threads) {
            (ScenarioName::Churn, Some(n)) => match churn_with_threads(n) {
                Ok(s) => s,
                Err(e) => return usage(e),
            },
            (_, Some(_)) => return usage("--churn-threads applies to --scenario churn only"),
            (name, None) => name.build(),
        };
        if let Some(n) = cli.churn_threads {
            println!("churn with {n} dying threads");
        }
        return match explore_scenario(cell, &scenario, bound) {
            Ok(v) => {
                println!("{}", v.summary());
                if let Some(c) = &v.livelock {
                    println!(
                        "\nshortest schedule to the livelock ({} steps):\n{c}",
                        c.len()
                    );
                }
                if let Some(c) = &v.leak {
                    println!("\nshortest schedule to the leak ({} steps):\n{c}", c.len());
                }
                if let (Some(c), None) = (&v.trap, &v.livelock) {
                    println!("\nshortest schedule to a state that cannot reach quiescence ({} steps):\n{c}", c.len());
                }
                if let Some(c) = &v.stuck {
                    println!(
                        "\nshortest schedule to a stuck state ({} steps):\n{c}",
                        c.len()
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("explore: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let started = Instant::now();
    if tsv {
        println!("{TSV_HEADER}");
    } else {
        println!(
            "{:<13} {:<5} {:<10} {:<8} {:>9} {:>11} {:>9} {:>5} {:>5} {:>5} {:>7} {:>8}",
            "scenario",
            "py",
            "policy",
            "mode",
            "states",
            "transitions",
            "livelock",
            "len",
            "leak",
            "len",
            "traps",
            "ms"
        );
    }
    let mut failed = false;
    let mut total_states = 0usize;
    let cells = TableCell::all();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    for result in explore_cells(&cells, bound, workers) {
        match result {
            Ok(v) => {
                total_states += v.states;
                let cell = v.cell;
                if tsv {
                    println!("{}", v.tsv_row());
                } else {
                    let len = |c: &Option<greenlet::interp_shim::explore::Counterexample>| {
                        c.as_ref().map_or("-".to_string(), |c| c.len().to_string())
                    };
                    println!(
                        "{:<13} {:<5} {:<10} {:<8} {:>9} {:>11} {:>9} {:>5} {:>5} {:>5} {:>7} {:>8.1}",
                        cell.scenario.name(),
                        cell.version.name(),
                        cell.policy.name(),
                        cell.mode.name(),
                        v.states,
                        v.transitions,
                        if v.livelock_reachable() { "YES" } else { "no" },
                        len(&v.livelock),
                        if v.leak_reachable() { "YES" } else { "no" },
                        len(&v.leak),
                        v.traps,
                        v.elapsed.as_secs_f64() * 1e3,
                    );
                    if v.stuck.is_some()
                        || v.inconsistent > 0
                        || (v.traps > 0) != v.livelock_reachable()
                    {
                        println!("{}", v.summary());
                    }
                }
            }
            Err(e) => {
                eprintln!("explore: {e}");
                failed = true;
            }
        }
    }
    if !tsv {
        let secs = started.elapsed().as_secs_f64();
        println!(
            "\n{} cells, {} states in {:.2} s wall on {workers} threads ({:.0} states/s)",
            cells.len(),
            total_states,
            secs,
            total_states as f64 / secs
        );
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
