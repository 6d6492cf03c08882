//! The seed report's reproducer on the CPython model (issue 3).
//!
//! ```text
//! cargo run --example reproduce -- --python 3.11 --policy legacy --mode trace --timeout 20
//! ```
//! Prints `GREEN True` (whether thread B was queued while the drain ran) and
//! the queue metrics, and exits 0; on a livelock the watchdog prints each
//! thread's simulated stack and the pending-call state, and the process exits
//! 1 (like `faulthandler.dump_traceback_later(timeout, exit=True)`). Bad flags
//! exit 2.

use std::process::ExitCode;
use std::time::Duration;

use greenlet::cleanup::Policy;
use greenlet::interp_shim::scenarios::{seed, SeedConfig, TraceMode};
use greenlet::interp_shim::{PyVersion, Watchdog};

const USAGE: &str =
    "usage: reproduce [--python 3.11|3.12|3.13] [--policy legacy|draining|scheduled|shielded] \
[--mode trace|ctrace|profile|pyprofile|none] [--timeout SECONDS]";

fn parse(args: &[String]) -> Result<SeedConfig, String> {
    let mut config = SeedConfig {
        version: PyVersion::V3_11,
        policy: Policy::Legacy,
        mode: TraceMode::Trace,
        watchdog: Watchdog::Exit(Duration::from_secs(20)),
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--python" => config.version = value.parse().map_err(|e| format!("{e}"))?,
            "--policy" => config.policy = value.parse().map_err(|e| format!("{e}"))?,
            "--mode" => config.mode = value.parse().map_err(|e| format!("{e}"))?,
            "--timeout" => {
                let secs: f64 = value
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| {
                        format!("--timeout {value:?}: expected a positive number of seconds")
                    })?;
                config.watchdog = Watchdog::Exit(Duration::from_secs_f64(secs));
            }
            other => return Err(format!("unknown flag {other:?}")),
        }
    }
    Ok(config)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match parse(&args) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("reproduce: {err}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    println!(
        "python={} policy={} mode={}",
        config.version, config.policy, config.mode
    );
    match seed(config) {
        Ok(report) => {
            if let Some(err) = &report.error {
                eprintln!("Traceback: {err}");
            }
            println!("{}", report.green_line());
            println!("{}", report.metrics_line());
            if report.error.is_some() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(err) => {
            eprintln!("reproduce: {err}");
            ExitCode::FAILURE
        }
    }
}
