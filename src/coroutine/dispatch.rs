//! The dispatcher: symmetric switching on top of corosensei's asymmetric
//! coroutines, the parent chain, throw and kill.
//!
//! Owns the switch protocol. The thread's native stack runs a loop
//! ([`dispatch`]) that alone resumes greenlets: main → greenlet is one stack
//! switch, greenlet → greenlet is two (suspend to the loop, resume the
//! other), and greenlet stacks never nest. One machine word crosses a stack
//! switch (the next greenlet's record, or [`TO_MAIN`]); the value travels
//! through the thread state's slot. Every greenlet's body runs under
//! [`root`], which catches panics and hands the result to the parent chain.
//!
//! Uses the thread state, the greenlet records, the stack pool and tracing.
//! User code never runs inside the loop itself: it runs either in a greenlet
//! or in the main greenlet after the loop returned, so a context that gets
//! control back first settles the pending work (trace events, released
//! records, kills) with [`take_and_settle`].

use std::mem::{self, MaybeUninit};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use corosensei::stack::{Stack, StackPointer};
use corosensei::{Coroutine, CoroutineResult, Yielder};

use super::error::GreenletError;
use super::greenlet::{
    exit_value, owner_state, panic_message, unregister, Core, Local, Run, DEAD, LEAKED, MAIN,
    STARTED,
};
use super::stack::{self, PooledStack};
use super::thread_state::{self, ThreadState};
use super::trace;
use super::value::Value;

/// The word a greenlet suspends with to hand control to the main greenlet.
const TO_MAIN: usize = 0;

/// A greenlet's coroutine: resumed with a dummy word, suspends with the next
/// greenlet's word, returns the next greenlet's word when it finishes.
pub(crate) type Co = Coroutine<usize, usize, usize, StackRef>;

/// The stack of a coroutine, owned by the greenlet's record (next to the
/// coroutine) so that the pool's stack can be named while it runs.
pub(crate) struct StackRef(*const PooledStack);

// SAFETY: points to the `PooledStack` in the same greenlet record as the
// coroutine that uses it; the record does not move (it is in an `Arc`) and
// the coroutine is always dropped before the stack (`dispatch`,
// `kill_unstarted`, `force_unwind`, and `Local`'s field order).
unsafe impl Stack for StackRef {
    #[inline]
    fn base(&self) -> StackPointer {
        // SAFETY: see the impl's comment: the pointee outlives the coroutine.
        unsafe { (*self.0).base() }
    }
    #[inline]
    fn limit(&self) -> StackPointer {
        // SAFETY: as for `base`.
        unsafe { (*self.0).limit() }
    }
}

/// What crosses a switch: a value, or an error raised at the receiver.
pub(crate) type Payload = Result<Value, Raised>;

/// An error in flight, one word wide so that a payload is two words (as a
/// `Value` is): the bare `GreenletExit` of a kill needs no allocation,
/// anything else is boxed.
pub(crate) enum Raised {
    Exit,
    Error(Box<GreenletError>),
}

impl Raised {
    #[inline]
    pub(crate) fn new(err: GreenletError) -> Raised {
        match err {
            GreenletError::GreenletExit(None) => Raised::Exit,
            other => Raised::Error(Box::new(other)),
        }
    }

    #[inline]
    pub(crate) fn into_error(self) -> GreenletError {
        match self {
            Raised::Exit => GreenletError::GreenletExit(None),
            Raised::Error(err) => *err,
        }
    }

    fn is_exit(&self) -> bool {
        match self {
            Raised::Exit => true,
            Raised::Error(err) => err.is_exit(),
        }
    }
}

/// What kind of transfer: a switch carrying a value, or a throw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Switch,
    Throw,
}

impl Kind {
    fn of(payload: &Payload) -> Kind {
        if payload.is_ok() {
            Kind::Switch
        } else {
            Kind::Throw
        }
    }
}

/// Check that the calling thread owns `target`; returns its state.
#[inline]
pub(crate) fn check_owner(target: &Core) -> Result<*mut ThreadState, GreenletError> {
    match thread_state::state() {
        // SAFETY: `ts` is this thread's live state; short read.
        Some(ts)
            if ptr::eq(Arc::as_ptr(&target.thread), unsafe {
                Arc::as_ptr(&(*ts).link)
            }) =>
        {
            Ok(ts)
        }
        ts => Err(thread_error(ts, target)),
    }
}

#[cold]
fn thread_error(ts: Option<*mut ThreadState>, target: &Core) -> GreenletError {
    match ts {
        Some(ts) if target.thread.alive.load(Ordering::Acquire) => {
            // SAFETY: `ts` is this thread's live state; `current` is live.
            let (current, current_thread) = unsafe {
                (
                    (*(*ts).current).label(),
                    ThreadState::link(ts).label.clone(),
                )
            };
            GreenletError::WrongThread {
                current,
                current_thread,
                target: target.label(),
                target_thread: target.thread.label.clone(),
            }
        }
        _ => GreenletError::ThreadExited {
            target: target.label(),
            target_thread: target.thread.label.clone(),
        },
    }
}

/// `switch` / `throw` from the API.
#[inline(always)]
pub(crate) fn send(
    target: &Arc<Core>,
    payload: Payload,
    kind: Kind,
) -> Result<Value, GreenletError> {
    let ts = check_owner(target)?;
    // SAFETY: `ts` is this thread's live state and `target` belongs to it;
    // the mailed kills are run by whichever context receives control next
    // (`take_and_settle`).
    let result = unsafe { transfer(ts, target, payload, kind) };
    result.map_err(Raised::into_error)
}

/// Run the kills other threads sent, if any (greenlet's "deleteme" list).
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline]
pub(crate) unsafe fn check_mail(ts: *mut ThreadState) {
    // SAFETY: guaranteed by the caller.
    if unsafe { ThreadState::link(ts).has_mail.load(Ordering::Relaxed) } {
        // SAFETY: guaranteed by the caller.
        unsafe { do_pending_work(ts) }
    }
}

/// Where a transfer really goes.
enum Resolved {
    /// Resume (or start) this live greenlet with this payload.
    Go(*const Core, Payload),
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
unsafe fn transfer(
    ts: *mut ThreadState,
    target: &Arc<Core>,
    payload: Payload,
    kind: Kind,
) -> Payload {
    let dest = Arc::as_ptr(target);
    // SAFETY: `ts` is live (caller); short reads. `dest` is a started, live
    // greenlet of this thread other than the current one, which is what
    // `jump` needs; the slot is empty outside a transfer (`put_slot`). The
    // payload goes to the slot first, so that it is moved once.
    unsafe {
        put_slot(ts, payload);
        if target.flags() & (STARTED | DEAD) == STARTED
            && dest != (*ts).current
            && !needs_slow_path(ts)
        {
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
unsafe fn needs_slow_path(ts: *mut ThreadState) -> bool {
    // SAFETY: guaranteed by the caller; short reads.
    unsafe { (*ts).slow_switch() | trace::global_on() }
}

/// The thread's value slot: the payload of the transfer in flight.
///
/// Empty between transfers: every transfer fills it right before its stack
/// switch and the receiving context empties it first thing
/// ([`take_and_settle`]); the forced unwind, which resumes a greenlet without
/// a transfer, empties it after the fact.
///
/// The payload is stored and loaded one machine word at a time (volatile
/// accesses, which the compiler may not merge): the sender has it in two
/// registers, and a receiver that loaded both words with one 16-byte move
/// would stall on store-to-load forwarding at every switch.
pub(crate) struct Slot {
    full: bool,
    words: [MaybeUninit<usize>; 2],
}

impl Slot {
    pub(crate) const fn empty() -> Slot {
        Slot {
            full: false,
            words: [MaybeUninit::uninit(); 2],
        }
    }
}

/// Put `payload` in the (empty) slot.
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline(always)]
unsafe fn put_slot(ts: *mut ThreadState, payload: Payload) {
    // SAFETY: guaranteed by the caller. The slot is empty (see `Slot`), so
    // overwriting it loses nothing; a payload is two words (`Raised` and
    // `Value` are two words with a non-null niche, checked by a test), and
    // any bit pattern, uninitialized bytes included, is a valid
    // `MaybeUninit<usize>`.
    unsafe {
        debug_assert!(!(*ts).slot.full, "a payload was left in the slot");
        let words: [MaybeUninit<usize>; 2] = mem::transmute(payload);
        let dst = ptr::addr_of_mut!((*ts).slot.words).cast::<MaybeUninit<usize>>();
        ptr::write_volatile(dst, words[0]);
        ptr::write_volatile(dst.add(1), words[1]);
        (*ts).slot.full = true;
    }
}

/// Take the payload out of the slot (a unit value if a forced unwind left
/// it empty).
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline(always)]
unsafe fn take_slot(ts: *mut ThreadState) -> Payload {
    // SAFETY: guaranteed by the caller. A full slot holds the two words of a
    // payload written by `put_slot`, read back once (the slot is marked
    // empty first), so ownership moves from the slot to the result.
    unsafe {
        if !(*ts).slot.full {
            return Ok(Value::unit());
        }
        (*ts).slot.full = false;
        let src = ptr::addr_of!((*ts).slot.words).cast::<MaybeUninit<usize>>();
        let words = [ptr::read_volatile(src), ptr::read_volatile(src.add(1))];
        mem::transmute::<[MaybeUninit<usize>; 2], Payload>(words)
    }
}

/// Everything but the common case of [`transfer`]: unstarted, dead or
/// current targets, and tracing. The payload is in the slot.
///
/// # Safety
/// As for [`transfer`].
#[inline(never)]
unsafe fn transfer_slow(ts: *mut ThreadState, target: &Arc<Core>, kind: Kind) -> Payload {
    // SAFETY (whole function): `ts` is live; accesses are short; the record
    // pointers used are kept alive by the registry or the state's `main`.
    unsafe {
        let payload = take_slot(ts);
        if (*ts).current_is_unwinding() {
            // A switch from a greenlet being force-unwound (a destructor run
            // by the unwind): it cannot suspend (corosensei would unwind the
            // suspended switch again, inside that destructor, and a panic in
            // a destructor during unwinding aborts). It fails instead.
            drop(payload);
            return Err(Raised::Exit);
        }
        check_mail(ts);
        let (dest, payload) = if target.flags() & (STARTED | DEAD) == STARTED {
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
        put_slot(ts, payload);
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
    target: &Arc<Core>,
    mut payload: Payload,
    throw: bool,
) -> Resolved {
    if throw && target.flags() & DEAD != 0 {
        if let Err(err) = payload {
            match err.into_error() {
                GreenletError::GreenletExit(value) => return Resolved::Back(Ok(exit_value(value))),
                other => payload = Err(Raised::new(other)),
            }
        }
    }
    // Keeps the ancestor `t` points to alive once the walk left `target`.
    let mut held: Option<Arc<Core>> = None;
    let mut t: &Arc<Core> = target;
    loop {
        let flags = t.flags();
        if flags & DEAD != 0 {
            match t.parent_core() {
                Some(parent) => t = held.insert(parent),
                None => return Resolved::Back(payload),
            }
            continue;
        }
        if flags & STARTED == 0 {
            if payload.is_err() {
                // It dies without running; the error goes up its chain.
                // SAFETY: `t` is alive, hence in this thread's registry.
                unsafe { kill_unstarted(ts, t) };
                continue;
            }
            // SAFETY: as above.
            if let Err(err) = unsafe { prepare(t) } {
                payload = Err(Raised::new(err));
                continue;
            }
        }
        return Resolved::Go(Arc::as_ptr(t), payload);
    }
}

/// Give an unstarted greenlet its stack and coroutine.
///
/// # Safety
/// Called on `core`'s owner thread; `core` is alive and unstarted.
unsafe fn prepare(core: &Arc<Core>) -> Result<(), GreenletError> {
    // SAFETY: owner thread (caller); short accesses to `local`.
    unsafe {
        let local = core.local();
        if (*local).co.is_some() {
            return Ok(());
        }
        let size = (*local).stack_size;
        let stack = stack::acquire(size).map_err(|source| GreenletError::StackAllocation {
            greenlet: core.label(),
            size,
            source,
        })?;
        label_stack(&stack, core);
        let stack = (*local).stack.insert(stack) as *const PooledStack;
        let core_ptr = Arc::as_ptr(core);
        (*local).co = Some(Co::with_stack(StackRef(stack), move |yielder, _| {
            root(core_ptr, yielder)
        }));
        Ok(())
    }
}

/// Name the stack after its greenlet (`'name' (id N)`, as in messages),
/// without allocating or formatting: this runs at every start, and an
/// unnamed greenlet's label is only spelled out if its stack overflows.
fn label_stack(stack: &PooledStack, core: &Core) {
    match core.given_name() {
        Some(name) => stack.set_greenlet_label(name, core.id()),
        None => stack.set_default_greenlet_label(core.id()),
    }
}

/// Hand control to `dest` (a live, started or prepared greenlet, or main).
///
/// # Safety
/// `ts` is live and `dest` is not the current greenlet.
#[inline(always)]
unsafe fn jump(ts: *mut ThreadState, dest: *const Core) {
    // SAFETY: guaranteed by the caller; `current`'s yielder is set because a
    // non-main current greenlet is running inside its `root`.
    unsafe {
        let main = Arc::as_ptr(&(*ts).main);
        let current = (*ts).current;
        if current == main {
            dispatch(ts, dest);
            (*ts).current = main;
        } else {
            let word = if dest == main { TO_MAIN } else { dest as usize };
            let yielder = (*(*current).local()).yielder;
            (*yielder).suspend(word);
        }
    }
}

/// Resume `next` on the main greenlet's stack until it hands control on;
/// returns the word it handed on (the next greenlet, or [`TO_MAIN`]).
///
/// # Safety
/// Runs on the main greenlet's stack; `next` is a live, started or prepared
/// greenlet of this thread, kept alive by the registry (or, once it
/// finished, by `retiring`); its `co` field is borrowed only for the resume,
/// while its code touches other fields.
#[inline(always)]
unsafe fn resume(ts: *mut ThreadState, next: *const Core) -> usize {
    // SAFETY: guaranteed by the caller.
    unsafe {
        (*ts).current = next;
        let local = (*next).local();
        let Some(co) = (*local).co.as_mut() else {
            return TO_MAIN;
        };
        stack::running((*local).stack.as_ref());
        let result = co.resume(0);
        stack::running(None);
        match result {
            CoroutineResult::Yield(word) => word,
            CoroutineResult::Return(word) => {
                release_finished(local);
                word
            }
        }
    }
}

/// A greenlet's coroutine returned: drop it and its stack (the record is
/// kept by the registry while it has handles, else by `retiring`).
///
/// # Safety
/// `local` is the owner-only part of a greenlet of this thread whose
/// coroutine just returned.
#[cold]
#[inline(never)]
unsafe fn release_finished(local: *mut Local) {
    // SAFETY: guaranteed by the caller; the coroutine is dropped before the
    // stack it ran on.
    unsafe {
        drop((*local).co.take());
        drop((*local).stack.take());
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
unsafe fn dispatch(ts: *mut ThreadState, mut next: *const Core) {
    // SAFETY: as for `resume`, for every greenlet resumed.
    unsafe {
        loop {
            let word = resume(ts, next);
            if word == TO_MAIN {
                break;
            }
            next = word as *const Core;
        }
    }
}

/// Take what the last transfer brought and do the pending work (trace
/// event, released records, deferred kills) in this, the receiving context.
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline(always)]
unsafe fn take_and_settle(ts: *mut ThreadState) -> Payload {
    // SAFETY: guaranteed by the caller.
    unsafe {
        let payload = take_slot(ts);
        if (*ts).work | ThreadState::link(ts).has_mail.load(Ordering::Relaxed) {
            // By value, not by reference: a payload whose address is taken
            // lives in memory even on the fast path.
            return settle(ts, payload);
        }
        payload
    }
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
        do_pending_work(ts);
        payload
    }
}

/// Release the finished record, and finalize or kill every greenlet whose
/// last handle went while that was not possible (and those other threads
/// sent). The running greenlet stays deferred until it switches away.
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline]
pub(crate) unsafe fn do_pending_work(ts: *mut ThreadState) {
    // SAFETY: the caller's `ts` is live; short accesses.
    unsafe {
        if (*ts).retiring.is_none()
            && (*ts).deferred.is_empty()
            && !ThreadState::link(ts).has_mail.load(Ordering::Acquire)
        {
            // The common case after a greenlet finished (`settle` released
            // it already): nothing deferred.
            (*ts).work = (*ts).trace_pending.is_some();
            return;
        }
        do_deferred_work(ts);
    }
}

/// [`do_pending_work`] when there is a record to release, deferred work or
/// mail.
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline(never)]
unsafe fn do_deferred_work(ts: *mut ThreadState) {
    // SAFETY: the caller's `ts` is live; each access is short, none spans
    // the user code run by `finalize_or_kill`.
    unsafe {
        drop((*ts).retiring.take());
        let mailed = ThreadState::link(ts).has_mail.load(Ordering::Acquire);
        if !mailed && (*ts).deferred.is_empty() {
            (*ts).work = (*ts).retiring.is_some() || (*ts).trace_pending.is_some();
            return;
        }
        if mailed {
            let mail = {
                let mut inbox = ThreadState::link(ts).inbox.lock();
                ThreadState::link(ts)
                    .has_mail
                    .store(false, Ordering::Release);
                mem::take(&mut *inbox)
            };
            (*ts).deferred.extend(mail);
        }
        let mut kept = Vec::new();
        loop {
            let batch = mem::take(&mut (*ts).deferred);
            if batch.is_empty() {
                break;
            }
            for core in batch {
                if Arc::as_ptr(&core) == (*ts).current {
                    kept.push(core);
                } else {
                    finalize_or_kill(ts, &core);
                }
            }
        }
        (*ts).deferred = kept;
        (*ts).work =
            (*ts).retiring.is_some() || (*ts).trace_pending.is_some() || !(*ts).deferred.is_empty();
    }
}

/// The body every greenlet's coroutine runs.
fn root(core_ptr: *const Core, yielder: &Yielder<usize, usize>) -> usize {
    // SAFETY: the dispatcher resumed this coroutine on its owner thread, so
    // the state exists and `core_ptr` is the live record of the current
    // greenlet (kept by the registry); accesses to its `local` are short.
    unsafe {
        let Some(ts) = thread_state::existing_state() else {
            return TO_MAIN;
        };
        let core = &*core_ptr;
        let local = core.local();
        (*local).yielder = yielder;
        core.mark(STARTED);
        let payload = take_and_settle(ts);
        let run = ptr::addr_of_mut!((*local).run);
        // Matched without building a tuple, and the closure called where it
        // is: every copy of a payload or closure through the stack lengthens
        // this path.
        let result: Payload = match payload {
            // The closure is moved out of the record before it runs, and the
            // record's `run` is not touched again.
            Ok(value) => {
                match catch_unwind(AssertUnwindSafe(move || Run::call_in_place(run, value))) {
                    Ok(Ok(Ok(value))) => Ok(value),
                    Ok(Ok(Err(err))) => Err(Raised::new(err)),
                    // No closure to run (a prepared greenlet always has one):
                    // the value is its result.
                    Ok(Err(value)) => Ok(value),
                    Err(panic) => {
                        if (*ts).unwinding() == core_ptr {
                            // corosensei's forced unwind: let it reach its root.
                            resume_unwind(panic);
                        }
                        Err(Raised::new(GreenletError::Panic {
                            greenlet: core.label(),
                            message: panic_message(&*panic),
                        }))
                    }
                }
            }
            Err(err) => {
                drop_quietly((*run).take(), core);
                Err(err)
            }
        };
        finish(ts, core_ptr, result)
    }
}

/// Drop a value whose destructor is user code, reporting a panic.
fn drop_quietly<T>(value: T, core: &Core) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(move || drop(value))) {
        eprintln!(
            "greenlet: dropping the closure of {} panicked: {}",
            core.label(),
            panic_message(&*panic)
        );
    }
}

/// A greenlet's run ended with `result`: find who receives it, mark the
/// greenlet dead, and return the word that tells the dispatcher where to go.
///
/// # Safety
/// Runs at the end of `root`, on the greenlet's own stack.
unsafe fn finish(ts: *mut ThreadState, core_ptr: *const Core, result: Payload) -> usize {
    // SAFETY: as in `root`.
    unsafe {
        let core = &*core_ptr;
        let local = core.local();
        // Updated in place rather than moved through temporaries (see `root`).
        let mut payload = result;
        if matches!(&payload, Err(err) if err.is_exit()) {
            payload = exit_to_value(payload);
        }
        let killer = (*local).return_to.take();
        let fast = match &killer {
            // The common case: a live, started parent takes the result as is.
            None => core.live_parent_ptr(),
            // A kill: the killer, suspended in `kill`, takes it (it stays
            // alive after this reference goes: it is main or registered).
            Some(killer) if killer.flags() & (STARTED | DEAD) == STARTED => {
                Some(Arc::as_ptr(killer))
            }
            Some(_) => None,
        };
        let dest = match fast {
            Some(parent) => parent,
            None => {
                let start = match killer {
                    Some(killer) if killer.flags() & DEAD == 0 => killer,
                    _ => core
                        .parent_core()
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
                        Arc::as_ptr(&(*ts).main)
                    }
                }
            }
        };
        core.mark(DEAD);
        // With a handle left, it stays registered (which keeps the record
        // alive past this stack) until its last handle goes (see `Core`).
        // Without one, it leaves the registry now; `retiring` keeps it alive
        // until the next context, where it is finalized.
        if core.handles() == 0 {
            let me = unregister(ts, core);
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
        put_slot(ts, payload);
        if dest == Arc::as_ptr(&(*ts).main) {
            TO_MAIN
        } else {
            dest as usize
        }
    }
}

/// A greenlet ended with `GreenletExit`: its parent receives the exit's
/// value (or the exit itself), not an error.
#[cold]
fn exit_to_value(payload: Payload) -> Payload {
    match payload.map_err(Raised::into_error) {
        Ok(value) => Ok(value),
        Err(GreenletError::GreenletExit(value)) => Ok(exit_value(value)),
        Err(other) => Err(Raised::new(other)),
    }
}

/// An unstarted greenlet dies without running: its closure is dropped.
///
/// # Safety
/// `ts` is live and `core` is an unstarted greenlet of its thread.
unsafe fn kill_unstarted(ts: *mut ThreadState, core: &Arc<Core>) {
    // SAFETY: owner thread; short accesses; the closure's destructor runs
    // after the bookkeeping, with no borrow held.
    unsafe {
        let local = core.local();
        let run = (*local).run.take();
        let co = (*local).co.take();
        let stack = (*local).stack.take();
        core.mark(DEAD);
        let me = unregister(ts, core);
        drop(co);
        drop(stack);
        drop_quietly(run, core);
        drop(me);
    }
}

/// Kill `core` with control coming back here (`Greenlet::kill`).
///
/// # Safety
/// `ts` is the calling thread's live state and owns `core`.
pub(crate) unsafe fn kill(ts: *mut ThreadState, core: &Arc<Core>) -> Result<(), GreenletError> {
    // SAFETY: guaranteed by the caller; short accesses.
    unsafe {
        let flags = core.flags();
        if flags & DEAD != 0 {
            return Ok(());
        }
        if flags & MAIN != 0 {
            return transfer(ts, core, Err(Raised::Exit), Kind::Throw)
                .map(drop)
                .map_err(Raised::into_error);
        }
        if flags & STARTED == 0 {
            kill_unstarted(ts, core);
            return Ok(());
        }
        if Arc::as_ptr(core) == (*ts).current {
            // Killing yourself: the exit is raised right here.
            return Err(GreenletError::exit());
        }
        (*core.local()).return_to = Some((*ts).current_arc());
        let result = transfer(ts, core, Err(Raised::Exit), Kind::Throw);
        if core.flags() & DEAD != 0 {
            return result.map(drop).map_err(Raised::into_error);
        }
        drop((*core.local()).return_to.take());
        match result {
            // Raised in the caller while `core` was away (it switched
            // elsewhere, and someone threw into or killed the caller): the
            // caller's own error, as at any pending switch.
            Err(raised) => Err(raised.into_error()),
            Ok(_) => Err(GreenletError::KillIgnored {
                greenlet: core.label(),
            }),
        }
    }
}

/// `Greenlet::kill` from the API.
pub(crate) fn kill_from_api(core: &Arc<Core>) -> Result<(), GreenletError> {
    let ts = check_owner(core)?;
    // SAFETY: `ts` is this thread's live state and owns `core`.
    unsafe {
        check_mail(ts);
        kill(ts, core)
    }
}

/// The last handle of `core` was dropped (on any thread).
pub(crate) fn last_handle_gone(core: &Arc<Core>) {
    let flags = core.flags();
    if flags & MAIN != 0 {
        // Main greenlets are finalized when their thread exits.
        return;
    }
    if let Some(ts) = owner_state(core) {
        // SAFETY: `ts` is this thread's live state and owns `core`.
        unsafe {
            if Arc::as_ptr(core) == (*ts).current {
                // Running: killed once it switches away.
                (*ts).deferred.push(Arc::clone(core));
                (*ts).work = true;
            } else {
                finalize_or_kill(ts, core);
            }
        }
        return;
    }
    if flags & DEAD != 0 {
        core.finalize();
        // Its thread's registry may still hold it (see `Core`): the owner
        // releases it. It no longer counts as live from now on.
        core.uncount();
        if let Err(core) = core.thread.post(Arc::clone(core)) {
            // Its thread exited, and released it.
            core.recount();
        }
    } else if let Err(core) = core.thread.post(Arc::clone(core)) {
        // Its thread exited, and unwound it: only the finalizers are left.
        core.finalize();
    }
}

/// Deal with a greenlet of this thread that has no handle left. The caller
/// drops (or recycles) `core` afterwards and makes no handle from it.
///
/// # Safety
/// `ts` is the calling thread's live state and owns `core`, which is not
/// the current greenlet.
unsafe fn finalize_or_kill(ts: *mut ThreadState, core: &Arc<Core>) {
    if core.handles() > 0 {
        // A handle was made again meanwhile: it is live again.
        core.recount();
        return;
    }
    let flags = core.flags();
    // A leaked greenlet is left alone while it lives; one that finished
    // since (its killer or a child resumed it) is finalized like any other.
    if flags & MAIN != 0 || flags & (LEAKED | DEAD) == LEAKED {
        return;
    }
    if flags & DEAD == 0 {
        if flags & STARTED == 0 {
            // SAFETY: guaranteed by the caller.
            unsafe { kill_unstarted(ts, core) };
        } else {
            // Marked before the kill, so that a last handle made and dropped
            // again while the kill runs (a trace event names the greenlet as
            // the origin of its switch back) does not start a second kill
            // from inside this one: that one's switch back would fire
            // another event, and so on without bound (a stack overflow).
            // Killed, it is dead as well, and finalized as any dead one.
            core.mark(LEAKED);
            // SAFETY: guaranteed by the caller; short reads.
            if unsafe { (*ts).current_is_unwinding() } {
                // Dropped by a destructor of a greenlet being force-unwound,
                // which cannot switch: the thread's exit unwinds it later.
                report_unkillable_now(core);
                return;
            }
            // SAFETY: guaranteed by the caller.
            let result = unsafe { kill(ts, core) };
            if core.flags() & DEAD == 0 {
                eprintln!(
                    "greenlet: GreenletExit did not kill {} (its last handle was dropped): it caught \
                     the exit and switched away; leaking it until its thread exits",
                    core.label()
                );
                return;
            }
            if let Err(err) = result {
                if !err.is_exit() {
                    eprintln!(
                        "greenlet: {} ended with an error while being killed: {err}",
                        core.label()
                    );
                }
            }
        }
    }
    if core.handles() == 0 {
        // SAFETY: guaranteed by the caller.
        let registered = unsafe { unregister(ts, core) };
        // The callers drop `core` afterwards.
        Core::finalize_unreachable(core, 1 + usize::from(registered.is_some()));
    }
}

/// Warn that a dropped greenlet cannot be killed now: its last handle went
/// in a destructor run by the forced unwind of another greenlet, which
/// cannot switch.
#[cold]
#[inline(never)]
fn report_unkillable_now(core: &Core) {
    eprintln!(
        "greenlet: cannot kill {} now (its last handle was dropped by a greenlet being \
         force-unwound, which cannot switch); leaking it until its thread exits unwinds it",
        core.label()
    );
}

/// Last resort at thread exit: unwind `core`'s stack with corosensei's
/// forced unwind (its destructors run), then retire it.
///
/// The greenlet the caller runs in is left as it is, marked leaked: thread
/// exit runs in a greenlet when that greenlet called `exit()`, which runs
/// the thread's thread-local destructors (the teardown) on its stack.
///
/// # Safety
/// `ts` is the calling thread's live state, the caller runs in the current
/// greenlet (main, or the greenlet that called `exit()`), and `core`
/// belongs to this thread.
pub(crate) unsafe fn force_unwind(ts: *mut ThreadState, core: &Arc<Core>) {
    // SAFETY: guaranteed by the caller; `co` is borrowed only for the unwind.
    unsafe {
        let flags = core.flags();
        if flags & DEAD != 0 {
            return;
        }
        if Arc::as_ptr(core) == (*ts).current {
            // We run on its stack. corosensei cannot unwind a coroutine from
            // inside (and reports a running one as `done()`, its saved stack
            // pointer being cleared while it runs), and releasing its stack
            // here would hand the pool (or munmap) the memory under our own
            // frames. It is never resumed: its coroutine and stack are
            // leaked with its record (`Drop for Core` forgets them).
            core.mark(LEAKED);
            return;
        }
        let local = core.local();
        if flags & STARTED == 0 || (*local).co.is_none() {
            kill_unstarted(ts, core);
            return;
        }
        let previous = (*ts).current;
        (*ts).current = Arc::as_ptr(core);
        (*ts).set_unwinding(Arc::as_ptr(core));
        if let Some(co) = (*local).co.as_mut() {
            stack::running((*local).stack.as_ref());
            if catch_unwind(AssertUnwindSafe(|| co.force_unwind())).is_err() {
                eprintln!("greenlet: unwinding {} raised a panic", core.label());
            }
            // Back on the caller's stack: marked again (none for main; the
            // stack of the greenlet that called `exit()` otherwise, which
            // its record keeps while it runs). `previous` is the caller's
            // live record (main, or registered), read briefly.
            stack::running((*(*previous).local()).stack.as_ref());
        }
        (*ts).current = previous;
        (*ts).set_unwinding(ptr::null());
        // If its code caught the unwind and finished, `finish` left these.
        drop(take_slot(ts));
        drop((*ts).trace_pending.take());
        core.mark(DEAD);
        // Still there if it was unwound before its body took it: a greenlet
        // suspended while its start settled the pending work (kills, trace
        // hooks), before `root` called the closure.
        let run = (*local).run.take();
        let co = (*local).co.take();
        let stack = (*local).stack.take();
        if co.as_ref().is_some_and(|co| !co.done()) {
            eprintln!(
                "greenlet: {} kept running while being unwound at thread exit; leaking its stack",
                core.label()
            );
            mem::forget(co);
            mem::forget(stack);
        } else {
            drop(co);
            drop(stack);
        }
        drop(unregister(ts, core));
        // User code (the closure's captures), run with no borrow held; never
        // called, the closure is whole (`call_in_place` takes it out first).
        drop_quietly(run, core);
        do_pending_work(ts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_is_two_words() {
        assert_eq!(mem::size_of::<Payload>(), 2 * mem::size_of::<usize>());
    }

    #[test]
    fn raised_round_trips() {
        assert!(matches!(Raised::new(GreenletError::exit()), Raised::Exit));
        assert!(Raised::new(GreenletError::exit()).into_error().is_exit());
        let user = Raised::new(GreenletError::user("u"));
        assert!(!user.is_exit());
        assert_eq!(user.into_error().to_string(), "u");
        let valued = Raised::new(GreenletError::GreenletExit(Some(Value::new(1u8))));
        assert!(valued.is_exit());
    }
}
