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
//! Owns: [`Dump`], [`TaskStack`], the dump's gathering and the folding of
//! runtime frames, the dump-on-signal thread. Uses `stack_capture` (both
//! sides of a capture), the placement of a task on a given worker, the
//! registry, the channels, [`Signals`] and `stall_stacks`.

use std::backtrace::Backtrace;
use std::collections::HashMap;
use std::fmt;
use std::panic::Location;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::channel::{oneshot, unbounded};
use super::error::HubError;
use super::shared::Shared;
use super::signal::Signals;
use super::spawning::NewTask;
use super::stack_capture::capture_here;
use super::task_header::Task;
use super::task_info::TaskInfo;
use super::task_state::TaskState;
use super::worker;

/// How long a dump waits for each worker to capture its green threads'
/// stacks: a worker held by a green thread that does not park cannot.
/// Longer makes a dump of a stalled runtime slower; shorter may miss a
/// worker that runs a long slice of a busy green thread.
pub const DUMP_ANSWER_WITHIN: Duration = Duration::from_secs(1);

/// Why a stack has no frames when every frame is the runtime's.
pub(crate) const ONLY_RUNTIME: &str = "only runtime frames: its own code was inlined into them \
     (mark a function #[inline(never)] to see it)";

/// The name of the capturing green threads (left out of the dump).
const CAPTURER: &str = "hub-stack-capture";

/// One green thread in a [`Dump`]: its state and, when it was captured,
/// its stack where it waits.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskStack {
    /// Its id, name, state, worker and spawn site.
    pub info: TaskInfo,
    /// Its frames, innermost first, as `function` or `function at
    /// file:line:column`, the runtime's own frames folded into the
    /// outermost of each run (the call the green thread's code made).
    /// Empty when no stack was captured (see `note`).
    pub frames: Vec<String>,
    /// Why there are no frames, when there are none.
    pub note: Option<String>,
    /// Whether this is the green thread that took the dump (listed as
    /// running, with its stack where it called the dump).
    pub current: bool,
}

impl TaskStack {
    /// `info` with `frames` (folded) and why there are none (`note`), not
    /// the green thread taking a dump.
    pub(crate) fn new(info: TaskInfo, frames: Vec<String>, note: Option<String>) -> TaskStack {
        TaskStack {
            info,
            frames,
            note,
            current: false,
        }
    }
}

/// Every green thread of a runtime with its stack: what
/// [`Handle::dump`](super::Handle::dump) returns. Its `Display` prints one
/// block per green thread, as Go prints goroutines, the current one marked
/// `(this one, taking the dump)`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Dump {
    /// The green threads, by id.
    pub tasks: Vec<TaskStack>,
    /// Workers that did not answer within [`DUMP_ANSWER_WITHIN`].
    pub silent_workers: Vec<usize>,
}

impl fmt::Display for Dump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for t in &self.tasks {
            let marker = if t.current {
                " (this one, taking the dump)"
            } else {
                ""
            };
            writeln!(f, "green thread {}{marker}:", t.info)?;
            for frame in &t.frames {
                writeln!(f, "    {frame}")?;
            }
            if let Some(note) = &t.note {
                writeln!(f, "    ({note})")?;
            }
            writeln!(f)?;
        }
        for w in &self.silent_workers {
            writeln!(
                f,
                "worker {w} did not answer within {DUMP_ANSWER_WITHIN:?}: a green thread holds it \
                 without parking"
            )?;
        }
        Ok(())
    }
}

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

/// Whether `name` is a frame of the runtime or of the backtrace machinery.
fn is_runtime(name: &str) -> bool {
    const PREFIXES: [&str; 12] = [
        "greenlet::hub::",
        "greenlet::coroutine::",
        "std::backtrace",
        "std::panicking::",
        "std::panic::",
        "core::panicking::",
        "core::ops::function::",
        "__rust_try",
        "alloc::boxed::",
        "std::sys::",
        "std::thread::local::",
        "greenlet_coroutine_root",
    ];
    let bare = name.trim_start_matches('<');
    PREFIXES.iter().any(|p| bare.starts_with(p))
}

/// The frames of a backtrace's text (`N: function` lines, each followed by
/// an `at file:line:column` line where known), innermost first, each run
/// of runtime frames folded into its outermost one (see [`fold_frames`]).
fn fold(text: &str) -> Vec<String> {
    let mut frames: Vec<(String, Option<String>)> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(at) = t.strip_prefix("at ") {
            if let Some(last) = frames.last_mut() {
                if last.1.is_none() {
                    last.1 = Some(at.to_string());
                }
            }
        } else if let Some((n, name)) = t.split_once(": ") {
            if n.chars().all(|c| c.is_ascii_digit()) {
                frames.push((name.to_string(), None));
            }
        }
    }
    fold_frames(&frames)
}

/// `frames` (function and `file:line:column` where known, innermost
/// first), each run of runtime frames folded into its outermost one (the
/// call the green thread's code made), a run at the outer end (the green
/// thread's start) dropped; each rendered as `function at file:line:column`.
pub(crate) fn fold_frames(frames: &[(String, Option<String>)]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < frames.len() {
        if is_runtime(&frames[i].0) {
            let mut j = i;
            while j + 1 < frames.len() && is_runtime(&frames[j + 1].0) {
                j += 1;
            }
            // A run at the outer end is the green thread's start: dropped.
            if j + 1 < frames.len() {
                out.push(render(&frames[j]));
            }
            i = j + 1;
        } else {
            out.push(render(&frames[i]));
            i += 1;
        }
    }
    out
}

fn render((name, at): &(String, Option<String>)) -> String {
    match at {
        Some(at) => format!("{name} at {at}"),
        None => name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_runs_fold_into_their_outermost_frame_and_the_start_is_dropped() {
        let text = "   0: std::backtrace::Backtrace::force_capture\n\
                    \x20            at /x/backtrace.rs:1:1\n\
                    \x20  1: greenlet::hub::park::park_then\n\
                    \x20  2: greenlet::hub::channel::Receiver<T>::recv\n\
                    \x20            at src/hub/channel.rs:9:5\n\
                    \x20  3: app::waits_here\n\
                    \x20            at src/main.rs:3:5\n\
                    \x20  4: app::main::{{closure}}\n\
                    \x20  5: greenlet::hub::spawning::NewTask::build\n\
                    \x20  6: std::panicking::try\n";
        assert_eq!(
            fold(text),
            vec![
                "greenlet::hub::channel::Receiver<T>::recv at src/hub/channel.rs:9:5",
                "app::waits_here at src/main.rs:3:5",
                "app::main::{{closure}}",
            ]
        );
    }
}
