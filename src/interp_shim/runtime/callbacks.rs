//! The simulated Python callables the shared state stores: pending calls
//! ([`PendingCall`]) and what a signal does ([`SignalDisposition`], with its
//! [`SignalHandler`]).
//!
//! Uses only the error types and the [`Py`] handle the callables receive.

use std::fmt;
use std::sync::Arc;

use super::error::PyResult;
use super::Py;

/// A pending call: simulated Python code run by `make_pending_calls` on the
/// main thread with the GIL held. An `Err` is the callback's `-1`.
pub type PendingCall = Box<dyn FnOnce(&Py) -> PyResult<()> + Send>;

/// A Python-level signal handler (`signal.signal(signum, handler)`): runs on
/// the main thread as an ordinary Python call.
pub type SignalHandler = Arc<dyn Fn(&Py) -> PyResult<()> + Send + Sync>;

/// What a signal does (`signal.signal(signum, handler)` with `handler` a
/// Python function, `signal.default_int_handler` or `signal.SIG_IGN`).
///
/// Checked on CPython 3.11.7, 3.12.1 and 3.13.0 (`probes/signal_handlers.py`,
/// `probes/sigint_in_livelock.py`, results in `probes/RESULTS.md`):
/// - [`Python`](Self::Python): the C-level `signal_handler` → `trip_signal`
///   marks it tripped; `_PyErr_CheckSignalsTstate`, from `handle_signals`
///   at a check site of the main thread, calls the function: a new frame
///   whose `RESUME` is itself a check site (on 3.11 under tracing, with
///   the breaker still set, it spins there).
/// - [`DefaultInt`](Self::DefaultInt): `signal.default_int_handler`, a
///   builtin. `_PyErr_CheckSignalsTstate` calls it with `_PyObject_Call`,
///   not through a `CALL`: no frame, no trace or profile event, no check
///   site. Its `KeyboardInterrupt` fails the handling step
///   (`handle_signals` returns -1), so it is raised in whichever frame hit
///   the check site. Escaping a pending call, it takes
///   `make_pending_calls`' error exit (`busy = 0`, re-signal), which ends
///   the 3.11 livelock.
/// - [`Ignore`](Self::Ignore): `PyOS_setsig(sig, SIG_IGN)`: the OS drops the
///   signal, no C handler runs, nothing trips.
///
/// With none set, a signal trips and is taken at a check site, and nothing
/// runs (the C handler is installed, the Python-level one is `None`).
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::interp_shim::{Outcome, PyErr, PyVersion, Interpreter, SignalDisposition, Watchdog};
///
/// for version in PyVersion::ALL {
///     let rt = Interpreter::new(version);
///     rt.set_signal_disposition(SignalDisposition::DefaultInt);
///     let outcome = rt
///         .run(Watchdog::Report(Duration::from_secs(20)), |py| {
///             py.runtime().raise_signal(); // SIGINT to the main thread
///             py.call("busy", |py| py.loop_iter())
///         })
///         .unwrap();
///     let Outcome::Finished(Err(err)) = outcome else { panic!("KeyboardInterrupt") };
///     assert_eq!(err, PyErr::keyboard_interrupt());
///     assert_eq!(rt.stats().signal_handlers_run, 0); // no Python handler ran
/// }
/// ```
#[non_exhaustive]
#[derive(Clone)]
pub enum SignalDisposition {
    /// A Python function named `name`.
    Python {
        /// The function's name (its frame in a hang report).
        name: &'static str,
        /// Its body.
        handler: SignalHandler,
    },
    /// `signal.default_int_handler`: raises `KeyboardInterrupt` from C.
    DefaultInt,
    /// `signal.SIG_IGN`.
    Ignore,
}

impl SignalDisposition {
    /// A Python handler named `name` running `handler`.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::SignalDisposition;
    ///
    /// let d = SignalDisposition::python("on_sigint", |_| Ok(()));
    /// assert_eq!(format!("{d:?}"), "Python(on_sigint)");
    /// ```
    pub fn python(
        name: &'static str,
        handler: impl Fn(&Py) -> PyResult<()> + Send + Sync + 'static,
    ) -> SignalDisposition {
        SignalDisposition::Python {
            name,
            handler: Arc::new(handler),
        }
    }

    /// Whether handling a signal can raise without entering Python code
    /// (the default SIGINT handler): such a signal can end a 3.11 livelock.
    pub(super) fn raises_from_c(&self) -> bool {
        matches!(self, SignalDisposition::DefaultInt)
    }
}

impl fmt::Debug for SignalDisposition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignalDisposition::Python { name, .. } => write!(f, "Python({name})"),
            SignalDisposition::DefaultInt => f.write_str("DefaultInt"),
            SignalDisposition::Ignore => f.write_str("Ignore"),
        }
    }
}
