//! The capture of a suspended green thread's stack, both sides of it:
//! [`capture_here`] runs on a capturing green thread and throws a
//! [`CaptureRequest`] into each other started green thread of its worker;
//! [`answer_throw`], on the slow path of that green thread's park, takes
//! its backtrace and switches straight back, staying in its park (see
//! `stacks` for the whole dump).
//!
//! Owns: the request, the worker's capture slot (a thread-local: the
//! capturer and the backtrace left for it). Uses the coroutine API
//! (`throw`, `switch`) and the worker's `live` table.

use std::backtrace::Backtrace;
use std::cell::RefCell;
use std::fmt;

use crate::coroutine::{getcurrent, ErrorKind, Greenlet, GreenletError};

use super::worker;

/// The error thrown into a parked green thread to ask for its stack.
#[derive(Debug)]
pub(crate) struct CaptureRequest;

impl fmt::Display for CaptureRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the hub asks for this green thread's stack (a dump is under way)")
    }
}

impl std::error::Error for CaptureRequest {}

thread_local! {
    /// The capturing greenlet of this worker while it captures, and the
    /// backtrace the last green thread asked left for it.
    static CAPTURE: RefCell<(Option<Greenlet>, Option<Backtrace>)> =
        const { RefCell::new((None, None)) };
}

fn is_capture(e: &GreenletError) -> bool {
    matches!(e.kind(), ErrorKind::User(inner) if inner.is::<CaptureRequest>())
}

/// A park of this worker's green thread came back with a thrown error
/// (`Err(thrown)`): while that is a capture request, leave this stack's
/// backtrace for the capturer and switch back to it, suspended again in
/// the park. `Ok` once a real resume ended the park, `Err` when a
/// cancellation did (the caller raises it).
#[cold]
#[inline(never)]
pub(crate) fn answer_throw(mut thrown: GreenletError) -> Result<(), ()> {
    loop {
        if !is_capture(&thrown) {
            return Err(());
        }
        let capturer = CAPTURE.with(|c| {
            let mut c = c.borrow_mut();
            c.1 = Some(Backtrace::force_capture());
            c.0.clone()
        });
        let Some(capturer) = capturer else {
            // No capturer: nobody to go back to but the park's caller.
            return Ok(());
        };
        match capturer.switch(()) {
            Ok(_) => return Ok(()),
            Err(e) => thrown = e,
        }
    }
}

/// Run on a capturing green thread: the backtrace of every other started,
/// suspended green thread of this worker, by id.
pub(crate) fn capture_here() -> Vec<(u64, Backtrace)> {
    let Some(suspended) = worker::with_current(|w| w.map(|w| w.suspended_greenlets())) else {
        return Vec::new();
    };
    CAPTURE.with(|c| c.borrow_mut().0 = Some(getcurrent()));
    let mut out = Vec::with_capacity(suspended.len());
    for (task, g) in suspended {
        if g.is_dead() || !g.is_started() {
            continue;
        }
        // The request comes back as `Ok` once the green thread switched
        // back from its park; anything else means it was not in a park
        // (nothing captured).
        if g.throw(GreenletError::user(CaptureRequest)).is_ok() {
            if let Some(bt) = CAPTURE.with(|c| c.borrow_mut().1.take()) {
                out.push((task.id, bt));
            }
        }
    }
    CAPTURE.with(|c| *c.borrow_mut() = (None, None));
    out
}
