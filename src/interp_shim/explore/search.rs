//! Breadth-first enumeration of every reachable state of one cell, with
//! exact state hashing; decides livelock and leak reachability and keeps the
//! shortest counterexample of each.
//!
//! Owns: [`explore`], [`explore_scenario`], [`Verdict`], [`Counterexample`],
//! [`BoundExceeded`], and the `Host` trait that a host's transition system
//! implements (`CpythonHost` here over the CPython model's `model::Model`;
//! the hub's `HubHost` over its own transitions). Uses a host's transitions and predicates only; it knows no
//! rule of CPython, of the hub or of a policy (the CPython livelock test
//! below asks the model's own predicate and replays its own steps).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::time::{Duration, Instant};

use crate::cleanup::QueueCore;

use super::frames::StateToken;
use super::model::{Model, State, Step};
use super::scenario::Scenario;
use super::{ExploreCell, TableCell};

/// A host's transition system, as the search needs it.
pub(crate) trait Host {
    /// One explored state (hashed and compared exactly).
    type State: Clone + Eq + Hash;
    /// What one transition did, for counterexamples.
    type Step: Copy + Eq;
    /// Whether the host's livelock is "a state from which quiescence is
    /// unreachable" (the hub: no re-dispatch loop exists to name) rather
    /// than [`Host::livelocked`].
    const LIVELOCK_IS_NO_PROGRESS: bool;
    /// The initial state.
    fn initial(&self) -> Self::State;
    /// Every step from `st`, with the state after it (`out` is cleared first).
    fn successors(&self, st: &Self::State, out: &mut Vec<(Self::Step, Self::State)>);
    /// The cleanup queue of `st`.
    fn queue<'s>(&self, st: &'s Self::State) -> &'s QueueCore<StateToken>;
    /// Nothing will ever run a drain again: the leak test's states.
    fn quiescent(&self, st: &Self::State) -> bool;
    /// The scenario's main program has ended.
    fn main_done(&self, st: &Self::State) -> bool;
    /// A livelocked state (unused when [`Host::LIVELOCK_IS_NO_PROGRESS`]).
    fn livelocked(&self, st: &Self::State) -> bool;
    /// A safety rule of the host broken in `st` (`terminal`: no step
    /// leaves it), as the counterexample's conclusion.
    fn violation(&self, st: &Self::State, terminal: bool) -> Option<String>;
    /// One line describing a step.
    fn describe(&self, step: Self::Step) -> String;
    /// The state in one line.
    fn describe_state(&self, st: &Self::State) -> String;
    /// The conclusion of a livelock counterexample.
    fn livelock_conclusion(&self, st: &Self::State) -> String;
    /// Where the scenario's main program is, for a trap's conclusion.
    fn main_stack(&self, st: &Self::State) -> String;
}

/// A cell's state space grew past the bound it was given.
///
/// # Examples
/// ```
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::explore::{explore, BoundExceeded, TableCell, Mode, ScenarioName};
/// use greenlet::interp_shim::PyVersion;
///
/// let cell = TableCell { scenario: ScenarioName::Churn, version: PyVersion::V3_11,
///                   policy: Policy::Legacy, mode: Mode::Trace };
/// let err: BoundExceeded = explore(cell, 100).unwrap_err();
/// assert_eq!((err.cell, err.bound), (cell, 100));
/// assert!(err.to_string().contains("Raise the bound (--max-states)"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{cell}: more than {bound} states; the verdict would not be a proof. Raise the bound (--max-states) or shrink the scenario")]
pub struct BoundExceeded<C: ExploreCell = TableCell> {
    /// The cell.
    pub cell: C,
    /// The bound.
    pub bound: usize,
}

/// A schedule from the initial state: each step with the state after it.
///
/// # Examples
/// ```
/// use greenlet::interp_shim::explore::Counterexample;
///
/// let schedule = Counterexample {
///     initial: "ring=0".into(),
///     steps: vec![("T1 A: Py_AddPendingCall".into(), "ring=1".into())],
///     conclusion: "LIVELOCK".into(),
/// };
/// assert_eq!(
///     schedule.to_string(),
///     "  0. initial state\n       ring=0\n  1. T1 A: Py_AddPendingCall\n       ring=1\n  => LIVELOCK\n"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counterexample {
    /// The initial state, described.
    pub initial: String,
    /// Each step: what happened, and the state after it.
    pub steps: Vec<(String, String)>,
    /// What the last state shows.
    pub conclusion: String,
}

impl Counterexample {
    /// Steps in the schedule.
    ///
    /// # Examples
    /// ```
    /// use greenlet::cleanup::Policy;
    /// use greenlet::interp_shim::explore::{explore, TableCell, Mode, ScenarioName, DEFAULT_BOUND};
    /// use greenlet::interp_shim::PyVersion;
    ///
    /// let cell = TableCell { scenario: ScenarioName::Seed, version: PyVersion::V3_11,
    ///                   policy: Policy::Legacy, mode: Mode::Trace };
    /// let schedule = explore(cell, DEFAULT_BOUND).unwrap().livelock.unwrap();
    /// assert_eq!(schedule.len(), schedule.steps.len());
    /// assert!(schedule.len() > 1); // several threads must move to reach it
    /// ```
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether the schedule has no step (the initial state itself).
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::explore::Counterexample;
    ///
    /// let mut schedule = Counterexample { initial: "start".into(), steps: vec![], conclusion: "end".into() };
    /// assert!(schedule.is_empty());
    /// schedule.steps.push(("T0 main: take the GIL".into(), "gil=T0".into()));
    /// assert!(!schedule.is_empty() && schedule.len() == 1);
    /// ```
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

impl fmt::Display for Counterexample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  0. initial state")?;
        writeln!(f, "       {}", self.initial)?;
        for (i, (step, state)) in self.steps.iter().enumerate() {
            writeln!(f, "{:>3}. {step}", i + 1)?;
            writeln!(f, "       {state}")?;
        }
        writeln!(f, "  => {}", self.conclusion)
    }
}

/// What the exploration of one cell found.
///
/// # Examples
/// ```
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::explore::{explore, TableCell, Mode, ScenarioName, Verdict, DEFAULT_BOUND};
/// use greenlet::interp_shim::PyVersion;
///
/// let cell = TableCell { scenario: ScenarioName::Seed, version: PyVersion::V3_11,
///                   policy: Policy::Legacy, mode: Mode::Trace };
/// let verdict: Verdict = explore(cell, DEFAULT_BOUND).unwrap();
/// assert_eq!(verdict.cell, cell);
/// assert!(verdict.livelock.is_some() && verdict.leak.is_none());
/// assert!(verdict.traps > 0); // the livelocked states cannot reach quiescence
/// assert!(verdict.stuck.is_none() && verdict.inconsistent == 0);
/// ```
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct Verdict<C: ExploreCell = TableCell> {
    /// The cell.
    pub cell: C,
    /// Distinct states reached.
    pub states: usize,
    /// Transitions taken (edges of the state graph, including those into
    /// states seen before): the interleavings, merged where they meet.
    pub transitions: u64,
    /// The shortest schedule to a livelocked RESUME, if one is reachable.
    pub livelock: Option<Counterexample>,
    /// The shortest schedule to a quiescent state with a stranded queue.
    pub leak: Option<Counterexample>,
    /// The shortest schedule to a state where no thread can move although
    /// the main thread has not finished (a scenario bug; never expected).
    pub stuck: Option<Counterexample>,
    /// The shortest schedule to a state that breaks a safety rule of the
    /// host (the hub's slot: a call queued with `has_calls` clear, two
    /// drains at once, a call accepted and never run); the CPython hosts
    /// state none, so theirs is always `None`.
    pub violation: Option<Counterexample>,
    /// States from which no schedule reaches quiescence (or, in a scenario
    /// that finalizes, the end): found by backward reachability over the
    /// whole state graph, independently of the livelock predicate. Every
    /// livelocked state is one; a trap without a livelock would be a
    /// non-progress cycle of another kind.
    pub traps: usize,
    /// The shortest schedule to a trap state.
    pub trap: Option<Counterexample>,
    /// Quiescent states where the queue holds states while a drain is still
    /// counted as outstanding: a broken accounting (never expected).
    pub inconsistent: usize,
    /// The most states leaked on purpose at finalization, over the final
    /// states (not a leak in the verdict's sense).
    pub leaked_on_purpose: u64,
    /// Wall time of the exploration.
    pub elapsed: Duration,
}

impl<C: ExploreCell> Verdict<C> {
    /// Whether a livelock is reachable.
    ///
    /// # Examples
    /// ```
    /// use greenlet::cleanup::Policy;
    /// use greenlet::interp_shim::explore::{explore, TableCell, Mode, ScenarioName, DEFAULT_BOUND};
    /// use greenlet::interp_shim::PyVersion;
    ///
    /// let seed = |policy| TableCell { scenario: ScenarioName::Seed, version: PyVersion::V3_11, policy, mode: Mode::Trace };
    /// assert!(explore(seed(Policy::Legacy), DEFAULT_BOUND).unwrap().livelock_reachable());
    /// assert!(!explore(seed(Policy::Draining), DEFAULT_BOUND).unwrap().livelock_reachable());
    /// ```
    pub fn livelock_reachable(&self) -> bool {
        self.livelock.is_some()
    }

    /// Whether a leak is reachable.
    ///
    /// # Examples
    /// ```
    /// use greenlet::cleanup::Policy;
    /// use greenlet::interp_shim::explore::{explore, TableCell, Mode, ScenarioName, DEFAULT_BOUND};
    /// use greenlet::interp_shim::PyVersion;
    ///
    /// // A full ring strands the shielded queue; the robust one retries.
    /// let full_ring = |policy| TableCell { scenario: ScenarioName::FullRing, version: PyVersion::V3_11, policy, mode: Mode::Trace };
    /// assert!(explore(full_ring(Policy::Shielded), DEFAULT_BOUND).unwrap().leak_reachable());
    /// assert!(!explore(full_ring(Policy::Robust), DEFAULT_BOUND).unwrap().leak_reachable());
    /// ```
    pub fn leak_reachable(&self) -> bool {
        self.leak.is_some()
    }

    /// States per second of this exploration.
    pub(crate) fn states_per_second(&self) -> f64 {
        self.states as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

struct Meta<P> {
    parent: u32,
    step: Option<P>,
}

/// The hash of a state: FxHash's multiply-rotate over what `#[derive(Hash)]`
/// feeds it (the states are small; SipHash's cost dominated the search).
#[derive(Default)]
struct Fx(u64);

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

fn fx(st: &impl Hash) -> u64 {
    let mut h = Fx::default();
    st.hash(&mut h);
    h.finish()
}

/// The hash is already a hash: use it as is.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = i;
    }
}

const NONE: u32 = u32::MAX;

/// Every state seen, in breadth-first order, with an exact index: states
/// with equal hashes are chained and compared in full.
struct Seen<S, P> {
    states: Vec<S>,
    meta: Vec<Meta<P>>,
    first: HashMap<u64, u32, BuildHasherDefault<Identity>>,
    chain: Vec<u32>,
}

impl<S: Eq, P> Seen<S, P> {
    fn find(&self, h: u64, st: &S) -> Option<u32> {
        let mut id = self.first.get(&h).copied().unwrap_or(NONE);
        while id != NONE {
            if self.states[id as usize] == *st {
                return Some(id);
            }
            id = self.chain[id as usize];
        }
        None
    }

    fn insert(&mut self, h: u64, st: S, meta: Meta<P>) -> u32 {
        let id = self.states.len() as u32;
        let prev = self.first.insert(h, id).unwrap_or(NONE);
        self.chain.push(prev);
        self.states.push(st);
        self.meta.push(meta);
        id
    }
}

/// Explore every interleaving of `cell`, up to `bound` distinct states.
///
/// # Errors
/// [`BoundExceeded`] if the cell has more than `bound` distinct states: its
/// verdict would not be a proof.
///
/// # Example
/// ```
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::explore::{explore, TableCell, Mode, ScenarioName};
/// use greenlet::interp_shim::PyVersion;
///
/// let cell = TableCell {
///     scenario: ScenarioName::Churn,
///     version: PyVersion::V3_11,
///     policy: Policy::Scheduled,
///     mode: Mode::Trace,
/// };
/// let verdict = explore(cell, 1_000_000).unwrap();
/// assert!(verdict.livelock_reachable() && !verdict.leak_reachable());
/// // Too small a bound is an error, not a verdict.
/// assert!(explore(cell, 100).is_err());
/// ```
pub fn explore(cell: TableCell, bound: usize) -> Result<Verdict, BoundExceeded> {
    explore_scenario(cell, &cell.scenario.build(), bound)
}

/// [`explore`] with a scenario built by hand (e.g. [`churn`] with more
/// threads) in place of the cell's built-in one; the cell names the result.
///
/// # Errors
/// [`BoundExceeded`] as for [`explore`].
///
/// ```
/// use greenlet::cleanup::Policy;
/// use greenlet::interp_shim::explore::scenario::churn_with_threads;
/// use greenlet::interp_shim::explore::{explore_scenario, TableCell, Mode, ScenarioName};
/// use greenlet::interp_shim::PyVersion;
///
/// let cell = TableCell { scenario: ScenarioName::Churn, version: PyVersion::V3_11,
///                   policy: Policy::Draining, mode: Mode::Trace };
/// // One dying thread cannot livelock draining: it needs a second death.
/// let one = explore_scenario(cell, &churn_with_threads(1).unwrap(), 1_000_000).unwrap();
/// assert!(!one.livelock_reachable());
/// let two = explore_scenario(cell, &churn_with_threads(2).unwrap(), 1_000_000).unwrap();
/// assert!(two.livelock_reachable());
/// ```
///
/// [`churn`]: super::scenario::churn_with_threads
pub fn explore_scenario(
    cell: TableCell,
    scenario: &Scenario,
    bound: usize,
) -> Result<Verdict, BoundExceeded> {
    let model = CpythonHost {
        model: Model { scenario },
        cell,
    };
    search(&model, cell, bound)
}

/// The CPython model of one cell as a [`Host`].
struct CpythonHost<'a> {
    model: Model<'a>,
    cell: TableCell,
}

impl Host for CpythonHost<'_> {
    type State = State;
    type Step = Step;
    const LIVELOCK_IS_NO_PROGRESS: bool = false;
    fn initial(&self) -> State {
        self.model
            .initial(self.cell.version, self.cell.policy, self.cell.mode)
    }
    fn successors(&self, st: &State, out: &mut Vec<(Step, State)>) {
        self.model.successors(st, out)
    }
    fn queue<'s>(&self, st: &'s State) -> &'s QueueCore<StateToken> {
        &st.queue
    }
    fn quiescent(&self, st: &State) -> bool {
        self.model.quiescent(st)
    }
    fn main_done(&self, st: &State) -> bool {
        self.model.main_done(st)
    }
    fn livelocked(&self, st: &State) -> bool {
        is_livelock(&self.model, st)
    }
    fn violation(&self, _: &State, _: bool) -> Option<String> {
        None
    }
    fn describe(&self, step: Step) -> String {
        self.model.describe(step)
    }
    fn describe_state(&self, st: &State) -> String {
        self.model.describe_state(st)
    }
    fn livelock_conclusion(&self, st: &State) -> String {
        format!(
            "LIVELOCK: the main thread is at a traced RESUME ({}); handling the eval breaker \
             changes nothing (make_pending_calls is busy below, calls_to_do and the breaker stay \
             set) and re-dispatches the same RESUME, forever; no other thread can clear busy",
            self.model.main_stack(st)
        )
    }
    fn main_stack(&self, st: &State) -> String {
        self.model.main_stack(st)
    }
}

/// Explore every state of `host` reachable from its initial state, up to
/// `bound` distinct ones, and judge them.
pub(crate) fn search<H: Host, C: ExploreCell>(
    host: &H,
    cell: C,
    bound: usize,
) -> Result<Verdict<C>, BoundExceeded<C>> {
    let started = Instant::now();
    let init = host.initial();

    let mut seen = Seen {
        states: Vec::new(),
        meta: Vec::new(),
        first: HashMap::default(),
        chain: Vec::new(),
    };
    seen.insert(
        fx(&init),
        init.clone(),
        Meta {
            parent: 0,
            step: None,
        },
    );

    let mut transitions = 0u64;
    let mut livelock_at = None;
    let mut leak_at = None;
    let mut stuck_at = None;
    let mut violation_at: Option<(u32, String)> = None;
    let mut inconsistent = 0usize;
    let mut leaked_on_purpose = 0u64;
    let mut succ = Vec::new();
    let mut goals: Vec<u32> = Vec::new();
    let mut edges: Vec<(u32, u32)> = Vec::new();

    let mut id = 0u32;
    while (id as usize) < seen.states.len() {
        let st = &seen.states[id as usize];
        if !H::LIVELOCK_IS_NO_PROGRESS && livelock_at.is_none() && host.livelocked(st) {
            livelock_at = Some(id);
        }
        let queue = host.queue(st);
        if host.quiescent(st) && !queue.is_finalized() && !queue.is_empty() {
            if queue.is_stranded() {
                if leak_at.is_none() {
                    leak_at = Some(id);
                }
            } else {
                inconsistent += 1;
            }
        }
        host.successors(st, &mut succ);
        if violation_at.is_none() {
            violation_at = host.violation(st, succ.is_empty()).map(|why| (id, why));
        }
        if succ.is_empty() {
            if host.main_done(st) {
                leaked_on_purpose = leaked_on_purpose.max(queue.metrics().states_leaked);
            } else if stuck_at.is_none() {
                stuck_at = Some(id);
            }
        }
        if host.quiescent(st) || (succ.is_empty() && host.main_done(st)) {
            goals.push(id);
        }
        for (step, next) in succ.drain(..) {
            transitions += 1;
            let h = fx(&next);
            let to = match seen.find(h, &next) {
                Some(to) => to,
                None => {
                    if seen.states.len() >= bound {
                        return Err(BoundExceeded { cell, bound });
                    }
                    seen.insert(
                        h,
                        next,
                        Meta {
                            parent: id,
                            step: Some(step),
                        },
                    )
                }
            };
            edges.push((to, id));
        }
        id += 1;
    }
    let trap_at = first_trap(seen.states.len(), &goals, &mut edges);
    let meta = &seen.meta;

    let trace = |id: Option<u32>, what: &dyn Fn(&H::State) -> String| {
        id.map(|id| counterexample(host, &init, meta, id, what))
    };
    let livelock = trace(livelock_at, &|st| host.livelock_conclusion(st));
    let leak = trace(leak_at, &|st| {
        format!(
            "LEAK: every other thread finished, the main thread is idle and the ring is empty, \
             yet {} state(s) wait in the cleanup queue with no drain outstanding: nothing will \
             ever schedule one",
            host.queue(st).len()
        )
    });
    let stuck = trace(stuck_at, &|_| "STUCK: no thread can move".to_string());
    let trap = trace(trap_at.map(|(first, _)| first), &|st| {
        format!(
            "NO PROGRESS: from here no schedule reaches quiescence (main thread: {})",
            host.main_stack(st)
        )
    });
    let violation = violation_at
        .map(|(id, why)| counterexample(host, &init, meta, id, &|_| format!("VIOLATION: {why}")));
    let livelock = if H::LIVELOCK_IS_NO_PROGRESS {
        trace(trap_at.map(|(first, _)| first), &|st| {
            host.livelock_conclusion(st)
        })
    } else {
        livelock
    };
    Ok(Verdict {
        cell,
        states: seen.states.len(),
        transitions,
        livelock,
        leak,
        stuck,
        violation,
        inconsistent,
        traps: trap_at.map_or(0, |(_, n)| n),
        trap,
        leaked_on_purpose,
        elapsed: started.elapsed(),
    })
}

/// Backward reachability from the goal states over the edges `(to, from)`:
/// the first (so shortest-path) state that cannot reach a goal, and how many
/// such states there are.
fn first_trap(states: usize, goals: &[u32], edges: &mut [(u32, u32)]) -> Option<(u32, usize)> {
    edges.sort_unstable();
    let mut good = vec![false; states];
    let mut todo: Vec<u32> = Vec::new();
    for &g in goals {
        if !good[g as usize] {
            good[g as usize] = true;
            todo.push(g);
        }
    }
    while let Some(to) = todo.pop() {
        let start = edges.partition_point(|&(t, _)| t < to);
        for &(t, from) in &edges[start..] {
            if t != to {
                break;
            }
            if !good[from as usize] {
                good[from as usize] = true;
                todo.push(from);
            }
        }
    }
    let traps = good.iter().filter(|&&g| !g).count();
    let first = good.iter().position(|&g| !g)?;
    Some((first as u32, traps))
}

/// A livelock: the main thread is ready at a RESUME for which the core's
/// predicate holds, handling it (the main thread alone) leads back to exactly
/// this state, and no interleaving of any thread ever lets the main thread
/// get past that RESUME.
fn is_livelock(model: &Model<'_>, st: &State) -> bool {
    let Some(frame) = model.main_at_resume(st) else {
        return false;
    };
    st.py.resume_livelocked() && main_self_loop(model, st) && !main_escapes(model, st, frame)
}

/// Run the main thread alone from `st` (taking the GIL when it waits) and
/// report whether it comes back to `st` itself.
fn main_self_loop(model: &Model<'_>, st: &State) -> bool {
    let mut cur = st.clone();
    let mut out = Vec::new();
    for _ in 0..64 {
        model.main_steps(&cur, &mut out);
        let Some((_, next)) = out.drain(..).next() else {
            return false;
        };
        if next == *st {
            return true;
        }
        cur = next;
    }
    false
}

/// Whether, from `st`, any interleaving of all threads changes the main
/// thread's frames up to and including `frame` (the RESUME's code frame):
/// only then would the main thread get past the RESUME.
fn main_escapes(model: &Model<'_>, st: &State, frame: usize) -> bool {
    let stuck = &st.main[..=frame];
    let mut seen: HashSet<State> = HashSet::new();
    let mut todo = vec![st.clone()];
    seen.insert(st.clone());
    let mut out = Vec::new();
    while let Some(cur) = todo.pop() {
        if cur.main.len() <= frame || cur.main[..=frame] != *stuck {
            return true;
        }
        model.successors(&cur, &mut out);
        for (_, next) in out.drain(..) {
            if seen.insert(next.clone()) {
                todo.push(next);
            }
        }
    }
    false
}

fn counterexample<H: Host>(
    model: &H,
    init: &H::State,
    meta: &[Meta<H::Step>],
    id: u32,
    conclusion: &dyn Fn(&H::State) -> String,
) -> Counterexample {
    let mut steps = Vec::new();
    let mut cur = id;
    while let Some(step) = meta[cur as usize].step {
        steps.push(step);
        cur = meta[cur as usize].parent;
    }
    steps.reverse();
    let mut st = init.clone();
    let mut out = Vec::new();
    let mut lines = Vec::new();
    for step in steps {
        model.successors(&st, &mut out);
        let next = out
            .drain(..)
            .find(|(s, _)| *s == step)
            .map(|(_, next)| next)
            .unwrap_or_else(|| st.clone());
        lines.push((model.describe(step), model.describe_state(&next)));
        st = next;
    }
    Counterexample {
        initial: model.describe_state(init),
        steps: lines,
        conclusion: conclusion(&st),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_trap_finds_the_states_that_cannot_reach_a_goal() {
        // 0 -> 1 -> 2 (goal); 0 -> 3 -> 3 (a cycle with no way out); 4 -> 2.
        let mut edges = vec![(1, 0), (2, 1), (3, 0), (3, 3), (2, 4)];
        assert_eq!(first_trap(5, &[2], &mut edges), Some((3, 1)));
        let mut edges = vec![(1, 0), (2, 1)];
        assert_eq!(first_trap(3, &[2], &mut edges), None);
    }

    #[test]
    fn equal_states_hash_equal_and_different_ones_are_told_apart() {
        let scenario = super::super::ScenarioName::Seed.build();
        let model = Model {
            scenario: &scenario,
        };
        let init = model.initial(
            crate::interp_shim::PyVersion::V3_11,
            crate::cleanup::Policy::Legacy,
            super::super::Mode::Trace,
        );
        assert_eq!(fx(&init), fx(&init.clone()));
        let mut seen: Seen<State, Step> = Seen {
            states: Vec::new(),
            meta: Vec::new(),
            first: HashMap::default(),
            chain: Vec::new(),
        };
        let mut out = Vec::new();
        model.successors(&init, &mut out);
        // A and B asking for the GIL lead to the same state.
        let mut distinct: Vec<State> = Vec::new();
        for (_, st) in out {
            if !distinct.contains(&st) {
                distinct.push(st);
            }
        }
        assert_eq!(distinct.len(), 2);
        // Force every state into one chain: lookups must still be exact.
        for (i, st) in distinct.iter().enumerate() {
            assert_eq!(seen.find(7, st), None);
            let id = seen.insert(
                7,
                st.clone(),
                Meta {
                    parent: 0,
                    step: None,
                },
            );
            assert_eq!(id as usize, i);
        }
        for (i, st) in distinct.iter().enumerate() {
            assert_eq!(seen.find(7, st), Some(i as u32));
        }
        assert_eq!(seen.find(7, &init), None);
    }
}
