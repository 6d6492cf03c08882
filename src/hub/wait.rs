//! The wait list every hub primitive parks on ([`WaitList`]), [`wait_on`],
//! which parks the caller on one, and [`Watch`], a registration that
//! outlives one park (`select`'s): none of them loses a notification or a
//! value when the waiter is cancelled or times out.
//!
//! Owns: those, the waiter nodes, and [`Wakeup`] (whom a notification
//! wakes). Uses `park` and the current task (`worker::with_current_task`).
//!
//! # Nodes
//! A waiter's node is not allocated per wait: [`wait_on`] keeps it in its
//! own frame, and the list is intrusive (the nodes link to each other, the
//! list holds its two ends), so a registration and a notification are a
//! few pointer writes. That frame outlives the registration: the node
//! unlinks itself before its frame ends, also when the frame unwinds (a
//! started green thread never leaves its thread, and its stack is unwound
//! before it is freed, or leaked with everything on it when it refuses to
//! unwind). A [`Watch`] keeps its node in a `Box` freed only by its `Drop`,
//! which unlinks it first.
//!
//! # Who touches a node when
//! A node is linked while it is not notified, and only then may a
//! notifier reach it, always under the lock of the state its list lives
//! in (through `&mut WaitList`). A notifier unlinks the node, may hand it a
//! value (a send to a parked receive) or take the one it offers (a receive
//! from a parked send), takes its [`Wakeup`] out (no clone; woken after the
//! lock is released), and as its very last access sets the node's
//! `notified` flag (`Release`). From then on the node belongs to its owner
//! alone: the owner, back from its park, reads `notified` (`Acquire`)
//! without the lock and, when it is set, takes the value it was handed
//! without locking again (the woken side of a hand-over costs no lock).
//! While `notified` is clear the owner touches its node only under the
//! lock (to leave the list on a deadline, an unwind or a dropped watch),
//! where it cannot race a notifier. Over every interleaving of one owner
//! and any notifiers: the node is either unlinked by exactly one notifier
//! (which then never touches it again) or by its owner under the lock
//! while no notifier holds it; the owner frees it only after one of the
//! two.
//!
//! A waiter that unwinds after it was notified gives its node's value and
//! the notification back to its [`Site::unwind`], which puts the
//! value back and picks the next waiter: nothing sent is lost and no
//! waiter is stranded.

use std::cell::UnsafeCell;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::Instant;

use super::spin_lock::{QuickGuard as MutexGuard, QuickMutex as Mutex};

use super::park::{park, park_green};
use super::task_header::Task;
use super::task_state::Wait;
use super::worker;

/// Whom a notification wakes: a green thread goes onto its worker's ready
/// queue (no `Waker` in between), a plain thread is unparked.
pub(crate) enum Wakeup {
    /// A green thread.
    Task(Arc<Task>),
    /// A plain thread blocked in `park`.
    Thread(Thread),
}

impl Wakeup {
    /// The caller's.
    #[inline]
    fn current() -> Wakeup {
        worker::with_current_task(|_, task| Wakeup::Task(Arc::clone(task)))
            .unwrap_or_else(|| Wakeup::Thread(std::thread::current()))
    }

    /// Wake it (call without holding the lock its wait list is under).
    /// Inlined into the notifier, with the green thread's wake
    /// (`worker::wake_task`): a wake of a green thread of the notifier's
    /// own worker is a few loads and stores there, no call; a plain
    /// thread's unpark is a call.
    #[inline(always)]
    pub(crate) fn wake(self) {
        match self {
            // By value: the ready queue takes this `Arc` (no clone).
            Wakeup::Task(task) => worker::wake_task(task),
            Wakeup::Thread(thread) => unpark(thread),
        }
    }
}

/// Unpark a plain thread (out of line: the green thread's wake stays
/// small).
#[inline(never)]
fn unpark(thread: Thread) {
    thread.unpark();
}

/// Wake `w`, if any.
#[inline]
pub(crate) fn wake(w: Option<Wakeup>) {
    if let Some(w) = w {
        w.wake();
    }
}

/// Wake every one of `wakeups`.
pub(crate) fn wake_all(wakeups: Vec<Wakeup>) {
    for w in wakeups {
        w.wake();
    }
}

/// A waiter's state, reached only under its list's lock while its node is
/// not notified, and only by its owner once it is.
struct Slot<P> {
    /// The neighbours on the list while linked.
    prev: *const Node<P>,
    next: *const Node<P>,
    /// Taken by the notifier.
    wakeup: Option<Wakeup>,
    /// Whether a notifier may hand it a value (a receive; not a watch).
    takes: bool,
    /// A value handed to it, or the one it offers.
    value: Option<P>,
}

/// One waiter.
struct Node<P> {
    /// Set by the notifier, last: see the module doc.
    notified: AtomicBool,
    slot: UnsafeCell<Slot<P>>,
}

impl<P> Node<P> {
    fn new(takes: bool, value: Option<P>, wakeup: Wakeup) -> Node<P> {
        Node {
            notified: AtomicBool::new(false),
            slot: UnsafeCell::new(Slot {
                prev: ptr::null(),
                next: ptr::null(),
                wakeup: Some(wakeup),
                takes,
                value,
            }),
        }
    }

    /// Its state.
    ///
    /// # Safety
    /// The caller holds the lock of the state whose list the node is (or
    /// was last) linked to, or owns the node and has seen it notified; and
    /// holds no other reference from `slot`.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slot(&self) -> &mut Slot<P> {
        // SAFETY: the lock, or the notification, serialises every access
        // (the caller's contract).
        unsafe { &mut *self.slot.get() }
    }

    /// Whether a notifier took it off its list (see the module doc).
    #[inline]
    fn is_notified(&self) -> bool {
        self.notified.load(Ordering::Acquire)
    }
}

/// Parked waiters, first come first notified: an intrusive list of the
/// waiters' nodes. Lives inside the state it guards (under the same lock):
/// `&mut WaitList` proves that lock is held.
pub(crate) struct WaitList<P> {
    head: *const Node<P>,
    tail: *const Node<P>,
}

// SAFETY: the pointers are only followed under the lock of the state the
// list lives in (see the module doc), and what they reach (a `Wakeup`,
// which is `Send`, and a `P`) moves between threads only as a `P: Send`.
unsafe impl<P: Send> Send for WaitList<P> {}

// The node pointers make the list `!UnwindSafe` by default, which would
// take that from `Event`, `Mutex`, `Semaphore` and the channels, as they
// were before nodes were pointers. Nothing a caught panic could observe is
// half-done: a node is linked or unlinked by a few pointer writes and its
// flag, all under the lock, none of which can panic.
impl<P> std::panic::UnwindSafe for WaitList<P> {}

impl<P> Default for WaitList<P> {
    fn default() -> Self {
        WaitList {
            head: ptr::null(),
            tail: ptr::null(),
        }
    }
}

impl<P> WaitList<P> {
    /// Append `node` (not notified, on no list).
    fn link(&mut self, node: &Node<P>) {
        let me: *const Node<P> = node;
        // SAFETY: `&mut self`: the lock is held; no other slot reference.
        let slot = unsafe { node.slot() };
        slot.prev = self.tail;
        slot.next = ptr::null();
        match self.tail.is_null() {
            true => self.head = me,
            // SAFETY: the tail is linked, so alive (module doc), and is
            // not `node`; the lock is held.
            false => unsafe { (*self.tail).slot() }.next = me,
        }
        self.tail = me;
    }

    /// Take `node`, linked to this list, off it.
    ///
    /// # Safety
    /// `node` is linked to this list.
    unsafe fn unlink(&mut self, node: *const Node<P>) {
        // SAFETY: linked (the caller's contract), so alive; the lock is
        // held (`&mut self`). Its neighbours are other linked nodes; each
        // reference ends before the next is made.
        unsafe {
            let (prev, next) = {
                let slot = (*node).slot();
                (slot.prev, slot.next)
            };
            match prev.is_null() {
                true => self.head = next,
                false => (*prev).slot().next = next,
            }
            match next.is_null() {
                true => self.tail = prev,
                false => (*next).slot().prev = prev,
            }
        }
    }

    /// Whether the first waiter takes a value handed to it.
    #[inline]
    pub(crate) fn first_takes(&self) -> bool {
        // SAFETY: a linked node is alive (module doc); `&self` of the list
        // inside the locked state: the lock is held.
        !self.head.is_null() && unsafe { (*self.head).slot() }.takes
    }

    /// Take the first waiter off the list and mark it notified; `f` sees
    /// its value slot (to hand it a value, or take the one it offers).
    /// Returns whom to wake once the lock is released.
    #[inline]
    pub(crate) fn notify_one_with(&mut self, f: impl FnOnce(&mut Option<P>)) -> Option<Wakeup> {
        let node = self.head;
        if node.is_null() {
            return None;
        }
        // SAFETY: the head is linked to this list, first (no `prev`); the
        // lock is held (`&mut self`), and its next, if any, is linked too.
        unsafe {
            let next = (*node).slot().next;
            self.head = next;
            match next.is_null() {
                true => self.tail = ptr::null(),
                false => (*next).slot().prev = ptr::null(),
            }
        }
        let wakeup = {
            // SAFETY: it was linked, so alive and not notified; the lock is
            // held; the reference ends before the flag is set.
            let slot = unsafe { (*node).slot() };
            f(&mut slot.value);
            slot.wakeup.take()
        };
        // SAFETY: alive until this store, which hands it to its owner: the
        // last access (the owner may free it right after).
        unsafe { (*node).notified.store(true, Ordering::Release) };
        wakeup
    }

    /// [`notify_one_with`](Self::notify_one_with), leaving its value be.
    #[inline]
    pub(crate) fn notify_one(&mut self) -> Option<Wakeup> {
        self.notify_one_with(|_| {})
    }

    /// Notify every waiter (see [`notify_one`](Self::notify_one)).
    pub(crate) fn notify_all(&mut self) -> Vec<Wakeup> {
        let mut all = Vec::new();
        while !self.head.is_null() {
            all.extend(self.notify_one());
        }
        all
    }
}

/// Where a wait parks (implemented by a marker type per kind of wait, so
/// that a waiter carries no description of its site): the list in the
/// locked state, what `dump` shows, and what a waiter that unwinds after
/// it was notified gives back.
pub(crate) trait Site {
    /// The state the list lives in, under its lock.
    type State;
    /// What a waiter is handed or offers.
    type Value;
    /// What the parked green thread waits for.
    const WAIT: Wait;
    /// Whether a notifier may hand the waiter a value.
    const TAKES: bool;
    /// The list.
    fn list(state: &mut Self::State) -> &mut WaitList<Self::Value>;
    /// Called under the lock for a waiter that unwinds (or stops watching)
    /// after it was notified, with its node's value: put the value back and
    /// return the next waiter to wake, if the notification should pass on.
    fn unwind(state: &mut Self::State, value: Option<Self::Value>) -> Option<Wakeup>;
}

/// How a [`wait_on`] ended, with its node's value (one handed to it, or
/// its own offer not taken): notified (the lock not taken again), or its
/// deadline passed (the lock held again). An enum, so that the caller's
/// notified path carries no guard to test.
pub(crate) enum Woken<'a, S, P> {
    /// Notified: the lock not taken again.
    Notified(&'a Mutex<S>, Option<P>),
    /// The deadline passed: the lock held again.
    Relocked(MutexGuard<'a, S>, Option<P>),
}

impl<'a, S, P> Woken<'a, S, P> {
    /// The node's value, taken.
    #[inline]
    pub(crate) fn take_value(&mut self) -> Option<P> {
        match self {
            Woken::Notified(_, value) | Woken::Relocked(_, value) => value.take(),
        }
    }

    /// The lock, held: taken again unless the wait ended holding it.
    #[inline]
    pub(crate) fn relock(self) -> MutexGuard<'a, S> {
        match self {
            Woken::Notified(lock, _) => lock.lock(),
            Woken::Relocked(guard, _) => guard,
        }
    }
}

/// Park the caller on `W`'s list in `lock`'s state (whose `guard` the
/// caller holds and gives up meanwhile), offering `value`, until it is
/// notified or `deadline` passes; the caller re-checks its condition under
/// [`Woken::relock`] unless the value it was handed is all it needs. If the
/// caller unwinds from the park (cancelled, or a `timeout` elapsed), it
/// leaves the list, or, when notified already, gives its value and the
/// notification to `W::unwind`. Inlined into its callers: one frame
/// for the receive and its wait.
#[inline(always)]
pub(crate) fn wait_on<'a, W: Site>(
    lock: &'a Mutex<W::State>,
    guard: MutexGuard<'a, W::State>,
    value: Option<W::Value>,
    deadline: Option<Instant>,
) -> Woken<'a, W::State, W::Value> {
    wait_on_then::<W, _>(lock, guard, value, deadline, |woken| woken)
}

/// [`wait_on`], then `then` of how it ended, called on the green thread's
/// path and on the plain thread's apart: what `then` returns is all that
/// the two paths merge (a receive's value or its lock, in registers),
/// where a [`Woken`] merged would go through memory (the plain thread's
/// comes back from an out-of-line call).
#[inline(always)]
pub(crate) fn wait_on_then<'a, W: Site, R>(
    lock: &'a Mutex<W::State>,
    guard: MutexGuard<'a, W::State>,
    value: Option<W::Value>,
    deadline: Option<Instant>,
    then: impl Fn(Woken<'a, W::State, W::Value>) -> R,
) -> R {
    // Taken by whichever path waits (a closure not called drops nothing).
    let mut held = Some((guard, value));
    let green = worker::with_current_task(|w, task| {
        let (guard, value) = held.take()?;
        let me = Wakeup::Task(w.take_ref(task));
        Some(then(wait_with::<W>(
            lock,
            guard,
            value,
            deadline,
            me,
            || park_green(w, task, W::WAIT, deadline),
        )))
    });
    if let Some(ended) = green.flatten() {
        return ended;
    }
    let Some((guard, value)) = held else {
        unreachable!("hub wait: a green thread's wait took the lock and returned no wake-up")
    };
    then(wait_on_thread::<W>(lock, guard, value, deadline))
}

/// [`wait_on`] on a plain thread (out of line: a green thread's wait
/// keeps a small frame).
#[inline(never)]
fn wait_on_thread<'a, W: Site>(
    lock: &'a Mutex<W::State>,
    guard: MutexGuard<'a, W::State>,
    value: Option<W::Value>,
    deadline: Option<Instant>,
) -> Woken<'a, W::State, W::Value> {
    let me = Wakeup::Thread(std::thread::current());
    wait_with::<W>(lock, guard, value, deadline, me, || park(W::WAIT, deadline))
}

/// [`wait_on`] for the waiter `me`, which `park` parks.
#[inline(always)]
fn wait_with<'a, W: Site>(
    lock: &'a Mutex<W::State>,
    mut guard: MutexGuard<'a, W::State>,
    value: Option<W::Value>,
    deadline: Option<Instant>,
    me: Wakeup,
    mut park: impl FnMut(),
) -> Woken<'a, W::State, W::Value> {
    let node = Node::new(W::TAKES, value, me);
    W::list(&mut guard).link(&node);
    drop(guard);
    let leave = Leave::<W> { lock, node: &node };
    loop {
        park();
        if node.is_notified() {
            std::mem::forget(leave);
            // SAFETY: notified: off the list, and its notifier is done
            // with it (module doc).
            let value = unsafe { node.slot() }.value.take();
            // Nothing left in it to drop: the notifier took its wake-up,
            // and its value is taken.
            std::mem::forget(node);
            return Woken::Notified(lock, value);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            let mut guard = lock.lock();
            if !node.is_notified() {
                // SAFETY: not notified: still linked to `W`'s list, whose
                // lock is held.
                unsafe { W::list(&mut guard).unlink(&node) };
            }
            std::mem::forget(leave);
            // SAFETY: the lock is held, and the node is off the list.
            let value = unsafe { node.slot() }.value.take();
            return Woken::Relocked(guard, value);
        }
    }
}

/// Takes a waiter off its list when it stops waiting other than by a
/// return from `wait_on` (an unwind, a `Watch` dropped).
struct Leave<'n, 'a, W: Site> {
    lock: &'a Mutex<W::State>,
    node: &'n Node<W::Value>,
}

impl<W: Site> Drop for Leave<'_, '_, W> {
    fn drop(&mut self) {
        let mut state = self.lock.lock();
        let next = if self.node.is_notified() {
            // SAFETY: notified: off the list, the notifier done with it.
            let value = unsafe { self.node.slot() }.value.take();
            W::unwind(&mut state, value)
        } else {
            // SAFETY: not notified: linked to `W`'s list, whose lock is
            // held.
            unsafe { W::list(&mut state).unlink(self.node) };
            None
        };
        drop(state);
        if let Some(w) = next {
            w.wake();
        }
    }
}

/// A standing registration on a wait list that does not take values
/// (`select` watches several receivers at once): notified like any waiter;
/// dropped, it leaves the list or passes its notification on
/// (`W::unwind`). Forgetting one leaks its node, which stays valid.
pub(crate) struct Watch<'a, W: Site> {
    lock: &'a Mutex<W::State>,
    node: Box<Node<W::Value>>,
}

impl<'a, W: Site> Watch<'a, W> {
    /// Register the caller on `W`'s list in `lock`'s state.
    pub(crate) fn new(lock: &'a Mutex<W::State>) -> Watch<'a, W> {
        let node = Box::new(Node::new(false, None, Wakeup::current()));
        W::list(&mut lock.lock()).link(&node);
        Watch { lock, node }
    }
}

impl<W: Site> Drop for Watch<'_, W> {
    fn drop(&mut self) {
        drop(Leave::<W> {
            lock: self.lock,
            node: &self.node,
        });
    }
}
