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
//! (with the surprises listed) otherwise, 2 on bad flags.

use std::process::ExitCode;

use greenlet::interp_shim::demo::{run, DemoConfig};

fn main() -> ExitCode {
    if let Some(arg) = std::env::args().nth(1) {
        eprintln!("demo: unexpected argument {arg:?}\nusage: demo (no arguments)");
        return ExitCode::from(2);
    }
    let mut stdout = std::io::stdout().lock();
    match run(&DemoConfig::default(), &mut stdout) {
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
