//! [`Event`], the model's `threading.Event`: set from any OS thread,
//! waited on by [`Py::wait`](super::Py::wait) with the GIL released.
//!
//! Uses the runtime's shared state (its lock and condition variable) only
//! to wake waiters.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use super::state::Shared;
use super::Runtime;

/// `threading.Event`: set from any thread; [`Py::wait`](super::Py::wait) blocks with the GIL
/// released.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use greenlet::interp_shim::{Event, Outcome, PyVersion, Runtime, Watchdog};
///
/// let rt = Runtime::new(PyVersion::V3_11);
/// let release = Event::new(&rt);
/// let seen = release.clone();
/// let outcome = rt
///     .run(Watchdog::Report(Duration::from_secs(20)), move |py| {
///         let t = py.spawn("waiter", move |py| py.wait(&seen))?;
///         release.set();
///         py.join(&t)
///     })
///     .unwrap();
/// assert!(matches!(outcome, Outcome::Finished(Ok(()))));
/// ```
#[derive(Clone)]
pub struct Event {
    pub(super) flag: Arc<AtomicBool>,
    pub(super) shared: Weak<Shared>,
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("set", &self.is_set())
            .finish()
    }
}

impl Event {
    /// A new, clear event of `runtime`.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::{Event, PyVersion, Runtime};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
    /// let event = Event::new(&rt);
    /// assert!(!event.is_set());
    /// assert_eq!(format!("{event:?}"), "Event { set: false }");
    /// ```
    pub fn new(runtime: &Runtime) -> Event {
        Event {
            flag: Arc::new(AtomicBool::new(false)),
            shared: Arc::downgrade(&runtime.shared),
        }
    }

    /// `Event.set()`: wakes every waiter.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Event, Outcome, PyVersion, Runtime, Watchdog};
    ///
    /// let rt = Runtime::new(PyVersion::V3_12);
    /// let ready = Event::new(&rt);
    /// let setter = ready.clone();
    /// let outcome = rt
    ///     .run(Watchdog::Report(Duration::from_secs(20)), move |py| {
    ///         let t = py.spawn("setter", move |py| py.c_call(|| setter.set()))?;
    ///         py.wait(&ready)?; // returns once the other thread has set it
    ///         py.join(&t)
    ///     })
    ///     .unwrap();
    /// assert!(matches!(outcome, Outcome::Finished(Ok(()))));
    /// ```
    pub fn set(&self) {
        self.flag.store(true, Ordering::SeqCst);
        if let Some(shared) = self.shared.upgrade() {
            // Taking the lock orders this store before a waiter's re-check.
            let _st = shared.state.lock();
            shared.cond.notify_all();
        }
    }

    /// `Event.is_set()`.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::{Event, PyVersion, Runtime};
    ///
    /// let rt = Runtime::new(PyVersion::V3_13);
    /// let event = Event::new(&rt);
    /// let same = event.clone(); // clones share one flag
    /// event.set();
    /// assert!(same.is_set());
    /// ```
    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
}
