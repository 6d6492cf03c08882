//! Command-line flags of the `reproduce` and `churn` examples, parsed here so
//! that tests can check them without running the binaries.
//!
//! Owns: [`parse_reproduce_args`], [`parse_churn_args`], [`CliError`]. Uses
//! the scenario configurations of [`scenarios`](super::scenarios).

use std::time::Duration;

use crate::cleanup::Policy;

use super::scenarios::{ChurnConfig, SeedConfig, TraceMode};
use super::version::PyVersion;
use super::watchdog::Watchdog;

/// Usage of the `reproduce` example.
pub const REPRODUCE_USAGE: &str = "usage: reproduce [--python 3.11|3.12|3.13] \
[--policy legacy|draining|scheduled|shielded|robust] [--mode trace|ctrace|profile|pyprofile|none] \
[--timeout SECONDS]";

/// Usage of the `churn` example.
pub const CHURN_USAGE: &str = "usage: churn [--python 3.11|3.12|3.13] \
[--policy legacy|draining|scheduled|shielded|robust] [--mode trace|ctrace|profile|pyprofile|none] \
[--threads N] [--waves N] [--runs N] [--timeout SECONDS]";

/// A command line that could not be understood.
///
/// # Examples
/// ```
/// use greenlet::interp_shim::cli::{parse_churn_args, CHURN_USAGE};
///
/// let args: Vec<String> = ["--runs", "0"].map(String::from).into();
/// let err = parse_churn_args(&args).unwrap_err();
/// assert_eq!(err.problem, "--runs \"0\": expected a positive integer");
/// assert_eq!(err.usage, CHURN_USAGE);
/// assert_eq!(err.to_string(), format!("{}\n{}", err.problem, CHURN_USAGE));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{problem}\n{usage}")]
pub struct CliError {
    /// What was wrong, e.g. `--runs "0": expected a positive integer`.
    pub problem: String,
    /// The usage line of the program.
    pub usage: &'static str,
}

/// Walks `--flag value` pairs.
struct Flags<'a> {
    args: std::slice::Iter<'a, String>,
    usage: &'static str,
}

impl<'a> Flags<'a> {
    fn new(args: &'a [String], usage: &'static str) -> Self {
        Flags {
            args: args.iter(),
            usage,
        }
    }

    fn error(&self, problem: String) -> CliError {
        CliError {
            problem,
            usage: self.usage,
        }
    }

    /// The next flag and its value.
    fn next(&mut self) -> Result<Option<(&'a str, &'a str)>, CliError> {
        let Some(flag) = self.args.next() else {
            return Ok(None);
        };
        match self.args.next() {
            Some(value) => Ok(Some((flag, value))),
            None => Err(self.error(format!("{flag} needs a value"))),
        }
    }

    fn parse<T: std::str::FromStr>(&self, value: &str) -> Result<T, CliError>
    where
        T::Err: std::fmt::Display,
    {
        value.parse().map_err(|e: T::Err| self.error(e.to_string()))
    }

    fn positive(&self, flag: &str, value: &str) -> Result<usize, CliError> {
        value
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| self.error(format!("{flag} {value:?}: expected a positive integer")))
    }

    fn seconds(&self, value: &str) -> Result<Duration, CliError> {
        value
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e9)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| {
                self.error(format!(
                    "--timeout {value:?}: expected a positive number of seconds"
                ))
            })
    }
}

/// The `reproduce` flags: `--python` (default 3.11), `--policy`
/// ([`Policy::default()`], robust; `--policy legacy` shows the hang),
/// `--mode` (trace), `--timeout` (20 s, an exiting watchdog like the seed's
/// `faulthandler.dump_traceback_later(20, exit=True)`).
///
/// # Errors
/// [`CliError`] naming the bad flag or value.
///
/// # Example
/// ```
/// use greenlet::interp_shim::cli::parse_reproduce_args;
/// let args: Vec<String> = ["--python", "3.12", "--mode", "profile"].map(String::from).into();
/// let config = parse_reproduce_args(&args).unwrap();
/// assert_eq!(config.version.name(), "3.12");
/// assert_eq!(config.policy, greenlet::cleanup::Policy::default());
/// let bad: Vec<String> = ["--python", "3.10"].map(String::from).into();
/// assert!(parse_reproduce_args(&bad).unwrap_err().to_string().contains("3.10"));
/// ```
pub fn parse_reproduce_args(args: &[String]) -> Result<SeedConfig, CliError> {
    let mut config = SeedConfig {
        version: PyVersion::V3_11,
        policy: Policy::default(),
        mode: TraceMode::Trace,
        watchdog: Watchdog::Exit(Duration::from_secs(20)),
    };
    let mut flags = Flags::new(args, REPRODUCE_USAGE);
    while let Some((flag, value)) = flags.next()? {
        match flag {
            "--python" => config.version = flags.parse(value)?,
            "--policy" => config.policy = flags.parse(value)?,
            "--mode" => config.mode = flags.parse(value)?,
            "--timeout" => config.watchdog = Watchdog::Exit(flags.seconds(value)?),
            other => return Err(flags.error(format!("unknown flag {other:?}"))),
        }
    }
    Ok(config)
}

/// The `churn` flags and the number of runs: `--python` (3.11), `--policy`
/// ([`Policy::default()`], robust), `--mode` (trace), `--threads` per wave (100), `--waves` (3),
/// `--runs` (1), `--timeout` per run (20 s, a reporting watchdog so that
/// every run is counted).
///
/// # Errors
/// [`CliError`] naming the bad flag or value.
///
/// # Example
/// ```
/// use greenlet::interp_shim::cli::parse_churn_args;
/// let args: Vec<String> = ["--threads", "50", "--runs", "4"].map(String::from).into();
/// let (config, runs) = parse_churn_args(&args).unwrap();
/// assert_eq!((config.threads, config.waves, runs), (50, 3, 4));
/// assert_eq!(config.policy, greenlet::cleanup::Policy::default());
/// ```
pub fn parse_churn_args(args: &[String]) -> Result<(ChurnConfig, usize), CliError> {
    let mut config = ChurnConfig {
        version: PyVersion::V3_11,
        policy: Policy::default(),
        mode: TraceMode::Trace,
        threads: 100,
        waves: 3,
        watchdog: Watchdog::Report(Duration::from_secs(20)),
    };
    let mut runs = 1;
    let mut flags = Flags::new(args, CHURN_USAGE);
    while let Some((flag, value)) = flags.next()? {
        match flag {
            "--python" => config.version = flags.parse(value)?,
            "--policy" => config.policy = flags.parse(value)?,
            "--mode" => config.mode = flags.parse(value)?,
            "--threads" => config.threads = flags.positive(flag, value)?,
            "--waves" => config.waves = flags.positive(flag, value)?,
            "--runs" => runs = flags.positive(flag, value)?,
            "--timeout" => config.watchdog = Watchdog::Report(flags.seconds(value)?),
            other => return Err(flags.error(format!("unknown flag {other:?}"))),
        }
    }
    Ok((config, runs))
}
