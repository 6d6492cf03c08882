//! The main demo: greenlet's CPython 3.11 livelock, its fix, and the proof,
//! on the CPython model, in one command (well under a minute on two cores).
//!
//! ```text
//! cargo run --release --example demo
//! ```
//! (a) THE HANG: the seed's reproducer on 3.11 + `sys.settrace` + the
//! `legacy` policy, run in-process with the watchdog in report mode, prints
//! the faulthandler-style dump (stuck at `<lambda>`, the re-dispatch count,
//! busy/calls_to_do/eval_breaker). (b) THE FIX: the same with the default
//! policy (`robust`) prints `GREEN True` and the queue metrics. (c) THE
//! PROOF: the explorer's verdicts for the seed, churn and full-ring
//! scenarios on 3.11 for all five policies, and the shortest livelock of
//! `scheduled` in churn. Exits 0 when everything behaved as predicted, 1
//! (with the surprises listed) otherwise; `--help` for the flags, 2 on a bad
//! flag.
//!
//! `parts.rs` holds the three parts; this file only parses the flags.

#[path = "../common/mod.rs"]
mod common;
mod parts;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use greenlet::interp_shim::explore::DEFAULT_BOUND;

use parts::{run, DemoConfig};

/// Greenlet's CPython 3.11 livelock, its fix and the explorer's proof, on
/// the CPython model, in one run. Exits 0 when everything behaved as
/// predicted, 1 otherwise.
#[derive(Parser, Debug)]
#[command(name = "demo")]
struct Cli {
    /// Seconds until the watchdog reports the run that hangs (the spin
    /// starts within milliseconds).
    #[arg(long, value_name = "SECONDS", default_value = "3", value_parser = common::seconds)]
    hang_after: Duration,
    /// Seconds the run with the fix may take before it counts as a hang.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = common::seconds)]
    green_within: Duration,
    /// The most states the explorer visits per cell before it is an error.
    #[arg(long = "max-states", value_name = "N", default_value_t = DEFAULT_BOUND)]
    bound: usize,
    /// Threads exploring cells in parallel.
    #[arg(long, value_name = "N", default_value = "2", value_parser = common::positive)]
    workers: usize,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = DemoConfig {
        hang_after: cli.hang_after,
        green_within: cli.green_within,
        bound: cli.bound,
        workers: cli.workers,
    };
    let mut stdout = std::io::stdout().lock();
    match run(&config, &mut stdout) {
        Ok(outcome) if outcome.as_predicted() => ExitCode::SUCCESS,
        Ok(outcome) => {
            eprintln!(
                "demo: {} result(s) differ from the predictions:\n  {}",
                outcome.surprises.len(),
                outcome.surprises.join("\n  ")
            );
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("demo: {err}");
            ExitCode::FAILURE
        }
    }
}
