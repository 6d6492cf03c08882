//! A coverage.py-like load on the CPython model (issue 3): waves of
//! short-lived threads, each keying a weak dictionary by its main greenlet
//! (a finalizer with simulated Python work), the main thread traced and
//! entering functions while they die.
//!
//! ```text
//! cargo run --release --example churn -- --python 3.11 --policy shielded --threads 100 --waves 3 --runs 3
//! ```
//! Prints one line per run (hang or not, states leaked) and a summary; the
//! first hang's watchdog report goes to stderr. Exits 0 when no run hung and
//! no state leaked, 1 otherwise, 2 on bad flags.

use std::process::ExitCode;
use std::time::Duration;

use greenlet::cleanup::Policy;
use greenlet::interp_shim::scenarios::{churn, ChurnConfig, TraceMode};
use greenlet::interp_shim::{PyVersion, Watchdog};

const USAGE: &str =
    "usage: churn [--python 3.11|3.12|3.13] [--policy legacy|draining|scheduled|shielded] \
[--mode trace|ctrace|profile|pyprofile|none] [--threads N] [--waves N] [--runs N] [--timeout SECONDS]";

fn parse(args: &[String]) -> Result<(ChurnConfig, usize), String> {
    let mut config = ChurnConfig {
        version: PyVersion::V3_11,
        policy: Policy::Shielded,
        mode: TraceMode::Trace,
        threads: 100,
        waves: 3,
        watchdog: Watchdog::Report(Duration::from_secs(20)),
    };
    let mut runs = 1;
    let count = |flag: &str, value: &str| -> Result<usize, String> {
        value
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{flag} {value:?}: expected a positive integer"))
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--python" => config.version = value.parse().map_err(|e| format!("{e}"))?,
            "--policy" => config.policy = value.parse().map_err(|e| format!("{e}"))?,
            "--mode" => config.mode = value.parse().map_err(|e| format!("{e}"))?,
            "--threads" => config.threads = count(flag, value)?,
            "--waves" => config.waves = count(flag, value)?,
            "--runs" => runs = count(flag, value)?,
            "--timeout" => {
                let secs: f64 = value
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| {
                        format!("--timeout {value:?}: expected a positive number of seconds")
                    })?;
                config.watchdog = Watchdog::Report(Duration::from_secs_f64(secs));
            }
            other => return Err(format!("unknown flag {other:?}")),
        }
    }
    Ok((config, runs))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (config, runs) = match parse(&args) {
        Ok(parsed) => parsed,
        Err(err) => {
            eprintln!("churn: {err}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    println!(
        "python={} policy={} mode={} threads={}x{} runs={runs}",
        config.version, config.policy, config.mode, config.waves, config.threads
    );
    let (mut hangs, mut leaked, mut reported) = (0, 0, false);
    for run in 1..=runs {
        let report = match churn(config) {
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
