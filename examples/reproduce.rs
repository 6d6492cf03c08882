//! The seed report's reproducer on the CPython model (issue 3).
//!
//! ```text
//! cargo run --example reproduce -- --python 3.11 --policy legacy --mode trace --timeout 20
//! ```
//! Defaults: `--python 3.11 --policy robust --mode trace --timeout 20` (the
//! policy is `Policy::default()`, so without flags the fix is shown; pass
//! `--policy legacy` for the hang). Policies: legacy, draining, scheduled,
//! shielded, robust; modes: trace, ctrace, profile, pyprofile, none.
//! Prints `GREEN True` (whether thread B was queued while the drain ran) and
//! the queue metrics, and exits 0; on a livelock the watchdog prints each
//! thread's simulated stack and the pending-call state, and the process exits
//! 1 (like `faulthandler.dump_traceback_later(timeout, exit=True)`). Bad flags
//! exit 2.

use std::process::ExitCode;

use greenlet::interp_shim::cli::parse_reproduce_args;
use greenlet::interp_shim::scenarios::seed;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match parse_reproduce_args(&args) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("reproduce: {err}");
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
