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
//! own frame, and the list holds a pointer to it. That frame outlives the
//! registration: the node unlinks itself before its frame ends, also when
//! the frame unwinds (a started green thread never leaves its thread, and
//! its stack is unwound before it is freed, or leaked with everything on
//! it when it refuses to unwind). A [`Watch`] keeps its node in a `Box`
//! freed only by its `Drop`, which unlinks it first. Every access to a node
//! is made under the lock of the state its list lives in: a notifier
//! reaches it through `&mut WaitList` (inside the locked state), its owner
//! only while it holds that lock.
//!
//! A notifier unlinks the node it notifies (so a notified waiter has
//! nothing to remove), takes its [`Wakeup`] out (no clone; woken after the
//! lock is released), and may hand the node a value (a send to a parked
//! receive) or take the one it offers (a receive from a parked send). A
//! waiter that unwinds after it was notified gives its node's value and
//! the notification back to its [`Site`]'s `unwind` hook, which puts the
//! value back and picks the next waiter: nothing sent is lost and no
//! waiter is stranded.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::Arc;
use std::thread::Thread;
use std::time::Instant;

use parking_lot::{Mutex, MutexGuard};

use super::park::park;
use super::task::{Task, Wait};
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
    pub(crate) fn wake(self) {
        match self {
            // By value: the ready queue takes this `Arc` (no clone).
            Wakeup::Task(task) => std::task::Wake::wake(task),
            Wakeup::Thread(thread) => thread.unpark(),
        }
    }
}

/// Wake `w`, if any.
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

/// A waiter's state, reached only under its list's lock.
struct Slot<P> {
    /// Taken by the notifier.
    wakeup: Option<Wakeup>,
    linked: bool,
    notified: bool,
    /// Whether a notifier may hand it a value (a receive; not a watch).
    takes: bool,
    /// A value handed to it, or the one it offers.
    value: Option<P>,
}

/// One waiter.
struct Node<P> {
    slot: UnsafeCell<Slot<P>>,
}

impl<P> Node<P> {
    fn new(takes: bool, value: Option<P>) -> Node<P> {
        Node {
            slot: UnsafeCell::new(Slot {
                wakeup: Some(Wakeup::current()),
                linked: false,
                notified: false,
                takes,
                value,
            }),
        }
    }

    /// Its state.
    ///
    /// # Safety
    /// The caller holds the lock of the state whose list the node is (or
    /// was last) linked to, and holds no other reference from `slot`.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slot(&self) -> &mut Slot<P> {
        // SAFETY: the lock serialises every access (the caller's contract).
        unsafe { &mut *self.slot.get() }
    }
}

/// Parked waiters, first come first notified. Lives inside the state it
/// guards (under the same lock): `&mut WaitList` proves that lock is held.
pub(crate) struct WaitList<P> {
    queue: VecDeque<NonNull<Node<P>>>,
}

// SAFETY: the pointers are only followed under the lock of the state the
// list lives in (see the module doc), and what they reach (a `Wakeup`,
// which is `Send`, and a `P`) moves between threads only as a `P: Send`.
unsafe impl<P: Send> Send for WaitList<P> {}

// The node pointers make the list `!UnwindSafe` by default, which would
// take that from `Event`, `Mutex`, `Semaphore` and the channels, as they
// were before nodes were pointers. Nothing a caught panic could observe is
// half-done: a node is linked or unlinked by one queue operation and its
// flag, both under the lock.
impl<P> std::panic::UnwindSafe for WaitList<P> {}

impl<P> Default for WaitList<P> {
    fn default() -> Self {
        WaitList {
            queue: VecDeque::new(),
        }
    }
}

impl<P> WaitList<P> {
    fn link(&mut self, node: &Node<P>) {
        // SAFETY: `&mut self`: the lock is held; no other slot reference.
        unsafe { node.slot() }.linked = true;
        self.queue.push_back(NonNull::from(node));
    }

    fn unlink(&mut self, node: &Node<P>) {
        let me = NonNull::from(node);
        if let Some(i) = self.queue.iter().position(|n| *n == me) {
            self.queue.remove(i);
        }
        // SAFETY: as in `link`.
        unsafe { node.slot() }.linked = false;
    }

    /// Whether the first waiter takes a value handed to it.
    pub(crate) fn first_takes(&self) -> bool {
        self.queue.front().is_some_and(|n| {
            // SAFETY: a linked node is alive (module doc); `&self` of the
            // list inside the locked state: the lock is held.
            unsafe { n.as_ref().slot() }.takes
        })
    }

    /// Take the first waiter off the list and mark it notified; `f` sees
    /// its value slot (to hand it a value, or take the one it offers).
    /// Returns whom to wake once the lock is released.
    pub(crate) fn notify_one_with(&mut self, f: impl FnOnce(&mut Option<P>)) -> Option<Wakeup> {
        let node = self.queue.pop_front()?;
        // SAFETY: it was linked, so alive; `&mut self`: the lock is held.
        let slot = unsafe { node.as_ref().slot() };
        slot.linked = false;
        slot.notified = true;
        f(&mut slot.value);
        slot.wakeup.take()
    }

    /// [`notify_one_with`](Self::notify_one_with), leaving its value be.
    pub(crate) fn notify_one(&mut self) -> Option<Wakeup> {
        self.notify_one_with(|_| {})
    }

    /// Notify every waiter (see [`notify_one`](Self::notify_one)).
    pub(crate) fn notify_all(&mut self) -> Vec<Wakeup> {
        let mut all = Vec::new();
        while !self.queue.is_empty() {
            all.extend(self.notify_one());
        }
        all
    }
}

/// Where a wait parks: the list in the locked state `S`, what `dump` shows,
/// and what a waiter that unwinds after it was notified gives back.
pub(crate) struct Site<S, P> {
    /// The list.
    pub(crate) list: fn(&mut S) -> &mut WaitList<P>,
    /// What the parked green thread waits for.
    pub(crate) wait: Wait,
    /// Whether a notifier may hand the waiter a value.
    pub(crate) takes: bool,
    /// Called under the lock for a waiter that unwinds (or stops watching)
    /// after it was notified, with its node's value: put the value back and
    /// return the next waiter to wake, if the notification should pass on.
    pub(crate) unwind: fn(&mut S, Option<P>) -> Option<Wakeup>,
}

impl<S, P> Clone for Site<S, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S, P> Copy for Site<S, P> {}

/// How a [`wait_on`] ended: the lock is held again.
pub(crate) struct Woken<'a, S, P> {
    /// The lock, held.
    pub(crate) guard: MutexGuard<'a, S>,
    /// The node's value: one handed to it, or its own offer not taken.
    pub(crate) value: Option<P>,
}

/// Park the caller on `site`'s list in `lock`'s state (whose `guard` the
/// caller holds and gives up meanwhile), offering `value`, until it is
/// notified or `deadline` passes; returns with the lock held again, so
/// the caller re-checks its condition in the same critical section. If the
/// caller unwinds from the park (cancelled, or a `timeout` elapsed), it
/// leaves the list, or, when notified already, gives its value and the
/// notification to `site.unwind`.
pub(crate) fn wait_on<'a, S, P>(
    lock: &'a Mutex<S>,
    mut guard: MutexGuard<'a, S>,
    site: Site<S, P>,
    value: Option<P>,
    deadline: Option<Instant>,
) -> Woken<'a, S, P> {
    let node = Node::new(site.takes, value);
    (site.list)(&mut guard).link(&node);
    drop(guard);
    let leave = Leave {
        lock,
        site,
        node: &node,
    };
    loop {
        park(site.wait, deadline);
        let mut guard = lock.lock();
        let (notified, linked) = {
            // SAFETY: the lock is held; the reference ends before `unlink`.
            let slot = unsafe { node.slot() };
            (slot.notified, slot.linked)
        };
        let expired = !notified && deadline.is_some_and(|d| Instant::now() >= d);
        if notified || expired {
            if linked {
                (site.list)(&mut guard).unlink(&node);
            }
            std::mem::forget(leave);
            // SAFETY: the lock is held, and the node is off the list.
            let value = unsafe { node.slot() }.value.take();
            return Woken { guard, value };
        }
    }
}

/// Takes a waiter off its list when it stops waiting other than by a
/// return from `wait_on` (an unwind, a `Watch` dropped).
struct Leave<'n, 'a, S, P> {
    lock: &'a Mutex<S>,
    site: Site<S, P>,
    node: &'n Node<P>,
}

impl<S, P> Drop for Leave<'_, '_, S, P> {
    fn drop(&mut self) {
        let mut state = self.lock.lock();
        let (linked, notified) = {
            // SAFETY: the lock is held; the reference ends before `unlink`.
            let slot = unsafe { self.node.slot() };
            (slot.linked, slot.notified)
        };
        let next = if linked {
            (self.site.list)(&mut state).unlink(self.node);
            None
        } else if notified {
            // SAFETY: the lock is held; the node is off the list.
            let value = unsafe { self.node.slot() }.value.take();
            (self.site.unwind)(&mut state, value)
        } else {
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
/// (`site.unwind`). Forgetting one leaks its node, which stays valid.
pub(crate) struct Watch<'a, S, P> {
    lock: &'a Mutex<S>,
    site: Site<S, P>,
    node: Box<Node<P>>,
}

impl<'a, S, P> Watch<'a, S, P> {
    /// Register the caller on `site`'s list in `lock`'s state.
    pub(crate) fn new(lock: &'a Mutex<S>, site: Site<S, P>) -> Watch<'a, S, P> {
        let node = Box::new(Node::new(false, None));
        (site.list)(&mut lock.lock()).link(&node);
        Watch { lock, site, node }
    }
}

impl<S, P> Drop for Watch<'_, S, P> {
    fn drop(&mut self) {
        drop(Leave {
            lock: self.lock,
            site: self.site,
            node: &self.node,
        });
    }
}
