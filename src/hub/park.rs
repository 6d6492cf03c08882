//! Parking and waking the caller, whatever it is: a green thread parks by
//! switching to its hub (arming a timer for a deadline, cancelled when the
//! park ends), or straight to the next ready green thread when the hub
//! would only resume that one (see `Worker::next_after_park`), a plain
//! thread by `std::thread::park`.
//! Also the unwinds that deliver a cancellation or an elapsed `timeout` at
//! a parking point, and at every park on a worker whose loop has ended
//! (its teardown's kills): such a park never waits.
//!
//! Owns: [`park`], [`park_shielded`], [`current_waker`], [`with_scopes`] (the caller's
//! `timeout` scopes) and the raising of the unwinds of `unwind`. Uses the
//! worker (current task, timers, the hub greenlet, the hand-off), the
//! task's timeout scopes and, on the slow path of a park, the answer to a
//! dump's capture request (`stack_capture`).

use std::mem::ManuallyDrop;
use std::panic::resume_unwind;
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::thread::Thread;
use std::time::Instant;

use super::scopes::Scopes;
use super::stack_capture;
use super::task_header::{Parked, Task};
use super::task_state::Wait;
use super::timer::TimerKey;
use super::unwind::{CancelUnwind, TimeoutUnwind};
use super::worker::{self, Next, Worker};
use crate::coroutine::direct;

/// Park the caller until it is woken (or `deadline` passes). May return
/// spuriously: callers re-check their condition. A parking point: a
/// pending cancellation or an elapsed `timeout` unwinds from here.
#[inline]
pub(crate) fn park(wait: Wait, deadline: Option<Instant>) {
    let parked = worker::with_current_task(|w, task| park_green(w, task, wait, deadline));
    if parked.is_none() {
        if worker::hub_ended() {
            // A green thread killed after its worker's loop ended (it
            // caught the kill and parked again): nothing would wake it, and
            // a wait here would hold the worker's OS thread, so the shutdown,
            // past its timeout. The cancellation again, at once.
            return raise(CancelUnwind);
        }
        with_scopes(|scopes| {
            check_scopes(scopes);
            match earliest(deadline, scopes.earliest()) {
                Some(at) => std::thread::park_timeout(at.saturating_duration_since(Instant::now())),
                None => std::thread::park(),
            }
            check_scopes(scopes);
        });
    }
}

/// [`park`] for the green thread `task`, running on its worker `w`: one
/// of two frames, so that a park without a deadline (most) passes none
/// and tests none.
#[inline(always)]
pub(crate) fn park_green(w: &Worker, task: &Arc<Task>, wait: Wait, deadline: Option<Instant>) {
    match deadline {
        None => park_untimed(w, task, Task::parked_as(wait)),
        Some(at) => park_until(w, task, wait, at),
    }
}

/// [`park_green`] without a deadline: the task by its address only (no
/// reference to pass through memory), its own reference needed only in a
/// `timeout` scope, whose deadline is a timer's.
/// `parked`: its state while parked (what it waits for).
#[inline(never)]
fn park_untimed(w: &Worker, task: &Task, parked: Parked) {
    if task.scopes.is_active() {
        // The caller's contract: `task` is the running green thread, so
        // the worker's current one.
        worker::with_current_task(|w, task| park_scoped(w, task, parked, None, None));
        return;
    }
    park_switch(w, task, parked, None, false, || {});
}

/// [`park_green`] until `at`.
#[inline(never)]
fn park_until(w: &Worker, task: &Arc<Task>, wait: Wait, at: Instant) {
    park_then(w, task, Task::parked_as(wait), Some(at), None);
}

/// A yield of the green thread `task`, running on its worker `w`, that
/// does not run on in place: `me`, its reference for the ready queue
/// (`None`: it is queued already, woken meanwhile), goes to the back of
/// the queue and the front is resumed, with no call in between: one frame
/// for `yield_now` and its park.
#[inline(always)]
pub(crate) fn yield_green(w: &Worker, task: &Arc<Task>, me: Option<Arc<Task>>) {
    park_then(w, task, Task::parked_as(Wait::Yield), None, me);
}

/// [`park_green`], queuing `requeue` (the parking task's own reference)
/// at the back of the ready queue first when it is a yield's.
#[inline(always)]
fn park_then(
    w: &Worker,
    task: &Arc<Task>,
    parked: Parked,
    deadline: Option<Instant>,
    requeue: Option<Arc<Task>>,
) {
    // No look for an elapsed scope before the park (a clock read and a
    // lock): the scope's deadline is armed, so an elapsed one is a due
    // timer, which sends this park to the loop, which fires it, and the
    // check after the park unwinds from here as the one before would have.
    // With no scope active, none is checked after the park either: only
    // the green thread itself opens one.
    if task.scopes.is_active() {
        return park_scoped(w, task, parked, deadline, requeue);
    }
    match deadline {
        None => park_switch(w, task, parked, requeue, false, || {}),
        Some(at) => park_timed(w, task, parked, at, requeue),
    }
}

/// [`park_then`] inside a `timeout` scope: the park's deadline is the
/// earliest of its own and the scopes', and the scopes are checked after
/// it. Out of line: the parks outside any scope (most) carry no flag.
#[inline(never)]
fn park_scoped(
    w: &Worker,
    task: &Arc<Task>,
    parked: Parked,
    deadline: Option<Instant>,
    requeue: Option<Arc<Task>>,
) {
    match earliest(deadline, task.scopes.earliest()) {
        None => park_switch(w, task, parked, requeue, true, || {}),
        Some(at) => park_timed(w, task, parked, at, requeue),
    }
}

/// [`park_then`] with a timer for `at`: armed before the park, and gone
/// with it whatever ends the park (the timer, another wake, a
/// cancellation): O(1), and a no-op for a timer that fired. Out of line,
/// so that the parks without a deadline (most) carry no key across their
/// switch.
#[inline(never)]
fn park_timed(
    w: &Worker,
    task: &Arc<Task>,
    parked: Parked,
    at: Instant,
    requeue: Option<Arc<Task>>,
) {
    let key = w.arm_timer(at, task);
    park_switch(w, task, parked, requeue, true, || cancel_timer(w, key));
}

/// Cancel a park's timer (a no-op for one that fired); the green thread
/// the timer held goes after the timers' borrow ends.
fn cancel_timer(w: &Worker, key: TimerKey) {
    let target = w.cancel_timer(key);
    drop(target);
}

/// The park itself, once its timer (if any) is armed: `disarm` runs as
/// soon as it ends, before any unwind is raised from it; `scoped`: whether
/// a `timeout` scope was active (its expiry is checked after the park).
#[inline(always)]
fn park_switch(
    w: &Worker,
    task: &Task,
    parked: Parked,
    requeue: Option<Arc<Task>>,
    scoped: bool,
    disarm: impl Fn(),
) {
    task.set_parked_as(parked);
    let to = match w.next_after_park(task, requeue) {
        Next::Hub => None,
        Next::Sibling(to) => Some(to),
        Next::Myself => {
            disarm();
            if scoped {
                check_scopes(&task.scopes);
            }
            return;
        }
        Next::Cancelled => {
            disarm();
            return raise(CancelUnwind);
        }
    };
    // SAFETY: a `to` was made just now by `next_after_park`, with no switch
    // since; the target's greenlet handle is in the worker's `live` table,
    // whose entries only the hub removes, while it is suspended.
    let parked = ManuallyDrop::new(unsafe { direct::park(&w.hub, to) });
    // Only an error is looked at (out of line): a cancellation, or a
    // dump's request for this stack, answered there (see `stack_capture`)
    // while the green thread stays in its park, so the timer stays armed
    // until a real resume or a cancellation ends the park.
    // The `Ok` path runs no drop glue (the compiler may leave the
    // `Result`'s out of line, a call at every park).
    if parked.is_err() {
        if let Err(thrown) = ManuallyDrop::into_inner(parked) {
            let cancelled = stack_capture::answer_throw(thrown).is_err();
            disarm();
            if cancelled {
                raise(CancelUnwind);
            }
        }
    } else {
        disarm();
    }
    if scoped {
        check_scopes(&task.scopes);
    }
}

/// Park the green thread `task` until it is woken (or `deadline`, armed
/// as a timer, passes), delivering nothing from here: a cancellation
/// thrown into the park (or waiting at it) is answered by returning
/// `true`, for the caller to raise once it may unwind; timeout scopes are
/// neither armed nor checked. For a wait that must not unwind before the
/// kernel is done with memory it points into (a ring operation, see
/// `driver::op`). A dump's request for the stack is answered as at any
/// park.
pub(crate) fn park_shielded(
    w: &Worker,
    task: &Arc<Task>,
    wait: Wait,
    deadline: Option<Instant>,
) -> bool {
    let key = deadline.map(|at| w.arm_timer(at, task));
    // The park's timer goes when the park ends, whatever ended it.
    let disarm = || {
        if let Some(key) = key {
            cancel_timer(w, key);
        }
    };
    task.set_parked(wait);
    let to = match w.next_after_park(task, None) {
        Next::Hub => None,
        Next::Sibling(to) => Some(to),
        Next::Myself => {
            disarm();
            return false;
        }
        Next::Cancelled => {
            disarm();
            return true;
        }
    };
    // SAFETY: as in `park_then`: `to` was made just now by
    // `next_after_park`, with no switch since, and its greenlet handle is
    // in the worker's `live` table, which only the suspended hub changes.
    let parked = ManuallyDrop::new(unsafe { direct::park(&w.hub, to) });
    let mut cancelled = false;
    if parked.is_err() {
        if let Err(thrown) = ManuallyDrop::into_inner(parked) {
            cancelled = stack_capture::answer_throw(thrown).is_err();
        }
    }
    disarm();
    cancelled
}

/// Deliver a cancellation that [`park_shielded`] returned: the unwind a
/// park would have started.
pub(crate) fn raise_cancel() {
    raise(CancelUnwind);
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Unwind with the outermost elapsed timeout scope's payload, if any.
#[inline(always)]
pub(crate) fn check_scopes(scopes: &Scopes) {
    if let Some(id) = scopes.expired() {
        raise(TimeoutUnwind(id));
    }
}

/// Start an unwind from a parking point, unless one is already under way
/// (a destructor that parks while its stack unwinds): a second unwind
/// would abort the process. (The panic count is per OS thread, so while
/// another green thread of this worker is suspended in the middle of an
/// unwind, this one's cancellation waits for that unwind to end.)
fn raise<P: Send + 'static>(payload: P) {
    if std::thread::panicking() {
        return;
    }
    resume_unwind(Box::new(payload));
}

/// Wakes a plain thread parked in [`park`].
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

thread_local! {
    static THREAD_WAKER: Waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
}

/// A waker that wakes the caller from [`park`]: the current green thread's,
/// or the current plain thread's.
pub(crate) fn current_waker() -> Waker {
    worker::with_current_task(|_, task| Waker::from(Arc::clone(task)))
        .unwrap_or_else(|| THREAD_WAKER.with(Waker::clone))
}

thread_local! {
    static PLAIN_SCOPES: Scopes = const { Scopes::new() };
}

/// Run `f` with the caller's scopes: the current green thread's, else the
/// plain thread's.
pub(crate) fn with_scopes<R>(f: impl FnOnce(&Scopes) -> R) -> R {
    match worker::current_task() {
        Some((_, task)) => f(&task.scopes),
        None => PLAIN_SCOPES.with(f),
    }
}
