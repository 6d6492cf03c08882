//! Explore every interleaving of the cleanup protocol over the CPython model,
//! and over the hub's pending-call slot.
//!
//! One cell, with its counterexamples:
//! `cargo run --release --example explore -- --scenario seed --python 3.11 --policy scheduled --mode trace`
//!
//! The hub's pending-call slot as a host (with the `hub` feature, on by
//! default): `--python hub` (no `--mode`; the
//! scenarios above and `drain-parks`; `--slot-rules no-busy`,
//! `clear-outside-lock` or `no-close` break one rule of
//! `src/hub/pending.rs` on purpose).
//!
//! The whole table: `--table` (add `--format tsv` for `scenario\tpython\tpolicy\tmode\tlivelock\tleak`),
//! the CPython cells, then the hub's (python `hub`, mode `-`).
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
    explore_cells, explore_scenario, scenario::churn_with_threads, BoundExceeded, Counterexample,
    ExploreCell, Mode, ScenarioName, TableCell, Verdict, DEFAULT_BOUND, TSV_HEADER,
};
#[cfg(feature = "hub")]
use greenlet::interp_shim::explore::{explore_hub, HubCell, HubScenario, SlotRules};
use greenlet::interp_shim::PyVersion;

/// Explores every interleaving of greenlet's thread-exit cleanup over the
/// CPython model or the hub's pending-call slot: one cell (scenario x
/// version x policy x mode, or scenario x policy on the hub) with its
/// shortest counterexamples, or `--table` for every cell.
#[derive(Parser, Debug)]
#[command(name = "explore")]
struct Cli {
    /// Scenario: seed, churn, full-ring, finalization, foreign-call or
    /// greenlet-switch; with --python hub also drain-parks.
    #[arg(long, default_value = "seed")]
    scenario: String,
    /// The host: CPython 3.11, 3.12 or 3.13, or hub (the hub's
    /// pending-call slot).
    #[arg(long = "python", value_name = "VERSION", default_value = "3.11", value_parser = host)]
    version: Host,
    /// With --python hub: the slot's rules as they are (real), or one
    /// broken on purpose: no-busy, clear-outside-lock, no-close.
    #[cfg(feature = "hub")]
    #[arg(long, value_name = "RULES", default_value = "real")]
    slot_rules: SlotRules,
    /// Cleanup policy: legacy, draining, scheduled, shielded or robust.
    #[arg(long, default_value_t = Policy::default())]
    policy: Policy,
    /// trace (stands for the live trace and ctrace; the default), profile
    /// (a C profiler) or none; the live pyprofile is not modelled. Not with
    /// --python hub (the hub has no tracing).
    #[arg(long)]
    mode: Option<Mode>,
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

/// `--python`: a CPython version or the hub.
#[derive(Clone, Copy, Debug)]
enum Host {
    Python(PyVersion),
    #[cfg(feature = "hub")]
    Hub,
}

fn host(value: &str) -> Result<Host, String> {
    #[cfg(feature = "hub")]
    if value == "hub" {
        return Ok(Host::Hub);
    }
    value
        .parse()
        .map(Host::Python)
        .map_err(|e: <PyVersion as std::str::FromStr>::Err| {
            if cfg!(feature = "hub") {
                format!("{e}, or hub")
            } else {
                e.to_string()
            }
        })
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

/// One cell's summary and counterexamples.
fn print_verdict<C: ExploreCell>(v: &Verdict<C>) {
    println!("{}", v.summary());
    let show = |what: &str, c: &Option<Counterexample>| {
        if let Some(c) = c {
            println!("\nshortest schedule to {what} ({} steps):\n{c}", c.len());
        }
    };
    show("the livelock", &v.livelock);
    show("the leak", &v.leak);
    show("the broken slot rule", &v.violation);
    if v.livelock.is_none() {
        show("a state that cannot reach quiescence", &v.trap);
    }
    show("a stuck state", &v.stuck);
}

fn one_cell(cli: &Cli) -> ExitCode {
    let bound = cli.bound;
    let result = match cli.version {
        #[cfg(feature = "hub")]
        Host::Hub => {
            if cli.churn_threads.is_some() || cli.mode.is_some() {
                return usage("--churn-threads and --mode apply to the CPython hosts only");
            }
            let scenario = match cli.scenario.parse::<HubScenario>() {
                Ok(s) => s,
                Err(e) => return usage(e),
            };
            let cell = HubCell {
                scenario,
                policy: cli.policy,
            };
            explore_hub(cell, cli.slot_rules, bound)
                .map(|v| print_verdict(&v))
                .map_err(|e| e.to_string())
        }
        Host::Python(version) => {
            #[cfg(feature = "hub")]
            if cli.slot_rules != SlotRules::Real {
                return usage("--slot-rules applies to --python hub only");
            }
            let name = match cli.scenario.parse::<ScenarioName>() {
                Ok(s) => s,
                Err(e) => return usage(e),
            };
            let cell = TableCell {
                scenario: name,
                version,
                policy: cli.policy,
                mode: cli.mode.unwrap_or(Mode::Trace),
            };
            let scenario = match (name, cli.churn_threads) {
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
            explore_scenario(cell, &scenario, bound)
                .map(|v| print_verdict(&v))
                .map_err(|e| e.to_string())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("explore: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The text table's columns for one cell.
struct Row<'a> {
    scenario: &'a str,
    py: &'a str,
    policy: &'a str,
    mode: &'a str,
}

/// Print each verdict of a host's table; how many states, and whether
/// every cell fit its bound.
fn print_rows<C: ExploreCell>(
    results: Vec<Result<Verdict<C>, BoundExceeded<C>>>,
    tsv: bool,
    row: impl Fn(&C) -> Row<'_>,
) -> (usize, bool) {
    let mut ok = true;
    let mut total_states = 0usize;
    for result in results {
        match result {
            Ok(v) => {
                total_states += v.states;
                if tsv {
                    println!("{}", v.tsv_row());
                    continue;
                }
                let len = |c: &Option<Counterexample>| {
                    c.as_ref().map_or("-".to_string(), |c| c.len().to_string())
                };
                let r = row(&v.cell);
                println!(
                    "{:<13} {:<5} {:<10} {:<8} {:>9} {:>11} {:>9} {:>5} {:>5} {:>5} {:>7} {:>8.1}",
                    r.scenario,
                    r.py,
                    r.policy,
                    r.mode,
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
                    || v.violation.is_some()
                    || (v.traps > 0) != v.livelock_reachable()
                {
                    println!("{}", v.summary());
                }
            }
            Err(e) => {
                eprintln!("explore: {e}");
                ok = false;
            }
        }
    }
    (total_states, ok)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !cli.table {
        return one_cell(&cli);
    }
    let (tsv, bound) = (cli.format == Format::Tsv, cli.bound);
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
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cells = TableCell::all();
    let (python_states, python_ok) =
        print_rows(explore_cells(&cells, bound, workers), tsv, |c| Row {
            scenario: c.scenario.name(),
            py: c.version.name(),
            policy: c.policy.name(),
            mode: c.mode.name(),
        });
    #[cfg(feature = "hub")]
    let (hub_cells, hub_states, hub_ok) = {
        let hub_cells = HubCell::all();
        let (states, ok) = print_rows(explore_cells(&hub_cells, bound, workers), tsv, |c| Row {
            scenario: c.scenario.name(),
            py: "hub",
            policy: c.policy.name(),
            mode: "-",
        });
        (hub_cells.len(), states, ok)
    };
    #[cfg(not(feature = "hub"))]
    let (hub_cells, hub_states, hub_ok) = (0, 0, true);
    if !tsv {
        let secs = started.elapsed().as_secs_f64();
        let total_states = python_states + hub_states;
        println!(
            "\n{} cells ({} CPython, {} hub), {} states in {:.2} s wall on {workers} threads ({:.0} states/s)",
            cells.len() + hub_cells,
            cells.len(),
            hub_cells,
            total_states,
            secs,
            total_states as f64 / secs
        );
    }
    if python_ok && hub_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
