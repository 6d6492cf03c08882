//! What a trace hook is given and what it is: [`TraceEvent`] (a switch or a
//! throw, with the handles of both greenlets), [`TraceHook`] (process-wide)
//! and [`ThreadTraceHook`] (one thread's).
//!
//! Owns these types and the event's accessors. Uses the handle's type (from
//! the record) and the error type; the thread state holds a thread's hook,
//! `trace.rs` installs and fires hooks.

use std::rc::Rc;
use std::sync::Arc;

use super::error::GreenletError;
use super::record::Greenlet;

/// A switch or throw as a trace hook sees it.
///
/// ```
/// use std::cell::Cell;
/// use std::rc::Rc;
/// use greenlet::{Greenlet, GreenletError, TraceEvent};
/// let throws = Rc::new(Cell::new(0));
/// let t = Rc::clone(&throws);
/// greenlet::settrace(Some(Rc::new(move |e: &TraceEvent| {
///     if let TraceEvent::Throw { .. } = e {
///         t.set(t.get() + 1);
///     }
///     Ok(())
/// })));
/// let g = Greenlet::new(|_| Err(GreenletError::user("no")));
/// assert!(g.switch(()).is_err()); // g finished with an error: a throw into main
/// greenlet::settrace(None);
/// assert_eq!(throws.get(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceEvent {
    /// `origin` switched to `target`, sending a value (or finished with one).
    Switch {
        /// The greenlet that gave up control.
        origin: Greenlet,
        /// The greenlet that got it (the current one while the hook runs).
        target: Greenlet,
    },
    /// `origin` threw an error into `target` (or finished with an error).
    Throw {
        /// The greenlet that gave up control.
        origin: Greenlet,
        /// The greenlet that got it (the current one while the hook runs).
        target: Greenlet,
    },
}

impl TraceEvent {
    /// The greenlet that gave up control.
    ///
    /// ```
    /// let me = greenlet::getcurrent();
    /// let e = greenlet::TraceEvent::Switch { origin: me.clone(), target: me.clone() };
    /// assert_eq!(e.origin(), &me);
    /// ```
    pub fn origin(&self) -> &Greenlet {
        match self {
            TraceEvent::Switch { origin, .. } | TraceEvent::Throw { origin, .. } => origin,
        }
    }

    /// The greenlet that got control.
    ///
    /// ```
    /// let me = greenlet::getcurrent();
    /// let e = greenlet::TraceEvent::Throw { origin: me.clone(), target: me.clone() };
    /// assert_eq!(e.target(), &me);
    /// ```
    pub fn target(&self) -> &Greenlet {
        match self {
            TraceEvent::Switch { target, .. } | TraceEvent::Throw { target, .. } => target,
        }
    }
}

/// The process-wide trace hook ([`set_global_trace`](crate::set_global_trace)), which any thread may
/// run. It runs in the target greenlet, right after the switch, with
/// tracing suspended (switches it makes are not traced). If it returns an
/// error or panics it is removed, and the error replaces the value the
/// target receives.
///
/// ```
/// use std::sync::Arc;
/// let hook: greenlet::TraceHook = Arc::new(|e: &greenlet::TraceEvent| {
///     println!("{} -> {}", e.origin().name(), e.target().name());
///     Ok(())
/// });
/// let previous = greenlet::set_global_trace(Some(hook));
/// greenlet::set_global_trace(previous);
/// ```
pub type TraceHook = Arc<dyn Fn(&TraceEvent) -> Result<(), GreenletError> + Send + Sync + 'static>;

/// A thread's own trace hook ([`settrace`](crate::settrace)): as a [`TraceHook`], but it only
/// ever runs on the thread that installed it, so it need not be `Send` or
/// `Sync` (it may capture an `Rc` or a `Cell`).
///
/// ```
/// use std::cell::Cell;
/// use std::rc::Rc;
/// let switches = Rc::new(Cell::new(0));
/// let count = Rc::clone(&switches);
/// let hook: greenlet::ThreadTraceHook = Rc::new(move |_: &greenlet::TraceEvent| {
///     count.set(count.get() + 1);
///     Ok(())
/// });
/// greenlet::settrace(Some(hook));
/// greenlet::Greenlet::new(Ok).switch(()).unwrap();
/// greenlet::settrace(None);
/// assert_eq!(switches.get(), 2);
/// ```
pub type ThreadTraceHook = Rc<dyn Fn(&TraceEvent) -> Result<(), GreenletError> + 'static>;
