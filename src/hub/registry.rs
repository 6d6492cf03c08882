//! Every green thread a runtime knows of, for [`dump`](super::dump) and the
//! watchdog: sharded by the worker that spawned it (one more shard for
//! spawns from outside), so spawns on different workers do not contend.
//!
//! Each shard is an intrusive doubly linked list through the tasks
//! themselves (their [`Links`]) under one lock (a [`QuickMutex`]: its
//! unlock is a plain store, where `parking_lot`'s is a locked
//! read-modify-write): joining and leaving it are a few pointer writes
//! between an uncontended lock and unlock, with no allocation and no table
//! to search. The list holds no
//! count of its tasks, and the readers ([`snapshot`](Registry::snapshot),
//! [`find`](Registry::find)) take none: they read what they need of each
//! task under the lock.
//!
//! # Why it is sound
//! - Every read and write of a task's `Links`, and of a shard's head and
//!   length, happens with that shard's lock held: the lock orders them
//!   between threads (a task joins on its spawner's thread and leaves on
//!   whichever thread finishes it: another worker, a blocking-pool thread,
//!   a plain thread dropping its token).
//! - A task is in at most one shard (`shard` is fixed at its making), and
//!   its `linked` flag, under the same lock, makes leaving idempotent: a
//!   second `remove` finds it unlinked and does nothing.
//! - A listed task is alive. It joins at its making and leaves when it
//!   finishes (`Task::complete`), and until it finishes something that will
//!   finish it holds a count of it: its token (`unstarted::NotStarted`, which
//!   finishes it when dropped unrun), then its worker's `live` entry (which
//!   finishes it before it goes), or a blocking-pool job (a token too).
//!   Should a task still be listed when its last count goes (a bug
//!   elsewhere), its `Drop` takes it out under the lock before any of it
//!   is freed, so a reader under the lock never reaches freed memory.
//!
//! These are the rules a model checker would drive (spawn, finish on
//! another thread, dump at any point): the list is a plain sequential data
//! structure whose every access is inside one critical section.
//!
//! Owns: [`Registry`], [`Links`] and what it asks of a task it lists
//! ([`Listed`]: its links, shard and id). Uses the spin lock only: the
//! task is a type parameter (the task header, which holds its links, sits
//! above this file).

use std::cell::UnsafeCell;
use std::fmt;
use std::ptr;

use super::spin_lock::QuickMutex;

/// What the registry reads of a task it lists.
pub(crate) trait Listed: Sized {
    /// Its place in its shard.
    fn links(&self) -> &Links<Self>;
    /// Its shard: fixed when it is made.
    fn shard(&self) -> usize;
    /// Its id, which orders a snapshot.
    fn id(&self) -> u64;
}

/// A task's place in its registry shard (see the module doc).
pub(crate) struct Links<T> {
    cell: UnsafeCell<Link<T>>,
}

struct Link<T> {
    prev: *const T,
    next: *const T,
    linked: bool,
}

impl<T> Clone for Link<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Link<T> {}

// SAFETY: the cell is only read or written with the lock of the task's
// registry shard held (see the module doc), which orders every access.
unsafe impl<T> Sync for Links<T> {}
// SAFETY: as for `Sync`; the pointers are to tasks, which are `Send + Sync`.
unsafe impl<T> Send for Links<T> {}

impl<T> Links<T> {
    /// Whether its task is in a shard, read by the task's only owner.
    pub(crate) fn is_linked(&mut self) -> bool {
        self.cell.get_mut().linked
    }

    /// Not in any shard.
    pub(crate) const fn new() -> Links<T> {
        Links {
            cell: UnsafeCell::new(Link {
                prev: ptr::null(),
                next: ptr::null(),
                linked: false,
            }),
        }
    }
}

impl<T> fmt::Debug for Links<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Links")
    }
}

/// One shard's list: its newest task, and how many it holds.
struct Shard<T> {
    head: *const T,
    len: usize,
    /// How many tasks ever joined it.
    joined: u64,
}

// SAFETY: `head` points at a listed task, alive (see the module doc), and
// is only used with the shard's lock held.
unsafe impl<T> Send for Shard<T> {}

/// The links of `task`.
///
/// # Safety
/// The caller holds the lock of `task`'s shard, and `task` is alive.
unsafe fn link_of<T: Listed>(task: *const T) -> *mut Link<T> {
    // SAFETY: alive (the caller's contract); a raw pointer into the cell,
    // used under the lock only.
    unsafe { (*task).links().cell.get() }
}

/// The runtime's live tasks.
pub(crate) struct Registry<T> {
    shards: Box<[QuickMutex<Shard<T>>]>,
}

impl<T: Listed> Registry<T> {
    pub(crate) fn new(shards: usize) -> Registry<T> {
        Registry {
            shards: (0..shards)
                .map(|_| {
                    QuickMutex::new(Shard {
                        head: ptr::null(),
                        len: 0,
                        joined: 0,
                    })
                })
                .collect(),
        }
    }

    fn shard_of(&self, task: &T) -> &QuickMutex<Shard<T>> {
        &self.shards[task.shard().min(self.shards.len() - 1)]
    }

    /// Add `task` (made just now, not in any shard) to its shard.
    pub(crate) fn insert(&self, task: &T) {
        let raw: *const T = task;
        let mut shard = self.shard_of(task).lock();
        // SAFETY: under the shard's lock; `raw` is alive (borrowed) and so
        // is the old head (listed); `task` is in no shard, so nobody else
        // reaches its links.
        unsafe {
            let link = &mut *link_of(raw);
            debug_assert!(!link.linked, "a task joins its shard once");
            *link = Link {
                prev: ptr::null(),
                next: shard.head,
                linked: true,
            };
            if !shard.head.is_null() {
                (*link_of(shard.head)).prev = raw;
            }
        }
        shard.head = raw;
        shard.len += 1;
        shard.joined += 1;
    }

    /// Take `task` out of its shard, if it is in it.
    pub(crate) fn remove(&self, task: &T) {
        let this: *const T = task;
        let mut shard = self.shard_of(task).lock();
        // SAFETY: under the shard's lock; `task` is alive (borrowed), and
        // its neighbours are alive (listed).
        unsafe {
            let link = &mut *link_of(this);
            if !link.linked {
                return;
            }
            let Link { prev, next, .. } = *link;
            if prev.is_null() {
                shard.head = next;
            } else {
                (*link_of(prev)).next = next;
            }
            if !next.is_null() {
                (*link_of(next)).prev = prev;
            }
            *link = Link {
                prev: ptr::null(),
                next: ptr::null(),
                linked: false,
            };
        }
        shard.len -= 1;
    }

    /// `f` of every registered task, by id; `f` runs under a shard's lock
    /// (so it must not spawn, finish or dump).
    pub(crate) fn snapshot<R>(&self, mut f: impl FnMut(&T) -> R) -> Vec<R> {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.lock();
            all.reserve(shard.len);
            // SAFETY: under the shard's lock, every listed task is alive
            // (module doc).
            unsafe { each(&shard, |t| all.push(((*t).id(), f(&*t)))) };
        }
        all.sort_by_key(|(id, _)| *id);
        all.into_iter().map(|(_, r)| r).collect()
    }

    /// Whether `f` holds for every registered task, stopping at the first
    /// for which it does not; `f` runs under a shard's lock (as in
    /// [`snapshot`](Self::snapshot)).
    pub(crate) fn all(&self, mut f: impl FnMut(&T) -> bool) -> bool {
        self.shards.iter().all(|shard| {
            let shard = shard.lock();
            let mut t = shard.head;
            while !t.is_null() {
                // SAFETY: under the shard's lock, every listed task is
                // alive (module doc), and so are its links.
                unsafe {
                    if !f(&*t) {
                        return false;
                    }
                    t = (*link_of(t)).next;
                }
            }
            true
        })
    }

    /// Call `f` with every registered task, under its shard's lock (as in
    /// [`snapshot`](Self::snapshot)), in no particular order.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&T)) {
        for shard in self.shards.iter() {
            let shard = shard.lock();
            // SAFETY: as in `snapshot`.
            unsafe { each(&shard, |t| f(&*t)) };
        }
    }

    /// `f` of the registered task with this id, under its shard's lock (as
    /// in [`snapshot`](Self::snapshot)).
    pub(crate) fn find<R>(&self, id: u64, f: impl FnOnce(&T) -> R) -> Option<R> {
        let mut f = Some(f);
        self.shards.iter().find_map(|shard| {
            let shard = shard.lock();
            let mut found = None;
            // SAFETY: as in `snapshot`.
            unsafe {
                each(&shard, |t| {
                    if (*t).id() == id {
                        if let Some(f) = f.take() {
                            found = Some(f(&*t));
                        }
                    }
                })
            };
            found
        })
    }

    /// How many tasks were ever registered.
    pub(crate) fn joined(&self) -> u64 {
        self.shards.iter().map(|s| s.lock().joined).sum()
    }

    /// How many tasks are registered.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len).sum()
    }
}

/// Call `f` with every task of `shard`, newest first.
///
/// # Safety
/// `shard` is the guard of its lock; `f` does not touch any task's links.
unsafe fn each<T: Listed>(shard: &Shard<T>, mut f: impl FnMut(*const T)) {
    let mut t = shard.head;
    while !t.is_null() {
        f(t);
        // SAFETY: listed, so alive; under the lock (the caller's contract).
        t = unsafe { (*link_of(t)).next };
    }
}
