//! What simulated Python code and a run of the runtime end with: [`PyErr`]
//! (a Python exception, or one of the harness's escapes), [`PyResult`],
//! [`Outcome`] and [`RunError`].
//!
//! Uses the [`HangReport`] of the watchdog; nothing else of the runtime.

use super::super::watchdog::HangReport;

/// A Python exception, or the harness's cancellation.
///
/// # Examples
/// ```
/// use greenlet::interp_shim::PyErr;
///
/// let err = PyErr::exception("RuntimeError", "boom");
/// assert_eq!(err.to_string(), "RuntimeError: boom");
/// assert!(PyErr::Cancelled.to_string().contains("not a Python exception"));
/// assert!(PyErr::ThreadExit.to_string().contains("finalizing"));
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PyErr {
    /// A Python exception raised by simulated code (`kind` is its type name).
    #[error("{kind}: {message}")]
    Exception {
        /// The exception type, e.g. `RuntimeError`.
        kind: String,
        /// Its message.
        message: String,
    },
    /// The watchdog fired in [`Watchdog::Report`](super::super::Watchdog::Report) mode and the harness is
    /// unwinding the simulated frames. Not a Python exception: see the module
    /// documentation.
    #[error(
        "cancelled by the watchdog after a timeout (a test-harness escape, not a Python exception)"
    )]
    Cancelled,
    /// A daemon thread tried to take the GIL after finalization began: in
    /// CPython `take_gil` calls `ThreadHandle_exit_thread` and the thread ends
    /// without running more Python code.
    #[error("the interpreter is finalizing: a daemon thread exits when it tries to take the GIL")]
    ThreadExit,
}

impl PyErr {
    /// A Python exception of type `kind` with `message`.
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{Outcome, PyErr, PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_12);
    /// let outcome = rt
    ///     .run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///         py.call("f", |_| Err::<(), _>(PyErr::exception("ValueError", "bad input")))
    ///     })
    ///     .unwrap();
    /// let Outcome::Finished(Err(err)) = outcome else { panic!("f raises") };
    /// assert_eq!(err, PyErr::exception("ValueError", "bad input"));
    /// ```
    pub fn exception(kind: &str, message: impl Into<String>) -> Self {
        PyErr::Exception {
            kind: kind.to_string(),
            message: message.into(),
        }
    }

    /// The `KeyboardInterrupt` that `signal.default_int_handler` raises.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::PyErr;
    ///
    /// assert_eq!(PyErr::keyboard_interrupt().to_string(), "KeyboardInterrupt: ");
    /// ```
    pub fn keyboard_interrupt() -> Self {
        PyErr::exception("KeyboardInterrupt", "")
    }
}

/// The result of simulated Python code.
pub type PyResult<T> = Result<T, PyErr>;

/// How an [`Interpreter::run`](super::Interpreter::run) ended.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::interp_shim::{Outcome, PyVersion, Interpreter, Watchdog};
///
/// let rt = Interpreter::new(PyVersion::V3_13);
/// match rt.run(Watchdog::Report(Duration::from_secs(20)), |_| Ok("done")).unwrap() {
///     Outcome::Finished(value) => assert_eq!(value, Ok("done")),
///     Outcome::Hung(report) => panic!("{report}"),
/// }
/// ```
#[derive(Debug)]
pub enum Outcome<T> {
    /// The main body returned (its value or its exception), and the
    /// interpreter was finalized.
    Finished(PyResult<T>),
    /// The watchdog fired ([`Watchdog::Report`](super::super::Watchdog::Report) mode); the scenario was
    /// cancelled and unwound.
    Hung(Box<HangReport>),
}

/// Why [`Interpreter::run`](super::Interpreter::run) could not run.
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::interp_shim::{PyVersion, RunError, Interpreter, Watchdog};
///
/// let rt = Interpreter::new(PyVersion::V3_13);
/// let dog = Watchdog::Report(Duration::from_secs(20));
/// rt.run(dog, |_| Ok(())).unwrap();
/// let err = rt.run(dog, |_| Ok(())).unwrap_err();
/// assert!(matches!(err, RunError::AlreadyRan));
/// assert!(err.to_string().contains("create a new Interpreter"));
/// ```
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// `run` was called a second time on the same runtime.
    #[error(
        "this Interpreter already ran its main thread; create a new Interpreter for another run"
    )]
    AlreadyRan,
    /// The OS refused to start the main thread.
    #[error("could not start the simulated main thread: {0}")]
    Spawn(#[from] std::io::Error),
}
