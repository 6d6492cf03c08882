//! The demo's three parts: greenlet's CPython 3.11 livelock, its fix, and
//! the explorer's proof, in one run and in one process.
//!
//! Owns: [`run`], [`DemoConfig`], [`DemoOutcome`], [`DemoError`] and the
//! demo's predictions ([`PREDICTED_VERDICTS`]). Uses the seed scenario of
//! `greenlet::interp_shim::scenarios` on the live runtime with the watchdog
//! in report mode (so the hang is caught and printed without ending the
//! process), and the explorer (`greenlet::interp_shim::explore`). Every part
//! checks its outcome against what the README predicts; a run that differs
//! is reported in [`DemoOutcome::surprises`], never hidden.

use std::io::Write;
use std::time::{Duration, Instant};

use greenlet::cleanup::Policy;
use greenlet::interp_shim::explore::{
    explore_cells, BoundExceeded, Counterexample, Mode, ScenarioName, TableCell, Verdict,
};
use greenlet::interp_shim::scenarios::{seed, ScenarioReport, SeedConfig, TraceMode};
use greenlet::interp_shim::{PyVersion, RunError, Watchdog};

/// How long each part may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DemoConfig {
    /// The watchdog's timeout for the run that hangs (the seed uses 20 s;
    /// the spin starts within milliseconds).
    pub(crate) hang_after: Duration,
    /// The watchdog's timeout for the run that must finish (far longer than
    /// it takes: reaching it would be a hang, reported as a surprise).
    pub(crate) green_within: Duration,
    /// The explorer's bound on states per cell.
    pub(crate) bound: usize,
    /// Threads exploring cells in parallel.
    pub(crate) workers: usize,
}

/// What the demo found.
#[derive(Debug, Default)]
pub(crate) struct DemoOutcome {
    /// Each way the run differed from the predictions, in words.
    pub(crate) surprises: Vec<String>,
}

impl DemoOutcome {
    /// Whether everything behaved as predicted: a hang where one is
    /// predicted, `GREEN True` where the fix is, every explorer verdict as
    /// in [`PREDICTED_VERDICTS`].
    pub(crate) fn as_predicted(&self) -> bool {
        self.surprises.is_empty()
    }
}

/// Why the demo could not run to the end.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DemoError {
    /// Writing the demo's output failed (e.g. a closed pipe).
    #[error("could not write the demo's output: {0}")]
    Write(#[from] std::io::Error),
    /// The live runtime could not start a run.
    #[error("the CPython model could not run the seed scenario: {0}")]
    Run(#[from] RunError),
    /// A cell of the explorer outgrew its bound.
    #[error("the explorer could not finish: {0}")]
    Bound(#[from] BoundExceeded),
}

/// The explorer's predicted verdicts on CPython 3.11 with a traced main
/// thread: `(scenario, policy, livelock reachable, leak reachable)`. The
/// seed's patch (`draining`) fixes the seed but not the churn; `scheduled`
/// adds the livelock window after a drain clears its flag; `shielded` closes
/// it but leaks when the ring is full; only `robust` (the default) has
/// neither anywhere.
pub(crate) const PREDICTED_VERDICTS: [(ScenarioName, Policy, bool, bool); 15] = [
    (ScenarioName::Seed, Policy::Legacy, true, false),
    (ScenarioName::Seed, Policy::Draining, false, false),
    (ScenarioName::Seed, Policy::Scheduled, false, false),
    (ScenarioName::Seed, Policy::Shielded, false, false),
    (ScenarioName::Seed, Policy::Robust, false, false),
    (ScenarioName::Churn, Policy::Legacy, true, false),
    (ScenarioName::Churn, Policy::Draining, true, false),
    (ScenarioName::Churn, Policy::Scheduled, true, false),
    (ScenarioName::Churn, Policy::Shielded, false, false),
    (ScenarioName::Churn, Policy::Robust, false, false),
    (ScenarioName::FullRing, Policy::Legacy, true, true),
    (ScenarioName::FullRing, Policy::Draining, true, true),
    (ScenarioName::FullRing, Policy::Scheduled, true, true),
    (ScenarioName::FullRing, Policy::Shielded, false, true),
    (ScenarioName::FullRing, Policy::Robust, false, false),
];

fn heading(out: &mut dyn Write, title: &str) -> std::io::Result<()> {
    let rule = "=".repeat(78);
    writeln!(out, "\n{rule}\n{title}\n{rule}")
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// Run the demo, writing it to `out`: (a) the hang, (b) the fix, (c) the
/// proof, then a summary. Surprises are collected, not fatal.
///
/// # Errors
/// [`DemoError`] if the output cannot be written, the runtime cannot start,
/// or an explorer cell outgrows `config.bound`.
pub(crate) fn run(config: &DemoConfig, out: &mut dyn Write) -> Result<DemoOutcome, DemoError> {
    let started = Instant::now();
    let mut outcome = DemoOutcome::default();
    let hang = the_hang(config, out, &mut outcome)?;
    let fix = the_fix(config, out, &mut outcome)?;
    let verdicts = the_proof(config, out, &mut outcome)?;
    heading(out, "SUMMARY")?;
    let redispatches = hang.hang.as_ref().map_or(0, |h| h.redispatches);
    let robust_clean = verdicts
        .iter()
        .filter(|v| v.cell.policy == Policy::Robust)
        .all(|v| !v.livelock_reachable() && !v.leak_reachable());
    paragraph(
        out,
        &format!(
            "{}On the model of CPython 3.11 with a trace function installed, greenlet's old \
             cleanup policy (legacy) schedules a second pending call while the first one is \
             still running; the finalizer then enters <lambda> and the traced RESUME is \
             re-dispatched forever ({redispatches} re-dispatches before the watchdog fired \
             after {:.1} s, with busy, calls_to_do and the eval breaker all set). The same run \
             with the default policy ({}) prints {} and destroys all {} thread states. The \
             explorer, going through every interleaving rather than one lucky schedule, shows \
             why the weaker fixes are not enough: the seed's patch and the scheduled flag \
             still livelock under churn (for scheduled, the window after a drain clears its \
             flag, shown above), shielding alone leaks when the pending-call ring is full, and \
             robust has {} reachable livelock and {} reachable leak in the seed, churn and \
             full-ring scenarios.",
            if outcome.as_predicted() {
                ""
            } else {
                "WHAT WAS PREDICTED (this run differs, see below): "
            },
            config.hang_after.as_secs_f64(),
            Policy::default(),
            fix.green_line(),
            fix.queue.states_destroyed,
            if robust_clean { "no" } else { "SOME" },
            if robust_clean { "no" } else { "SOME" },
        ),
    )?;
    writeln!(
        out,
        "\nwall time {:.1} s; {}",
        started.elapsed().as_secs_f64(),
        if outcome.as_predicted() {
            "everything behaved as predicted".to_string()
        } else {
            format!(
                "{} SURPRISE(S):\n  {}",
                outcome.surprises.len(),
                outcome.surprises.join("\n  ")
            )
        }
    )?;
    Ok(outcome)
}

/// The seed's reproducer on 3.11 with `sys.settrace` under `policy`, the
/// watchdog reporting (without exiting) after `hang_after`.
fn seed_3_11_traced(policy: Policy, hang_after: Duration) -> Result<ScenarioReport, RunError> {
    seed(SeedConfig {
        version: PyVersion::V3_11,
        policy,
        mode: TraceMode::Trace,
        watchdog: Watchdog::Report(hang_after),
    })
}

/// (a) The seed on 3.11 + trace + legacy: the watchdog's report.
fn the_hang(
    config: &DemoConfig,
    out: &mut dyn Write,
    outcome: &mut DemoOutcome,
) -> Result<ScenarioReport, DemoError> {
    heading(
        out,
        "(a) THE HANG: the seed's reproducer on CPython 3.11, sys.settrace, policy legacy",
    )?;
    paragraph(
        out,
        &format!(
            "Same as `reproduce --python 3.11 --policy legacy --mode trace --timeout {}`, run \
             in this process with the watchdog in report mode (its faulthandler-style dump, \
             without the exit):",
            config.hang_after.as_secs_f64()
        ),
    )?;
    writeln!(out)?;
    out.flush()?;
    let report = seed_3_11_traced(Policy::Legacy, config.hang_after)?;
    let Some(hang) = &report.hang else {
        writeln!(out, "{}\n{}", report.green_line(), report.metrics_line())?;
        outcome.surprises.push(format!(
            "(a) 3.11 + trace + legacy did not hang within {:?} ({})",
            config.hang_after,
            report.green_line()
        ));
        return Ok(report);
    };
    write!(out, "{hang}")?;
    let main = hang.thread(0);
    let at_lambda = main.is_some_and(|t| t.frames.first() == Some(&"<lambda>"));
    let spinning = main.is_some_and(|t| t.redispatches > 0);
    let s = &hang.summary;
    let predicate = hang.livelock_predicate && s.busy && s.calls_to_do && s.main_breaker;
    writeln!(out)?;
    paragraph(
        out,
        &format!(
            "-> stuck at <lambda>: {}; re-dispatching its RESUME: {} ({} times); busy, \
         calls_to_do and the eval breaker all set: {}; pending calls scheduled: {} (the \
         second while the first ran)",
            yes_no(at_lambda),
            yes_no(spinning),
            hang.redispatches,
            yes_no(predicate),
            report.queue.schedules_requested,
        ),
    )?;
    if !(at_lambda && spinning && predicate) {
        outcome.surprises.push(
            "(a) the hang is not the predicted livelock (main thread re-dispatching <lambda>'s \
             RESUME with busy, calls_to_do and the eval breaker set)"
                .into(),
        );
    }
    Ok(report)
}

/// (b) The same with the default policy: `GREEN True` and the metrics.
fn the_fix(
    config: &DemoConfig,
    out: &mut dyn Write,
    outcome: &mut DemoOutcome,
) -> Result<ScenarioReport, DemoError> {
    heading(
        out,
        &format!(
            "(b) THE FIX: the same run with the default policy ({})",
            Policy::default()
        ),
    )?;
    writeln!(
        out,
        "Same as `reproduce --python 3.11 --policy {} --mode trace`:\n",
        Policy::default()
    )?;
    out.flush()?;
    let report = seed_3_11_traced(Policy::default(), config.green_within)?;
    if let Some(hang) = &report.hang {
        write!(out, "{hang}")?;
        outcome.surprises.push(format!(
            "(b) the default policy hung on 3.11 + trace (watchdog after {:?})",
            config.green_within
        ));
        return Ok(report);
    }
    writeln!(out, "{}\n{}", report.green_line(), report.metrics_line())?;
    let green = report.green_line() == "GREEN True" && report.error.is_none();
    let clean = report.states_never_destroyed == 0 && report.queue.max_outstanding == 1;
    writeln!(
        out,
        "\n-> GREEN True: {}; one pending call at a time, every state destroyed: {}",
        yes_no(green),
        yes_no(clean)
    )?;
    if !green || !clean {
        outcome.surprises.push(format!(
            "(b) the default policy did not give a clean GREEN True ({}; {})",
            report.green_line(),
            report.metrics_line()
        ));
    }
    Ok(report)
}

/// (c) The explorer's verdicts for seed, churn and full-ring on 3.11, every
/// policy, and the shortest livelock of `scheduled` in churn.
fn the_proof(
    config: &DemoConfig,
    out: &mut dyn Write,
    outcome: &mut DemoOutcome,
) -> Result<Vec<Verdict>, DemoError> {
    heading(
        out,
        "(c) THE PROOF: every interleaving, CPython 3.11, traced main thread, all policies",
    )?;
    writeln!(
        out,
        "Same as `explore --scenario S --python 3.11 --policy P --mode trace` per row.\n"
    )?;
    out.flush()?;
    let cells: Vec<TableCell> = PREDICTED_VERDICTS
        .iter()
        .map(|&(scenario, policy, _, _)| TableCell {
            scenario,
            version: PyVersion::V3_11,
            policy,
            mode: Mode::Trace,
        })
        .collect();
    let verdicts = explore_cells(&cells, config.bound, config.workers)
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let len = |c: &Option<Counterexample>| c.as_ref().map_or("-".into(), |c| c.len().to_string());
    writeln!(
        out,
        "{:<10} {:<10} {:>9} {:>4} {:>5} {:>4} {:>8} {:>11} {:>8}  as predicted",
        "scenario", "policy", "livelock", "len", "leak", "len", "states", "transitions", "ms"
    )?;
    for (v, &(_, _, livelock, leak)) in verdicts.iter().zip(PREDICTED_VERDICTS.iter()) {
        let ok = v.livelock_reachable() == livelock && v.leak_reachable() == leak;
        writeln!(
            out,
            "{:<10} {:<10} {:>9} {:>4} {:>5} {:>4} {:>8} {:>11} {:>8.1}  {}",
            v.cell.scenario.name(),
            v.cell.policy.name(),
            yes_no(v.livelock_reachable()),
            len(&v.livelock),
            yes_no(v.leak_reachable()),
            len(&v.leak),
            v.states,
            v.transitions,
            v.elapsed.as_secs_f64() * 1e3,
            if ok { "yes" } else { "NO" }
        )?;
        if !ok {
            outcome.surprises.push(format!(
                "(c) {}: predicted livelock {} leak {}, explored livelock {} leak {}",
                v.cell,
                yes_no(livelock),
                yes_no(leak),
                yes_no(v.livelock_reachable()),
                yes_no(v.leak_reachable())
            ));
        }
    }
    writeln!(
        out,
        "(len: steps in the shortest schedule that reaches it; every verdict covers every \
         interleaving of the scenario)"
    )?;
    let churn_scheduled = verdicts
        .iter()
        .find(|v| v.cell.scenario == ScenarioName::Churn && v.cell.policy == Policy::Scheduled);
    if let Some(schedule) = churn_scheduled.and_then(|v| v.livelock.as_ref()) {
        heading(
            out,
            &format!(
                "(c') the shortest livelock of `scheduled` in churn ({} steps)",
                schedule.len()
            ),
        )?;
        writeln!(out, "{schedule}")?;
        match window(schedule) {
            Some((cleared, pushed, signalled)) => paragraph(
                out,
                &format!(
                    "-> the window: at step {cleared} the drain finds the queue empty and \
                     clears its flag, but it is still running inside make_pending_calls \
                     (busy=1); at step {pushed} a dying thread's push finds the flag clear and \
                     schedules a second drain, which the same make_pending_calls pops and \
                     runs. The push's signal lands only at step {signalled}: calls_to_do is \
                     set while busy with nothing left to pop, so the finalizer's next traced \
                     function entry re-dispatches its RESUME forever."
                ),
            )?,
            None => outcome.surprises.push(
                "(c') the counterexample does not go through the predicted window (a push \
                 scheduling after the drain cleared its flag, signalled later)"
                    .into(),
            ),
        }
    }
    Ok(verdicts)
}

/// The window of `scheduled` (1-based steps): where a drain found the
/// queue empty and released its flag, where a push then scheduled a drain
/// while the main thread was still inside `make_pending_calls`, and where
/// that push's `Py_AddPendingCall` signalled.
fn window(schedule: &Counterexample) -> Option<(usize, usize, usize)> {
    let after = |from: usize, hit: &dyn Fn(&str, &str) -> bool| {
        schedule.steps[from..]
            .iter()
            .position(|(step, state)| hit(step, state))
            .map(|i| from + i)
    };
    let cleared = after(0, &|step, _| step.contains("queue empty -> flags released"))?;
    let pushed = after(cleared, &|step, state| {
        step.contains("-> Schedule") && state.contains("busy=1")
    })?;
    let signalled = after(pushed, &|step, _| step.contains("SIGNAL_PENDING_CALLS"))?;
    Some((cleared + 1, pushed + 1, signalled + 1))
}

/// Write `text` wrapped at 100 columns, then a newline.
fn paragraph(out: &mut dyn Write, text: &str) -> std::io::Result<()> {
    let mut width = 0;
    for word in text.split_whitespace() {
        if width > 0 && width + 1 + word.len() > 100 {
            writeln!(out)?;
            width = 0;
        } else if width > 0 {
            write!(out, " ")?;
            width += 1;
        }
        write!(out, "{word}")?;
        width += word.len();
    }
    writeln!(out)
}
