//! `Thread.start()` and `Thread.join()` as Python code (issue 13 point 4):
//! the seed's shape whose first function entry after B is queued is
//! `c.start()` or `c.join()` replays `probes/threading_spin.py` on the
//! three versions. Real 3.11.7 hangs in all three cases, the stuck frame
//! (the top of the main thread's dump) being `<lambda>`, `threading.py
//! start` or `threading.py join`, over the callback, over the frames where
//! the cleanup pending call ran (inside `a.start()`'s `Condition.wait <-
//! Event.wait <- Thread.start <- <module>`, or at `<module>`); 3.12.1 and
//! 3.13.0 finish.

use crate::common;

use std::time::Duration;

use greenlet::cleanup::Policy;
use greenlet::interp_shim::scenarios::{
    seed_entering, FirstEntry, RunOptions, ScenarioReport, SeedConfig, TraceMode,
};
use greenlet::interp_shim::{HangCause, PyVersion, Watchdog};

fn run(version: PyVersion, first: FirstEntry) -> ScenarioReport {
    let _serial = common::serial();
    let config = SeedConfig {
        version,
        policy: Policy::Legacy,
        mode: TraceMode::Trace,
        // the backstop; the early verdict ends a livelock long before
        watchdog: Watchdog::Report(Duration::from_secs(30)),
    };
    seed_entering(config, RunOptions::default(), first).expect("the runtime starts")
}

#[test]
fn threading_spin_replays_on_3_11() {
    for first in FirstEntry::ALL {
        let report = run(PyVersion::V3_11, first);
        let hang = report.hang.as_ref().expect("3.11.7 livelocks");
        assert!(matches!(hang.cause, HangCause::Livelock { .. }), "{hang}");
        let main = hang.thread(0).expect("the main thread is alive");
        assert_eq!(main.frames[0], first.stuck_frame(), "{first:?}: {hang}");
        assert_eq!(main.frames[1], "_in_cleanup", "{first:?}: {hang}");
        // Where the cleanup pending call ran: one of the two real places.
        let below = &main.frames[2..];
        assert!(
            below == ["wait", "wait", "start", "<module>"] || below == ["<module>"],
            "{first:?}: {hang}"
        );
        assert!(hang.livelock_predicate, "{hang}");
        assert_eq!(report.b_queued, None, "the callback never returned");
    }
}

#[test]
fn threading_spin_finishes_on_3_12_and_3_13() {
    for version in [PyVersion::V3_12, PyVersion::V3_13] {
        for first in FirstEntry::ALL {
            let report = run(version, first);
            assert!(
                report.hang.is_none(),
                "{version} {first:?}: {:?}",
                report.hang
            );
            assert!(
                report.error.is_none(),
                "{version} {first:?}: {:?}",
                report.error
            );
            assert_eq!(report.b_queued, Some(true), "{version} {first:?}");
            assert_eq!(report.states_never_destroyed, 0, "{version} {first:?}");
        }
    }
}

#[test]
fn start_and_join_are_frames_with_their_own_entries() {
    use greenlet::interp_shim::{Hook, Interpreter};
    // A Python trace function runs once per frame entry: start's three
    // frames (start, Event.wait, Condition.wait) and the target's, join's
    // two on 3.11/3.12 (join, _wait_for_tstate_lock), one on 3.13.
    for (version, join_frames) in [
        (PyVersion::V3_11, 2),
        (PyVersion::V3_12, 2),
        (PyVersion::V3_13, 1),
    ] {
        let rt = Interpreter::new(version);
        rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
            py.settrace(Hook::Python)?;
            let t = py.spawn("target", |_| Ok(()))?;
            py.join(&t)?;
            py.settrace(Hook::Off)
        })
        .expect("the runtime starts");
        // the target thread is untraced (settrace is per thread)
        assert_eq!(rt.stats().trace_function_runs, 3 + join_frames, "{version}");
    }
}
