//! The scenarios the explorer runs: small, closed programs for the main
//! thread, for the threads that die, and for the finalizers their states
//! carry, written in a handful of operations that matter to pending calls.
//!
//! Owns: the operations (`Op`, `ThreadOp`, `Cond`), `Program`,
//! `ThreadSpec`, [`Scenario`] and the built-in scenarios
//! ([`ScenarioName`], [`churn_with_threads`]). Uses only `std`: scenarios are data, the
//! explorer's model gives them meaning. Only a scenario as a whole is public:
//! its parts are the explorer's internals.

use std::fmt;
use std::str::FromStr;

/// A condition a thread can wait for or test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Cond {
    /// The cleanup queue holds at least one state (greenlet's
    /// `get_pending_cleanup_count() > 0`).
    QueueNonEmpty,
    /// The pending-call ring is empty.
    RingEmpty,
    /// Event `n` was set (a `threading.Event`).
    Event(u8),
    /// Dying thread `n` (its index in [`Scenario::threads`]) has run its
    /// Python code and its thread state is gone (`Thread.join` returns);
    /// its thread-local destructors, where it pushes its state, may still
    /// be running.
    ThreadExited(u8),
}

/// One operation of simulated Python code run with the GIL held (by the main
/// thread: its own code, and the finalizers a drain runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Op {
    /// Call a Python function: its `RESUME` (oparg 0) is a check site.
    Enter(&'static str),
    /// The check site after a non-inlined call returns.
    AfterCall,
    /// A backward jump (a loop iteration) to `pc`: a check site.
    Loop(u8),
    /// Go to `pc` (forward, no check site) if the condition holds.
    JumpIf(Cond, u8),
    /// `time.sleep`: drop the GIL, then wait to take it back.
    Sleep,
    /// Block with the GIL released until the condition holds (`join`,
    /// `Event.wait`), then wait to take the GIL back.
    Block(Cond),
    /// Set event `n`.
    SetEvent(u8),
    /// `Py_FinalizeEx`'s `_Py_FinishPendingCalls`: if `calls_to_do` is set,
    /// run `make_pending_calls` once (3.11/3.12); while calls are queued,
    /// run it again and again (3.13). See
    /// [`VersionSpec::finish_until_empty`](crate::interp_shim::VersionSpec::finish_until_empty)
    /// for the makes with nothing to run that real 3.12/3.13 add. A make
    /// still running here (never, in these scenarios) would stop 3.13 after
    /// one refused try; CPython would retry for ever.
    FinishPendingCalls,
    /// `Py_AddPendingCall` of another extension's *Python-level* call (a
    /// `_testcapi._pending_threadfunc(f)`-like add, with the GIL): its push
    /// under the pending lock. The call, when popped, runs the scenario's
    /// [`foreign_call`](Scenario::foreign_call) program, whose entry is a
    /// `RESUME` check site.
    PushPythonCall,
    /// The same add's `SIGNAL_PENDING_CALLS` as this (the main) thread,
    /// after the lock is released.
    SignalPendingCalls,
    /// `Py_FinalizeEx` sets the runtime finalizing; the cleanup queue is
    /// finalized with it; the main thread runs no more Python code.
    Finalize,
    /// `greenlet.switch()` into greenlet `n` of the main thread (0: its
    /// main greenlet; `n >= 1`: [`Scenario::greenlets`]`[n - 1]`): the
    /// current greenlet's whole stack (code and C frames: the drain's, the
    /// handling of a check) is saved and the target's restored
    /// (`Greenlet::g_switchstack`); tracing stays with the thread. A dead
    /// target (its program ended) sends the switch to its parent, the main
    /// greenlet: from the main greenlet, nothing happens.
    Switch(u8),
}

/// A named piece of simulated Python code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Program {
    /// The frame name shown in counterexamples.
    pub name: &'static str,
    /// The operations, run from index 0.
    pub ops: Vec<Op>,
}

/// What a dying thread does, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ThreadOp {
    /// Take the GIL (waiting; may ask the holder to drop it), run briefly,
    /// drop it (`greenlet.getcurrent()` and the like).
    Python,
    /// Wait, without the GIL, until the condition holds.
    Wait(Cond),
    /// Exit: the TLS destructor pushes the thread's state onto the cleanup
    /// queue and, if the policy says so, calls `Py_AddPendingCall`.
    Die,
}

/// A thread that owns greenlet state and dies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ThreadSpec {
    /// Its name in counterexamples.
    pub name: &'static str,
    /// What it does.
    pub ops: Vec<ThreadOp>,
    /// The code a drain runs when it destroys this thread's state (weakref
    /// callbacks and `__del__` of its main greenlet); may be empty.
    pub finalizer: Program,
}

/// A closed scenario: the main thread's program, the dying threads, and the
/// initial state of the pending-call ring.
///
/// # Examples
/// ```
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::explore::scenario::churn_with_threads;
/// use greenlet::interp_shim::explore::{explore_scenario, TableCell, Mode, ScenarioName, DEFAULT_BOUND};
/// use greenlet::interp_shim::PyVersion;
///
/// let scenario = churn_with_threads(1).unwrap();
/// assert_eq!((scenario.name, scenario.dying_threads()), ("churn", 1));
/// let cell = TableCell { scenario: ScenarioName::Churn, version: PyVersion::V3_11,
///                   policy: Policy::Robust, mode: Mode::Trace };
/// let verdict = explore_scenario(cell, &scenario, DEFAULT_BOUND).unwrap();
/// assert!(!verdict.livelock_reachable() && !verdict.leak_reachable());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    /// Its name (`seed`, `churn`, `full-ring`, `finalization`).
    pub name: &'static str,
    /// One sentence on what it exercises.
    pub about: &'static str,
    /// The main thread's program.
    pub(crate) main: Program,
    /// From this index on, the main program is its idle loop: with every
    /// other thread finished, the main thread is then quiescent.
    pub(crate) idle_from: Option<u8>,
    /// The dying threads (thread `i + 1` of the interpreter).
    pub(crate) threads: Vec<ThreadSpec>,
    /// The ring starts full of other (C-level, instant) pending calls,
    /// signalled: added by a thread without the GIL before anything else.
    pub(crate) ring_full_at_start: bool,
    /// The program of the Python-level pending calls that
    /// [`Op::PushPythonCall`] adds (empty: none is added).
    pub(crate) foreign_call: Program,
    /// The main thread's other greenlets, each parked at the start of its
    /// program (inside traced frames, switched away from before the
    /// scenario begins); each ends by returning to the main greenlet.
    pub(crate) greenlets: Vec<Program>,
}

impl Scenario {
    /// How many threads die in the scenario (besides the main thread).
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::explore::ScenarioName;
    ///
    /// assert_eq!(ScenarioName::Seed.build().dying_threads(), 2);
    /// assert_eq!(ScenarioName::Churn.build().dying_threads(), 3);
    /// ```
    pub fn dying_threads(&self) -> usize {
        self.threads.len()
    }
}

/// The built-in scenarios by name.
///
/// ```
/// use greenlet::interp_shim::explore::ScenarioName;
///
/// let name: ScenarioName = "churn".parse().unwrap();
/// let churn = name.build();
/// assert_eq!(churn.dying_threads(), 3);
/// assert!("spin".parse::<ScenarioName>().unwrap_err().to_string().contains("spin"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScenarioName {
    /// The seed report's reproducer.
    Seed,
    /// Three dying threads whose finalizers sleep and enter functions.
    Churn,
    /// The ring is full when the queue goes non-empty.
    FullRing,
    /// The interpreter finalizes while states are queued.
    Finalization,
    /// A finalizer adds another extension's Python-level pending call.
    ForeignCall,
    /// A finalizer switches into a greenlet parked under tracing.
    GreenletSwitch,
}

impl ScenarioName {
    /// Every built-in scenario.
    pub const ALL: [ScenarioName; 6] = [
        ScenarioName::Seed,
        ScenarioName::Churn,
        ScenarioName::FullRing,
        ScenarioName::Finalization,
        ScenarioName::ForeignCall,
        ScenarioName::GreenletSwitch,
    ];

    /// The command-line name.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::explore::ScenarioName;
    ///
    /// let names: Vec<&str> = ScenarioName::ALL.iter().map(|s| s.name()).collect();
    /// assert_eq!(names, ["seed", "churn", "full-ring", "finalization", "foreign-call", "greenlet-switch"]);
    /// assert_eq!("full-ring".parse::<ScenarioName>().unwrap(), ScenarioName::FullRing);
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            ScenarioName::Seed => "seed",
            ScenarioName::Churn => "churn",
            ScenarioName::FullRing => "full-ring",
            ScenarioName::Finalization => "finalization",
            ScenarioName::ForeignCall => "foreign-call",
            ScenarioName::GreenletSwitch => "greenlet-switch",
        }
    }

    /// The scenario itself.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::explore::ScenarioName;
    ///
    /// for name in ScenarioName::ALL {
    ///     let scenario = name.build();
    ///     assert_eq!(scenario.name, name.name());
    ///     assert!(!scenario.about.is_empty());
    /// }
    /// ```
    pub fn build(self) -> Scenario {
        match self {
            ScenarioName::Seed => seed(),
            ScenarioName::Churn => churn_of(&CHURN_NAMES[..3]),
            ScenarioName::FullRing => full_ring(),
            ScenarioName::Finalization => finalization(),
            ScenarioName::ForeignCall => foreign_call(),
            ScenarioName::GreenletSwitch => greenlet_switch(),
        }
    }
}

impl fmt::Display for ScenarioName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scenario name that is not built in.
///
/// # Examples
/// ```
/// use greenlet::interp_shim::explore::{ScenarioName, UnknownScenario};
///
/// let err: UnknownScenario = "ring".parse::<ScenarioName>().unwrap_err();
/// assert_eq!(err.given, "ring");
/// assert!(err.to_string().ends_with("expected one of seed, churn, full-ring, finalization, foreign-call, greenlet-switch"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scenario {given:?}: expected one of seed, churn, full-ring, finalization, foreign-call, greenlet-switch")]
pub struct UnknownScenario {
    /// What was given.
    pub given: String,
}

impl FromStr for ScenarioName {
    type Err = UnknownScenario;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ScenarioName::ALL
            .into_iter()
            .find(|n| n.name() == s)
            .ok_or_else(|| UnknownScenario {
                given: s.to_string(),
            })
    }
}

/// The main thread's idle loop: sleep (and the check site after that
/// call), then a backward jump; `at` is the index of its first operation.
fn idle_loop(at: u8) -> [Op; 3] {
    [Op::Sleep, Op::AfterCall, Op::Loop(at)]
}

/// The main thread's working loop: call `work`, then the idle loop; `at` is
/// the index of its first operation (the call).
fn work_loop(at: u8) -> [Op; 4] {
    let [sleep, after_call, back] = idle_loop(at);
    [Op::Enter("work"), sleep, after_call, back]
}

/// A thread that runs `ops` and whose main greenlet's finalizer is
/// [`sleepy_finalizer`].
fn sleepy_thread(name: &'static str, ops: Vec<ThreadOp>) -> ThreadSpec {
    ThreadSpec {
        name,
        ops,
        finalizer: sleepy_finalizer(),
    }
}

const RELEASE_B: u8 = 0;

/// The seed report: thread A's main greenlet carries a weakref callback that
/// sets `release_b`, polls (sleeping) until B's state is queued, then calls a
/// lambda; B waits for `release_b`, then dies — during A's destruction.
fn seed() -> Scenario {
    let mut main = vec![Op::Block(Cond::ThreadExited(0))];
    main.extend(idle_loop(1));
    Scenario {
        name: "seed",
        about: "the seed report: A's finalizer waits for B to be queued, then enters a function",
        main: Program {
            name: "<module>",
            ops: main,
        },
        idle_from: Some(1),
        threads: vec![
            ThreadSpec {
                name: "A",
                ops: vec![ThreadOp::Python, ThreadOp::Die],
                finalizer: Program {
                    name: "_in_cleanup",
                    ops: release_b_then([Op::Enter("<lambda>")].into_iter(), "_in_cleanup"),
                },
            },
            thread_b(),
        ],
        ring_full_at_start: false,
        foreign_call: no_foreign_call(),
        greenlets: vec![],
    }
}

/// The seed's B: touches its greenlet state, waits for `release_b`, runs
/// Python code again and dies.
fn thread_b() -> ThreadSpec {
    ThreadSpec {
        name: "B",
        ops: vec![
            ThreadOp::Python,
            ThreadOp::Wait(Cond::Event(RELEASE_B)),
            ThreadOp::Python,
            ThreadOp::Die,
        ],
        finalizer: Program {
            name: "B's main greenlet",
            ops: vec![],
        },
    }
}

/// A seed-shaped weakref callback `name`: its entry, `release_b.set()`,
/// then a sleeping poll until B's state is queued; then `rest`.
fn release_b_then(rest: impl Iterator<Item = Op>, name: &'static str) -> Vec<Op> {
    let mut ops = vec![
        Op::Enter(name),
        Op::SetEvent(RELEASE_B),
        Op::AfterCall,
        Op::JumpIf(Cond::QueueNonEmpty, 7),
        Op::Sleep,
        Op::AfterCall,
        Op::Loop(3),
    ];
    ops.extend(rest);
    ops
}

/// A finalizer that releases the GIL, then enters a function (coverage.py's
/// `WeakKeyDictionary` callback, and any `__del__` that sleeps or waits):
/// the callback's own entry, a sleep, another function.
fn sleepy_finalizer() -> Program {
    Program {
        name: "weakref callback",
        ops: vec![
            Op::Enter("_remove"),
            Op::Sleep,
            Op::AfterCall,
            Op::Enter("_commit_removals"),
        ],
    }
}

/// The most dying threads [`churn_with_threads`] takes.
pub const MAX_CHURN_THREADS: usize = 8;

/// `threads` threads (the built-in `churn` has 3; at most
/// [`MAX_CHURN_THREADS`]) die at arbitrary moments while the main thread
/// loops and calls functions; each finalizer enters a function, sleeps and
/// enters another.
///
/// # Errors
/// [`TooManyThreads`] above [`MAX_CHURN_THREADS`] (the state space grows
/// about tenfold per thread).
///
/// ```
/// use greenlet::interp_shim::explore::scenario::churn_with_threads;
/// assert_eq!(churn_with_threads(2).unwrap().dying_threads(), 2);
/// assert!(churn_with_threads(9).is_err());
/// ```
pub fn churn_with_threads(threads: usize) -> Result<Scenario, TooManyThreads> {
    if threads > MAX_CHURN_THREADS {
        return Err(TooManyThreads { given: threads });
    }
    Ok(churn_of(&CHURN_NAMES[..threads]))
}

const CHURN_NAMES: [&str; MAX_CHURN_THREADS] = ["C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8"];

fn churn_of(names: &[&'static str]) -> Scenario {
    Scenario {
        name: "churn",
        about: "dying threads whose finalizers sleep and enter functions; main traced, looping",
        main: Program {
            name: "<module>",
            ops: work_loop(0).to_vec(),
        },
        idle_from: Some(0),
        threads: names
            .iter()
            .map(|&name| sleepy_thread(name, vec![ThreadOp::Python, ThreadOp::Die]))
            .collect(),
        ring_full_at_start: false,
        foreign_call: no_foreign_call(),
        greenlets: vec![],
    }
}

/// [`churn_with_threads`] was asked for more threads than it explores.
///
/// # Examples
/// ```
/// use greenlet::interp_shim::explore::scenario::{churn_with_threads, TooManyThreads, MAX_CHURN_THREADS};
///
/// let err: TooManyThreads = churn_with_threads(MAX_CHURN_THREADS + 1).unwrap_err();
/// assert_eq!(err.given, 9);
/// assert!(err.to_string().contains("at most 8"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("churn with {given} dying threads: at most {MAX_CHURN_THREADS} (the state space grows about tenfold per thread)")]
pub struct TooManyThreads {
    /// What was given.
    pub given: usize,
}

/// The ring is full of other pending calls (signalled) while the main
/// thread is blocked in `X.join()`; X dies, at any moment relative to the
/// main thread waking up and running those calls (the ring empties); then
/// Y dies.
fn full_ring() -> Scenario {
    let mut main = vec![Op::Block(Cond::ThreadExited(0))];
    main.extend(work_loop(1));
    Scenario {
        name: "full-ring",
        about: "X dies while the ring is full; the main thread runs its calls; then Y dies",
        main: Program {
            name: "<module>",
            ops: main,
        },
        idle_from: Some(1),
        threads: vec![
            sleepy_thread("X", vec![ThreadOp::Python, ThreadOp::Die]),
            sleepy_thread(
                "Y",
                vec![
                    ThreadOp::Python,
                    ThreadOp::Wait(Cond::RingEmpty),
                    ThreadOp::Die,
                ],
            ),
        ],
        ring_full_at_start: true,
        foreign_call: no_foreign_call(),
        greenlets: vec![],
    }
}

/// Two threads die while the main thread calls a function and then begins
/// `Py_FinalizeEx`, at any point relative to their deaths and drains.
fn finalization() -> Scenario {
    Scenario {
        name: "finalization",
        about: "two threads die around Py_FinalizeEx; states queued then are leaked on purpose",
        main: Program {
            name: "<module>",
            ops: vec![
                Op::Enter("work"),
                Op::Sleep,
                Op::AfterCall,
                Op::Enter("shutdown"),
                Op::FinishPendingCalls,
                Op::Finalize,
            ],
        },
        idle_from: None,
        threads: vec![
            sleepy_thread("F1", vec![ThreadOp::Python, ThreadOp::Die]),
            sleepy_thread("F2", vec![ThreadOp::Die]),
        ],
        ring_full_at_start: false,
        foreign_call: no_foreign_call(),
        greenlets: vec![],
    }
}

/// No Python-level pending call of another extension.
fn no_foreign_call() -> Program {
    Program {
        name: "-",
        ops: vec![],
    }
}

/// Another extension's Python-level pending call is added while greenlet's
/// drain runs: A's finalizer (a weakref callback) calls a C function that
/// adds `second_call`, a Python function, with `Py_AddPendingCall` (as
/// `_testcapi._pending_threadfunc` does), and returns; the drain ends, and
/// the same `make_pending_calls` loop pops `second_call`, whose entry is a
/// traced `RESUME` outside any shield. On real 3.11.7 this hangs at
/// `second_call`'s entry under the stock and the robust build alike
/// (`probes/greenlet_switch_in_cleanup.py --kick=testcapi`;
/// `probes/python_call_behind_running_call.py` without greenlet).
fn foreign_call() -> Scenario {
    Scenario {
        name: "foreign-call",
        about: "A's finalizer adds another extension's Python-level pending call during the drain",
        main: Program {
            name: "<module>",
            ops: work_loop(0).to_vec(),
        },
        idle_from: Some(0),
        threads: vec![ThreadSpec {
            name: "A",
            ops: vec![ThreadOp::Python, ThreadOp::Die],
            finalizer: Program {
                name: "after_a_destroyed",
                ops: vec![
                    Op::Enter("after_a_destroyed"),
                    Op::PushPythonCall,
                    Op::SignalPendingCalls,
                    Op::AfterCall,
                ],
            },
        }],
        ring_full_at_start: false,
        foreign_call: Program {
            name: "second_call",
            ops: vec![Op::Enter("second_call")],
        },
        greenlets: vec![],
    }
}

/// The hub's own scenario (`drain-parks`, run by `explore::hub` only):
/// the slot starts full; P1's finalizer sets an event and parks the drain
/// on a timer; P2 waits for that event and dies (so while the drain is
/// parked, or later); P3 dies at any moment, the slot full or not; the main
/// green thread idles. Two workers.
#[cfg(feature = "hub")]
pub(crate) fn hub_drain_parks() -> Scenario {
    Scenario {
        name: "drain-parks",
        about: "threads die while the hub's drain is parked in a finalizer; the slot starts full",
        main: Program {
            name: "main task",
            ops: idle_loop(0).to_vec(),
        },
        idle_from: Some(0),
        threads: vec![
            ThreadSpec {
                name: "P1",
                ops: vec![ThreadOp::Python, ThreadOp::Die],
                finalizer: Program {
                    name: "p1_finalizer",
                    ops: vec![
                        Op::Enter("p1_finalizer"),
                        Op::SetEvent(RELEASE_B),
                        Op::Sleep,
                        Op::Enter("after_park"),
                    ],
                },
            },
            sleepy_thread(
                "P2",
                vec![
                    ThreadOp::Python,
                    ThreadOp::Wait(Cond::Event(RELEASE_B)),
                    ThreadOp::Die,
                ],
            ),
            ThreadSpec {
                name: "P3",
                ops: vec![ThreadOp::Die],
                finalizer: Program {
                    name: "P3's main greenlet",
                    ops: vec![],
                },
            },
        ],
        ring_full_at_start: true,
        foreign_call: no_foreign_call(),
        greenlets: vec![],
    }
}

const G: u8 = 1;
const MAIN_GREENLET: u8 = 0;

/// `probes/greenlet_switch_in_cleanup.py --kick=b` in the seed's shape:
/// greenlet G is parked under tracing; A's finalizer (a weakref callback)
/// sets `release_b`, polls until B's state is queued (the legacy queue has
/// then scheduled a second drain), switches into G, which enters
/// `g_in_cleanup` and switches back, and enters `cb_probe_after_g`. The
/// main thread joins A, sleeps until B has exited, switches into G once more (G enters
/// `g_after_cleanup` and ends), then idles. Real: stock 3.11.7 livelocks
/// inside G (`g_in_cleanup <- g_body`), robust does not, 3.12/3.13 never.
fn greenlet_switch() -> Scenario {
    // a.join(); while B lives: time.sleep(); G.switch(); then idle
    let mut main = vec![
        Op::Block(Cond::ThreadExited(0)),
        Op::JumpIf(Cond::ThreadExited(1), 5),
        Op::Sleep,
        Op::AfterCall,
        Op::Loop(1),
        Op::Switch(G),
        Op::AfterCall,
    ];
    main.extend(idle_loop(7));
    Scenario {
        name: "greenlet-switch",
        about:
            "A's finalizer switches into a greenlet parked under tracing, which enters a function",
        main: Program {
            name: "<module>",
            ops: main,
        },
        idle_from: Some(7),
        threads: vec![
            ThreadSpec {
                name: "A",
                ops: vec![ThreadOp::Python, ThreadOp::Die],
                finalizer: Program {
                    name: "cleanup_cb",
                    ops: release_b_then(
                        [Op::Switch(G), Op::AfterCall, Op::Enter("cb_probe_after_g")].into_iter(),
                        "cleanup_cb",
                    ),
                },
            },
            thread_b(),
        ],
        ring_full_at_start: false,
        foreign_call: no_foreign_call(),
        greenlets: vec![Program {
            name: "g_body",
            ops: vec![
                Op::AfterCall,
                Op::Enter("g_in_cleanup"),
                Op::Switch(MAIN_GREENLET),
                Op::AfterCall,
                Op::Enter("g_after_cleanup"),
            ],
        }],
    }
}
