//! The hub's lean switch path: a scheduler running on its thread's main
//! greenlet resumes a greenlet ([`resume`]), and that greenlet hands control
//! back to main ([`park`]), with nothing crossing the switch: no `Value`, no
//! `Result`, the slot left empty.
//!
//! Owns those two functions and [`Resumed`]. Uses the switch protocol's
//! pieces (`resume`, the dispatcher loop, settling) and the thread state;
//! `pub(crate)` only, for [`crate::hub`].
//!
//! Each side takes the fast path only when it is exactly a plain switch of
//! the full protocol with a unit value: the target (main for a park) belongs
//! to the calling thread (checked: the target's thread link against the
//! thread state's, main's record against the state's), is started and not
//! dead, is not the running greenlet, no trace hook is set (thread or
//! global) and no greenlet is being force-unwound. Anything else goes
//! through the public [`Greenlet::switch`], unchanged: trace hooks see the
//! hub's switches while one is set, a start, a dead target, a wrong thread
//! or a forced unwind behave as they always did.
//!
//! The two sides mix freely with the full protocol. What a context finds
//! when it gets control back tells it how it was entered: an empty slot and
//! no pending work or mail is a plain switch (the fast case); a full slot
//! (a throw such as a hub's cancellation, a kill, a greenlet's end, any
//! switch by the full path) or pending work is settled as the full
//! protocol's receiver does, and its payload returned.

use std::ptr;
use std::sync::Arc;

use super::error::GreenletError;
use super::handle::Greenlet;
use super::payload::Raised;
use super::switch;
use super::thread_state;
use super::value::Value;

/// How a [`resume`] came back to main.
#[derive(Debug)]
pub(crate) enum Resumed {
    /// The greenlet parked through [`park`] (or switched to main with a
    /// unit value that nobody needs to see): nothing came back.
    Parked,
    /// What the full protocol returned: the greenlet ended (its result), or
    /// switched to main through the public API, or the fast path did not
    /// apply and `Greenlet::switch` ran.
    Full(Result<Value, GreenletError>),
}

/// Resume `g` from the main greenlet and return when control comes back to
/// main. The fast path needs `g` to be a started, live greenlet of this
/// thread, main to be running, and no tracing or forced unwind; otherwise
/// this is `g.switch(())`.
#[inline]
pub(crate) fn resume(g: &Greenlet) -> Resumed {
    let Some(ts) = thread_state::existing_state() else {
        return Resumed::Full(g.switch(()));
    };
    let dest = Arc::as_ptr(&g.record);
    // SAFETY: `ts` is this thread's live state (short reads). The thread
    // check makes `dest` one of its greenlets, and `is_active` a started,
    // live one, kept alive by the registry (and by `g`); main is current, so
    // `dest` is not: what `switch::resume_from_main` needs.
    unsafe {
        let main = (*ts).main_ptr;
        if !ptr::eq(Arc::as_ptr(&g.record.thread), Arc::as_ptr(&(*ts).link))
            || (*ts).current != main
            || !g.record.flags().is_active()
            || switch::needs_slow_path(ts)
        {
            return Resumed::Full(g.switch(()));
        }
        switch::resume_from_main(ts, main, dest);
        if (*ts).slot.is_full() || switch::must_settle(ts) {
            return Resumed::Full(switch::take_and_settle(ts).map_err(Raised::into_error));
        }
        Resumed::Parked
    }
}

/// Hand control from the running greenlet to `main`, this thread's main
/// greenlet (a scheduler's, suspended in [`resume`] or in a switch), and
/// return when some context switches back. `Err` is an error thrown in
/// meanwhile (a kill, a hub's cancellation); a value switched in is
/// dropped. The fast path needs `main` to be this thread's main greenlet,
/// not running, and no tracing or forced unwind; otherwise this is
/// `main.switch(())`.
#[inline]
pub(crate) fn park(main: &Greenlet) -> Result<(), GreenletError> {
    let Some(ts) = thread_state::existing_state() else {
        return main.switch(()).map(drop);
    };
    // SAFETY: `ts` is this thread's live state (short reads); `main` is its
    // main greenlet (compared with the state's), which is always active, and
    // not current: what `switch::suspend_to_main` needs.
    unsafe {
        if !ptr::eq(Arc::as_ptr(&main.record), (*ts).main_ptr)
            || (*ts).current == (*ts).main_ptr
            || switch::needs_slow_path(ts)
        {
            return main.switch(()).map(drop);
        }
        switch::suspend_to_main(ts);
        if (*ts).slot.is_full() || switch::must_settle(ts) {
            return switch::take_and_settle(ts)
                .map(drop)
                .map_err(Raised::into_error);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;
    use crate::coroutine::{getcurrent, settrace, ThreadTraceHook, TraceEvent};

    /// A greenlet that parks through [`park`] `rounds` times, counting the
    /// parks that returned `Ok`, then returns the count.
    fn parker(rounds: usize) -> Greenlet {
        let main = getcurrent();
        Greenlet::new(move |_| {
            let mut ok = 0usize;
            for _ in 0..rounds {
                if park(&main).is_ok() {
                    ok += 1;
                }
            }
            Ok(Value::new(ok))
        })
    }

    fn value_of(resumed: Resumed) -> usize {
        match resumed {
            Resumed::Full(Ok(value)) => value.downcast::<usize>().expect("a usize"),
            other => panic!("expected the greenlet's result, got {other:?}"),
        }
    }

    #[test]
    fn fast_resume_and_park_round_trip_and_the_end_comes_back_in_full() {
        let g = parker(3);
        // The first resume starts it: the full path, whose switch returns
        // the empty slot's unit value.
        assert!(matches!(resume(&g), Resumed::Full(Ok(_))));
        assert!(g.is_started());
        assert!(matches!(resume(&g), Resumed::Parked));
        assert!(matches!(resume(&g), Resumed::Parked));
        assert_eq!(value_of(resume(&g)), 3);
        assert!(g.is_dead());
        // Dead: the full path, whose switch goes to the nearest live
        // ancestor (main, the caller): the unit value comes straight back.
        assert!(matches!(resume(&g), Resumed::Full(Ok(_))));
    }

    #[test]
    fn a_throw_reaches_a_greenlet_parked_on_the_fast_path() {
        let g = parker(2);
        assert!(matches!(resume(&g), Resumed::Full(Ok(_))));
        // The first park returns the error (not counted); the second is
        // resumed on the fast path (counted), then the body ends.
        assert!(g.throw(GreenletError::user("cancelled")).is_ok());
        assert!(!g.is_dead());
        assert_eq!(value_of(resume(&g)), 1);
    }

    #[test]
    fn a_value_switched_to_main_by_the_full_path_comes_back_in_full() {
        let main = getcurrent();
        let g = Greenlet::new(move |_| {
            main.switch(7usize)?;
            Ok(Value::unit())
        });
        assert_eq!(value_of(resume(&g)), 7);
        assert!(matches!(resume(&g), Resumed::Full(Ok(_))));
        assert!(g.is_dead());
    }

    #[test]
    fn trace_hooks_see_the_switches_while_one_is_set() {
        // The target's id per event.
        let seen: Rc<RefCell<Vec<u64>>> = Rc::default();
        let log = Rc::clone(&seen);
        let hook: ThreadTraceHook = Rc::new(move |event: &TraceEvent| {
            log.borrow_mut().push(event.target().id());
            Ok(())
        });
        let g = parker(2);
        assert!(matches!(resume(&g), Resumed::Full(Ok(_))));
        let old = settrace(Some(hook));
        let resumed = resume(&g);
        settrace(old);
        // The full path: its switch returns the empty slot's unit value.
        assert!(matches!(resumed, Resumed::Full(Ok(_))));
        // main -> g (its park returning), g -> main (its next park).
        assert_eq!(*seen.borrow(), vec![g.id(), getcurrent().id()]);
        assert_eq!(value_of(resume(&g)), 2);
        assert_eq!(seen.borrow().len(), 2, "no events once the hook is gone");
    }

    /// Greenlets are not `Send`: a handle crosses to the test thread
    /// wrapped, to attempt a resume there, and comes back to be dropped.
    struct Carry(Greenlet);
    // SAFETY: the receiving thread only reads the record's thread link and
    // flags (both thread-safe) through `resume`, which refuses it, and sends
    // the handle back to its own thread, which drops it.
    unsafe impl Send for Carry {}

    #[test]
    fn a_greenlet_of_another_thread_is_refused() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (back_tx, back_rx) = std::sync::mpsc::channel::<Carry>();
        let other = std::thread::spawn(move || {
            let g = parker(1);
            tx.send(Carry(g.clone())).expect("the test thread");
            drop(back_rx.recv().expect("the test thread"));
            drop(g);
        });
        let carried = rx.recv().expect("the other thread");
        let resumed = resume(&carried.0);
        assert!(
            matches!(
                resumed,
                Resumed::Full(Err(GreenletError::WrongThread { .. }))
            ),
            "{resumed:?}"
        );
        assert!(!carried.0.is_started());
        back_tx.send(carried).expect("the other thread");
        other.join().expect("the other thread");
    }
}
