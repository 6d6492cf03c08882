//! The explorer's verdicts, computed over every interleaving and compared
//! with the expected table: which policy livelocks or leaks where, and why
//! (the shape of the shortest counterexamples). Run in release
//! (`cargo test --release --test model explorer_verdicts`): the table takes
//! seconds there.

use greenlet::cleanup::Policy;
use greenlet::interp_shim::explore::{
    explore, explore_cells, Counterexample, Mode, ScenarioName, TableCell, Verdict, DEFAULT_BOUND,
};
use greenlet::interp_shim::PyVersion;

/// The expected verdict (livelock, leak) of a cell.
fn expected(cell: TableCell) -> (bool, bool) {
    let traced = cell.mode != Mode::None;
    let on_311 = cell.version == PyVersion::V3_11;
    let weak = match cell.scenario {
        // Only a second schedule while a state is being destroyed.
        ScenarioName::Seed | ScenarioName::GreenletSwitch => matches!(cell.policy, Policy::Legacy),
        // Another extension's Python-level pending call popped by the same
        // busy loop after the drain: no policy of greenlet's can help
        // (real 3.11.7: the robust build hangs in `second_call` too).
        ScenarioName::ForeignCall => true,
        // Also the window after the drain found the queue empty.
        _ => matches!(
            cell.policy,
            Policy::Legacy | Policy::Draining | Policy::Scheduled
        ),
    };
    let livelock = on_311 && traced && weak;
    let leak = cell.scenario == ScenarioName::FullRing && cell.policy != Policy::Robust;
    (livelock, leak)
}

fn cells_of(scenario: ScenarioName) -> Vec<TableCell> {
    TableCell::all()
        .into_iter()
        .filter(|c| c.scenario == scenario)
        .collect()
}

fn check(scenario: ScenarioName) -> Vec<Verdict> {
    let cells = cells_of(scenario);
    let verdicts: Vec<Verdict> = explore_cells(&cells, DEFAULT_BOUND, 2)
        .into_iter()
        .map(|v| v.expect("every cell fits the bound"))
        .collect();
    let mut wrong = Vec::new();
    for v in &verdicts {
        let want = expected(v.cell);
        let got = (v.livelock_reachable(), v.leak_reachable());
        if got != want {
            wrong.push(format!("{}: got {got:?}, expected {want:?}", v.cell));
        }
        // The livelock predicate and the independent progress check agree.
        assert_eq!(v.traps > 0, v.livelock_reachable(), "{}", v.summary());
        assert!(v.stuck.is_none(), "{}", v.summary());
        assert_eq!(v.inconsistent, 0, "{}", v.summary());
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    verdicts
}

fn cell(scenario: ScenarioName, version: PyVersion, policy: Policy) -> Verdict {
    explore(
        TableCell {
            scenario,
            version,
            policy,
            mode: Mode::Trace,
        },
        DEFAULT_BOUND,
    )
    .unwrap()
}

#[test]
fn seed_table() {
    check(ScenarioName::Seed);
}

#[test]
fn churn_table() {
    check(ScenarioName::Churn);
}

#[test]
fn full_ring_table() {
    check(ScenarioName::FullRing);
}

#[test]
fn finalization_table() {
    let verdicts = check(ScenarioName::Finalization);
    // Some schedule finalizes with a state queued or dies after: leaked on
    // purpose and counted, never a leak in the verdict's sense.
    assert!(verdicts.iter().all(|v| v.leaked_on_purpose >= 1));
}

/// `probes/greenlet_switch_in_cleanup.py --kick=testcapi` on real 3.11.7:
/// stock and robust builds both hang at `second_call`'s entry, popped by
/// the busy `make_pending_calls` after greenlet's drain; 3.12/3.13 finish.
#[test]
fn foreign_call_table() {
    let verdicts = check(ScenarioName::ForeignCall);
    let robust = verdicts
        .iter()
        .find(|v| {
            v.cell.policy == Policy::Robust
                && v.cell.version == PyVersion::V3_11
                && v.cell.mode == Mode::Trace
        })
        .expect("the robust 3.11 cell");
    let schedule = robust.livelock.as_ref().expect("robust livelocks here");
    assert!(schedule.conclusion.contains("second_call@0"), "{schedule}");
    let shielded_add = first_step(schedule, |s| {
        s.contains("T0 main: Py_AddPendingCall: push -> ok")
    });
    assert!(
        schedule.steps[shielded_add]
            .1
            .contains("tracing_suspended=1"),
        "the add runs inside the shield: {schedule}"
    );
}

/// `probes/greenlet_switch_in_cleanup.py --kick=b` on real 3.11.7: stock
/// hangs inside G, the greenlet parked under tracing that the callback
/// switched into, with only G's frames in the dump; robust finishes (the
/// shield is the thread's, so it covers G); 3.12/3.13 finish.
#[test]
fn greenlet_switch_table() {
    check(ScenarioName::GreenletSwitch);
    let v = cell(
        ScenarioName::GreenletSwitch,
        PyVersion::V3_11,
        Policy::Legacy,
    );
    let schedule = v.livelock.as_ref().expect("legacy livelocks");
    assert!(
        schedule
            .conclusion
            .contains("(g_body@1:call g_in_cleanup() (RESUME))"),
        "{schedule}"
    );
    let last = &schedule.steps.last().expect("steps").1;
    assert!(
        last.ends_with("main: g_body@1:call g_in_cleanup() (RESUME)"),
        "only G's frames: {schedule}"
    );
    let switched = first_step(schedule, |s| s.contains("greenlet.switch() to greenlet 1"));
    assert!(
        schedule.steps[switched]
            .1
            .contains("queue len=1 draining=1"),
        "{schedule}"
    );
}

#[test]
fn default_policy_is_proven() {
    assert_eq!(Policy::default(), Policy::Robust);
    // Every scenario whose other pending calls are C code (foreign-call's
    // is Python code of another extension: foreign_call_table).
    let cells: Vec<TableCell> = TableCell::all()
        .into_iter()
        .filter(|c| c.policy == Policy::default() && c.scenario != ScenarioName::ForeignCall)
        .collect();
    assert_eq!(cells.len(), 5 * 3 * 3);
    for v in explore_cells(&cells, DEFAULT_BOUND, 2) {
        let v = v.expect("every cell fits the bound");
        assert!(
            !v.livelock_reachable() && !v.leak_reachable() && v.traps == 0,
            "{}",
            v.summary()
        );
    }
}

/// The index of the first step of `c` that `is` accepts; a panic naming the
/// counterexample if there is none.
fn first_step(c: &Counterexample, is: impl Fn(&str) -> bool) -> usize {
    c.steps
        .iter()
        .position(|(s, _)| is(s))
        .unwrap_or_else(|| panic!("no such step in:\n{c}"))
}

/// A dying thread's push that asked for a drain to be scheduled.
fn dies_and_schedules(step: &str) -> bool {
    step.contains("dies") && step.ends_with("Schedule")
}

#[test]
fn legacy_seed_counterexample_is_the_seed_report() {
    let v = cell(ScenarioName::Seed, PyVersion::V3_11, Policy::Legacy);
    let c = v.livelock.expect("legacy livelocks on 3.11 under tracing");
    let text = c.to_string();
    // B is queued (and schedules a second drain) while A's state is destroyed.
    let b_schedules = first_step(&c, |s| s.contains("T2 B: dies") && s.ends_with("Schedule"));
    let a_popped = first_step(&c, |s| s.contains("pop state of thread 1"));
    assert!(a_popped < b_schedules, "{text}");
    assert!(c.conclusion.contains("<lambda>"), "{text}");
}

#[test]
fn scheduled_churn_counterexample_uses_the_empty_window() {
    for policy in [Policy::Draining, Policy::Scheduled] {
        let v = cell(ScenarioName::Churn, PyVersion::V3_11, policy);
        let c = v.livelock.expect("livelocks on 3.11 under tracing");
        let text = c.to_string();
        let empty = first_step(&c, |s| s.contains("queue empty -> flags released"));
        let second = c
            .steps
            .iter()
            .rposition(|(s, _)| dies_and_schedules(s))
            .expect("a second schedule");
        assert!(empty < second, "{policy}: {text}");
        // The same busy make_pending_calls pops the second drain.
        assert!(
            c.conclusion.contains("make_pending_calls[iter 2]"),
            "{text}"
        );
    }
}

#[test]
fn shielded_full_ring_counterexample_is_the_failed_schedule_race() {
    let v = cell(ScenarioName::FullRing, PyVersion::V3_11, Policy::Shielded);
    let c = v.leak.expect("shielded leaks in full-ring");
    let text = c.to_string();
    let pos = |needle: &str| first_step(&c, |s| s.contains(needle));
    let refused = pos("push -> ring full");
    let y_pushed = pos("T2 Y: dies: push state onto the cleanup queue -> Nothing");
    let gave_up = pos("give up");
    assert!(refused < y_pushed && y_pushed < gave_up, "{text}");
    // Robust retries instead.
    let v = cell(ScenarioName::FullRing, PyVersion::V3_11, Policy::Robust);
    assert!(!v.leak_reachable());
}

#[test]
fn scheduled_full_ring_livelock_needs_one_drain_only() {
    let v = cell(ScenarioName::FullRing, PyVersion::V3_11, Policy::Scheduled);
    let c = v
        .livelock
        .expect("scheduled livelocks in full-ring on 3.11");
    let text = c.to_string();
    let schedules = c
        .steps
        .iter()
        .filter(|(s, _)| dies_and_schedules(s))
        .count();
    assert_eq!(schedules, 1, "{text}");
    // X's pending call was added while make_pending_calls was busy with
    // the other calls, and the same loop popped it.
    let busy = first_step(&c, |s| s.contains("make_pending_calls -> Started"));
    let added = first_step(&c, |s| s.contains("T1 X: Py_AddPendingCall: push -> ok"));
    assert!(busy < added, "{text}");
}
