//! Time on the hub: [`sleep`], [`sleep_until`], [`yield_now`], and
//! [`timeout`] / [`timeout_at`] with the per-task deadline scopes they use.
//!
//! Owns: these functions. Uses `park` (and through it the caller's
//! [`Scopes`](super::scopes::Scopes), its stack of active `timeout`
//! deadlines), the current task,
//! and the current worker's timers (whether a deadline is known to have
//! passed, so that a woken sleeper need not read the clock).
//!
//! A `timeout` is delivered like a cancellation, at a parking point: when
//! its deadline passes, the innermost parking point inside it unwinds (so
//! destructors run) up to the `timeout` call, which returns
//! [`Elapsed`]. Code that never parks is not interrupted.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::error::Elapsed;
use super::park::{check_scopes, park, with_scopes, yield_green};
use super::task_state::Wait;
use super::unwind::TimeoutUnwind;
use super::worker;

/// Park the calling green thread for `d` (a plain thread sleeps). A parking
/// point.
///
/// It lasts at least `d`; the hub's timers have a resolution of 1 ms, so a
/// green thread wakes at the first scheduling point after the end of the
/// millisecond its deadline falls in: less than 1 ms late on a busy
/// worker, up to about 2 ms on an idle one (whose sleep in the poller is
/// in whole milliseconds).
///
/// ```
/// use std::time::{Duration, Instant};
/// greenlet::hub::run(|| {
///     let start = Instant::now();
///     greenlet::hub::sleep(Duration::from_millis(5));
///     assert!(start.elapsed() >= Duration::from_millis(5));
/// })
/// .unwrap();
/// ```
pub fn sleep(d: Duration) {
    let now = Instant::now();
    match now.checked_add(d) {
        Some(at) if at > now => park_until(at),
        Some(_) => {}
        None => loop {
            park(Wait::Sleep, None);
        },
    }
}

/// Park until `deadline` (a plain thread sleeps). A parking point. Never
/// returns before `deadline`; late by up to the timers' 1 ms resolution
/// and the worker's way to its next scheduling point (see [`sleep`]).
///
/// ```
/// use std::time::{Duration, Instant};
/// greenlet::hub::run(|| {
///     let at = Instant::now() + Duration::from_millis(2);
///     greenlet::hub::sleep_until(at);
///     assert!(Instant::now() >= at);
/// })
/// .unwrap();
/// ```
pub fn sleep_until(deadline: Instant) {
    if Instant::now() < deadline {
        park_until(deadline);
    }
}

/// Park until `deadline`, which had not passed at the last look. After a
/// wake, the worker's latest timer expiry tells whether it has passed (a
/// timer's wake comes from a clock reading at or after the deadline)
/// without reading the clock again; only when it does not is the clock
/// read.
fn park_until(deadline: Instant) {
    loop {
        park(Wait::Sleep, Some(deadline));
        let known =
            worker::with_current(|w| w.is_some_and(|w| w.timers.borrow().has_passed(deadline)));
        if known || Instant::now() >= deadline {
            return;
        }
    }
}

/// Let the other ready green threads of this worker run, then continue (a
/// plain thread yields its time slice). A parking point. With nothing else
/// ready and nothing for the worker's hub to do (no new task, wake from
/// another thread, due timer, pending call or poll due), it continues at once,
/// without a switch (unless a trace hook is set: hooks see it switch to the
/// hub and back).
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// greenlet::hub::Runtime::builder().worker_threads(1).build().unwrap().block_on(|| {
///     let flag = Arc::new(AtomicBool::new(false));
///     let f = Arc::clone(&flag);
///     let _h = greenlet::hub::spawn(move || f.store(true, Ordering::SeqCst));
///     greenlet::hub::yield_now(); // one worker: the new green thread runs now
///     assert!(flag.load(Ordering::SeqCst));
/// })
/// .unwrap();
/// ```
pub fn yield_now() {
    let yielded = worker::with_current_task(|w, task| {
        if w.yield_in_place(task) {
            check_scopes(&task.scopes);
            return;
        }
        let me = task.mark_ready().then(|| w.take_ref(task));
        yield_green(w, task, me);
    });
    if yielded.is_none() {
        std::thread::yield_now();
    }
}

static NEXT_SCOPE: AtomicU64 = AtomicU64::new(1);

/// Run `f`, giving up when `d` has passed: see [`timeout_at`].
///
/// ```
/// use std::time::Duration;
/// use greenlet::hub;
/// hub::run(|| {
///     let slow = hub::timeout(Duration::from_millis(5), || hub::sleep(Duration::from_secs(3600)));
///     assert_eq!(slow, Err(hub::Elapsed));
///     assert_eq!(hub::timeout(Duration::from_secs(3600), || 7), Ok(7));
/// })
/// .unwrap();
/// ```
///
/// # Errors
/// [`Elapsed`] if the deadline passed at a parking point inside `f`.
pub fn timeout<T>(d: Duration, f: impl FnOnce() -> T) -> Result<T, Elapsed> {
    match Instant::now().checked_add(d) {
        Some(at) => timeout_at(at, f),
        None => Ok(f()),
    }
}

/// Run `f`; if `deadline` passes while `f` is parked (or when it next
/// parks), the parking point unwinds `f`'s stack up to here (destructors
/// run) and this returns [`Elapsed`]. Code that does not park is not
/// interrupted; nested timeouts each see their own deadline. A parked `f`
/// is woken within the timers' 1 ms resolution after `deadline` (see
/// [`sleep`]).
///
/// ```
/// use std::time::{Duration, Instant};
/// use greenlet::hub;
/// hub::run(|| {
///     let (tx, rx) = hub::channel::<u8>(1);
///     let r = hub::timeout_at(Instant::now() + Duration::from_millis(5), || rx.recv());
///     assert!(r.is_err());
///     drop(tx);
/// })
/// .unwrap();
/// ```
///
/// # Errors
/// [`Elapsed`] if the deadline passed at a parking point inside `f`.
pub fn timeout_at<T>(deadline: Instant, f: impl FnOnce() -> T) -> Result<T, Elapsed> {
    let id = NEXT_SCOPE.fetch_add(1, Ordering::Relaxed);
    with_scopes(|s| s.push(id, deadline));
    let out = catch_unwind(AssertUnwindSafe(f));
    with_scopes(|s| s.pop(id));
    match out {
        Ok(v) => Ok(v),
        Err(payload) => match payload.downcast::<TimeoutUnwind>() {
            Ok(t) if t.0 == id => Err(Elapsed),
            Ok(other) => resume_unwind(other),
            Err(payload) => resume_unwind(payload),
        },
    }
}

/// A point in time as an arm of [`select`](super::select): the arm wins
/// once the instant has passed, so one select waits for several sources or
/// a timer (several deadlines can be arms; the select's own `deadline`
/// argument is the one that makes it return [`Elapsed`] instead).
///
/// ```
/// use std::time::Duration;
/// use greenlet::hub::{self, Deadline, Selectable};
/// hub::run(|| {
///     let (_tx, rx) = hub::unbounded::<u32>();
///     let tick = Deadline::after(Duration::from_millis(5));
///     let won = hub::select(&[&rx as &dyn Selectable, &tick], None).unwrap();
///     assert_eq!(won, 1);
///     assert!(tick.is_elapsed());
/// })
/// .unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Deadline {
    at: Instant,
}

impl Deadline {
    /// The deadline `at`.
    ///
    /// ```
    /// let now = std::time::Instant::now();
    /// assert_eq!(greenlet::hub::Deadline::at(now).instant(), now);
    /// ```
    pub fn at(at: Instant) -> Deadline {
        Deadline { at }
    }

    /// The deadline `d` from now (far in the future, about a century,
    /// when `d` is too large to add to the clock).
    ///
    /// ```
    /// let d = greenlet::hub::Deadline::after(std::time::Duration::MAX);
    /// assert!(!d.is_elapsed());
    /// ```
    pub fn after(d: std::time::Duration) -> Deadline {
        let now = Instant::now();
        let at = now
            .checked_add(d)
            .or_else(|| now.checked_add(std::time::Duration::from_secs(100 * 365 * 86_400)))
            .unwrap_or(now);
        Deadline { at }
    }

    /// Its instant.
    ///
    /// ```
    /// let d = greenlet::hub::Deadline::after(std::time::Duration::from_secs(1));
    /// assert!(d.instant() > std::time::Instant::now());
    /// ```
    pub fn instant(&self) -> Instant {
        self.at
    }

    /// Whether it has passed.
    ///
    /// ```
    /// let d = greenlet::hub::Deadline::at(std::time::Instant::now());
    /// assert!(d.is_elapsed());
    /// ```
    pub fn is_elapsed(&self) -> bool {
        Instant::now() >= self.at
    }
}
