//! A coverage.py-like load on the CPython model (issue 3): waves of
//! short-lived threads, each keying a weak dictionary by its main greenlet
//! (a finalizer with simulated Python work), the main thread traced and
//! entering functions while they die.
//!
//! ```text
//! cargo run --release --example churn -- --python 3.11 --policy robust --threads 100 --waves 3 --runs 3
//! ```
//! `--policy` defaults to `Policy::default()` (robust); every policy (legacy,
//! draining, scheduled, shielded, robust) and mode (trace, ctrace, profile,
//! pyprofile, none) is accepted.
//! Prints one line per run (hang or not, states leaked) and a summary; the
//! first hang's watchdog report goes to stderr. Exits 0 when no run hung and
//! no state leaked, 1 otherwise, 2 on bad flags.

use std::process::ExitCode;

use greenlet::interp_shim::cli::parse_churn_args;
use greenlet::interp_shim::scenarios::churn;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (config, runs) = match parse_churn_args(&args) {
        Ok(parsed) => parsed,
        Err(err) => {
            eprintln!("churn: {err}");
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
