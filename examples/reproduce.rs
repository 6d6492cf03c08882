//! The seed report's reproducer on the CPython model.
//!
//! ```text
//! cargo run --release --example reproduce -- --python 3.11 --policy legacy --mode trace --timeout 20
//! ```
//! Without flags the default policy (robust) shows the fix; `--policy
//! legacy` shows the hang. Prints `GREEN True` (whether thread B was queued
//! while the drain ran) and the queue metrics, and exits 0; on a livelock
//! the watchdog prints each thread's simulated stack and the pending-call
//! state, and the process exits 1 (like
//! `faulthandler.dump_traceback_later(timeout, exit=True)`). `--help` for
//! the flags; a bad flag exits 2.

mod common;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use greenlet::interp_shim::scenarios::{seed_with, SeedConfig};
use greenlet::interp_shim::Watchdog;

/// The seed report's reproducer on the CPython model: prints `GREEN True`
/// and the queue metrics (exit 0), or the watchdog's faulthandler-style
/// dump of the livelock (exit 1).
#[derive(Parser, Debug)]
#[command(name = "reproduce")]
struct Cli {
    #[command(flatten)]
    model: common::ModelFlags,
    #[command(flatten)]
    run: common::RunFlags,
    /// Seconds until the watchdog dumps every thread and exits 1 (the
    /// seed's `faulthandler.dump_traceback_later(20, exit=True)`).
    #[arg(long, value_name = "SECONDS", default_value = "20", value_parser = common::seconds)]
    timeout: Duration,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = SeedConfig {
        version: cli.model.version,
        policy: cli.model.policy,
        mode: cli.model.mode,
        watchdog: Watchdog::Exit(cli.timeout),
    };
    println!(
        "python={} policy={} mode={} exit_order={}",
        config.version, config.policy, config.mode, cli.run.exit_order
    );
    match seed_with(config, cli.run.options()) {
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
