//! The switch protocol: symmetric switching on top of corosensei's
//! asymmetric coroutines, and the parent chain a value or error follows.
//!
//! Owns the transfer of a payload from the current greenlet to another one.
//! The thread's native stack runs a loop ([`dispatch_loop`]) that alone
//! resumes greenlets: main -> greenlet is one stack switch, greenlet ->
//! greenlet is two (suspend to the loop, resume the other), and greenlet
//! stacks never nest. One machine word crosses a stack switch (the address
//! of the next greenlet's record, main's included); the payload travels through the
//! thread state's [`Slot`](super::payload::Slot). Every greenlet's body runs
//! under [`root`], which catches panics and hands the result up the parent
//! chain ([`finish`]).
//!
//! User code never runs inside the loop itself: it runs either in a
//! greenlet or in the main greenlet after the loop returned, so a context
//! that gets control back first settles the pending work (trace events,
//! released records, kills) with [`take_and_settle`].
//!
//! Uses the thread state, records, the stack pool, tracing, and the
//! lifecycle: settling runs the deferred kills, and a greenlet that must die
//! unstarted is killed there. The lifecycle calls back into [`transfer`]
//! (a kill is a throw): this is the one pair of files that call each other.

use std::mem;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use corosensei::{CoroutineResult, Yielder};

use super::error::{panic_message, GreenletError};
use super::lifecycle;
use super::payload::{exit_value, Kind, Payload, Raised};
use super::record::{Co, Flags, Record, StackRef};
use super::run::Run;
use super::stack::{self, PooledStack};
use super::thread_state::{self, ThreadState};
use super::trace;
use super::value::Value;

/// `switch` / `throw` from the API.
#[inline(always)]
pub(crate) fn send(
    target: &Arc<Record>,
    payload: Payload,
    kind: Kind,
) -> Result<Value, GreenletError> {
    let ts = thread_state::check_owner(target)?;
    // SAFETY: `ts` is this thread's live state and `target` belongs to it;
    // the mailed kills are run by whichever context receives control next
    // (`take_and_settle`).
    let result = unsafe { transfer(ts, target, payload, kind) };
    result.map_err(Raised::into_error)
}

/// Where a transfer really goes.
enum Resolved {
    /// Resume (or start) this live greenlet with this payload.
    Go(*const Record, Payload),
    /// Nothing to switch to: this is the caller's result.
    Back(Payload),
}

/// Send `payload` to `target` from the current greenlet, and return what
/// comes back when some greenlet switches back to the current one.
///
/// The common case (a suspended target other than the current greenlet, no
/// tracing) costs a few loads and compares on top of the stack switch; pending
/// work and mail do not leave it, being settled by the receiving context
/// ([`take_and_settle`]). Everything else goes through [`transfer_slow`].
///
/// # Safety
/// `ts` is the calling thread's live state and `target` belongs to it.
#[inline(always)]
pub(crate) unsafe fn transfer(
    ts: *mut ThreadState,
    target: &Arc<Record>,
    payload: Payload,
    kind: Kind,
) -> Payload {
    let dest = Arc::as_ptr(target);
    // SAFETY: `ts` is live (caller); short reads. `dest` is a started, live
    // greenlet of this thread other than the current one, which is what
    // `jump` needs; the slot is empty outside a transfer (`Slot::put`). The
    // payload goes to the slot first, so that it is moved once.
    unsafe {
        (*ts).slot.put(payload);
        if target.flags().is_active() && dest != (*ts).current && !needs_slow_path(ts) {
            jump(ts, dest);
            return take_and_settle(ts);
        }
        transfer_slow(ts, target, kind)
    }
}

/// Whether a switch must take the slow path on the sending side: only
/// tracing, whose event needs the sender's identity, and a forced unwind at
/// thread exit, during which switches fail (see [`transfer_slow`]); both are
/// folded into one flag of the thread state. Pending work (a retiring
/// record, deferred kills, a trace event) and kills mailed by other threads
/// are settled by the receiving context ([`take_and_settle`]).
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline(always)]
pub(super) unsafe fn needs_slow_path(ts: *mut ThreadState) -> bool {
    // SAFETY: guaranteed by the caller; short reads.
    unsafe { (*ts).slow_switch() | trace::global_on() }
}

/// Everything but the common case of [`transfer`]: unstarted, dead or
/// current targets, and tracing. The payload is in the slot.
///
/// # Safety
/// As for [`transfer`].
#[inline(never)]
unsafe fn transfer_slow(ts: *mut ThreadState, target: &Arc<Record>, kind: Kind) -> Payload {
    // SAFETY: (whole function) `ts` is live; accesses are short; the record
    // pointers used are kept alive by the registry or the state's `main`.
    unsafe {
        if target.flags() == Flags::UNSTARTED
            && kind == Kind::Switch
            && !needs_slow_path(ts)
            && prepare(ts, target).is_ok()
        {
            // The start of a new greenlet with a value (the common case
            // here): nothing to walk, and no trace event or forced unwind
            // (`needs_slow_path`). Mail is settled by the receiver, as on
            // the fast path. A stack that cannot be mapped takes the
            // general path, which reports it.
            jump(ts, Arc::as_ptr(target));
            return take_and_settle(ts);
        }
        let payload = (*ts).slot.take();
        if (*ts).current_is_unwinding() {
            // A switch from a greenlet being force-unwound (a destructor run
            // by the unwind): it cannot suspend (corosensei would unwind the
            // suspended switch again, inside that destructor, and a panic in
            // a destructor during unwinding aborts). It fails instead.
            drop(payload);
            return Err(Raised::Exit);
        }
        lifecycle::check_mail(ts);
        let (dest, payload) = if target.flags().is_active() {
            (Arc::as_ptr(target), payload)
        } else {
            match resolve(ts, target, payload, kind == Kind::Throw) {
                Resolved::Go(dest, payload) => (dest, payload),
                Resolved::Back(result) => return result,
            }
        };
        if dest == (*ts).current {
            return switch_to_self(ts, payload);
        }
        if trace::active(ts) {
            (*ts).trace_pending = Some((Kind::of(&payload), (*ts).current_arc()));
            (*ts).work = true;
        }
        (*ts).slot.put(payload);
        jump(ts, dest);
        take_and_settle(ts)
    }
}

/// A switch to the running greenlet: the payload comes straight back (after
/// a trace event, as in greenlet).
#[cold]
unsafe fn switch_to_self(ts: *mut ThreadState, mut payload: Payload) -> Payload {
    // SAFETY: the caller's `ts` is live.
    unsafe {
        if trace::active(ts) {
            let me = (*ts).current_arc();
            if let Err(err) = trace::run_hooks(ts, Kind::of(&payload), me) {
                payload = Err(Raised::new(err));
            }
        }
    }
    payload
}

/// Walk from `target` to the greenlet that really receives `payload`:
/// skip dead ones, kill unstarted ones that would receive an error, and
/// prepare the coroutine of an unstarted one that will start. Only the
/// ancestors walked to are reference-counted (`target` is the caller's).
///
/// # Safety
/// `ts` is the calling thread's live state and `target` belongs to it.
unsafe fn resolve(
    ts: *mut ThreadState,
    target: &Arc<Record>,
    mut payload: Payload,
    throw: bool,
) -> Resolved {
    if throw && target.flags().is_dead() {
        // greenlet's `throw_greenlet`: into a dead greenlet, `GreenletExit`
        // becomes a regular return value (`g_handle_exit`), which then goes
        // to the nearest live ancestor like any switch to a dead greenlet.
        payload = exit_to_value(payload);
    }
    // Keeps the ancestor `t` points to alive once the walk left `target`.
    let mut held: Option<Arc<Record>> = None;
    let mut t: &Arc<Record> = target;
    loop {
        let flags = t.flags();
        if flags.is_dead() {
            match t.parent_record() {
                Some(parent) => t = held.insert(parent),
                None => return Resolved::Back(payload),
            }
            continue;
        }
        if !flags.is_started() {
            if payload.is_err() {
                // It dies without running; the error goes up its chain,
                // `GreenletExit` as the value it ended with (greenlet's
                // `g_initialstub` with an exception pending, then
                // `g_handle_exit`).
                // SAFETY: `t` is alive, hence in this thread's registry.
                unsafe { lifecycle::kill_unstarted(ts, t) };
                payload = exit_to_value(payload);
                continue;
            }
            // SAFETY: as above.
            if let Err(err) = unsafe { prepare(ts, t) } {
                payload = Err(Raised::new(err));
                continue;
            }
        }
        return Resolved::Go(Arc::as_ptr(t), payload);
    }
}

/// Give an unstarted greenlet its stack and coroutine. Inlined into its
/// callers (the start fast path of [`transfer_slow`], [`resolve`], and the
/// hub's lean start, `direct::start`): as a call it cost a second save of
/// every callee-saved register and a `Result` as wide as a `GreenletError`
/// written and tested through memory.
///
/// # Safety
/// `ts` is the calling thread's live state; `record` is one of its
/// greenlets, alive and unstarted.
#[inline(always)]
pub(super) unsafe fn prepare(
    ts: *mut ThreadState,
    record: &Arc<Record>,
) -> Result<(), GreenletError> {
    // SAFETY: owner thread (caller); short accesses to `local`.
    unsafe {
        let local = record.local();
        if (*local).co.is_some() {
            return Ok(());
        }
        let size = (*local).stack_size;
        let stack = match (*ts).kept_stack.take(size) {
            Some(stack) => stack,
            None => match stack::acquire(size) {
                Ok(stack) => stack,
                Err(source) => return Err(stack_error(record, size, source)),
            },
        };
        label_stack(&stack, record);
        let stack = StackRef::new((*local).stack.insert(stack));
        let record_ptr = Arc::as_ptr(record);
        let co = Co::with_stack(stack, move |yielder, _| root(ts, record_ptr, yielder));
        // Written over the `None` tested above (the pool ran no code of
        // this record's meanwhile): nothing to drop.
        ptr::write(ptr::addr_of_mut!((*local).co), Some(co));
        Ok(())
    }
}

/// The error of a greenlet whose stack of `size` bytes could not be mapped.
#[cold]
#[inline(never)]
fn stack_error(record: &Record, size: usize, source: std::io::Error) -> GreenletError {
    GreenletError::StackAllocation {
        greenlet: record.label(),
        size,
        source,
    }
}

/// Name the stack after its greenlet (`'name' (id N)`, as in messages),
/// without allocating or formatting: this runs at every start, and an
/// unnamed greenlet's label is only spelled out if its stack overflows.
fn label_stack(stack: &PooledStack, record: &Record) {
    match record.given_name() {
        Some(name) => stack.set_greenlet_label(name, record.id()),
        None => stack.set_default_greenlet_label(record.id()),
    }
}

/// Hand control to `dest` (a live, started or prepared greenlet, or main).
///
/// # Safety
/// `ts` is live and `dest` is not the current greenlet.
#[inline(always)]
unsafe fn jump(ts: *mut ThreadState, dest: *const Record) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        let current = (*ts).current;
        if current == (*ts).main_ptr {
            resume_from_main(ts, current, dest);
        } else {
            suspend_to(current, dest);
        }
    }
}

/// From main, resume `dest` and return once control is back on main (main
/// current again). The first resume is inline (a switch from main usually
/// comes straight back); the dispatcher's loop runs only if the greenlet
/// hands on.
///
/// # Safety
/// `ts` is live, main (`main`, the state's `main_ptr`) is the current
/// greenlet, and `dest` is a live, started or prepared greenlet of this
/// thread.
#[inline(always)]
pub(super) unsafe fn resume_from_main(
    ts: *mut ThreadState,
    main: *const Record,
    dest: *const Record,
) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        let word = resume(ts, dest);
        if word != main as usize {
            dispatch_loop(ts, word as *const Record);
        }
        (*ts).current = main;
    }
}

/// Suspend `current`, the current greenlet (not main), with `dest` as the
/// word for the dispatcher.
///
/// # Safety
/// `current` is the live state's current greenlet, not main, and `dest` is
/// not `current`.
#[inline(always)]
pub(super) unsafe fn suspend_to(current: *const Record, dest: *const Record) {
    // SAFETY: guaranteed by the caller; `current`'s yielder is set because a
    // non-main current greenlet is running inside its `root`.
    unsafe {
        let yielder = (*(*current).local()).yielder;
        (*yielder).suspend(dest as usize);
    }
}

/// Resume `next` on the main greenlet's stack until it hands control on;
/// returns the word it handed on (the next greenlet's record, main's
/// included).
///
/// # Safety
/// Runs on the main greenlet's stack; `next` is a live, started or prepared
/// greenlet of this thread, kept alive by the registry (or, once it
/// finished, by `retiring`); its `co` field is borrowed only for the resume,
/// while its code touches other fields.
#[inline(always)]
unsafe fn resume(ts: *mut ThreadState, next: *const Record) -> usize {
    // SAFETY: guaranteed by the caller.
    unsafe {
        (*ts).current = next;
        let local = (*next).local();
        let Some(co) = (*local).co.as_mut() else {
            return (*ts).main_ptr as usize;
        };
        // Marked for the overflow handler; left marked after the coroutine
        // suspends (one thread-local store fewer per switch): the handler
        // only reports faults inside the marked stack's guard, which code
        // on other stacks cannot touch, and a stack unmarks itself when it
        // is dropped, so a mark never outlives its mapping.
        stack::running((*local).stack.as_ref());
        let result = co.resume(0);
        match result {
            CoroutineResult::Yield(word) => word,
            CoroutineResult::Return(word) => {
                // Found again through `ts` (still `next`: nothing else
                // resumes greenlets meanwhile), so that `next` need not
                // stay in a register across the stack switch.
                release_finished(ts);
                word
            }
        }
    }
}

/// A greenlet's coroutine returned: drop it, and keep its stack for the
/// thread's next greenlet start (`ThreadState::kept_stack`) or give it back
/// to the pool (the record is kept by the registry while it has handles,
/// else by `retiring`).
///
/// # Safety
/// `ts` is the calling thread's live state, whose current greenlet's
/// coroutine just returned.
#[cold]
#[inline(never)]
unsafe fn release_finished(ts: *mut ThreadState) {
    // SAFETY: guaranteed by the caller; the coroutine is dropped before the
    // stack it ran on is kept or released.
    unsafe {
        let local = (*(*ts).current).local();
        let co = ptr::addr_of_mut!((*local).co);
        if (*co).as_ref().is_some_and(Co::done) {
            // A coroutine that returned holds nothing to release: its drop
            // only unwinds a suspended one, and its stack is a `StackRef`
            // (two plain words) to the record's own `stack`. Cleared
            // without a copy of it to drop.
            ptr::write(co, None);
        } else {
            drop((*co).take());
        }
        if let Some(stack) = (*local).stack.take() {
            (*ts).kept_stack.keep((*local).stack_size, stack);
        }
    }
}

/// The loop on the thread's native stack: resume greenlets until one hands
/// control to main (greenlet to greenlet switches pass through here).
///
/// # Safety
/// Runs on the main greenlet's stack, called by [`jump`] with the main
/// greenlet current (`jump` makes it current again afterwards); `next` is a
/// live, started or prepared greenlet of this thread.
#[inline(never)]
unsafe fn dispatch_loop(ts: *mut ThreadState, mut next: *const Record) {
    // SAFETY: as for `resume`, for every greenlet resumed.
    unsafe {
        let main = (*ts).main_ptr as usize;
        loop {
            let word = resume(ts, next);
            if word == main {
                break;
            }
            next = word as *const Record;
        }
    }
}

/// Take what the last transfer brought and do the pending work (trace
/// event, released records, deferred kills) in this, the receiving context.
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline(always)]
pub(super) unsafe fn take_and_settle(ts: *mut ThreadState) -> Payload {
    // SAFETY: guaranteed by the caller.
    unsafe {
        let payload = (*ts).slot.take();
        if must_settle(ts) {
            // By value, not by reference: a payload whose address is taken
            // lives in memory even on the fast path.
            return settle(ts, payload);
        }
        payload
    }
}

/// Whether the context that just got control has work to settle: a
/// retiring record, deferred kills, a trace event, or mail from other
/// threads.
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline(always)]
pub(super) unsafe fn must_settle(ts: *mut ThreadState) -> bool {
    // SAFETY: guaranteed by the caller; short reads.
    unsafe { (*ts).work | ThreadState::link(ts).has_mail.load(Ordering::Relaxed) }
}

#[cold]
#[inline(never)]
unsafe fn settle(ts: *mut ThreadState, mut payload: Payload) -> Payload {
    // SAFETY: the caller's `ts` is live; each access is short.
    unsafe {
        drop((*ts).retiring.take());
        if let Some((kind, origin)) = (*ts).trace_pending.take() {
            if let Err(err) = trace::run_hooks(ts, kind, origin) {
                payload = Err(Raised::new(err));
            }
        }
        lifecycle::do_pending_work(ts);
        payload
    }
}

/// The body every greenlet's coroutine runs (inlined into its one caller,
/// the coroutine's entry closure, as before the split into modules), with
/// its thread's state (which outlives every run of its coroutines: the
/// state is freed at thread exit after they were unwound or leaked).
#[inline(always)]
fn root(ts: *mut ThreadState, record_ptr: *const Record, yielder: &Yielder<usize, usize>) -> usize {
    // SAFETY: the dispatcher resumed this coroutine on its owner thread, so
    // `ts` is live and `record_ptr` is the live record of the current
    // greenlet (kept by the registry); accesses to its `local` are short.
    unsafe {
        let record = &*record_ptr;
        let local = record.local();
        (*local).yielder = yielder;
        record.mark_started();
        let payload = take_and_settle(ts);
        let run = ptr::addr_of_mut!((*local).run);
        // Matched without building a tuple, and the closure called where it
        // is: every copy of a payload or closure through the stack lengthens
        // this path.
        let result: Payload = match payload {
            // The closure is moved out of the record before it runs, and the
            // record's `run` is not touched again.
            Ok(value) => {
                // With no closure to run (a prepared greenlet always has
                // one), the value is its result.
                match catch_unwind(AssertUnwindSafe(move || Run::call_in_place(run, value))) {
                    Ok(result) => result,
                    Err(panic) => {
                        if (*ts).unwinding() == record_ptr {
                            // corosensei's forced unwind: let it reach its root.
                            resume_unwind(panic);
                        }
                        Err(Raised::new(GreenletError::Panic {
                            greenlet: record.label(),
                            message: panic_message(&*panic),
                        }))
                    }
                }
            }
            Err(err) => {
                lifecycle::drop_quietly((*run).take(), record);
                Err(err)
            }
        };
        finish(ts, record_ptr, result)
    }
}

/// A greenlet's run ended with `result`: find who receives it, mark the
/// greenlet dead, and return the word that tells the dispatcher where to go.
///
/// # Safety
/// Runs at the end of `root`, on the greenlet's own stack.
#[inline(always)]
unsafe fn finish(ts: *mut ThreadState, record_ptr: *const Record, result: Payload) -> usize {
    // SAFETY: as in `root`.
    unsafe {
        let record = &*record_ptr;
        let local = record.local();
        // Updated in place rather than moved through temporaries (see `root`).
        let mut payload = result;
        if matches!(payload, Err(Raised::Exit)) {
            // A kill's bare exit: its parent (the killer) receives the value.
            payload = Ok(exit_value(None));
        } else if matches!(&payload, Err(err) if err.is_exit()) {
            payload = exit_to_value(payload);
        }
        let killer = (*local).return_to.take();
        let fast = match &killer {
            // The common case: a live, started parent takes the result as is.
            None => record.live_parent_ptr(),
            // A kill: the killer, suspended in `kill`, takes it (it stays
            // alive after this reference goes: it is main or registered).
            Some(killer) if killer.flags().is_active() => Some(Arc::as_ptr(killer)),
            Some(_) => None,
        };
        let dest = match fast {
            Some(parent) => parent,
            None => {
                let start = match killer {
                    Some(killer) if !killer.flags().is_dead() => killer,
                    _ => record
                        .parent_record()
                        .unwrap_or_else(|| Arc::clone(&(*ts).main)),
                };
                // May run user code (closures of unstarted ancestors being
                // dropped); nothing after it does.
                match resolve(ts, &start, payload, false) {
                    Resolved::Go(dest, resolved) => {
                        payload = resolved;
                        dest
                    }
                    Resolved::Back(back) => {
                        payload = back;
                        (*ts).main_ptr
                    }
                }
            }
        };
        record.mark_dead();
        // With a handle left, it stays registered (which keeps the record
        // alive past this stack) until its last handle goes (see `Record`).
        // Without one, it leaves the registry now; `retiring` keeps it alive
        // until the next context, where it is finalized.
        if record.handles() == 0 {
            let me = ThreadState::unregister(ts, record);
            if let Some(me) = &me {
                (*ts).deferred.push(Arc::clone(me));
            }
            drop(mem::replace(&mut (*ts).retiring, me));
            (*ts).work = true;
        }
        if trace::active(ts) {
            (*ts).trace_pending = Some((Kind::of(&payload), (*ts).current_arc()));
            (*ts).work = true;
        }
        (*ts).slot.put(payload);
        dest as usize
    }
}

/// A greenlet ended with `GreenletExit`: its parent receives the exit's
/// value (or the exit itself), not an error. Other payloads pass as they are.
#[cold]
fn exit_to_value(payload: Payload) -> Payload {
    if !matches!(&payload, Err(err) if err.is_exit()) {
        return payload;
    }
    match payload.map_err(Raised::into_error) {
        Ok(value) => Ok(value),
        Err(GreenletError::GreenletExit(value)) => Ok(exit_value(value)),
        Err(other) => Err(Raised::new(other)),
    }
}
