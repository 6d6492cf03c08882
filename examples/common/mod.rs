//! Flags shared by the CPython-model examples (`reproduce`, `churn`,
//! `matrix`): which interpreter, policy and trace mode to run, and the
//! value parsers for counts and timeouts. Each example parses its own
//! command line with `clap`; this module only holds what several repeat.
//!
//! Uses the model's names (`PyVersion`, `Policy`, `TraceMode`), parsed with
//! their own `FromStr`, so a bad value gets the library's error message.

use std::time::Duration;

use clap::Args;
use greenlet::cleanup::Policy;
use greenlet::interp_shim::scenarios::{RunOptions, TraceMode};
use greenlet::interp_shim::{ExitOrder, PyVersion, EARLY_VERDICT_REDISPATCHES};

/// The interpreter, cleanup policy and trace mode of one live run.
#[derive(Args, Debug, Clone, Copy)]
pub(crate) struct ModelFlags {
    /// CPython version modelled: 3.11, 3.12 or 3.13.
    #[arg(long = "python", value_name = "VERSION", default_value = "3.11")]
    pub(crate) version: PyVersion,
    /// Cleanup policy: legacy, draining, scheduled, shielded or robust
    /// (the default; legacy shows the hang).
    #[arg(long, default_value_t = Policy::default())]
    pub(crate) policy: Policy,
    /// What the main thread has installed: trace (a Python trace function,
    /// as in the seed), ctrace (coverage's C tracer), profile (cProfile),
    /// pyprofile (a Python profile function) or none.
    #[arg(long, default_value = "trace")]
    pub(crate) mode: TraceMode,
}

/// How a live run schedules dying threads and when its watchdog may end it
/// early.
#[derive(Args, Debug, Clone)]
pub(crate) struct RunFlags {
    /// Where dying threads' thread-local destructors (greenlet's push and
    /// Py_AddPendingCall) fall: `settled` (the default) makes every GIL take
    /// wait for them, so runs repeat, but it rules out a real interleaving,
    /// the common one on real 3.11/3.12 (code right after Thread.join()
    /// running before the joined thread's push); `racing` lets the OS
    /// decide, as in CPython.
    #[arg(long, value_name = "ORDER", default_value = "settled")]
    pub(crate) exit_order: ExitOrder,
    /// Re-dispatches in a row with the livelock predicate holding and
    /// nothing else able to move before the watchdog reports the hang
    /// without waiting for its timeout, or `off`.
    #[arg(long, value_name = "N|off", default_value_t = EARLY_VERDICT_REDISPATCHES.to_string(), value_parser = early_verdict_text)]
    pub(crate) early_verdict: String,
}

impl RunFlags {
    /// The scenario options these flags ask for.
    #[allow(dead_code)] // matrix only passes the flags on
    pub(crate) fn options(&self) -> RunOptions {
        let bound = early_verdict(&self.early_verdict).ok().flatten();
        RunOptions::default()
            .exit_order(self.exit_order)
            .early_verdict(bound)
    }
}

/// A valid `--early-verdict`, kept as written so that `matrix` can pass it on.
fn early_verdict_text(value: &str) -> Result<String, String> {
    early_verdict(value).map(|_| value.to_string())
}

/// `off` or a positive number of re-dispatches (`--early-verdict`).
fn early_verdict(value: &str) -> Result<Option<u64>, String> {
    if value == "off" {
        return Ok(None);
    }
    positive(value)
        .map(|n| Some(n as u64))
        .map_err(|_| format!("{value:?}: expected a positive number of re-dispatches or off"))
}

/// A positive integer (`--runs`, `--threads`, ...).
pub(crate) fn positive(value: &str) -> Result<usize, String> {
    value
        .parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{value:?}: expected a positive integer"))
}

/// A positive, finite number of seconds (`--timeout`).
#[allow(dead_code)] // not every example takes a timeout
pub(crate) fn seconds(value: &str) -> Result<Duration, String> {
    value
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e9)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{value:?}: expected a positive number of seconds"))
}
