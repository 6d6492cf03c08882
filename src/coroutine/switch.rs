//! The switch protocol: symmetric switching between greenlets' coroutines
//! (`context.rs`), and the parent chain a value or error follows.
//!
//! Owns the transfer of a payload from the current greenlet to another one.
//! Main resumes a greenlet from the thread's native stack; a greenlet hands
//! control to another straight from its stack to the other's
//! (`suspend_to`, one stack switch; the other inherits main as the
//! context it suspends to), and back to main by suspending. Where there is
//! no direct switch (targets other than x86_64 Unix, or a target without a
//! fiber), the greenlet suspends to a loop on main's stack
//! ([`dispatch_loop`]) that resumes the other: two stack switches. Greenlet
//! stacks never nest. Two machine words cross a stack switch: the address
//! of the next greenlet's record (main's included), and the address of the
//! payload, which stays where the sender had it (on its stack, suspended)
//! until the receiver moves it out ([`receive`]); a switch that carries no
//! payload points to `NOTHING` instead. Every greenlet's body runs
//! under [`root`], which catches panics and hands the result up the parent
//! chain ([`finish`]).
//!
//! User code never runs inside the loop itself: it runs either in a
//! greenlet or in the main greenlet after the loop returned, so a context
//! that gets control back first settles the pending work (trace events,
//! released records, kills) with [`settle_received`].
//!
//! Also owns the death of a greenlet that must die unstarted
//! ([`kill_unstarted`]: an error sent to it).
//!
//! Uses the thread state (settling runs its pending work, the deferred
//! kills among it), records, the stack pool and tracing. The lifecycle
//! calls [`transfer`] (a kill is a throw).
//!
//! Longer than the crate's usual 800 lines because the protocol is one piece:
//! its parts call each other in a ring (a new coroutine's entry runs
//! [`run_bodies`], which runs [`root`], whose [`finish`] resolves the next
//! greenlet with [`resolve`] and prepares it with [`prepare`]), and nearly
//! all of them are `#[inline(always)]` into [`transfer`]; split into files,
//! each part would import the others back.

use std::convert::Infallible;
use std::mem::{self, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::Arc;

use super::arch::Top;
use super::context;
use super::error::{panic_message, ErrorKind, GreenletError};
use super::fiber::Fiber;
#[cfg(feature = "hub")]
use super::payload::NOTHING;
use super::payload::{exit_value, from_words, into_words, Kind, Payload, PayloadWords, Words};
use super::record::{drop_quietly, Local, Record};
use super::run::Run;
use super::stack::{self, PooledStack};
use super::thread_state::{self, ThreadState, Upcalls};
use super::trace;
use super::value::Value;
use crate::diag::diag_error;

/// `switch` / `throw` from the API.
#[inline(always)]
pub(crate) fn send(
    target: &Arc<Record>,
    payload: Payload,
    kind: Kind,
    upcalls: &'static Upcalls,
) -> Result<Value, GreenletError> {
    // The payload goes to its words first thing, before the owner check:
    // kept whole across the check (whose failure drops it), it went to the
    // stack as it was made and was copied from there.
    let mut words = MaybeUninit::<Words>::uninit();
    // SAFETY: `words` is this frame's; the payload is moved out of it once,
    // by the error path or by the transfer.
    unsafe { Words::write(words.as_mut_ptr(), payload) };
    let ts = match thread_state::check_owner(target, upcalls) {
        Ok(ts) => ts,
        Err(err) => {
            // SAFETY: written above, not moved out.
            drop(unsafe { receive(words.as_ptr()) });
            return Err(err);
        }
    };
    // SAFETY: `ts` is this thread's live state and `target` belongs to it;
    // mailed kills send the transfer down its slow path, which runs them
    // first. `words` holds the payload.
    unsafe { transfer_words(ts, target, &mut words, kind) }
}

/// An unstarted greenlet dies without running: its closure is dropped.
///
/// # Safety
/// `ts` is live and `record` is an unstarted greenlet of its thread.
pub(crate) unsafe fn kill_unstarted(ts: *mut ThreadState, record: &Arc<Record>) {
    // SAFETY: owner thread; short accesses; the closure's destructor runs
    // after the bookkeeping, with no borrow held.
    unsafe {
        let local = record.local();
        let run = (*local).run.take();
        // Prepared (a start that did not happen): its coroutine, unstarted
        // or parked between two bodies (taken from the thread's kept one),
        // goes back to be kept with its stack for the next start.
        if let Some(fiber) = (*local).fiber.take() {
            (*ts).kept.keep((*local).stack_size, fiber);
        }
        record.mark_dead();
        let me = ThreadState::unregister(ts, record);
        drop_quietly(run, record);
        drop(me);
    }
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
/// The common cases (a suspended target other than the current greenlet, or
/// the start of an unstarted one, no tracing, no mail) cost a few loads and
/// compares on top of the stack switch; this thread's pending work does not
/// leave it, being settled by the receiving context ([`settle_received`]).
/// Everything else goes through [`transfer_slow`], which runs the kills
/// mailed by other threads before it switches.
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
    let mut words = MaybeUninit::<Words>::uninit();
    // SAFETY: guaranteed by the caller; `words` holds the payload. It goes
    // there first, so that it is moved once: kept whole across the tests,
    // it was copied around the stack in 16-byte pieces.
    unsafe {
        Words::write(words.as_mut_ptr(), payload);
        transfer_words(ts, target, &mut words, kind)
    }
}

/// [`transfer`] of the payload in `words`, which it moves out.
///
/// # Safety
/// As for [`transfer`], and `words` holds a payload (written by
/// [`Words::write`]).
#[inline(always)]
unsafe fn transfer_words(
    ts: *mut ThreadState,
    target: &Arc<Record>,
    words: &mut MaybeUninit<Words>,
    kind: Kind,
) -> Payload {
    let dest = Arc::as_ptr(target);
    // SAFETY: `ts` is live (caller); short reads. `dest` is a started, live
    // greenlet of this thread other than the current one, which is what
    // `jump` needs; the receiver moves the payload out of `words` once
    // (`receive`), which are never dropped, or the slow path does.
    unsafe {
        // The flags read again for the start below rather than kept: kept
        // across the test, they cost a register copy on every switch.
        let go = if target.flags().is_active() {
            dest != (*ts).current && !needs_slow_path(ts)
        } else {
            // The start of a new greenlet with a value: nothing to walk, no
            // trace event, forced unwind or mail (`needs_slow_path`), and an
            // unstarted greenlet is never current. A stack that cannot be
            // mapped takes the general path, which reports it.
            target.flags().is_unstarted()
                && kind == Kind::Switch
                && !needs_slow_path(ts)
                && prepare(ts, target).is_ok()
        };
        if go {
            return settle_received(ts, receive(jump(ts, dest, words.as_ptr())));
        }
        from_words(transfer_slow(ts, target, words.as_ptr(), kind))
    }
}

/// Switch to `dest` with `payload`, which the receiver moves out of this
/// frame (it stays here, suspended, until then); returns what comes back,
/// settled.
///
/// # Safety
/// `ts` is live and `dest` is not the current greenlet: as for [`jump`].
#[inline(always)]
unsafe fn send_to(ts: *mut ThreadState, dest: *const Record, payload: Payload) -> Payload {
    let mut words = MaybeUninit::<Words>::uninit();
    // SAFETY: guaranteed by the caller; the receiver moves the payload out
    // of `words` once (`receive`), which are never dropped.
    unsafe {
        Words::write(words.as_mut_ptr(), payload);
        settle_received(ts, receive(jump(ts, dest, words.as_ptr())))
    }
}

/// Move the payload a switch brought out of where its sender left it.
///
/// # Safety
/// `carried` is what the switch that gave control here carried: a live
/// payload not read since, or `NOTHING`.
#[inline(always)]
unsafe fn receive(carried: *const Words) -> Payload {
    // SAFETY: guaranteed by the caller; the sender gave up ownership (its
    // words are never dropped), and a copy of `NOTHING` is a unit value.
    unsafe { Words::read(carried) }
}

/// Whether a switch must take the slow path on the sending side: tracing,
/// whose event needs the sender's identity; a forced unwind at thread exit,
/// during which switches fail (see [`transfer_slow`]); and kills mailed by
/// other threads, which the switching greenlet runs before it switches, as
/// greenlet clears its thread's deleteme list at the start of a switch.
/// Pending work of this thread (a retiring record, deferred kills, a trace
/// event) is settled by the receiving context ([`settle_received`]).
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline(always)]
pub(super) unsafe fn needs_slow_path(ts: *mut ThreadState) -> bool {
    // SAFETY: guaranteed by the caller; short reads. The thread's own
    // reasons and its mail share one byte (`ThreadLink::switch_flags`),
    // or-ed as an integer with the process-wide hook's: one test and one
    // branch. The receiving side reads no mail flag (`must_settle`).
    unsafe { (ThreadState::link(ts).switch_flags() | trace::global_on()) != 0 }
}

/// Whether switches on this thread are observed now: a trace hook is set
/// (on the thread or process-wide) or a greenlet is being force-unwound.
///
/// # Safety
/// `ts` is the calling thread's live state.
#[cfg(feature = "hub")]
#[inline(always)]
pub(super) unsafe fn switches_observed(ts: *mut ThreadState) -> bool {
    // SAFETY: guaranteed by the caller; short reads.
    unsafe { ((*ts).slow_switch() | trace::global_on()) != 0 }
}

/// Everything but the common cases of [`transfer`]: dead or current
/// targets, a throw into an unstarted one, a stack that cannot be mapped,
/// and tracing. Takes the payload where the fast path wrote it and returns
/// the result as its words ([`into_words`]): a `Payload` returned crosses
/// through memory, and the fast path's result, merged with it, went there
/// too on every switch.
///
/// # Safety
/// As for [`transfer`], and `words` holds a payload (written by
/// [`Words::write`]), which this moves out.
#[inline(never)]
unsafe fn transfer_slow(
    ts: *mut ThreadState,
    target: &Arc<Record>,
    words: *const Words,
    kind: Kind,
) -> PayloadWords {
    // SAFETY: guaranteed by the caller: `words` holds a payload, moved out
    // once, here.
    let payload = unsafe { receive(words) };
    // SAFETY: `ts` is live (caller).
    into_words(unsafe { transfer_slow_payload(ts, target, payload, kind) })
}

/// [`transfer_slow`] of the payload itself.
///
/// # Safety
/// As for [`transfer`].
#[inline(always)]
unsafe fn transfer_slow_payload(
    ts: *mut ThreadState,
    target: &Arc<Record>,
    payload: Payload,
    kind: Kind,
) -> Payload {
    // SAFETY: (whole function) `ts` is live; accesses are short; the record
    // pointers used are kept alive by the registry or the state's `main`.
    unsafe {
        if (*ts).current_is_unwinding() {
            // A switch from a greenlet being force-unwound (a destructor run
            // by the unwind): it cannot suspend (the unwinder would unwind the
            // suspended switch again, inside that destructor, and a panic in
            // a destructor during unwinding aborts). It fails instead.
            drop(payload);
            return Err(GreenletError::exit());
        }
        thread_state::check_mail(ts);
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
        send_to(ts, dest, payload)
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
                payload = Err(err);
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
                unsafe { kill_unstarted(ts, t) };
                payload = exit_to_value(payload);
                continue;
            }
            // SAFETY: as above.
            if let Err(err) = unsafe { prepare(ts, t) } {
                payload = Err(err);
                continue;
            }
        }
        return Resolved::Go(Arc::as_ptr(t), payload);
    }
}

/// Give an unstarted greenlet its fiber (stack and coroutine): the thread's
/// kept one if it has the size the greenlet asks for (its coroutine parked
/// between two bodies, see [`run_bodies`]), else a stack from the pool and
/// a new coroutine ([`prepare_new`], out of line). Inlined into its callers
/// (the start fast path of [`transfer`], [`resolve`], and the hub's lean
/// start, `direct::start`): as a call it cost a second save of every
/// callee-saved register and a `Result` as wide as a `GreenletError`
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
        if (*local).fiber.is_some() {
            return Ok(());
        }
        let Some(fiber) = (*ts).kept.take((*local).stack_size) else {
            return prepare_new(ts, record);
        };
        install(local, fiber, record, true);
        Ok(())
    }
}

/// [`prepare`] as a test, for the hub's lean start: whether `record` has
/// its fiber now. A stack that cannot be mapped is left to the full
/// protocol, which tries again and reports it; on the common paths no
/// `Result` is made.
///
/// # Safety
/// As for [`prepare`].
#[cfg(feature = "hub")]
#[inline(always)]
pub(super) unsafe fn prepared(ts: *mut ThreadState, record: &Arc<Record>) -> bool {
    // SAFETY: owner thread (caller); short accesses to `local`.
    unsafe {
        let local = record.local();
        if (*local).fiber.is_some() {
            return true;
        }
        let Some(fiber) = (*ts).kept.take((*local).stack_size) else {
            return prepared_new(ts, record);
        };
        install(local, fiber, record, true);
        true
    }
}

/// [`prepare`] without a kept fiber of the size `record` asks for: a stack
/// from the pool, and a new coroutine on it.
///
/// # Safety
/// As for [`prepare`], and `record` has no fiber.
#[inline(never)]
unsafe fn prepare_new(ts: *mut ThreadState, record: &Arc<Record>) -> Result<(), GreenletError> {
    // SAFETY: guaranteed by the caller; a short read of `local`.
    unsafe {
        new_fiber(ts, record)
            .map_err(|source| stack_error(record, (*record.local()).stack_size, source))
    }
}

/// [`prepare_new`] for the hub's lean start ([`prepared`]): whether
/// `record` has its fiber now. A stack that cannot be mapped makes no
/// `GreenletError` here (a label formatted, and a drop of the result out of
/// line at every start): the full protocol tries again and reports it.
///
/// # Safety
/// As for [`prepare_new`].
#[cfg(feature = "hub")]
#[inline(never)]
unsafe fn prepared_new(ts: *mut ThreadState, record: &Arc<Record>) -> bool {
    // SAFETY: guaranteed by the caller.
    unsafe { new_fiber(ts, record).is_ok() }
}

/// A stack from the pool for `record` (which has no fiber), and a new
/// coroutine on it, installed; the pool's error if no stack could be
/// mapped. One closure type for both callers: one coroutine entry.
///
/// # Safety
/// As for [`prepare_new`].
#[inline(always)]
unsafe fn new_fiber(ts: *mut ThreadState, record: &Arc<Record>) -> std::io::Result<()> {
    // SAFETY: owner thread (caller); short accesses to `local`.
    unsafe {
        let local = record.local();
        let stack = stack::acquire((*local).stack_size)?;
        let fiber = Fiber::new(stack, move |top, next, carried| {
            run_bodies(ts, top, next, carried)
        });
        install(local, fiber, record, false);
        Ok(())
    }
}

/// Give `record`, which has no fiber, `fiber`, its stack named after it.
/// A `kept` fiber (a finished greenlet's, parked between two bodies) takes
/// the running context's floating-point control state for its next body;
/// a new one took it when it was made (`Fiber::new`).
///
/// # Safety
/// `local` is `record`'s, on its owner thread, with no fiber.
#[inline(always)]
unsafe fn install(local: *mut Local, fiber: Fiber, record: &Record, kept: bool) {
    // SAFETY: guaranteed by the caller; written over a `None`: nothing to
    // drop. Written before the label, so that the fiber is not kept on the
    // stack across the named label's call.
    unsafe {
        let slot = ptr::addr_of_mut!((*local).fiber);
        ptr::write(slot, Some(fiber));
        if let Some(fiber) = &*slot {
            if kept {
                fiber.inherit_fp_control();
            }
            label_stack(fiber.stack(), record);
        }
    }
}

/// The error of a greenlet whose stack of `size` bytes could not be mapped.
#[cold]
#[inline(never)]
fn stack_error(record: &Record, size: usize, source: std::io::Error) -> GreenletError {
    GreenletError::from(ErrorKind::StackAllocation {
        greenlet: record.label(),
        size,
        source,
    })
}

/// Name the stack after its greenlet (`'name' (id N)`, as in messages),
/// without allocating or formatting: this runs at every start, so an
/// unnamed greenlet's label (one bit test and two stores, inline) and a hub
/// green thread's `'task-<n>'` (three stores) are only spelled out if the
/// stack overflows.
#[inline(always)]
fn label_stack(stack: &PooledStack, record: &Record) {
    if !record.flags().is_named() {
        stack.set_default_greenlet_label(record.id());
    } else if record.given_name().is_none() {
        stack.set_default_task_label(record.id(), record.task_id());
    } else {
        label_named(stack, record);
    }
}

/// [`label_stack`] for a greenlet with a given name: the name copied in.
#[cold]
#[inline(never)]
fn label_named(stack: &PooledStack, record: &Record) {
    if let Some(name) = record.given_name() {
        stack.set_greenlet_label(name, record.id());
    }
}

/// Hand control to `dest` (a live, started or prepared greenlet, or main)
/// with `carried` (a payload's address, or `NOTHING`'s); returns what the
/// switch back carried.
///
/// # Safety
/// `ts` is live and `dest` is not the current greenlet.
#[inline(always)]
unsafe fn jump(ts: *mut ThreadState, dest: *const Record, carried: *const Words) -> *const Words {
    // SAFETY: guaranteed by the caller.
    unsafe {
        let current = (*ts).current;
        if current == (*ts).main_ptr {
            resume_from_main_with(ts, current, dest, carried)
        } else {
            suspend_to_with(ts, current, dest, carried)
        }
    }
}

/// [`resume_from_main_with`] carrying no payload (the hub's lean resume and
/// start); a payload that comes back is put in the slot ([`deposit`]).
///
/// # Safety
/// As for [`resume_from_main_with`].
#[cfg(feature = "hub")]
#[inline(always)]
pub(super) unsafe fn resume_from_main(
    ts: *mut ThreadState,
    main: *const Record,
    dest: *const Record,
) {
    // SAFETY: guaranteed by the caller.
    unsafe { deposit(ts, resume_from_main_with(ts, main, dest, &NOTHING)) }
}

/// [`suspend_to_with`] carrying no payload (the hub's lean park); a payload
/// that comes back is put in the slot ([`deposit`]).
///
/// # Safety
/// As for [`suspend_to_with`].
#[cfg(feature = "hub")]
#[inline(always)]
pub(super) unsafe fn suspend_to(ts: *mut ThreadState, current: *const Record, dest: *const Record) {
    // SAFETY: guaranteed by the caller.
    unsafe { deposit(ts, suspend_to_with(ts, current, dest, &NOTHING)) }
}

/// A context that switched by the hub's lean path got control back with
/// `carried`: a payload (the full protocol's switch, a body's end) goes to
/// the slot, where that path looks (`Slot::is_full`); [`NOTHING`] (another
/// lean switch) leaves it empty.
///
/// # Safety
/// `ts` is live; `carried` is what the switch carried, not read since.
#[cfg(feature = "hub")]
#[inline(always)]
unsafe fn deposit(ts: *mut ThreadState, carried: *const Words) {
    if !ptr::eq(carried, &NOTHING) {
        // SAFETY: guaranteed by the caller; the slot is empty outside a
        // lean switch's return (it is emptied by `take_and_settle`).
        unsafe { (*ts).slot.put(receive(carried)) };
    }
}

/// From main, resume `dest` with `carried` and return once control is back
/// on main (main current again), with what that switch carried. The first
/// resume is inline (a switch from main usually comes straight back); the
/// dispatcher's loop runs only if the greenlet hands on.
///
/// # Safety
/// `ts` is live, main (`main`, the state's `main_ptr`) is the current
/// greenlet, and `dest` is a live, started or prepared greenlet of this
/// thread.
#[inline(always)]
unsafe fn resume_from_main_with(
    ts: *mut ThreadState,
    main: *const Record,
    dest: *const Record,
    carried: *const Words,
) -> *const Words {
    // SAFETY: guaranteed by the caller.
    unsafe {
        let (word, mut back) = resume(ts, dest, carried);
        if word != main as usize {
            back = dispatch_loop(ts, word as *const Record, back);
        }
        (*ts).current = main;
        back
    }
}

/// Hand control from `current`, the current greenlet (not main), to
/// `dest` with `carried`: straight to `dest`'s stack where that can be done
/// ([`context::hand_off`]: `dest` has a fiber, so it is not main), else by
/// suspending to main's stack with `dest` as the word for the dispatcher.
/// Returns what the switch back carried, when some context switches back
/// (a forced unwind carries `NOTHING`, and its receiver's settle unwinds:
/// [`settle`]).
///
/// # Safety
/// `ts` is the live state, `current` its current greenlet, not main, and
/// `dest` a live, started or prepared greenlet of this thread (or main)
/// other than `current`.
#[inline(always)]
unsafe fn suspend_to_with(
    ts: *mut ThreadState,
    current: *const Record,
    dest: *const Record,
    carried: *const Words,
) -> *const Words {
    // SAFETY: guaranteed by the caller; `current`'s top is set because a
    // non-main current greenlet is running inside its `root`, on that
    // coroutine; `dest`'s fiber, if it has one, is suspended (it is not
    // running, and a live greenlet's coroutine is suspended or parked).
    unsafe {
        let top = (*(*current).local()).top;
        #[cfg(all(
            target_arch = "x86_64",
            target_family = "unix",
            not(target_vendor = "apple"),
            not(greenlet_portable_switch)
        ))]
        // Main never has a fiber (it runs on the thread's own stack): a
        // switch to main suspends to it.
        let (word, back) = match (*(*dest).local()).fiber.as_ref() {
            Some(fiber) => {
                (*ts).current = dest;
                context::hand_off(top, fiber.top(), dest as usize, carried.cast())
            }
            _ => context::suspend(top, dest as usize, carried.cast()),
        };
        #[cfg(not(all(
            target_arch = "x86_64",
            target_family = "unix",
            not(target_vendor = "apple"),
            not(greenlet_portable_switch)
        )))]
        let (word, back) = {
            let _ = ts;
            context::suspend(top, dest as usize, carried.cast())
        };
        debug_assert!(
            word != context::FORCE || (*ts).work,
            "a forced unwind sets work"
        );
        back.cast()
    }
}

/// Resume `next` with `carried` on the main greenlet's stack until it hands
/// control on; returns the word it handed on (the next greenlet's record,
/// main's included) and what it carried.
///
/// # Safety
/// Runs on the main greenlet's stack; `next` is a live, started or prepared
/// greenlet of this thread, kept alive by the registry (or, once it
/// finished, by `retiring`); its `co` field is borrowed only for the resume,
/// while its code touches other fields.
#[inline(always)]
unsafe fn resume(
    ts: *mut ThreadState,
    next: *const Record,
    carried: *const Words,
) -> (usize, *const Words) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        (*ts).current = next;
        let local = (*next).local();
        let Some(fiber) = (*local).fiber.as_ref() else {
            return ((*ts).main_ptr as usize, carried);
        };
        // By its address: the coroutine stays where it is (at the top of its
        // stack) while its body's end moves the fiber out of the record
        // (`keep_finished`).
        let (word, back) = context::resume_with(fiber.top(), next as usize, carried.cast());
        (word, back.cast())
    }
}

/// What every greenlet coroutine runs, from the first switch into it (whose
/// word and pointer it is handed): the body of the greenlet whose word it
/// is resumed with; then, its fiber kept for the thread's next start
/// ([`keep_finished`]), parked again (suspended with the word of whoever
/// receives the result) until it is resumed with the next greenlet's word,
/// whose body it runs, and so on. It never returns: a parked coroutine that
/// is not needed any more is forgotten (a [`Fiber`]'s drop: its frames here
/// hold only plain words). A body unwound by force ([`Fiber::force_unwind`])
/// ends in [`unwound`], and the coroutine parks as after any body.
#[inline(always)]
fn run_bodies(
    ts: *mut ThreadState,
    top: *mut Top,
    mut next: usize,
    mut carried: context::Carried,
) -> Infallible {
    // Nothing may unwind out of here: the coroutine's root has no frame to
    // unwind to.
    let _abort = AbortOnUnwind;
    loop {
        let record = next as *const Record;
        debug_assert_ne!(next, context::FORCE, "a parked coroutine is never unwound");
        // SAFETY: what the resume that starts this body carried.
        let word = root(ts, record, top, unsafe { receive(carried.cast()) });
        let mut result = MaybeUninit::<Words>::uninit();
        // SAFETY: `root` returned on this coroutine, for `record`, alive
        // (registered, or kept by `retiring`) on its owner thread; `finish`
        // left the result in the slot (empty after a forced unwind).
        unsafe {
            keep_finished(ts, record);
            Words::write(result.as_mut_ptr(), (*ts).slot.take());
        }
        // SAFETY: we run on `top`'s coroutine; the receiver moves the
        // result out of `result`, which is never dropped.
        (next, carried) = unsafe { context::suspend(top, word, result.as_ptr().cast()) };
    }
}

/// Aborts the process if dropped, which only an unwind out of
/// [`run_bodies`] does: [`root`] catches the body's panics and forced
/// unwinds, and its own bookkeeping does not panic.
struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        diag_error!("greenlet: a panic left a greenlet's root; aborting");
        std::process::abort();
    }
}

/// The forced unwind of `record`'s body ([`Fiber::force_unwind`], the
/// thread state marking it as unwinding) reached its [`root`]: taken
/// quietly, or reported if the body raised a panic of its own while being
/// unwound; the coroutine parks next, back to the unwinder (the word is not
/// read).
#[cold]
#[inline(never)]
fn unwound(record: &Record, panic: Box<dyn std::any::Any + Send>) -> usize {
    if !panic.is::<context::ForcedUnwind>() {
        diag_error!(
            "greenlet: unwinding {} raised a panic: {}",
            record.label(),
            panic_message(&*panic)
        );
    }
    // A body's own panic payload: its drop is user code.
    drop_quietly(panic, record);
    0
}

/// [`settle`] at a greenlet's start, with a forced unwind caught: a kill or
/// trace hook run there may switch away, and the greenlet be unwound from
/// that switch. `None` when it was (see [`unwound`]); any other panic
/// becomes the start's error.
///
/// # Safety
/// As for [`settle`], on `record`'s coroutine in its [`root`].
#[cold]
#[inline(never)]
unsafe fn settle_at_start(
    ts: *mut ThreadState,
    record: *const Record,
    payload: Payload,
) -> Option<Payload> {
    // SAFETY: guaranteed by the caller.
    match catch_unwind(AssertUnwindSafe(|| unsafe { settle(ts, payload) })) {
        Ok(payload) => Some(payload),
        // SAFETY: `ts` is live; a short read.
        Err(panic) if unsafe { (*ts).unwinding() } == record => {
            // SAFETY: `record` is alive (caller).
            unwound(unsafe { &*record }, panic);
            None
        }
        Err(panic) => Some(Err(GreenletError::from(ErrorKind::Panic {
            // SAFETY: as above.
            greenlet: unsafe { (*record).label() },
            message: panic_message(&*panic),
        }))),
    }
}

/// `record`'s body finished on its coroutine, which parks next, with
/// nothing run in between: move its fiber to the thread's kept one
/// (`ThreadState::kept`) for the next start, the coroutine staying where it
/// is. Not during a forced unwind, which goes on through the loop and ends
/// the coroutine (`force_unwind` drops the fiber with it).
///
/// # Safety
/// Called by [`run_bodies`] on `record`'s coroutine, right after its `root`
/// returned; `ts` is the thread's live state.
#[inline(always)]
unsafe fn keep_finished(ts: *mut ThreadState, record: *const Record) {
    // SAFETY: guaranteed by the caller; short accesses to `local`.
    unsafe {
        if (*ts).unwinding() == record {
            return;
        }
        let local = (*record).local();
        if let Some(fiber) = (*local).fiber.take() {
            (*ts).kept.keep((*local).stack_size, fiber);
        }
    }
}

/// The loop on the thread's native stack: resume greenlets, each with what
/// the previous one carried, until one hands control to main (greenlet to
/// greenlet switches without a hand-off pass through here); returns what
/// that one carried.
///
/// # Safety
/// Runs on the main greenlet's stack, called by [`jump`] with the main
/// greenlet current (`jump` makes it current again afterwards); `next` is a
/// live, started or prepared greenlet of this thread.
#[inline(never)]
unsafe fn dispatch_loop(
    ts: *mut ThreadState,
    mut next: *const Record,
    mut carried: *const Words,
) -> *const Words {
    // SAFETY: as for `resume`, for every greenlet resumed.
    unsafe {
        let main = (*ts).main_ptr as usize;
        loop {
            let (word, back) = resume(ts, next, carried);
            if word == main {
                return back;
            }
            next = word as *const Record;
            carried = back;
        }
    }
}

/// Take what the last transfer left in the slot ([`deposit`]) and do the
/// pending work, as [`settle_received`] does.
///
/// # Safety
/// `ts` is the calling thread's live state.
#[cfg(feature = "hub")]
#[inline(always)]
pub(super) unsafe fn take_and_settle(ts: *mut ThreadState) -> Payload {
    // SAFETY: guaranteed by the caller.
    unsafe { settle_received(ts, (*ts).slot.take()) }
}

/// `payload` came with the last transfer: do the pending work (trace
/// event, released records, deferred kills) in this, the receiving context.
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline(always)]
unsafe fn settle_received(ts: *mut ThreadState, payload: Payload) -> Payload {
    // SAFETY: guaranteed by the caller.
    unsafe {
        if must_settle(ts) {
            // By value, not by reference: a payload whose address is taken
            // lives in memory even on the fast path; and as its words, in
            // registers (a `Payload` passed or returned whole goes through
            // memory, which kept it there on the fast path too).
            return from_words(settle_words(ts, into_words(payload)));
        }
        payload
    }
}

/// Whether the context that just got control has work to settle: a
/// retiring record, deferred kills or a trace event. Mail from other
/// threads is not read here: the sender of every switch ran it first
/// ([`needs_slow_path`]).
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline(always)]
pub(super) unsafe fn must_settle(ts: *mut ThreadState) -> bool {
    // SAFETY: guaranteed by the caller; a short read.
    unsafe { (*ts).work }
}

/// [`settle`] out of line, the payload in registers.
///
/// # Safety
/// As for [`settle`]; `words` are a payload's ([`into_words`]).
#[cold]
#[inline(never)]
unsafe fn settle_words(ts: *mut ThreadState, words: PayloadWords) -> PayloadWords {
    // SAFETY: guaranteed by the caller.
    unsafe { into_words(settle(ts, from_words(words))) }
}

/// Do the pending work the receiving context found (`must_settle`), or
/// unwind it if a forced unwind resumed it.
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline(always)]
unsafe fn settle(ts: *mut ThreadState, mut payload: Payload) -> Payload {
    // SAFETY: the caller's `ts` is live; each access is short.
    unsafe {
        if (*ts).current_is_unwinding() {
            // A forced unwind resumed this greenlet (`lifecycle::force_unwind`
            // set `work` for it, and carried `NOTHING`): its frames unwind
            // from here, the other work is left to whoever gets control next.
            drop(payload);
            context::unwind_now();
        }
        drop((*ts).retiring.take());
        if let Some((kind, origin)) = (*ts).trace_pending.take() {
            if let Err(err) = trace::run_hooks(ts, kind, origin) {
                payload = Err(err);
            }
        }
        thread_state::do_pending_work(ts);
        payload
    }
}

/// The body every greenlet's coroutine runs (inlined into its one caller,
/// the coroutine's entry closure, as before the split into modules), with
/// its thread's state (which outlives every run of its coroutines: the
/// state is freed at thread exit after they were unwound or leaked).
#[inline(always)]
fn root(
    ts: *mut ThreadState,
    record_ptr: *const Record,
    top: *mut Top,
    mut payload: Payload,
) -> usize {
    // SAFETY: the dispatcher resumed this coroutine on its owner thread, so
    // `ts` is live and `record_ptr` is the live record of the current
    // greenlet (kept by the registry); accesses to its `local` are short.
    unsafe {
        let record = &*record_ptr;
        let local = record.local();
        (*local).top = top;
        record.mark_started();
        if must_settle(ts) {
            match settle_at_start(ts, record_ptr, payload) {
                Some(settled) => payload = settled,
                None => return 0,
            }
        }
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
                            return unwound(record, panic);
                        }
                        Err(GreenletError::from(ErrorKind::Panic {
                            greenlet: record.label(),
                            message: panic_message(&*panic),
                        }))
                    }
                }
            }
            Err(err) => {
                drop_quietly((*run).take(), record);
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
        if matches!(&payload, Err(err) if err.is_bare_exit()) {
            // A kill's bare exit: its parent (the killer) receives the value.
            payload = Ok(exit_value(None));
        } else if matches!(&payload, Err(err) if err.is_exit()) {
            payload = exit_to_value(payload);
        }
        // The common case: no killer's link, and a live, started parent
        // takes the result as is; the payload goes to the slot at once.
        let parent = match (*local).return_to {
            None => record.live_parent_ptr(),
            Some(_) => None,
        };
        let (dest, in_place) = match parent {
            Some(parent) => {
                note_trace(ts, &payload);
                (*ts).slot.put(payload);
                // What a reuse of the record as it is needs from its end
                // (see `Flags::is_reusable`; with no handle left, the
                // unregister below clears the mark again).
                let in_place = ptr::eq(parent, (*ts).main_ptr)
                    && record.given_name().is_none()
                    && (*ts).unwinding() != record_ptr;
                (parent, in_place)
            }
            None => (finish_elsewhere(ts, record, payload), false),
        };
        record.mark_finished(in_place);
        // With a handle left, it stays registered (which keeps the record
        // alive past this stack) until its last handle goes (see `Record`).
        // Without one, it leaves the registry now; `retiring` keeps it alive
        // until the next context, where it is finalized.
        let handles = record.handles();
        if handles == 0 {
            let me = ThreadState::unregister(ts, record);
            if let Some(me) = &me {
                (*ts).deferred.push(Arc::clone(me));
            }
            drop(mem::replace(&mut (*ts).retiring, me));
            (*ts).work = true;
        }
        dest as usize
    }
}

/// [`finish`] when a killer's link or the parent chain decides who
/// receives the result: puts the payload in the slot and returns the
/// receiver (the killer, or the nearest live ancestor, or main).
///
/// # Safety
/// As for [`finish`].
#[inline(never)]
unsafe fn finish_elsewhere(
    ts: *mut ThreadState,
    record: &Record,
    mut payload: Payload,
) -> *const Record {
    // SAFETY: as in `root`.
    unsafe {
        let killer = (*record.local()).return_to.take();
        let dest = match killer {
            // A kill: the killer, suspended in `kill`, takes it (it stays
            // alive after this reference goes: it is main or registered).
            Some(killer) if killer.flags().is_active() => Arc::as_ptr(&killer),
            killer => {
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
        note_trace(ts, &payload);
        (*ts).slot.put(payload);
        dest
    }
}

/// A finishing greenlet's trace event, for the context that receives its
/// result, if tracing is on.
///
/// # Safety
/// `ts` is the calling thread's live state; the finishing greenlet is
/// current.
#[inline(always)]
unsafe fn note_trace(ts: *mut ThreadState, payload: &Payload) {
    // SAFETY: guaranteed by the caller; short accesses.
    unsafe {
        if trace::active(ts) {
            (*ts).trace_pending = Some((Kind::of(payload), (*ts).current_arc()));
            (*ts).work = true;
        }
    }
}

/// A greenlet ended with `GreenletExit`: its parent receives the exit's
/// value (or the exit itself), not an error. Other payloads pass as they are.
#[cold]
fn exit_to_value(payload: Payload) -> Payload {
    match payload {
        Err(err) if err.is_exit() => match err.into_kind() {
            ErrorKind::GreenletExit(value) => Ok(exit_value(value)),
            other => Err(other.into()),
        },
        other => other,
    }
}
