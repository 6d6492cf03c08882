//! [`PyEvent`], the model's `threading.Event`: set from any OS thread,
//! waited on by [`Py::wait`](super::Py::wait) with the GIL released.
//!
//! Uses the runtime's shared state (its lock and condition variable) only
//! to wake waiters.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use super::state::Shared;
use super::Interpreter;

/// `threading.Event`: set from any thread; [`Py::wait`](super::Py::wait) blocks with the GIL
/// released.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use greenlet::interp_shim::{PyEvent, Outcome, PyVersion, Interpreter, Watchdog};
///
/// let rt = Interpreter::new(PyVersion::V3_11);
/// let release = PyEvent::new(&rt);
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
pub struct PyEvent {
    pub(super) flag: Arc<AtomicBool>,
    pub(super) shared: Weak<Shared>,
}

impl fmt::Debug for PyEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PyEvent")
            .field("set", &self.is_set())
            .finish()
    }
}

impl PyEvent {
    /// A new, clear event of `runtime`.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::{PyEvent, PyVersion, Interpreter};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// let event = PyEvent::new(&rt);
    /// assert!(!event.is_set());
    /// assert_eq!(format!("{event:?}"), "PyEvent { set: false }");
    /// ```
    pub fn new(runtime: &Interpreter) -> PyEvent {
        PyEvent {
            flag: Arc::new(AtomicBool::new(false)),
            shared: Arc::downgrade(&runtime.shared),
        }
    }

    /// `Event.set()`: wakes every waiter.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyEvent, Outcome, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// let ready = PyEvent::new(&rt);
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
    /// use greenlet::interp_shim::{PyEvent, PyVersion, Interpreter};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_13);
    /// let event = PyEvent::new(&rt);
    /// let same = event.clone(); // clones share one flag
    /// event.set();
    /// assert!(same.is_set());
    /// ```
    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
}
