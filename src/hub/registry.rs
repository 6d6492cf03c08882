//! Every green thread a runtime knows of, for [`dump`](super::dump) and the
//! watchdog: sharded by the worker that spawned it (one more shard for
//! spawns from outside), so spawns on different workers do not contend.
//!
//! Each shard is an intrusive doubly linked list through the tasks
//! themselves (their [`Links`]) under one lock (a [`QuickMutex`]: its
//! unlock is a plain store, where `parking_lot`'s is a locked
//! read-modify-write): joining and leaving it are a few pointer writes
//! between an uncontended lock and unlock, with no allocation and no table
//! to search (the `Slab` it
//! replaces cost ~50 instructions per insert, its entry's match and write,
//! and as much per removal). The list owns one strong count of each task
//! in it (taken with `Arc::into_raw` when it joins, given back when it
//! leaves), so a task in a shard is always alive; a task that never
//! leaves (a bug elsewhere) is leaked, never freed while listed.
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
//! - A listed task holds the list's strong count, so `snapshot` and `find`
//!   may take a new `Arc` of any task they reach under the lock.
//!
//! These are the rules a model checker would drive (spawn, finish on
//! another thread, dump at any point): the list is a plain sequential data
//! structure whose every access is inside one critical section.
//!
//! Owns: [`Registry`] and [`Links`]. Uses the task's `shard` and `links`.

use std::cell::UnsafeCell;
use std::fmt;
use std::ptr;
use std::sync::Arc;

use super::quick::QuickMutex;
use super::task::Task;

/// A task's place in its registry shard (see the module doc).
pub(crate) struct Links {
    cell: UnsafeCell<Link>,
}

#[derive(Clone, Copy)]
struct Link {
    prev: *const Task,
    next: *const Task,
    linked: bool,
}

// SAFETY: the cell is only read or written with the lock of the task's
// registry shard held (see the module doc), which orders every access.
unsafe impl Sync for Links {}
// SAFETY: as for `Sync`; the pointers are to tasks, which are `Send + Sync`.
unsafe impl Send for Links {}

impl Links {
    /// Not in any shard.
    pub(crate) const fn new() -> Links {
        Links {
            cell: UnsafeCell::new(Link {
                prev: ptr::null(),
                next: ptr::null(),
                linked: false,
            }),
        }
    }
}

impl fmt::Debug for Links {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Links")
    }
}

/// One shard's list: its newest task, and how many it holds.
struct Shard {
    head: *const Task,
    len: usize,
}

// SAFETY: `head` points at a task this shard holds a strong count of, and
// is only used with the shard's mutex held.
unsafe impl Send for Shard {}

/// The links of `task`.
///
/// # Safety
/// The caller holds the lock of `task`'s shard, and `task` is alive.
unsafe fn link_of(task: *const Task) -> *mut Link {
    // SAFETY: alive (the caller's contract); a raw pointer into the cell,
    // used under the lock only.
    unsafe { (*task).links.cell.get() }
}

/// The runtime's live tasks.
pub(crate) struct Registry {
    shards: Box<[QuickMutex<Shard>]>,
}

impl Registry {
    pub(crate) fn new(shards: usize) -> Registry {
        Registry {
            shards: (0..shards)
                .map(|_| {
                    QuickMutex::new(Shard {
                        head: ptr::null(),
                        len: 0,
                    })
                })
                .collect(),
        }
    }

    fn shard_of(&self, task: &Task) -> &QuickMutex<Shard> {
        &self.shards[task.shard.min(self.shards.len() - 1)]
    }

    /// Add `task` (made just now, not in any shard) to its shard.
    pub(crate) fn insert(&self, task: &Arc<Task>) {
        let raw = Arc::into_raw(Arc::clone(task));
        let mut shard = self.shard_of(task).lock();
        // SAFETY: under the shard's lock; `raw` is alive (the count taken
        // above, now the list's) and so is the old head (the list holds
        // it); `task` is in no shard, so nobody else reaches its links.
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
    }

    /// Take `task` out of its shard, if it is in it (the list's count of
    /// it is dropped after the lock).
    pub(crate) fn remove(&self, task: &Task) {
        let this: *const Task = task;
        let mut shard = self.shard_of(task).lock();
        // SAFETY: under the shard's lock; `task` is alive (borrowed), and
        // its neighbours are alive (the list holds them).
        let listed = unsafe {
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
            shard.len -= 1;
            // The list's count, taken by `insert` with `Arc::into_raw`.
            Arc::from_raw(this)
        };
        drop(shard);
        drop(listed);
    }

    /// Every registered task, by id.
    pub(crate) fn snapshot(&self) -> Vec<Arc<Task>> {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.lock();
            all.reserve(shard.len);
            // SAFETY: under the shard's lock, every task on the list is
            // alive (the list holds a count of it).
            unsafe { each(&shard, |t| all.push(arc_of(t))) };
        }
        all.sort_by_key(|t| t.id);
        all
    }

    /// The registered task with this id.
    pub(crate) fn find(&self, id: u64) -> Option<Arc<Task>> {
        self.shards.iter().find_map(|shard| {
            let shard = shard.lock();
            let mut found = None;
            // SAFETY: as in `snapshot`.
            unsafe {
                each(&shard, |t| {
                    if found.is_none() && (*t).id == id {
                        found = Some(arc_of(t));
                    }
                })
            };
            found
        })
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
unsafe fn each(shard: &Shard, mut f: impl FnMut(*const Task)) {
    let mut t = shard.head;
    while !t.is_null() {
        f(t);
        // SAFETY: listed, so alive; under the lock (the caller's contract).
        t = unsafe { (*link_of(t)).next };
    }
}

/// A new `Arc` of a listed task.
///
/// # Safety
/// `t` is on a shard's list, whose lock the caller holds.
unsafe fn arc_of(t: *const Task) -> Arc<Task> {
    // SAFETY: the list holds a strong count of `t` (from `Arc::into_raw`),
    // which cannot go while the caller holds the lock: the count raised
    // here is a new one, owned by the `Arc` made from it.
    unsafe {
        Arc::increment_strong_count(t);
        Arc::from_raw(t)
    }
}
