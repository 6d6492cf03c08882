//! [`GreenletError`]: the one error type of the greenlet API (one pointer
//! wide), its [`ErrorKind`], and [`GreenletExit`], the value a killed
//! greenlet leaves to its parent.
//!
//! Owns the variants and their messages, the error's one-word
//! representation, and the text of a caught panic ([`panic_message`]). Uses
//! [`Value`] (its struct, `value_repr.rs`) for the payload a `GreenletExit`
//! may carry; the value's methods (`value.rs`, above this file) use this
//! error for a failed downcast.

use std::error::Error;
use std::fmt;

use super::value_repr::Value;

/// The value a greenlet's parent receives when the greenlet ended by
/// `GreenletExit` carrying no value of its own (for example after
/// [`Greenlet::kill`](crate::Greenlet::kill), or a `throw` into a dead
/// greenlet).
///
/// # Example
/// ```
/// use greenlet::{Greenlet, GreenletError, GreenletExit};
///
/// let g = Greenlet::new(|_| Err(GreenletError::exit()));
/// let v = g.switch(()).unwrap(); // GreenletExit is a normal result
/// assert!(v.is::<GreenletExit>());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GreenletExit;

/// What went wrong, as a [`GreenletError`] holds it: everything that can go
/// wrong in a greenlet operation, plus the two ways a greenlet's code ends
/// abnormally (an error it returns, a panic).
///
/// # Example
/// ```
/// use greenlet::{ErrorKind, Greenlet, GreenletError};
///
/// let g = Greenlet::new(|_| Err(GreenletError::user("disk full")));
/// let err = g.switch(()).unwrap_err(); // raised in the parent's switch
/// assert!(matches!(err.kind(), ErrorKind::User(_)));
/// let err: GreenletError = ErrorKind::KillIgnored { greenlet: "g".into() }.into();
/// assert!(err.to_string().starts_with("GreenletExit did not kill g"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Python's `GreenletExit`: asks a greenlet to finish. A greenlet whose
    /// run returns it ends normally: its parent receives the carried value,
    /// or [`GreenletExit`] when there is none (greenlet hands the exception
    /// object, which holds the value: see the differences in `docs/greenlets.md`).
    #[error(
        "GreenletExit{}: the greenlet was asked to exit (propagate it with `?` to finish)",
        Carried(.0)
    )]
    GreenletExit(Option<Value>),

    /// An error from the greenlet's own code.
    #[error(transparent)]
    User(Box<dyn Error + Send + Sync + 'static>),

    /// The greenlet's code panicked; the panic was caught at its root and
    /// raised in its parent's pending switch.
    #[error("greenlet {greenlet} panicked: {message}")]
    Panic {
        /// The greenlet whose code (or trace hook) panicked: `'name' (id N)`,
        /// or `'name' (id N)'s trace hook`.
        greenlet: String,
        /// The panic message, if it was a string.
        message: String,
    },

    /// The target greenlet belongs to another (live) thread.
    #[error(
        "Cannot switch to a different thread: current greenlet {current} on thread {current_thread}, \
         target greenlet {target} belongs to thread {target_thread}; switch to (or throw into, or \
         re-parent) a greenlet only from the thread that created it"
    )]
    WrongThread {
        /// The greenlet running where the call was made.
        current: String,
        /// The thread where the call was made.
        current_thread: String,
        /// The greenlet asked for.
        target: String,
        /// The thread it belongs to.
        target_thread: String,
    },

    /// The target greenlet belonged to a thread that has exited.
    #[error(
        "cannot switch to a different thread (which happens to have exited): greenlet {target} \
         belonged to thread {target_thread}, whose greenlets were unwound when it exited"
    )]
    ThreadExited {
        /// The greenlet asked for.
        target: String,
        /// The thread it belonged to.
        target_thread: String,
    },

    /// [`Value::downcast`] was asked for the wrong type.
    #[error(
        "expected a value of type {expected}, found a value of type {found}; downcast to the type \
         that was sent"
    )]
    TypeMismatch {
        /// The type asked for.
        expected: &'static str,
        /// The type held.
        found: &'static str,
    },

    /// `set_parent` would have made the parent chain loop.
    #[error(
        "cyclic parent chain: {greenlet} is already an ancestor of {parent}, so {parent} cannot \
         become its parent; pick a parent outside its descendants"
    )]
    ParentCycle {
        /// The greenlet being re-parented.
        greenlet: String,
        /// The parent that was refused.
        parent: String,
    },

    /// The proposed parent belongs to another thread.
    #[error(
        "parent cannot be on a different thread: {greenlet} belongs to thread {thread} but the \
         proposed parent {parent} belongs to thread {parent_thread}"
    )]
    ParentOnOtherThread {
        /// The greenlet being created or re-parented.
        greenlet: String,
        /// Its thread.
        thread: String,
        /// The parent that was refused.
        parent: String,
        /// The parent's thread.
        parent_thread: String,
    },

    /// Main greenlets are the roots of their thread's tree.
    #[error(
        "cannot set the parent of a main greenlet: {greenlet} is the main greenlet of its thread, \
         the root of that thread's tree; re-parent one of its descendants instead"
    )]
    MainCannotHaveParent {
        /// The main greenlet.
        greenlet: String,
    },

    /// [`Greenlet::kill`](crate::Greenlet::kill) threw `GreenletExit` but the
    /// greenlet caught it and switched away instead of finishing.
    #[error(
        "GreenletExit did not kill {greenlet}: it caught the exit and switched away; make it \
         propagate GreenletExit (with `?`) to let it finish"
    )]
    KillIgnored {
        /// The greenlet that survived.
        greenlet: String,
    },

    /// No stack could be mapped for the greenlet.
    #[error("could not allocate a {size}-byte stack for {greenlet}: {source}; lower the stack size or the number of live greenlets")]
    StackAllocation {
        /// The greenlet that could not start.
        greenlet: String,
        /// The requested stack size.
        size: usize,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

/// The value a `GreenletExit` carries, as its message shows it: nothing
/// for a bare exit, else ` carrying ` and the value's `Debug`.
struct Carried<'a>(&'a Option<Value>);

impl fmt::Display for Carried<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(value) => write!(f, " carrying {value:?}"),
            None => Ok(()),
        }
    }
}

/// The error of every greenlet operation: what went wrong is its
/// [`ErrorKind`] ([`kind`](GreenletError::kind),
/// [`into_kind`](GreenletError::into_kind)); its `Display`, `Debug` and
/// [`source`](Error::source) are the kind's.
///
/// One pointer wide, so that `Result<Value, GreenletError>` is two words
/// (a [`Value`] and the error share them through the value's non-null
/// niche): what a switch carries is what it returns, with no conversion,
/// and where the switch is inlined the result stays in registers. The kind
/// is boxed; the bare `GreenletExit` that a kill throws is a mark of its
/// own that allocates nothing.
///
/// # Example
/// ```
/// use greenlet::{ErrorKind, Greenlet, GreenletError};
///
/// let g = Greenlet::new(|_| Err(GreenletError::user("disk full")));
/// let err = g.switch(()).unwrap_err(); // raised in the parent's switch
/// assert_eq!(err.to_string(), "disk full");
/// match err.into_kind() {
///     ErrorKind::User(inner) => assert_eq!(inner.to_string(), "disk full"),
///     other => panic!("unexpected {other:?}"),
/// }
/// ```
pub struct GreenletError(Repr);

/// A [`GreenletError`]'s word: null for the bare `GreenletExit`, else the
/// boxed kind (never a bare `GreenletExit`: [`GreenletError::from`] keeps
/// that one unboxed).
enum Repr {
    /// `ErrorKind::GreenletExit(None)`.
    Exit,
    /// Any other kind.
    Boxed(Box<ErrorKind>),
}

/// The two words a switch returns, checked where the types are defined.
const _: () = assert!(
    std::mem::size_of::<Result<Value, GreenletError>>() == 2 * std::mem::size_of::<usize>()
);

/// What [`GreenletError::kind`] shows for the bare `GreenletExit`.
const BARE_EXIT: &ErrorKind = &ErrorKind::GreenletExit(None);

impl GreenletError {
    /// What went wrong.
    ///
    /// ```
    /// use greenlet::{ErrorKind, GreenletError};
    ///
    /// assert!(matches!(GreenletError::exit().kind(), ErrorKind::GreenletExit(None)));
    /// ```
    pub fn kind(&self) -> &ErrorKind {
        match &self.0 {
            Repr::Exit => BARE_EXIT,
            Repr::Boxed(kind) => kind,
        }
    }

    /// What went wrong, by value (to take the fields out).
    ///
    /// ```
    /// use greenlet::{ErrorKind, GreenletError};
    ///
    /// let err = GreenletError::user("bad input");
    /// let ErrorKind::User(inner) = err.into_kind() else { unreachable!() };
    /// assert_eq!(inner.to_string(), "bad input");
    /// ```
    pub fn into_kind(self) -> ErrorKind {
        match self.0 {
            Repr::Exit => ErrorKind::GreenletExit(None),
            Repr::Boxed(kind) => *kind,
        }
    }

    /// A user error from any error value or message.
    ///
    /// ```
    /// let e = greenlet::GreenletError::user("bad input");
    /// assert_eq!(e.to_string(), "bad input");
    /// ```
    pub fn user(err: impl Into<Box<dyn Error + Send + Sync + 'static>>) -> GreenletError {
        ErrorKind::User(err.into()).into()
    }

    /// The `GreenletExit` error with no value.
    ///
    /// ```
    /// assert!(greenlet::GreenletError::exit().is_exit());
    /// ```
    pub const fn exit() -> GreenletError {
        GreenletError(Repr::Exit)
    }

    /// Whether this is `GreenletExit`.
    ///
    /// ```
    /// assert!(!greenlet::GreenletError::user("x").is_exit());
    /// ```
    pub fn is_exit(&self) -> bool {
        matches!(self.kind(), ErrorKind::GreenletExit(_))
    }

    /// Whether this is the bare `GreenletExit` (no value), a kill's.
    #[inline(always)]
    pub(crate) fn is_bare_exit(&self) -> bool {
        matches!(self.0, Repr::Exit)
    }
}

impl From<ErrorKind> for GreenletError {
    /// The error of `kind` (boxed, unless it is the bare `GreenletExit`).
    ///
    /// ```
    /// use greenlet::{ErrorKind, GreenletError};
    ///
    /// let err = GreenletError::from(ErrorKind::MainCannotHaveParent { greenlet: "main".into() });
    /// assert!(err.to_string().contains("main greenlet"));
    /// ```
    #[inline]
    fn from(kind: ErrorKind) -> Self {
        match kind {
            ErrorKind::GreenletExit(None) => GreenletError::exit(),
            kind => GreenletError(Repr::Boxed(Box::new(kind))),
        }
    }
}

impl fmt::Debug for GreenletError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.kind(), f)
    }
}

impl fmt::Display for GreenletError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.kind(), f)
    }
}

impl Error for GreenletError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.kind().source()
    }
}

impl From<Box<dyn Error + Send + Sync + 'static>> for GreenletError {
    fn from(err: Box<dyn Error + Send + Sync + 'static>) -> Self {
        ErrorKind::User(err).into()
    }
}

impl From<std::io::Error> for GreenletError {
    fn from(err: std::io::Error) -> Self {
        ErrorKind::User(Box::new(err)).into()
    }
}

/// The message of a caught panic: its payload if that is a string.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".into()
    }
}
