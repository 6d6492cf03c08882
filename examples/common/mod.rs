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
use greenlet::interp_shim::scenarios::TraceMode;
use greenlet::interp_shim::PyVersion;

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

/// A positive integer (`--runs`, `--threads`, ...).
#[allow(dead_code)] // not every example takes a count
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
