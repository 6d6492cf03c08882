//! Where a dying thread's thread-local destructors fall relative to the other
//! threads' GIL takes ([`ExitOrder`]), and its name on a command line.
//!
//! A leaf: uses nothing of the runtime; `state.rs` keeps the chosen order
//! and `threads.rs` follows it.

use std::fmt;
use std::str::FromStr;

/// Where a dying thread's thread-local destructors fall relative to the
/// other threads' GIL takes (see the runtime's module documentation).
///
/// The destructors are where greenlet queues a dying thread's state and
/// calls `Py_AddPendingCall` (greenlet's `ThreadStateCreator` destructor →
/// `AddToCleanupQueue`), without the GIL and after the thread state is gone.
/// On real 3.11 and 3.12 another thread usually runs Python code before
/// they end: `probes/exit_order.py` (run it to re-measure on a given
/// machine) finds the push usually not yet done right after `Thread.join()`
/// returns, and done after one more `time.sleep(0)` in nearly every join.
/// On 3.13 `join()` waits for the OS thread, destructors included; the
/// version data says so
/// ([`VersionSpec::join_waits_for_thread_exit`](super::super::VersionSpec::join_waits_for_thread_exit))
/// and [`Py::join`](super::Py::join) follows it under either order.
///
/// # Examples
/// ```
/// use greenlet::interp_shim::{ExitOrder, PyVersion, Interpreter};
///
/// let rt = Interpreter::new(PyVersion::V3_11);
/// assert_eq!(rt.exit_order(), ExitOrder::Settled); // the default
/// rt.set_exit_order(ExitOrder::Racing); // CPython's own schedules
/// assert_eq!(rt.exit_order(), ExitOrder::Racing);
/// assert_eq!("racing".parse::<ExitOrder>(), Ok(ExitOrder::Racing));
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExitOrder {
    /// No thread takes the GIL while another runs its thread-local
    /// destructors: the same order on every run, so that live runs repeat.
    /// It rules out a real interleaving, and on 3.11/3.12 not a rare one:
    /// code running while a joined thread's push is still pending (the
    /// window behind the 3.11 residual livelocks, which only the explorer
    /// and [`Racing`](Self::Racing) runs then reach). On real 3.11/3.12
    /// this order is the *rare* one for code right after `Thread.join()`.
    #[default]
    Settled,
    /// The destructors run alongside the other threads, as in CPython, and
    /// the OS decides; also for tests that force an order themselves
    /// (gates in the destructors that wait for another thread's Python
    /// code).
    Racing,
}

impl ExitOrder {
    /// The command-line name: `settled` or `racing`.
    ///
    /// # Examples
    /// ```
    /// use greenlet::interp_shim::ExitOrder;
    ///
    /// assert_eq!(ExitOrder::Settled.name(), "settled");
    /// assert_eq!(ExitOrder::Racing.to_string(), "racing");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            ExitOrder::Settled => "settled",
            ExitOrder::Racing => "racing",
        }
    }
}

impl fmt::Display for ExitOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An exit order name that is neither `settled` nor `racing`.
///
/// # Examples
/// ```
/// use greenlet::interp_shim::{ExitOrder, UnknownExitOrder};
///
/// let err: UnknownExitOrder = "idle".parse::<ExitOrder>().unwrap_err();
/// assert!(err.to_string().contains("expected settled or racing"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown exit order {given:?}: expected settled or racing")]
pub struct UnknownExitOrder {
    /// What was given.
    pub given: String,
}

impl FromStr for ExitOrder {
    type Err = UnknownExitOrder;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [ExitOrder::Settled, ExitOrder::Racing]
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| UnknownExitOrder {
                given: s.to_string(),
            })
    }
}
