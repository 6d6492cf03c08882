//! The state a runtime's threads share: one lock over the semantic core and
//! what the harness keeps beside it (thread names and frames, callbacks,
//! hooks, counters, the cancel flag), one condition variable, the registry
//! of live runtimes and the thread-local naming the calling OS thread's
//! model thread.
//!
//! Uses the core (`core::InterpCore`); every other file of the runtime uses
//! this one.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use crate::cleanup::CleanupQueue;

use super::super::core::{InterpCore, ThreadIdx, MAIN_THREAD};
use super::super::version::PyVersion;
use super::callbacks::{PendingCall, SignalDisposition};
use super::exit_order::ExitOrder;
use super::hook::Hook;
use super::stats::InterpreterStats;

/// The id of a queued pending call (what the core's ring holds).
pub(crate) type CallId = u64;

/// What a model thread blocked without the GIL and without a deadline
/// waits for (`Event.wait()`, `Thread.join()`): kept so that the early
/// verdict can tell whether the thread could still move.
#[derive(Clone)]
pub(super) enum BlockedOn {
    /// A [`PyEvent`](super::PyEvent)'s flag.
    Event(Arc<AtomicBool>),
    /// Another model thread's end (`ThreadSlot::finished`).
    Thread(ThreadIdx),
}

pub(super) struct ThreadSlot {
    pub(super) name: String,
    pub(super) daemon: bool,
    pub(super) trace: Hook,
    pub(super) profile: Hook,
    /// The simulated frames of the running greenlet (the thread state's
    /// frame stack), innermost last.
    pub(super) frames: Vec<&'static str>,
    /// The greenlet whose frames `frames` holds (a crate greenlet id);
    /// `None` until the thread first makes a model greenlet.
    pub(super) running_greenlet: Option<u64>,
    /// The saved frame stacks of the thread's other greenlets
    /// (`PythonState::_top_frame`), by greenlet id.
    pub(super) parked_frames: HashMap<u64, Vec<&'static str>>,
    /// The `run` function names of the thread's model greenlets, by id.
    pub(super) greenlet_names: HashMap<u64, &'static str>,
    /// The thread state was deleted (`Thread.join` returns).
    pub(super) finished: bool,
    /// Its thread state is deleted and its OS thread is running its
    /// thread-local destructors (where greenlet queues a dying thread's
    /// state); under [`ExitOrder::Settled`] other threads' GIL takes wait for
    /// it to end.
    pub(super) exiting: bool,
    /// Blocked without the GIL until this holds (no deadline).
    pub(super) blocked_on: Option<BlockedOn>,
    pub(super) redispatches: u64,
}

impl ThreadSlot {
    pub(super) fn new(name: String, daemon: bool, finished: bool) -> ThreadSlot {
        ThreadSlot {
            name,
            daemon,
            trace: Hook::Off,
            profile: Hook::Off,
            frames: Vec::new(),
            running_greenlet: None,
            parked_frames: HashMap::new(),
            greenlet_names: HashMap::new(),
            finished,
            exiting: false,
            blocked_on: None,
            redispatches: 0,
        }
    }
}

pub(super) type FinalizeHook = Box<dyn FnOnce() + Send>;
pub(super) type ReportHook = Arc<dyn Fn() -> String + Send + Sync>;
pub(super) type ThreadInit = Arc<dyn Fn() + Send + Sync>;

pub(super) struct State {
    pub(super) core: InterpCore<CallId>,
    pub(super) callbacks: HashMap<CallId, PendingCall>,
    pub(super) next_call: CallId,
    pub(super) threads: Vec<ThreadSlot>,
    /// Model thread used by OS threads that are no model thread.
    pub(super) foreign: Option<ThreadIdx>,
    pub(super) signal: Option<SignalDisposition>,
    /// The signal module's `Handlers[signum].tripped` (not ceval state):
    /// set by the C-level handler, cleared before the Python handler runs.
    pub(super) tripped: bool,
    pub(super) stats: InterpreterStats,
    pub(super) os_threads: Vec<(JoinHandle<()>, bool)>,
    pub(super) thread_init: Option<ThreadInit>,
    pub(super) finalize_hooks: Vec<FinalizeHook>,
    pub(super) report_hook: Option<ReportHook>,
    /// The scenario (main body and shutdown) is over.
    pub(super) done: bool,
    /// The harness's cancel flag (see the module documentation).
    pub(super) cancelled: bool,
    pub(super) exit_order: ExitOrder,
    /// Re-dispatches the livelock predicate must hold for, with nothing
    /// else able to move, before the watchdog ends the run early; `None`:
    /// only the timeout ends it.
    pub(super) early_verdict: Option<u64>,
    /// Consecutive re-dispatches of the main thread with the predicate
    /// held and every other thread unable to move.
    pub(super) livelock_held: u64,
    /// The early verdict was reached after this many re-dispatches: the
    /// watchdog reports now.
    pub(super) livelocked: Option<u64>,
    /// The default unraisable hook finds the source file of the frames it
    /// prints, so printing the traceback runs Python code.
    pub(super) unraisable_reads_source: bool,
    /// The queue whose metrics a hang report carries.
    pub(super) report_queue: Option<Weak<CleanupQueue>>,
}

impl State {
    /// Whether no thread but the main one can change the interpreter's
    /// state: every other model thread has finished (its thread-local
    /// destructors too) or is blocked on a condition that does not hold; no
    /// OS thread outside the model has used the runtime (it could add a
    /// pending call, whose `COMPUTE_EVAL_BREAKER` as a non-main thread
    /// clears the 3.11 breaker); and the signal disposition cannot end the
    /// spin (a C handler that raises can: [`SignalDisposition`]).
    pub(super) fn nothing_else_can_move(&self) -> bool {
        if self.foreign.is_some()
            || self
                .signal
                .as_ref()
                .is_some_and(SignalDisposition::raises_from_c)
        {
            return false;
        }
        self.threads
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != MAIN_THREAD)
            .all(|(_, t)| match &t.blocked_on {
                _ if t.finished => !t.exiting,
                Some(BlockedOn::Event(flag)) => !flag.load(Ordering::SeqCst),
                Some(BlockedOn::Thread(other)) => {
                    let o = &self.threads[*other];
                    !o.finished || (self.core.spec().join_waits_for_thread_exit && o.exiting)
                }
                None => false,
            })
    }

    /// Under [`ExitOrder::Settled`], whether thread `idx`'s GIL take waits:
    /// another thread is in its thread-local destructors.
    pub(super) fn gil_waits_for_an_exit(&self, idx: ThreadIdx) -> bool {
        self.exit_order == ExitOrder::Settled
            && self
                .threads
                .iter()
                .enumerate()
                .any(|(i, t)| t.exiting && i != idx)
    }
}

/// The runtime's state shared by its threads (held weakly by schedulers and
/// events).
pub(crate) struct Shared {
    pub(super) id: u64,
    pub(super) version: PyVersion,
    pub(super) state: Mutex<State>,
    pub(super) cond: Condvar,
    pub(super) ran: AtomicBool,
}

/// Live runtimes, so that code finding its model thread through the
/// thread-local can reach its runtime. Holds weak references only.
pub(super) static REGISTRY: Mutex<Vec<(u64, Weak<Shared>)>> = Mutex::new(Vec::new());
pub(super) static NEXT_RUNTIME_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The calling OS thread's (runtime id, model thread index); runtime id 0
    /// means none. A `Cell` of plain integers: const-initialized and without a
    /// destructor, so it stays readable from other thread-local destructors
    /// during thread teardown (where a dying thread queues its greenlet state).
    pub(super) static MODEL_THREAD: Cell<(u64, ThreadIdx)> = const { Cell::new((0, 0)) };
}

impl Drop for Shared {
    fn drop(&mut self) {
        REGISTRY.lock().retain(|(id, _)| *id != self.id);
    }
}
