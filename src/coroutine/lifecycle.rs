//! The lifecycle of a greenlet after its creation: kill, kill on drop
//! (the last handle going), the deferred work that finalizes or kills
//! greenlets whose last handle went while that was not possible (or on
//! another thread), and the forced unwind at thread exit.
//!
//! Owns those policies. Uses the thread state's registry, records, and the
//! switch protocol ([`switch::transfer`]: a kill is a throw of
//! `GreenletExit` whose result comes back to the killer). The thread
//! state's pending work (run when a context gets control) calls
//! [`do_deferred_work`].
//! Problems that are nobody's error (a greenlet that refuses to die, a
//! panicking destructor) are reported through [`crate::diag`].

use std::mem;
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::error::{ErrorKind, GreenletError};
use super::fiber::Fiber;
use super::payload::{Kind, Payload};
use super::record::Greenlet;
use super::record::{drop_quietly, Record};
use super::switch;
use super::thread_state::{self, owner_state, ThreadState, Upcalls};
use crate::diag::{diag_warn, Field};

/// Kill `record` with control coming back here (`Greenlet::kill`).
///
/// # Safety
/// `ts` is the calling thread's live state and owns `record`.
pub(crate) unsafe fn kill(ts: *mut ThreadState, record: &Arc<Record>) -> Result<(), GreenletError> {
    // SAFETY: guaranteed by the caller; short accesses.
    unsafe {
        let flags = record.flags();
        if flags.is_dead() {
            return Ok(());
        }
        if flags.is_main() {
            return switch::transfer(ts, record, Err(GreenletError::exit()), Kind::Throw).map(drop);
        }
        if !flags.is_started() {
            switch::kill_unstarted(ts, record);
            return Ok(());
        }
        if Arc::as_ptr(record) == (*ts).current {
            // Killing yourself: the exit is raised right here, as a throw
            // into the current greenlet (a trace event names it twice).
            return switch::transfer(ts, record, Err(GreenletError::exit()), Kind::Throw).map(drop);
        }
        let result = throw_exit_from_killer(ts, record);
        if record.flags().is_dead() {
            return result.map(drop);
        }
        match result {
            // Raised in the caller while `record` was away (it switched
            // elsewhere, and someone threw into or killed the caller): the
            // caller's own error, as at any pending switch.
            Err(err) => Err(err),
            Ok(_) => Err(GreenletError::from(ErrorKind::KillIgnored {
                greenlet: record.label(),
            })),
        }
    }
}

/// Throw `GreenletExit` into `record`, a started, live greenlet of this
/// thread other than the current one and main, with the current greenlet
/// (the killer) receiving what comes back; returns that. The victim's own
/// end (a value, or its error) when it died; else what was switched or
/// raised into the killer meanwhile.
///
/// # Safety
/// `ts` is the calling thread's live state and owns `record`.
#[inline(always)]
unsafe fn throw_exit_from_killer(ts: *mut ThreadState, record: &Arc<Record>) -> Payload {
    // SAFETY: guaranteed by the caller; short accesses.
    unsafe {
        let killer = (*ts).current_arc();
        if !killer.flags().is_main() && is_ancestor_of(record, &killer) {
            // No counterpart in greenlet, which never kills an ancestor of
            // the running greenlet (the child holds it). Making the killer
            // its parent would close a loop in the parent chain, so the
            // result comes back to the killer past the parent chain.
            (*record.local()).return_to = Some(killer);
            let result = switch::transfer(ts, record, Err(GreenletError::exit()), Kind::Throw);
            drop((*record.local()).return_to.take());
            result
        } else {
            // greenlet's `ParentIsCurrentGuard` in
            // `UserGreenlet::throw_GreenletExit_during_dealloc`: the killer
            // is the victim's parent for the throw (inside, `parent()` is
            // the killer and its result goes there), then the old parent is
            // back.
            let old = record.replace_parent(Record::new_handle(killer));
            let result = switch::transfer(ts, record, Err(GreenletError::exit()), Kind::Throw);
            restore_parent(record, old);
            result
        }
    }
}

/// Whether `record` is `of` or one of its ancestors.
fn is_ancestor_of(record: &Arc<Record>, of: &Arc<Record>) -> bool {
    let mut ancestor = Some(Arc::clone(of));
    while let Some(a) = ancestor {
        if Arc::ptr_eq(&a, record) {
            return true;
        }
        ancestor = a.parent_record();
    }
    false
}

/// After a kill: `old` is the victim's parent again, as in greenlet, where
/// the guard puts it back whatever the victim did meanwhile; unless `old`
/// descends from the victim by now (re-parented during the kill), which
/// would close a loop in the parent chain: then the killer stays its parent.
fn restore_parent(record: &Arc<Record>, old: Option<Greenlet>) {
    let Some(old) = old else { return };
    if !old.is_main() && is_ancestor_of(record, &old.record) {
        drop(old);
        return;
    }
    // The killer's handle (or the victim's own choice) goes after the lock:
    // dropping it may kill a greenlet.
    drop(record.replace_parent(old));
}

/// `Greenlet::kill` from the API.
pub(crate) fn kill_from_api(
    record: &Arc<Record>,
    upcalls: &'static Upcalls,
) -> Result<(), GreenletError> {
    let ts = thread_state::check_owner(record, upcalls)?;
    // SAFETY: `ts` is this thread's live state and owns `record`.
    unsafe {
        thread_state::check_mail(ts);
        kill(ts, record)
    }
}

/// Drop a handle that was the only one a moment ago. On the greenlet's own
/// thread it still is, and the count is cleared without an atomic
/// read-modify-write: other threads make handles only by cloning handles
/// they can reach (every handle made from an internal reference is made on
/// the owner thread: `getcurrent`, `spawn_in`, trace events), and there is
/// no other handle to clone. A clone made on another thread from a handle
/// this thread now owns (one shared through a lock, such as a child's
/// `parent` field, which [`Greenlet::parent`] clones under the field's lock)
/// happened before this thread took the handle over, so the `Acquire` load
/// of the caller already counts it. A weak handle may upgrade on any thread,
/// so while one exists the count is decremented (an upgrade made since, which
/// needs a handle to exist, then keeps the greenlet). Elsewhere, another
/// handle may have been made since, so the count is decremented too.
///
/// The common case (a greenlet that simply finished, dropped on its own
/// thread, whose record goes to the spare list as it is: see
/// `ThreadState::recycle_finished`) calls nothing, so this function saves
/// one register, not five, and spills nothing; everything else goes on in
/// [`drop_only_handle_owned`] or [`drop_only_handle_elsewhere`].
#[inline(never)]
pub(crate) fn drop_only_handle(record: Arc<Record>) {
    match owner_state(&record) {
        Some(ts) => {
            // SAFETY: `ts` is this thread's live state and owns `record`.
            if let Some(record) = unsafe { ThreadState::recycle_finished(ts, record) } {
                // SAFETY: as above.
                unsafe { drop_only_handle_owned(ts, record) };
            }
        }
        None => drop_only_handle_elsewhere(record),
    }
}

/// [`drop_only_handle`] on the owner thread, past its common case.
///
/// # Safety
/// `ts` is the calling thread's live state, which owns `record`.
#[inline(never)]
unsafe fn drop_only_handle_owned(ts: *mut ThreadState, record: Arc<Record>) {
    if Arc::weak_count(&record) == 0 {
        record.clear_only_handle();
    } else if !record.release_handle() {
        return;
    }
    // SAFETY: guaranteed by the caller.
    unsafe {
        owner_last_handle_gone(ts, &record);
        ThreadState::recycle(ts, record);
    }
}

/// [`drop_only_handle`] on another thread than the owner's.
#[inline(never)]
fn drop_only_handle_elsewhere(record: Arc<Record>) {
    if record.release_handle() {
        last_handle_gone(&record);
    }
}

/// [`last_handle_gone`] on the owner thread, with the common case
/// first: a dead greenlet (not the current one, which `finish` may still
/// be leaving, nor a leaked one, nor one whose kill on drop is still to
/// report how it went) is only finalized;
/// [`ThreadState::recycle`](super::thread_state::ThreadState::recycle) then keeps
/// or unregisters it.
///
/// # Safety
/// `ts` is the calling thread's live state, which owns `record`.
#[inline]
unsafe fn owner_last_handle_gone(ts: *mut ThreadState, record: &Arc<Record>) {
    // SAFETY: guaranteed by the caller; short reads.
    unsafe {
        let current = std::ptr::eq(Arc::as_ptr(record), (*ts).current);
        let flags = record.flags();
        if flags.is_simply_finished() && !current {
            let registered = (*record.local()).key != usize::MAX;
            Record::finalize_unreachable(record, 1 + usize::from(registered));
        } else {
            last_handle_gone(record);
        }
    }
}

/// The last handle of `record` went: kill or finalize it, then keep the
/// record for reuse if this was its last reference.
#[inline(never)]
pub(crate) fn last_handle_dropped(record: Arc<Record>) {
    last_handle_gone(&record);
    if let Some(ts) = owner_state(&record) {
        // SAFETY: `ts` is this thread's live state and owns `record`.
        unsafe { ThreadState::recycle(ts, record) };
    }
}

/// The last handle of `record` was dropped (on any thread).
fn last_handle_gone(record: &Arc<Record>) {
    let flags = record.flags();
    if flags.is_main() {
        // Main greenlets are finalized when their thread exits.
        return;
    }
    if let Some(ts) = owner_state(record) {
        // SAFETY: `ts` is this thread's live state and owns `record`.
        unsafe {
            if Arc::as_ptr(record) == (*ts).current {
                // Running: killed once it switches away.
                (*ts).deferred.push(Arc::clone(record));
                (*ts).work = true;
            } else {
                finalize_or_kill(ts, record);
            }
        }
        return;
    }
    if flags.is_dead() {
        record.finalize();
        // Its thread's registry may still hold it (see `Record`): the owner
        // releases it. It no longer counts as live from now on.
        record.uncount();
        if let Err(record) = record.thread.post(Arc::clone(record)) {
            // Its thread exited, and released it.
            record.recount();
        }
    } else if let Err(record) = record.thread.post(Arc::clone(record)) {
        // Its thread exited, and unwound it: only the finalizers are left.
        record.finalize();
    }
}

/// Deal with a greenlet of this thread that has no handle left. The caller
/// drops (or recycles) `record` afterwards and makes no handle from it.
///
/// # Safety
/// `ts` is the calling thread's live state and owns `record`, which is not
/// the current greenlet.
unsafe fn finalize_or_kill(ts: *mut ThreadState, record: &Arc<Record>) {
    if record.handles() > 0 {
        // A handle was made again meanwhile: it is live again.
        record.recount();
        return;
    }
    let flags = record.flags();
    // One being killed on drop already is left to that kill, which
    // finalizes it once it is back (a handle made and dropped again
    // meanwhile: `getcurrent` in the victim, or a trace event naming it as
    // the origin of its switch back; a second kill from inside the first
    // would fire another event, and so on without bound). A leaked greenlet
    // is left alone while it lives; one that finished since (its killer or
    // a child resumed it) is finalized like any other.
    if flags.is_main() || flags.is_killing() || (flags.is_leaked() && !flags.is_dead()) {
        return;
    }
    if !flags.is_dead() {
        if !flags.is_started() {
            // SAFETY: guaranteed by the caller.
            unsafe { switch::kill_unstarted(ts, record) };
        } else {
            // SAFETY: guaranteed by the caller; short reads.
            if unsafe { (*ts).current_is_unwinding() } {
                // Dropped by a destructor of a greenlet being force-unwound,
                // which cannot switch: the thread's exit unwinds it later.
                record.mark_leaked();
                report_unkillable_now(record);
                return;
            }
            // greenlet's `_green_dealloc_kill_started_non_main_greenlet`.
            record.set_killing(true);
            // SAFETY: guaranteed by the caller: `record` is started, live,
            // not main (checked above) and not current.
            let result = unsafe { throw_exit_from_killer(ts, record) };
            record.set_killing(false);
            let dead = record.flags().is_dead();
            // The victim's own error (a `KillIgnored` from a kill it made
            // itself included), or one raised into the dropper: nobody's to
            // catch, as greenlet's `PyErr_WriteUnraisable(victim)`. A victim
            // that survived without raising anything is reported below.
            if let Err(err) = result {
                report_kill_error(record, &err, dead);
            }
            if !dead {
                if record.handles() > 0 {
                    // Reachable again (a child made meanwhile holds it, as
                    // greenlet sees a resurrected object): alive as any
                    // other, killed again when its new handles go.
                    record.recount();
                    return;
                }
                record.mark_leaked();
                report_kill_ignored(record);
                return;
            }
        }
    }
    if record.handles() == 0 {
        // SAFETY: guaranteed by the caller.
        let registered = unsafe { ThreadState::unregister(ts, record) };
        // The callers drop `record` afterwards.
        Record::finalize_unreachable(record, 1 + usize::from(registered.is_some()));
    }
}

/// Report the error a kill on drop ended with: the victim's own (`dead`),
/// or one raised into the dropper while the victim was away.
#[cold]
#[inline(never)]
fn report_kill_error(record: &Record, err: &GreenletError, dead: bool) {
    let label = record.label();
    let error = err.to_string();
    let fields = [
        Field("event", &"kill-error"),
        Field("greenlet", &record.name()),
        Field("id", &record.id()),
        Field("error", &error),
    ];
    if dead {
        diag_warn!(kv: fields; "greenlet: {label} ended with an error while being killed: {error}");
    } else {
        diag_warn!(
            kv: fields;
            "greenlet: {label}, being killed because its last handle was dropped, raised an error \
             into the greenlet that dropped it: {error}"
        );
    }
}

/// Warn that a greenlet survived the kill of its last handle's drop.
#[cold]
#[inline(never)]
fn report_kill_ignored(record: &Record) {
    diag_warn!(
        kv: [
            Field("event", &"did-not-kill"),
            Field("greenlet", &record.name()),
            Field("id", &record.id()),
        ];
        "greenlet: GreenletExit did not kill {} (its last handle was dropped): it caught the exit \
         and switched away; leaking it until its thread exits",
        record.label()
    );
}

/// Warn that a dropped greenlet cannot be killed now: its last handle went
/// in a destructor run by the forced unwind of another greenlet, which
/// cannot switch.
#[cold]
#[inline(never)]
fn report_unkillable_now(record: &Record) {
    diag_warn!(
        "greenlet: cannot kill {} now (its last handle was dropped by a greenlet being \
         force-unwound, which cannot switch); leaking it until its thread exits unwinds it",
        record.label()
    );
}

/// [`do_pending_work`](thread_state::do_pending_work) when there is a record to release, deferred work or
/// mail.
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline(never)]
pub(crate) unsafe fn do_deferred_work(ts: *mut ThreadState) {
    // SAFETY: the caller's `ts` is live; each access is short, none spans
    // the user code run by `finalize_or_kill`.
    unsafe {
        drop((*ts).retiring.take());
        let mailed = ThreadState::link(ts).has_mail(Ordering::Acquire);
        if !mailed && (*ts).deferred.is_empty() {
            (*ts).work = (*ts).retiring.is_some() || (*ts).trace_pending.is_some();
            return;
        }
        if mailed {
            let mail = ThreadState::link(ts).take_mail();
            (*ts).deferred.extend(mail);
        }
        let mut kept = Vec::new();
        loop {
            let batch = mem::take(&mut (*ts).deferred);
            if batch.is_empty() {
                break;
            }
            for record in batch {
                if Arc::as_ptr(&record) == (*ts).current {
                    kept.push(record);
                } else {
                    finalize_or_kill(ts, &record);
                }
            }
        }
        (*ts).deferred = kept;
        (*ts).work =
            (*ts).retiring.is_some() || (*ts).trace_pending.is_some() || !(*ts).deferred.is_empty();
    }
}

/// Last resort at thread exit: unwind `record`'s stack by force
/// ([`Fiber::force_unwind`]: its destructors run), then retire it.
///
/// The greenlet the caller runs in is left as it is, marked leaked: thread
/// exit runs in a greenlet when that greenlet called `exit()`, which runs
/// the thread's thread-local destructors (the teardown) on its stack.
///
/// # Safety
/// `ts` is the calling thread's live state, the caller runs in the current
/// greenlet (main, or the greenlet that called `exit()`), and `record`
/// belongs to this thread.
pub(crate) unsafe fn force_unwind(ts: *mut ThreadState, record: &Arc<Record>) {
    // SAFETY: guaranteed by the caller; `co` is borrowed only for the unwind.
    unsafe {
        let flags = record.flags();
        if flags.is_dead() {
            return;
        }
        if Arc::as_ptr(record) == (*ts).current {
            // We run on its stack. A coroutine cannot be unwound from inside
            // (the unwind resumes it, and it is running), and releasing its stack
            // here would hand the pool (or munmap) the memory under our own
            // frames. It is never resumed: its coroutine and stack are
            // leaked with its record (`Drop for Record` forgets them).
            record.mark_leaked();
            return;
        }
        let local = record.local();
        if !flags.is_started() || (*local).fiber.is_none() {
            switch::kill_unstarted(ts, record);
            return;
        }
        let previous = (*ts).current;
        (*ts).current = Arc::as_ptr(record);
        (*ts).set_unwinding(Arc::as_ptr(record));
        if let Some(fiber) = (*local).fiber.as_mut() {
            // What makes its receive settle, and the settle unwind (left
            // set: a settle with nothing to do costs the next receive only).
            (*ts).work = true;
            // Parked when this returns (see `Fiber::force_unwind`): its
            // body's frames are unwound, or its code caught the unwind and
            // finished. While it runs, it is `current`, which is how the
            // overflow handler finds its stack.
            let fiber: *mut Fiber = fiber;
            (*fiber).force_unwind();
        }
        (*ts).current = previous;
        (*ts).set_unwinding(ptr::null());
        // If its code caught the unwind and finished, `finish` left these.
        drop((*ts).slot.take());
        drop((*ts).trace_pending.take());
        record.mark_dead();
        // Still there if it was unwound before its body took it: a greenlet
        // suspended while its start settled the pending work (kills, trace
        // hooks), before `root` called the closure.
        let run = (*local).run.take();
        // Parked: dropped, its coroutine is forgotten and its stack pooled.
        drop((*local).fiber.take());
        drop(ThreadState::unregister(ts, record));
        // User code (the closure's captures), run with no borrow held; never
        // called, the closure is whole (`call_in_place` takes it out first).
        drop_quietly(run, record);
        thread_state::do_pending_work(ts);
    }
}
