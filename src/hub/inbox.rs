//! A worker's inbox: the tasks other threads wake for it, and the unstarted
//! tasks they place on it (`net::serve` dealing connections out), until
//! the worker takes them; and its closing when the worker has ended.
//!
//! Owns [`Inbox`] and its rules (below). Uses `std`'s atomics and
//! `parking_lot`'s mutex (`loom`'s under `cfg(loom)`, where the unit tests
//! check the rules over the interleavings of two wakers and the owner, or
//! a waker and the close: `RUSTFLAGS="--cfg loom" cargo test --release
//! --lib hub::inbox`), and x86's `prefetchw` hint (inline assembly) for
//! the owner's spin. The worker (`worker::scheduler`) owns the sleep handshake
//! around it and where the taken tasks go.
//!
//! # The slot and the overflow
//! A lone wake (the usual case: a reply between two workers) goes into a
//! one-task **slot**, an `AtomicPtr` written by one compare-and-swap from
//! empty, no lock. The owner takes it with a load and a plain store of
//! empty (no read-modify-write: only the owner empties a full slot, so no
//! waker can change it in between), so a wake moves the inbox's cache line
//! to the waker once and back to the owner once, with one locked
//! instruction in all. A wake that finds the slot full, and every wake
//! while the **overflow** (a list behind a lock) may hold tasks, goes to
//! the overflow, announced by `more` (and by a mark in the slot, if it
//! is empty, so that the owner's hand-offs read one word); placed tasks go
//! there too.
//!
//! Wake order: the owner takes the slot, then, if `more` is set, under
//! the lock, the slot again and the overflow. The tasks of one waker (and
//! of wakes ordered by happens-before) are taken in the order they were
//! woken, because a task goes to the overflow only while the slot is full
//! or `more` is set, and into the slot only while `more` is clear: a
//! waker whose earlier task went to the overflow sees its own `more` (or
//! the owner's clearing of it, which the owner does under the lock as it
//! drains the overflow, so that earlier task is taken already), so a task
//! in the slot never comes after one in the overflow from the same waker.
//! And a task in the overflow came while the slot held an earlier one or
//! after that one was taken: only the owner empties the slot, so the
//! slot's second look, under the lock, takes that earlier one first.
//! Without that second look, a first wake into the slot just after the
//! owner's look at it and a second into the overflow would be taken
//! second first (loom found it; and reading `more` before the slot only
//! moved the window).
//!
//! # Closing
//! [`close`](Inbox::close), once the worker has ended, drops what is left
//! and refuses every later push and placement (it returns the task to the
//! caller, which drops it): a task left in the inbox of an ended worker
//! would hold the runtime's shared state, which holds the inbox, for ever.
//! The slot is closed with a marker no waker's compare-and-swap expects,
//! so a late wake takes the locked path, where the closed flag is read
//! under the same lock `close` sets it under.

use std::ptr::{self, NonNull};
use std::sync::Arc;

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// `parking_lot`'s mutex, or `loom`'s with the same `lock` under `cfg(loom)`.
#[cfg(not(loom))]
use parking_lot::Mutex;
#[cfg(loom)]
struct Mutex<T>(loom::sync::Mutex<T>);
#[cfg(loom)]
impl<T> Mutex<T> {
    fn new(v: T) -> Mutex<T> {
        Mutex(loom::sync::Mutex::new(v))
    }
    fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        self.0.lock().expect("a loom mutex is not poisoned")
    }
}

/// Tasks woken for one worker (`Arc<T>`) and unstarted tasks placed on it
/// (`P`), from other threads: see the module's rules.
pub(crate) struct Inbox<T, P> {
    /// `Arc::into_raw` of the oldest woken task not yet taken; null when
    /// empty; [`overflow_marker`] when empty with the overflow holding tasks;
    /// [`closed_marker`] once closed.
    slot: AtomicPtr<T>,
    /// The overflow may hold tasks: set under the lock by whoever adds to
    /// it, cleared under the lock by the owner as it drains it.
    more: AtomicBool,
    overflow: Mutex<Overflow<T, P>>,
}

/// The locked part of an [`Inbox`]. The placed tasks are behind a pointer
/// (allocated at the first placement, then kept) so that the whole inbox
/// fits the one cache line a wake touches.
struct Overflow<T, P> {
    woken: Vec<Arc<T>>,
    #[allow(clippy::box_collection)] // the box is the point: see above
    placed: Option<Box<Vec<P>>>,
    closed: bool,
}

/// The slot's value once closed: not the address of any `Arc`'s value (an
/// `Arc` keeps its counts in front of its value, so none is at the
/// alignment's own address), and not null.
fn closed_marker<T>() -> *mut T {
    NonNull::dangling().as_ptr()
}

/// The slot's value when it holds no task but the overflow does (put by an
/// overflow push that found the slot empty), so that one load of the slot
/// sees every wake but one racing the owner's take (see
/// [`Inbox::marked`]). Not an `Arc`'s value either (twice the alignment).
fn overflow_marker<T>() -> *mut T {
    closed_marker::<T>().wrapping_add(1)
}

/// Whether `p`, a value of the slot, is a pushed task's reference.
fn is_task<T>(p: *mut T) -> bool {
    !p.is_null() && p != closed_marker() && p != overflow_marker()
}

impl<T, P> Default for Inbox<T, P> {
    fn default() -> Inbox<T, P> {
        Inbox {
            slot: AtomicPtr::new(ptr::null_mut()),
            more: AtomicBool::new(false),
            overflow: Mutex::new(Overflow {
                woken: Vec::new(),
                placed: None,
                closed: false,
            }),
        }
    }
}

impl<T, P> Inbox<T, P> {
    /// Queue a woken task; `Err` gives it back once the inbox is closed.
    /// Its announcement is a `SeqCst` read-modify-write (the slot's) or
    /// `SeqCst` store (`more`), for the caller's sleep handshake: a `SeqCst`
    /// load of the owner's `sleeping` flag may follow without a fence.
    #[inline]
    pub(crate) fn push(&self, task: Arc<T>) -> Result<(), Arc<T>> {
        if !self.more.load(Ordering::Acquire) {
            let p = Arc::into_raw(task).cast_mut();
            match self.slot.compare_exchange(
                ptr::null_mut(),
                p,
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                // SAFETY: `p` is the `into_raw` above, which the failed
                // exchange did not publish: still this call's reference.
                Err(_) => return self.push_locked(unsafe { Arc::from_raw(p) }),
            }
        }
        self.push_locked(task)
    }

    /// [`push`](Self::push) to the overflow.
    #[cold]
    fn push_locked(&self, task: Arc<T>) -> Result<(), Arc<T>> {
        let mut o = self.overflow.lock();
        if o.closed {
            return Err(task);
        }
        o.woken.push(task);
        self.announce_overflow();
        Ok(())
    }

    /// Set `more` (under the lock, after adding to the overflow), and mark
    /// an empty slot (a full one is taken, and `more` read, by the owner).
    fn announce_overflow(&self) {
        self.more.store(true, Ordering::SeqCst);
        let _ = self.slot.compare_exchange(
            ptr::null_mut(),
            overflow_marker(),
            Ordering::SeqCst,
            Ordering::Relaxed,
        );
    }

    /// Queue an unstarted task to start on the owner; `Err` gives it back
    /// once the inbox is closed. Announced by a `SeqCst` store of `more`
    /// (the caller's sleep handshake follows).
    pub(crate) fn place(&self, task: P) -> Result<(), P> {
        let mut o = self.overflow.lock();
        if o.closed {
            return Err(task);
        }
        o.placed.get_or_insert_with(Box::default).push(task);
        self.announce_overflow();
        Ok(())
    }

    /// Whether a task may wait (the owner's look: one cache line). With
    /// `SeqCst` loads, for the owner's sleep handshake (after its `SeqCst`
    /// store of `sleeping` and a fence); `Relaxed` elsewhere.
    #[inline(always)]
    pub(crate) fn has_work(&self, order: Ordering) -> bool {
        !self.slot.load(order).is_null() || self.more.load(order)
    }

    /// One load for the owner's hand-offs: whether the slot holds a task or
    /// the overflow's mark. It misses only an overflow push that found the
    /// slot full while the owner was taking that slot's task and did not
    /// see `more` yet: [`has_work`](Self::has_work), which the loop's round
    /// and the sleep handshake read, sees that one.
    #[inline(always)]
    pub(crate) fn marked(&self) -> bool {
        !self.slot.load(Ordering::Relaxed).is_null()
    }

    /// [`has_work`](Self::has_work) for the owner's spin, which reads it in
    /// a loop: a woken task found in the slot has its cache lines fetched
    /// for writing at once, in the background (the waker wrote them last;
    /// the resume writes them first), while the owner goes on to take it.
    #[inline(always)]
    pub(crate) fn look(&self) -> bool {
        let p = self.slot.load(Ordering::Relaxed);
        if p.is_null() {
            return self.more.load(Ordering::Relaxed);
        }
        if p != overflow_marker() {
            prefetch_for_write(p);
        }
        true
    }

    /// The owner's take: each woken task, oldest first, to `woken`; the
    /// placed tasks, in placement order, drained by `placed`. Only the
    /// owner's thread calls this, and never after [`close`](Self::close).
    #[inline]
    pub(crate) fn take(&self, mut woken: impl FnMut(Arc<T>), placed: impl FnOnce(&mut Vec<P>)) {
        self.take_slot(&mut woken);
        if self.more.load(Ordering::Acquire) {
            self.take_overflow(woken, placed);
        }
    }

    /// The slot's task, if it holds one, to `woken` (the owner only).
    #[inline(always)]
    fn take_slot(&self, woken: &mut impl FnMut(Arc<T>)) {
        let p = self.slot.load(Ordering::Acquire);
        if !p.is_null() {
            // Only the owner empties a full slot, so no waker changed it
            // since the load: a plain store gives it back.
            self.slot.store(ptr::null_mut(), Ordering::Relaxed);
            if p != overflow_marker() {
                // SAFETY: a non-null slot that is not the overflow's mark
                // holds the `into_raw` reference of a push (never the
                // closed marker: not closed before the owner ended), which
                // the acquire load made ours.
                woken(unsafe { Arc::from_raw(p) });
            }
        }
    }

    /// [`take`](Self::take)'s overflow, after the slot's second look.
    #[cold]
    fn take_overflow(&self, mut woken: impl FnMut(Arc<T>), placed: impl FnOnce(&mut Vec<P>)) {
        let mut o = self.overflow.lock();
        self.take_slot(&mut woken);
        self.more.store(false, Ordering::Relaxed);
        // Drained in place: the buffers stay for the next pushes.
        o.woken.drain(..).for_each(woken);
        if let Some(p) = o.placed.as_mut().filter(|p| !p.is_empty()) {
            placed(p);
        }
    }

    /// The owner has ended: drop what is left, refuse what comes later.
    /// Dropped after the lock: a task's destructor may push or place again
    /// (refused then).
    pub(crate) fn close(&self) {
        let (woken, placed, slot) = {
            let mut o = self.overflow.lock();
            o.closed = true;
            let slot = self.slot.swap(closed_marker(), Ordering::AcqRel);
            (std::mem::take(&mut o.woken), o.placed.take(), slot)
        };
        if is_task(slot) {
            // SAFETY: a push's `into_raw` reference, taken out of the slot
            // by the swap (the owner has ended: nobody else takes it).
            drop(unsafe { Arc::from_raw(slot) });
        }
        drop(woken);
        drop(placed);
    }
}

/// Ask for the cache lines of the `Arc` value at `p` (its counts and
/// `size_of::<T>()` bytes) for writing, without waiting for them.
#[cfg(all(target_arch = "x86_64", not(loom)))]
#[inline(always)]
fn prefetch_for_write<T>(p: *const T) {
    const LINE: usize = 64;
    let counts = 2 * std::mem::size_of::<usize>();
    let end = p as usize + std::mem::size_of::<T>();
    let mut line = (p as usize).wrapping_sub(counts) & !(LINE - 1);
    while line < end {
        // SAFETY: `prefetchw` is a hint: it never faults and changes no
        // state a program can see, whatever the address (a CPU without it
        // treats it as a no-op).
        unsafe {
            std::arch::asm!(
                "prefetchw [{}]",
                in(reg) line,
                options(nostack, preserves_flags, readonly)
            );
        }
        line += LINE;
    }
}

/// Elsewhere, no prefetch.
#[cfg(not(all(target_arch = "x86_64", not(loom))))]
#[inline(always)]
fn prefetch_for_write<T>(_: *const T) {}

impl<T, P> Drop for Inbox<T, P> {
    fn drop(&mut self) {
        let p = self.slot.load(Ordering::Relaxed);
        if is_task(p) {
            // SAFETY: a push's reference nobody took (`&mut self`: no one
            // else can).
            drop(unsafe { Arc::from_raw(p) });
        }
    }
}

#[cfg(all(test, loom))]
mod tests {
    use super::*;

    use loom::thread;

    /// Everything taken so far, as `(waker, sequence)` pairs, and the
    /// placed tasks.
    fn take_all(
        inbox: &Inbox<(usize, usize), usize>,
        got: &mut Vec<(usize, usize)>,
        placed: &mut Vec<usize>,
    ) {
        inbox.take(|t| got.push(*t), |p| placed.append(p));
    }

    /// Two wakers wake two tasks each while the owner takes: every task is
    /// taken exactly once, each waker's in its order. (Bounded to three
    /// preemptions: all interleavings ran for more than 15 minutes; the
    /// order bug loom found, see the module doc, needs two.)
    #[test]
    fn every_wake_taken_once_in_each_wakers_order() {
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(3);
        model.check(|| {
            let inbox = Arc::new(Inbox::<(usize, usize), usize>::default());
            let wakers: Vec<_> = (0..2)
                .map(|w| {
                    let inbox = Arc::clone(&inbox);
                    thread::spawn(move || {
                        for s in 0..2 {
                            inbox.push(Arc::new((w, s))).expect("not closed");
                        }
                    })
                })
                .collect();
            let mut got = Vec::new();
            let mut placed = Vec::new();
            take_all(&inbox, &mut got, &mut placed);
            take_all(&inbox, &mut got, &mut placed);
            for w in wakers {
                w.join().unwrap();
            }
            take_all(&inbox, &mut got, &mut placed);
            assert_eq!(got.len(), 4, "{got:?}");
            for w in 0..2 {
                let mine: Vec<usize> = got.iter().filter(|t| t.0 == w).map(|t| t.1).collect();
                assert_eq!(mine, [0, 1], "waker {w}'s tasks out of order: {got:?}");
            }
            assert!(!inbox.has_work(Ordering::SeqCst));
        });
    }

    /// A wake ordered after another waker's (through a flag) is taken after
    /// it, and placements arrive in order beside the wakes.
    #[test]
    fn a_wake_after_another_is_taken_after_it() {
        loom::model(|| {
            let inbox = Arc::new(Inbox::<(usize, usize), usize>::default());
            let first_done = Arc::new(AtomicBool::new(false));
            let a = {
                let inbox = Arc::clone(&inbox);
                let done = Arc::clone(&first_done);
                thread::spawn(move || {
                    inbox.push(Arc::new((0, 0))).expect("not closed");
                    inbox.push(Arc::new((0, 1))).expect("not closed");
                    inbox.place(7).expect("not closed");
                    done.store(true, Ordering::Release);
                })
            };
            let b = {
                let inbox = Arc::clone(&inbox);
                let done = Arc::clone(&first_done);
                thread::spawn(move || {
                    if done.load(Ordering::Acquire) {
                        inbox.push(Arc::new((1, 2))).expect("not closed");
                    }
                })
            };
            let mut got = Vec::new();
            let mut placed = Vec::new();
            take_all(&inbox, &mut got, &mut placed);
            a.join().unwrap();
            b.join().unwrap();
            take_all(&inbox, &mut got, &mut placed);
            take_all(&inbox, &mut got, &mut placed);
            let seqs: Vec<usize> = got.iter().map(|t| t.1).collect();
            assert!(seqs == [0, 1] || seqs == [0, 1, 2], "{got:?}");
            assert_eq!(placed, [7]);
        });
    }

    /// A push or placement racing the close is either refused or dropped
    /// by the close: nothing stays in a closed inbox.
    #[test]
    fn nothing_outlives_the_close() {
        loom::model(|| {
            let inbox = Arc::new(Inbox::<(usize, usize), Arc<()>>::default());
            let task = Arc::new((0, 0));
            let placed = Arc::new(());
            let waker = {
                let inbox = Arc::clone(&inbox);
                let task = Arc::clone(&task);
                let placed = Arc::clone(&placed);
                thread::spawn(move || {
                    drop(inbox.push(task));
                    drop(inbox.place(placed));
                })
            };
            inbox.close();
            waker.join().unwrap();
            assert_eq!(
                Arc::strong_count(&task),
                1,
                "a woken task outlived the close"
            );
            assert_eq!(
                Arc::strong_count(&placed),
                1,
                "a placed task outlived the close"
            );
        });
    }
}
