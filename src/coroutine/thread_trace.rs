//! A thread's own trace hook: [`settrace`] and [`gettrace`].
//!
//! Owns installing and reading the hook that `trace.rs` fires. Uses the
//! thread state, where the hook lives (and which [`settrace`] creates on a
//! thread that has none yet), and the hook's type (`trace_event.rs`).

use super::thread_exit::UPCALLS;
use super::thread_state;
use super::trace_event::ThreadTraceHook;

/// Set the calling thread's trace hook (`None` removes it); returns the
/// previous one.
///
/// # Example
/// ```
/// use std::cell::RefCell;
/// use std::rc::Rc;
/// use greenlet::{settrace, Greenlet, ThreadTraceHook, TraceEvent};
///
/// let seen = Rc::new(RefCell::new(Vec::new()));
/// let log = Rc::clone(&seen);
/// let hook: ThreadTraceHook = Rc::new(move |e: &TraceEvent| {
///     log.borrow_mut().push(matches!(e, TraceEvent::Switch { .. }));
///     Ok(())
/// });
/// assert!(settrace(Some(hook)).is_none());
/// let g = Greenlet::new(|v| Ok(v));
/// g.switch(()).unwrap(); // main -> g, then g -> main when it finishes
/// settrace(None);
/// assert_eq!(*seen.borrow(), vec![true, true]);
/// ```
pub fn settrace(hook: Option<ThreadTraceHook>) -> Option<ThreadTraceHook> {
    let ts = thread_state::state(&UPCALLS)?;
    // SAFETY: `ts` is this thread's live state; the old hook is returned,
    // not dropped, so no user code runs during the access.
    unsafe { (*ts).replace_trace_hook(hook) }
}

/// The calling thread's trace hook.
///
/// ```
/// assert!(greenlet::gettrace().is_none());
/// ```
pub fn gettrace() -> Option<ThreadTraceHook> {
    let ts = thread_state::existing_state()?;
    // SAFETY: `ts` is this thread's live state; short read.
    unsafe { (*ts).trace_hook().cloned() }
}
