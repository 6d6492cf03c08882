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

use std::process::ExitCode;
use std::time::Instant;

use greenlet::cleanup::Policy;
use greenlet::interp_shim::explore::{
    explore_cells, explore_scenario, scenario::churn, Cell, Mode, ScenarioName, DEFAULT_BOUND,
    TSV_HEADER,
};
use greenlet::interp_shim::PyVersion;

struct Args {
    cell: Cell,
    table: bool,
    tsv: bool,
    bound: usize,
    churn_threads: Option<usize>,
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("explore: {problem}");
    eprintln!(
        "usage: explore [--scenario seed|churn|full-ring|finalization] [--python 3.11|3.12|3.13] \
         [--policy legacy|draining|scheduled|shielded|robust] [--mode trace|profile|none] \
         [--churn-threads N] [--table [--format text|tsv]] [--max-states N]\n\
         modes: trace = live trace and ctrace, profile = live profile (C profiler), none; \
         live pyprofile is not modelled"
    );
    ExitCode::from(2)
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        cell: Cell {
            scenario: ScenarioName::Seed,
            version: PyVersion::V3_11,
            policy: Policy::default(),
            mode: Mode::Trace,
        },
        table: false,
        tsv: false,
        bound: DEFAULT_BOUND,
        churn_threads: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--scenario" => args.cell.scenario = value()?.parse().map_err(|e| format!("{e}"))?,
            "--python" => args.cell.version = value()?.parse().map_err(|e| format!("{e}"))?,
            "--policy" => args.cell.policy = value()?.parse().map_err(|e| format!("{e}"))?,
            "--mode" => args.cell.mode = value()?.parse().map_err(|e| format!("{e}"))?,
            "--max-states" => {
                let v = value()?;
                args.bound = v
                    .parse()
                    .map_err(|_| format!("--max-states wants a number of states, got {v:?}"))?
            }
            "--churn-threads" => {
                let v = value()?;
                args.churn_threads = Some(
                    v.parse()
                        .map_err(|_| format!("--churn-threads wants a number, got {v:?}"))?,
                );
            }
            "--table" => args.table = true,
            "--format" => match value()?.as_str() {
                "tsv" => args.tsv = true,
                "text" => args.tsv = false,
                other => return Err(format!("unknown format {other:?}: expected text or tsv")),
            },
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(problem) => return usage(&problem),
    };
    if !args.table {
        let scenario = match (args.cell.scenario, args.churn_threads) {
            (ScenarioName::Churn, Some(n)) => match churn(n) {
                Ok(s) => s,
                Err(e) => return usage(&e.to_string()),
            },
            (_, Some(_)) => return usage("--churn-threads applies to --scenario churn only"),
            (name, None) => name.build(),
        };
        if let Some(n) = args.churn_threads {
            println!("churn with {n} dying threads");
        }
        return match explore_scenario(args.cell, &scenario, args.bound) {
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
    if args.tsv {
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
    let cells = Cell::all();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    for result in explore_cells(&cells, args.bound, workers) {
        match result {
            Ok(v) => {
                total_states += v.states;
                let cell = v.cell;
                if args.tsv {
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
    if !args.tsv {
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
