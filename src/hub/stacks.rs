//! Every green thread's call stack where it waits: the [`Dump`] that
//! `Handle::dump` and `hub::dump` return ([`dump_of`]), the states of
//! `Handle::tasks` with each suspended green thread's backtrace from its
//! parking point, symbolised, the runtime's own frames folded away (and the
//! calling green thread's own, marked as the one running); and the thread
//! that prints it at a signal ([`dump_on_signal`]).
//!
//! # How a stack is captured
//! A green thread never leaves its worker, and a backtrace can only be
//! taken by the code running on the stack it walks. So the dump places a
//! capturing green thread on each worker (through the worker's inbox,
//! as `net::serve` places connections). Running there, that green thread
//! throws a capture request (a `GreenletError` whose user error is
//! `stack_capture::CaptureRequest`) into each other started green thread of its worker,
//! through the coroutine API's `throw` (`stack_capture`). Every one of them is suspended in
//! the hub's park; its park sees the thrown error on its slow path (the
//! branch a cancellation takes, off the switch path: nothing is added to a
//! park that is resumed normally), takes its backtrace
//! ([`std::backtrace::Backtrace::force_capture`], which walks the stack
//! without resolving symbols), and switches straight back to the capturer,
//! where it stays suspended in its park. It runs no user code, does not
//! touch its state, its wait-list entries, its timer or its wake sequence:
//! a wake or a cancellation that comes meanwhile is queued as it would
//! have been, and the next real resume ends its park as before.
//! A dump called from a green thread takes that green thread's own
//! backtrace first, on its own stack, before it parks to wait for the
//! capturers; it is listed as running, with that stack, and marked as the
//! current one.
//! Symbols are resolved afterwards on the dumping thread (on a thread of
//! its own when the dump is called from a green thread: the resolution
//! needs more stack than a green thread may have).
//!
//! A worker that does not reach a scheduling point within
//! [`DUMP_ANSWER_WITHIN`] (one held by a green thread that does not park) is
//! reported as such; its green threads' stacks are then read off its thread
//! as the watchdog reads them (`stall_stacks`, on x86_64 Linux: the one
//! holding it from the registers a signal takes, the others from their
//! saved contexts).
//!
//! Owns: the dump's gathering (the [`Dump`] it returns is `stack_dump`'s, its
//! frames folded by `frame_fold`), the dump-on-signal thread. Uses `stack_capture` (both
//! sides of a capture), the placement of a task on a given worker, the
//! registry, the channels, [`Signals`] and `stall_stacks`.

use std::backtrace::Backtrace;
use std::collections::HashMap;
use std::panic::Location;
use std::sync::{Arc, Weak};
use std::time::Instant;

use super::channel::{oneshot, unbounded};
use super::error::HubError;
use super::frame_fold::{fold, ONLY_RUNTIME};
use super::shared::Shared;
use super::signal::Signals;
use super::spawning::NewTask;
use super::stack_capture::capture_here;
use super::stack_dump::{Dump, TaskStack, DUMP_ANSWER_WITHIN};
use super::task_header::Task;
use super::task_info::TaskInfo;
use super::task_state::TaskState;
use super::worker;

/// The name of the capturing green threads (left out of the dump).
const CAPTURER: &str = "hub-stack-capture";

/// Every green thread of `shared`'s runtime with its stack (see
/// [`Handle::dump`](super::Handle::dump), which documents it).
#[track_caller]
pub(crate) fn dump_of(shared: &Arc<Shared>) -> Dump {
    // The calling green thread's own stack, taken here on that stack
    // (capture only: symbols are resolved off it).
    let own = worker::with_current_task(|_, t| t.id).map(|id| (id, Backtrace::force_capture()));
    let (tx, rx) = unbounded();
    let mut capturers = Vec::new();
    let mut asked = Vec::new();
    for (index, remote) in shared.workers.iter().enumerate() {
        let tx = tx.clone();
        let (u, handle) = NewTask {
            shared,
            name: Some(CAPTURER.into()),
            stack_size: None,
            site: Location::caller(),
            shard: index,
        }
        .build(move || {
            let got = capture_here();
            drop(tx.send((index, got)));
        });
        capturers.push(handle.id());
        if remote.place(u).is_ok() {
            asked.push(index);
        }
    }
    drop(tx);
    let mut stacks = HashMap::new();
    let mut answered = Vec::new();
    let until = Instant::now() + DUMP_ANSWER_WITHIN;
    while answered.len() < asked.len() {
        let left = until.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((index, got)) => {
                answered.push(index);
                stacks.extend(got);
            }
            Err(_) => break,
        }
    }
    let silent: Vec<usize> = asked
        .iter()
        .copied()
        .filter(|i| !answered.contains(i))
        .collect();
    let infos: Vec<TaskInfo> = shared
        .registry
        .snapshot(Task::info)
        .into_iter()
        .filter(|t| !capturers.contains(&t.id))
        .collect();
    if worker::current().is_none() {
        return with_stalled(shared, assemble(infos, stacks, own, silent));
    }
    // On a green thread: symbols are resolved on a thread of its own
    // (their resolution needs more stack than a green thread may have),
    // while this green thread parks.
    let kept = (infos.clone(), silent.clone());
    let held = Arc::clone(shared);
    let (tx, rx) = oneshot();
    let resolver = std::thread::Builder::new()
        .name("hub-stack-symbols".into())
        .spawn(move || {
            let dump = with_stalled(&held, assemble(infos, stacks, own, silent));
            drop(tx.send(dump));
        });
    match resolver.map(|_| rx.recv()) {
        Ok(Ok(dump)) => dump,
        _ => assemble(kept.0, HashMap::new(), None, kept.1),
    }
}

/// Start a thread that prints the dump of `shared`'s runtime to stderr at
/// each delivery of `signal` while the runtime lives (the first delivery
/// after it is gone ends the thread).
pub(crate) fn dump_on_signal(shared: Weak<Shared>, signal: i32) -> Result<(), HubError> {
    let mut signals = Signals::new(&[signal])
        .map_err(|e| HubError::InvalidConfig(format!("dump_on_signal({signal}): {e}")))?;
    std::thread::Builder::new()
        .name("hub-dump-on-signal".into())
        .spawn(move || loop {
            signals.recv();
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let dump = dump_of(&shared);
            drop(shared);
            eprint!("hub: dump on signal {signal}\n{dump}");
        })
        .map_err(|source| HubError::Os {
            what: "start the dump-on-signal thread",
            source,
        })?;
    Ok(())
}

/// `dump` with the stacks of the green threads of its silent workers, read
/// off those workers' threads as the watchdog reads them (`stall_stacks`),
/// where this platform allows.
fn with_stalled(shared: &Shared, mut dump: Dump) -> Dump {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    for &w in &dump.silent_workers {
        let running = shared.workers[w]
            .running
            .load(std::sync::atomic::Ordering::Relaxed);
        if running == 0 {
            continue;
        }
        let stalled = super::stall_stacks::stalled_worker(shared, w, running);
        for s in stalled.tasks {
            if let Some(t) = dump.tasks.iter_mut().find(|t| t.info.id == s.info.id) {
                t.frames = s.frames;
                t.note = s.note;
            }
        }
    }
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    let _ = shared;
    dump
}

/// The dump from the registry's `infos`, the captured `stacks` and the
/// calling green thread's `own` stack, symbolised.
fn assemble(
    infos: Vec<TaskInfo>,
    mut stacks: HashMap<u64, Backtrace>,
    own: Option<(u64, Backtrace)>,
    silent_workers: Vec<usize>,
) -> Dump {
    let current = own.as_ref().map(|(id, _)| *id);
    if let Some((id, bt)) = own {
        stacks.insert(id, bt);
    }
    let tasks = infos
        .into_iter()
        .map(|mut info| {
            let current = current == Some(info.id);
            if current {
                // Parked in this dump while the workers captured: running
                // as far as its own code can tell.
                info.state = TaskState::Running;
            }
            let (frames, note) = match stacks.remove(&info.id) {
                Some(bt) => {
                    let frames = fold(&bt.to_string());
                    let note = frames.is_empty().then(|| ONLY_RUNTIME.to_string());
                    (frames, note)
                }
                None => (Vec::new(), Some(no_stack(&info, &silent_workers))),
            };
            TaskStack {
                info,
                frames,
                note,
                current,
            }
        })
        .collect();
    Dump {
        tasks,
        silent_workers,
    }
}

/// Why `info` has no captured stack.
fn no_stack(info: &TaskInfo, silent: &[usize]) -> String {
    match (info.state, info.worker) {
        (TaskState::Queued, _) => "not started: no stack yet".into(),
        (TaskState::Blocking, _) => "a blocking call on a pool thread: not captured".into(),
        (_, Some(w)) if silent.contains(&w) => {
            format!("worker {w} did not answer: it is held by a green thread that does not park")
        }
        (TaskState::Running, _) => "running: not captured".into(),
        _ => "not captured: it was not suspended in a park when its worker looked".into(),
    }
}
