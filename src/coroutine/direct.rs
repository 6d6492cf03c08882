//! The hub's lean switch path: a scheduler running on its thread's main
//! greenlet starts a greenlet ([`start`]) or resumes one ([`resume`]), and
//! that greenlet hands control back to main or straight to a sibling
//! ([`park`], [`sibling_of`], [`observed`]), with nothing crossing the
//! switch: no `Value`, no `Result`, the slot left empty.
//!
//! Also, for the watchdog's stacks of a stalled worker's green threads:
//! where a started greenlet's coroutine state lies ([`stack_top`]) and the
//! registers its saved context goes on with ([`saved_registers`]).
//!
//! Owns those functions, [`Resumed`], [`Sibling`] and [`ThreadToken`].
//! Uses the switch protocol's pieces (`prepare`, `resume`, the dispatcher
//! loop, settling) and the thread state; `pub(crate)` only, for
//! [`crate::hub`].
//!
//! Each side takes the fast path only when it is exactly a plain switch of
//! the full protocol with a unit value: the target (main for a park) belongs
//! to the calling thread (checked: the target's thread link against the
//! thread state's, main's record against the state's; a sibling's is the
//! caller's promise, see [`sibling_of`]), is not the running
//! greenlet, no trace hook is set (thread or global), no greenlet is
//! being force-unwound and no kill was mailed by another thread (the full
//! protocol runs those before it switches); a resume's target is started
//! and not dead, a start's has never run, was not killed, has main as its live parent and
//! gets its stack. Anything else goes through the public
//! [`Greenlet::switch`], unchanged: trace hooks see the hub's switches while
//! one is set, a dead target, a wrong thread, a stack that cannot be mapped
//! or a forced unwind behave as they always did.
//!
//! The two sides mix freely with the full protocol. What a context finds
//! when it gets control back tells it how it was entered: an empty slot and
//! no pending work is a plain switch (the fast case); a full slot
//! (a throw such as a hub's cancellation, a kill, a greenlet's end, any
//! switch by the full path) or pending work is settled as the full
//! protocol's receiver does, and its payload returned. A greenlet started
//! here finds its slot empty, which its `root` takes as the unit value a
//! `switch(())` would have brought.

use std::ptr;
use std::sync::Arc;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
use super::arch;
use super::error::GreenletError;
use super::handle::Greenlet;
use super::record::Record;
use super::switch;
use super::thread_state::{self, ThreadState};
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
    // SAFETY: `ts` is this thread's live state (short reads). `plain_from_main`
    // makes `g` one of its greenlets with main current, so `g` is not
    // current, and `is_active` a started, live one, kept alive by the
    // registry (and by `g`): what `switch::resume_from_main` needs.
    unsafe {
        if !plain_from_main(ts, g) || !g.record.flags().is_active() {
            return Resumed::Full(g.switch(()));
        }
        switch::resume_from_main(ts, (*ts).main_ptr, Arc::as_ptr(&g.record));
        back_on_main(ts)
    }
}

/// Start `g` from the main greenlet (the hub starting a green thread) and
/// return when control comes back to main. The fast path needs `g` to be a
/// greenlet of this thread that never ran and was not killed, whose parent
/// is main (live: main is running), main to be running, no tracing or
/// forced unwind, and its stack to be mapped; otherwise this is
/// `g.switch(())`, which also reports a stack that cannot be mapped (trying
/// to map it again). Either way `g`'s body is called with the unit value.
#[inline]
pub(crate) fn start(g: &Greenlet) -> Resumed {
    let Some(ts) = thread_state::existing_state() else {
        return Resumed::Full(g.switch(()));
    };
    // SAFETY: `ts` is this thread's live state (short reads). As in
    // `resume`, `g` is one of its greenlets and not current; the owner
    // thread reads its parent (`live_parent_ptr`), and `prepare` gets an
    // alive (held by `g`), unstarted one. Prepared, it is what
    // `switch::resume_from_main` needs: the first resume runs its `root`.
    unsafe {
        let main = (*ts).main_ptr;
        if !plain_from_main(ts, g)
            || !g.record.flags().is_unstarted()
            || g.record.live_parent_ptr() != Some(main)
            || !switch::prepared(ts, &g.record)
        {
            return Resumed::Full(g.switch(()));
        }
        switch::resume_from_main(ts, main, Arc::as_ptr(&g.record));
        back_on_main(ts)
    }
}

/// Whether a switch from main into `g` is a plain one: `g` belongs to this
/// thread (its thread link is the state's), main is running, and no trace
/// hook is set, no greenlet force-unwound and no kill mailed.
///
/// # Safety
/// `ts` is this thread's live state.
#[inline(always)]
unsafe fn plain_from_main(ts: *mut ThreadState, g: &Greenlet) -> bool {
    // SAFETY: guaranteed by the caller; short reads.
    unsafe {
        ptr::eq(Arc::as_ptr(&g.record.thread), Arc::as_ptr(&(*ts).link))
            && (*ts).current == (*ts).main_ptr
            && !switch::needs_slow_path(ts)
    }
}

/// Main got control back from a lean resume or start: a plain park, or
/// what the full protocol brought (settled).
///
/// # Safety
/// `ts` is this thread's live state, and main is current.
#[inline(always)]
unsafe fn back_on_main(ts: *mut ThreadState) -> Resumed {
    // SAFETY: guaranteed by the caller.
    unsafe {
        if (*ts).slot.is_full() || switch::must_settle(ts) {
            return Resumed::Full(switch::take_and_settle(ts));
        }
        Resumed::Parked
    }
}

/// Hand control from the running greenlet to `main`, this thread's main
/// greenlet (a scheduler's, suspended in [`resume`] or in a switch), or
/// with `to` (checked by [`sibling_of`]) to that greenlet instead: main stays
/// suspended where it was, and the sibling's next park returns there. Returns when some context switches
/// back. `Err` is an error thrown in meanwhile (a kill, a hub's
/// cancellation); a value switched in is dropped. Without `to`, the fast
/// path needs `main` to be this thread's main greenlet, not running, and no
/// tracing or forced unwind; otherwise this is `main.switch(())`. One stack
/// switch either way, from one call site: straight to the sibling's stack
/// where the switch protocol can (`switch::suspend_to`), the sibling then
/// parking back to main's resume, else through the dispatcher.
///
/// # Safety
/// A `to` was made by [`sibling_of`] on this thread, and no greenlet switched,
/// started or ended since (so what it checked still holds), and the
/// target's record is still alive (its handle kept by the caller).
#[inline(always)]
pub(crate) unsafe fn park(main: &Greenlet, to: Option<Sibling>) -> Result<(), GreenletError> {
    let (ts, dest) = match to {
        Some(s) => (s.ts, s.to),
        None => {
            let Some(ts) = thread_state::existing_state() else {
                return park_in_full(main);
            };
            // SAFETY: `ts` is this thread's live state (short reads).
            let plain = unsafe {
                ptr::eq(Arc::as_ptr(&main.record), (*ts).main_ptr)
                    && (*ts).current != (*ts).main_ptr
                    && !switch::needs_slow_path(ts)
            };
            if !plain {
                return park_in_full(main);
            }
            (ts, Arc::as_ptr(&main.record))
        }
    };
    // SAFETY: `ts` is this thread's live state; its current greenlet is not
    // main (checked above, or by `sibling_of`), and `dest` is main (always
    // active, compared with the state's) or a started, live greenlet of
    // this thread other than the current one (`sibling_of`, whose checks hold
    // by the caller's guarantee): what `switch::suspend_to` needs.
    unsafe {
        switch::suspend_to(ts, (*ts).current, dest);
        if (*ts).slot.is_full() || switch::must_settle(ts) {
            return settle_park(ts);
        }
        Ok(())
    }
}

/// [`park`] through the full protocol (out of line, as every slow branch
/// of a park: the parking frame keeps no room for a `GreenletError`).
#[cold]
#[inline(never)]
fn park_in_full(main: &Greenlet) -> Result<(), GreenletError> {
    main.switch(()).map(drop)
}

/// A lean [`park`] came back with a full slot or work to settle: settled
/// as the full protocol's receiver does (out of line, see
/// [`park_in_full`]).
///
/// # Safety
/// `ts` is this thread's live state, and the parked greenlet is current.
#[cold]
#[inline(never)]
unsafe fn settle_park(ts: *mut ThreadState) -> Result<(), GreenletError> {
    // SAFETY: guaranteed by the caller.
    unsafe { switch::take_and_settle(ts) }.map(drop)
}

/// Whether switches on this thread are observed now (a trace hook is set,
/// on the thread or globally) or a greenlet is being force-unwound: the
/// lean paths are off then, and a scheduler that would let the running
/// greenlet go on without a switch switches anyway, so that hooks see it.
#[inline(always)]
pub(crate) fn observed() -> bool {
    match thread_state::existing_state() {
        // SAFETY: this thread's live state (short reads).
        Some(ts) => unsafe { switch::switches_observed(ts) },
        None => true,
    }
}

/// A greenlet to which the running one may hand control without main in
/// between ([`park`]): checked by [`sibling_of`].
#[derive(Debug)]
pub(crate) struct Sibling {
    ts: *mut ThreadState,
    to: *const Record,
}

/// This thread's greenlet state, taken once by a scheduler that lives as
/// long as its thread's greenlets run (a worker, on its own thread), for
/// [`sibling_of`]: a hand-off then reads no thread-local.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ThreadToken(ptr::NonNull<ThreadState>);

/// The calling thread's [`ThreadToken`], if its greenlet state exists (it
/// does once `getcurrent` returned on it, until the thread's teardown).
pub(crate) fn this_thread() -> Option<ThreadToken> {
    thread_state::existing_state()
        .and_then(ptr::NonNull::new)
        .map(ThreadToken)
}

/// `g`'s record, as an address for [`sibling_of`] (a scheduler keeps it
/// beside its own handle of `g`, so that a hand-off finds it in one load).
pub(crate) fn record_of(g: &Greenlet) -> *const () {
    Arc::as_ptr(&g.record).cast()
}

/// Whether the running greenlet (not main) may hand control straight to
/// the greenlet whose record is `record` (see [`record_of`]), as a plain
/// switch of the full protocol with a unit value would: it is a started,
/// live greenlet other than the running one, and no trace hook is set, no
/// greenlet force-unwound and no kill mailed. `None` when any of that fails
/// (the caller parks to main instead). `thread` saves the thread-local
/// read, the record the handle.
///
/// # Safety
/// `thread` was taken on the calling thread ([`this_thread`]), whose
/// teardown has not begun; `record` came from [`record_of`] of a greenlet
/// made on this thread (a greenlet never changes threads) that the caller
/// still holds a handle of.
#[inline(always)]
pub(crate) unsafe fn sibling_of(thread: ThreadToken, record: *const ()) -> Option<Sibling> {
    let ts = thread.0.as_ptr();
    let to: *const Record = record.cast();
    debug_assert!(ptr::eq(
        // SAFETY: as below (short reads).
        unsafe { Arc::as_ptr(&(*to).thread) },
        // SAFETY: as below (short reads).
        unsafe { Arc::as_ptr(&(*ts).link) },
    ));
    // SAFETY: `ts` is this thread's live state (short reads), and `to` a
    // record kept alive by the caller's handle (the caller's guarantee).
    let plain = unsafe {
        (*ts).current != (*ts).main_ptr
            && (*ts).current != to
            && (*to).flags().is_active()
            && !switch::needs_slow_path(ts)
    };
    plain.then_some(Sibling { ts, to })
}

/// The address of `g`'s coroutine state (its `Top`, in the top slot of its
/// stack, where its context is saved while it is suspended; its frames lie
/// below it), when `g` is started and not dead; `None` otherwise. It stays
/// put while `g` lives. A few instructions: called once per green thread.
///
/// # Safety
/// The caller runs on `g`'s owner thread (the thread that created it) and
/// holds no reference into `g`'s owner-only part.
#[inline]
pub(crate) unsafe fn stack_top(g: &Greenlet) -> Option<usize> {
    if !g.record.flags().is_active() {
        return None;
    }
    // SAFETY: guaranteed by the caller: this is the owner thread and no
    // other reference into the `Local` is held (a plain read of one field,
    // no user code, no switch).
    let top = unsafe { (*g.record.local()).top };
    (!top.is_null()).then_some(top as usize)
}

/// The registers `[pc, sp, rbp]` the suspended coroutine whose state is at
/// `top` (see [`stack_top`]) goes on with, each word read through `read`
/// (see `arch::saved_registers`); `None` where the backend does not say or
/// a read fails.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(crate) fn saved_registers(
    top: usize,
    read: impl FnMut(usize) -> Option<u64>,
) -> Option<[u64; 3]> {
    arch::saved_registers(top, read)
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};
    use std::rc::Rc;

    use super::*;
    use crate::coroutine::{getcurrent, settrace, ErrorKind, ThreadTraceHook, TraceEvent};

    /// [`super::park`] to `main`.
    fn park(main: &Greenlet) -> Result<(), GreenletError> {
        // SAFETY: no sibling, nothing to guarantee.
        unsafe { super::park(main, None) }
    }

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

    /// A trace hook that logs each event's target id, and its log.
    fn target_ids() -> (Rc<RefCell<Vec<u64>>>, ThreadTraceHook) {
        let seen: Rc<RefCell<Vec<u64>>> = Rc::default();
        let log = Rc::clone(&seen);
        let hook: ThreadTraceHook = Rc::new(move |event: &TraceEvent| {
            log.borrow_mut().push(event.target().id());
            Ok(())
        });
        (seen, hook)
    }

    #[test]
    fn trace_hooks_see_the_switches_while_one_is_set() {
        let (seen, hook) = target_ids();
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

    /// A greenlet that checks it was started with the unit value, sets
    /// `ran`, then parks through [`park`] once and returns 5.
    fn starter(ran: &Rc<Cell<bool>>) -> Greenlet {
        let main = getcurrent();
        let ran = Rc::clone(ran);
        Greenlet::new(move |value| {
            assert!(value.is::<()>(), "started with {}", value.type_name());
            ran.set(true);
            park(&main)?;
            Ok(Value::new(5usize))
        })
    }

    #[test]
    fn a_fast_start_parks_and_the_end_comes_back_in_full() {
        let ran = Rc::new(Cell::new(false));
        let g = starter(&ran);
        // Parked, not `Full`: the start and the park both took the lean path.
        assert!(matches!(start(&g), Resumed::Parked));
        assert!(ran.get() && g.is_started() && !g.is_dead());
        assert_eq!(value_of(resume(&g)), 5);
        assert!(g.is_dead());
        // Started once: a second start is the full path's switch to a dead
        // greenlet, whose unit value comes straight back to main.
        assert!(matches!(start(&g), Resumed::Full(Ok(_))));
    }

    #[test]
    fn a_greenlet_that_ends_in_its_first_run_returns_its_result_in_full() {
        let g = Greenlet::new(|value| Ok(Value::new(value.is::<()>())));
        match start(&g) {
            Resumed::Full(Ok(value)) => assert!(value.downcast::<bool>().expect("a bool")),
            other => panic!("expected the greenlet's result, got {other:?}"),
        }
        assert!(g.is_dead());
    }

    #[test]
    fn a_start_of_a_greenlet_whose_parent_is_not_main_takes_the_full_path() {
        let ran = Rc::new(Cell::new(false));
        let other = Greenlet::new(Ok);
        let main = getcurrent();
        let flag = Rc::clone(&ran);
        let g = Greenlet::builder()
            .parent(&other)
            .spawn(move |_| {
                flag.set(true);
                park(&main)?;
                Ok(Value::unit())
            })
            .expect("a greenlet");
        // The full path's switch returns the unit value the park left.
        assert!(matches!(start(&g), Resumed::Full(Ok(_))));
        assert!(ran.get());
        // Its end goes to its parent, `other`, which starts with it and
        // ends, its result going to main.
        assert!(matches!(resume(&g), Resumed::Full(Ok(_))));
        assert!(g.is_dead() && other.is_dead());
    }

    #[test]
    fn a_greenlet_killed_before_its_start_never_runs() {
        let ran = Rc::new(Cell::new(false));
        let g = starter(&ran);
        assert!(g.kill().is_ok());
        assert!(g.is_dead());
        // A switch to a dead greenlet: its unit value comes back to main.
        assert!(matches!(start(&g), Resumed::Full(Ok(_))));
        assert!(!ran.get(), "the body of a killed greenlet ran");
        assert!(!g.is_started());
    }

    #[test]
    fn trace_hooks_see_a_start_while_one_is_set() {
        let (seen, hook) = target_ids();
        let ran = Rc::new(Cell::new(false));
        let g = starter(&ran);
        let old = settrace(Some(hook));
        let started = start(&g);
        settrace(old);
        assert!(matches!(started, Resumed::Full(Ok(_))), "{started:?}");
        assert!(ran.get());
        // main -> g (its start), g -> main (its park).
        assert_eq!(*seen.borrow(), vec![g.id(), getcurrent().id()]);
        assert_eq!(value_of(resume(&g)), 5);
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
        for enter in [resume, start] {
            let entered = enter(&carried.0);
            assert!(
                matches!(
                    &entered,
                    Resumed::Full(Err(err)) if matches!(err.kind(), ErrorKind::WrongThread { .. })
                ),
                "{entered:?}"
            );
        }
        assert!(!carried.0.is_started());
        back_tx.send(carried).expect("the other thread");
        other.join().expect("the other thread");
    }
}
