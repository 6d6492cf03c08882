//! A coverage.py-like load on the CPython model: waves of
//! short-lived threads, each keying a weak dictionary by its main greenlet
//! (a finalizer with simulated Python work), the main thread traced and
//! entering functions while they die.
//!
//! ```text
//! cargo run --release --example churn -- --python 3.11 --policy robust --threads 100 --waves 3 --runs 3
//! ```
//! Prints one line per run (hang or not, states leaked) and a summary; the
//! first hang's watchdog report goes to stderr. Exits 0 when no run hung and
//! no state leaked, 1 otherwise; `--help` for the flags, 2 on a bad flag.

mod common;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use greenlet::interp_shim::scenarios::{churn_with, ChurnConfig};
use greenlet::interp_shim::Watchdog;

/// A coverage.py-like load on the CPython model: waves of short-lived
/// threads whose main greenlets have finalizers, while the traced main
/// thread enters functions. Exits 0 when no run hung and no state leaked.
#[derive(Parser, Debug)]
#[command(name = "churn")]
struct Cli {
    #[command(flatten)]
    model: common::ModelFlags,
    #[command(flatten)]
    run: common::RunFlags,
    /// Threads per wave.
    #[arg(long, value_name = "N", default_value = "100", value_parser = common::positive)]
    threads: usize,
    /// Waves of threads per run.
    #[arg(long, value_name = "N", default_value = "3", value_parser = common::positive)]
    waves: usize,
    /// Runs, each in a fresh interpreter.
    #[arg(long, value_name = "N", default_value = "1", value_parser = common::positive)]
    runs: usize,
    /// Seconds per run until the watchdog reports a hang (the run is
    /// counted and the next one starts).
    #[arg(long, value_name = "SECONDS", default_value = "20", value_parser = common::seconds)]
    timeout: Duration,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runs = cli.runs;
    let config = ChurnConfig {
        version: cli.model.version,
        policy: cli.model.policy,
        mode: cli.model.mode,
        threads: cli.threads,
        waves: cli.waves,
        watchdog: Watchdog::Report(cli.timeout),
    };
    println!(
        "python={} policy={} mode={} threads={}x{} runs={runs} exit_order={}",
        config.version,
        config.policy,
        config.mode,
        config.waves,
        config.threads,
        cli.run.exit_order
    );
    let (mut hangs, mut leaked, mut reported) = (0, 0, false);
    for run in 1..=runs {
        let report = match churn_with(config, cli.run.options()) {
            Ok(report) => report,
            Err(err) => {
                eprintln!("churn: {err}");
                return ExitCode::FAILURE;
            }
        };
        if let Some(hang) = &report.hang {
            hangs += 1;
            if !reported {
                eprint!("run {run}: {hang}");
                reported = true;
            }
        }
        if let Some(err) = &report.error {
            eprintln!("run {run}: the main thread raised {err}");
        }
        leaked += report.states_never_destroyed;
        println!(
            "run {run}: {} {}",
            if report.hung() { "HANG" } else { "ok" },
            report.metrics_line()
        );
    }
    println!("summary: runs={runs} hangs={hangs} states_never_destroyed={leaked}");
    if hangs == 0 && leaked == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
