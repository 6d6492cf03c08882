//! Tracing: per-thread and process-wide hooks that see every switch and
//! throw, run in the target greenlet right after the switch.
//!
//! Owns [`set_global_trace`] and firing an event. Uses the hook and event
//! types (`trace_event.rs`), the thread state (where the per-thread hook
//! lives, installed by `thread_trace.rs`) and records (whose handles an
//! event carries); the switch protocol calls it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::error::{panic_message, ErrorKind, GreenletError};
use super::payload::Kind;
use super::record::Record;
use super::thread_state::ThreadState;
use super::trace_event::{TraceEvent, TraceHook};

static GLOBAL_HOOK: Mutex<Option<TraceHook>> = Mutex::new(None);
/// 1 while a process-wide hook is installed, else 0: a byte rather than an
/// `AtomicBool`, so that the switch's test or-s it with the thread's flag
/// as it is loaded (a `bool`'s load is normalized first, two instructions).
static GLOBAL_ON: AtomicU8 = AtomicU8::new(0);

/// Set the process-wide trace hook, which sees the switches of every thread
/// (after that thread's own hook); returns the previous one.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// static SWITCHES: AtomicUsize = AtomicUsize::new(0);
/// let previous = greenlet::set_global_trace(Some(Arc::new(|_: &greenlet::TraceEvent| {
///     SWITCHES.fetch_add(1, Ordering::SeqCst);
///     Ok(())
/// })));
/// greenlet::Greenlet::new(|v| Ok(v)).switch(()).unwrap();
/// greenlet::set_global_trace(previous);
/// assert!(SWITCHES.load(Ordering::SeqCst) >= 2);
/// ```
pub fn set_global_trace(hook: Option<TraceHook>) -> Option<TraceHook> {
    let mut global = GLOBAL_HOOK.lock();
    GLOBAL_ON.store(u8::from(hook.is_some()), Ordering::Release);
    std::mem::replace(&mut *global, hook)
}

/// 1 when a process-wide hook is installed, else 0.
#[inline(always)]
pub(crate) fn global_on() -> u8 {
    GLOBAL_ON.load(Ordering::Relaxed)
}

/// Whether a switch must record a trace event.
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline]
pub(crate) unsafe fn active(ts: *mut ThreadState) -> bool {
    // SAFETY: guaranteed by the caller; short reads.
    unsafe {
        // The hooks first: with none set (the common case) that is two
        // tests, and `in_trace` is not read.
        ((*ts).trace_hook().is_some() || global_on() != 0) && !(*ts).in_trace
    }
}

/// Fire the event `origin` → current greenlet through the thread's hook,
/// then the global one. A failing hook is removed and its error returned.
///
/// # Safety
/// `ts` is the calling thread's live state.
pub(crate) unsafe fn run_hooks(
    ts: *mut ThreadState,
    kind: Kind,
    origin: Arc<Record>,
) -> Result<(), GreenletError> {
    // SAFETY: guaranteed by the caller; no access spans a hook call.
    unsafe {
        if (*ts).in_trace {
            return Ok(());
        }
        let target = Record::new_handle((*ts).current_arc());
        let origin = Record::new_handle(origin);
        let event = match kind {
            Kind::Switch => TraceEvent::Switch { origin, target },
            Kind::Throw => TraceEvent::Throw { origin, target },
        };
        (*ts).in_trace = true;
        let mut result = Ok(());
        if let Some(hook) = (*ts).trace_hook().cloned() {
            if let Err(err) = call(&*hook, &event) {
                let same = (*ts).trace_hook().is_some_and(|h| Rc::ptr_eq(h, &hook));
                if same {
                    drop((*ts).replace_trace_hook(None));
                }
                result = Err(err);
            }
        }
        if result.is_ok() && GLOBAL_ON.load(Ordering::Acquire) != 0 {
            let global = GLOBAL_HOOK.lock().clone();
            if let Some(hook) = global {
                if let Err(err) = call(&*hook, &event) {
                    let removed = {
                        let mut slot = GLOBAL_HOOK.lock();
                        if slot.as_ref().is_some_and(|h| Arc::ptr_eq(h, &hook)) {
                            GLOBAL_ON.store(0, Ordering::Release);
                            slot.take()
                        } else {
                            None
                        }
                    };
                    drop(removed);
                    result = Err(err);
                }
            }
        }
        (*ts).in_trace = false;
        drop(event);
        result
    }
}

fn call(
    hook: &dyn Fn(&TraceEvent) -> Result<(), GreenletError>,
    event: &TraceEvent,
) -> Result<(), GreenletError> {
    match catch_unwind(AssertUnwindSafe(|| hook(event))) {
        Ok(result) => result,
        Err(panic) => Err(GreenletError::from(ErrorKind::Panic {
            greenlet: format!("{}'s trace hook", event.target().record.label()),
            message: panic_message(&*panic),
        })),
    }
}
