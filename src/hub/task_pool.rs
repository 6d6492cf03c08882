//! A worker's pool of spent tasks ([`TaskPool`]), whose allocations its
//! spawns reuse, and the proof that a task may be reused.
//!
//! Owns: [`TaskPool`] and [`Spent`]. Uses the task header's `is_spent` and
//! `renew`.

use std::cell::RefCell;
use std::fmt;
use std::panic::Location;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

use super::task_body::Body;
use super::task_header::Task;

/// A worker's spent tasks (finished, their values taken, nothing else
/// referring to them), kept so that a spawn on that worker makes its task
/// in one of their allocations instead of a new one: a spawn + join then
/// pays no `malloc` and `free` of the task
/// and no drop of its header. At most [`TaskPool::KEEP`] are kept; each
/// holds its runtime's `Shared`, which is that worker's runtime (only
/// tasks of it are given back), so the pool lives and dies with the
/// worker.
pub(crate) struct TaskPool {
    spent: RefCell<Vec<Spent>>,
}

/// A spent task of a [`TaskPool`]: its `Arc` was proven the only
/// reference (`is_only_and_spent`) when the pool took it, and no reference is
/// made from it while the pool keeps it, so it is still the only one.
pub(crate) struct Spent(Arc<Task>);

impl Spent {
    /// The task made new (see [`Task::renew`]) with these, in its
    /// allocation: no second proof that it is unique.
    pub(crate) fn renew(
        self,
        name: Option<Box<str>>,
        site: &'static Location<'static>,
        stack_size: usize,
        shard: usize,
        body: Body<Task>,
    ) -> Arc<Task> {
        let raw = Arc::into_raw(self.0).cast_mut();
        // SAFETY: `raw` is the only reference to the task (see `Spent`):
        // the pool proved it (`is_only_and_spent`) and cloned nothing of it
        // since, a task has no `Weak` (nothing downgrades one) and is on
        // no list that could reach it (it left the registry when it
        // finished), so this `&mut` aliases nothing. `Arc::into_raw`'s
        // pointer is derived from the allocation's own pointer, so it may
        // write the task; `from_raw` takes the one count back.
        unsafe {
            (*raw).renew(name, site, stack_size, shard, body);
            Arc::from_raw(raw)
        }
    }
}

impl TaskPool {
    /// Spent tasks kept at most.
    const KEEP: usize = 64;

    pub(crate) fn new() -> TaskPool {
        TaskPool {
            spent: RefCell::new(Vec::new()),
        }
    }

    /// A spent task, if one is kept; only the caller refers to it. Inline:
    /// a spawn is instantiated in its caller's crate.
    #[inline]
    pub(crate) fn take(&self) -> Option<Spent> {
        self.spent.borrow_mut().pop()
    }

    /// Keep `task` for a later spawn if it is spent and `task` is its only
    /// reference; else drop it (after the pool's borrow: its value's
    /// destructor may spawn or join). Inline: a join's last step.
    #[inline]
    pub(crate) fn give(&self, task: Arc<Task>) {
        let mut spent = self.spent.borrow_mut();
        if spent.len() < Self::KEEP && is_only_and_spent(&task) {
            spent.push(Spent(task));
            return;
        }
        drop(spent);
        drop(task);
    }

    /// Drop every task kept (a worker's teardown).
    pub(crate) fn clear(&self) {
        drop(self.spent.take());
    }
}

impl fmt::Debug for TaskPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskPool")
            .field("spent", &self.spent.borrow().len())
            .finish()
    }
}

/// Whether `task` is the only reference to its task, and that task is
/// spent (see [`Task::is_spent`]). What `Arc::get_mut` proves, without its
/// `cmpxchg` of the weak count: that guards against a `Weak` upgraded
/// meanwhile, and a task never has one (nothing downgrades a task's `Arc`;
/// `Task::allocate`'s `new_cyclic` ignores the one it is lent).
#[inline]
fn is_only_and_spent(task: &Arc<Task>) -> bool {
    if Arc::strong_count(task) != 1 {
        return false;
    }
    // Pairs with the `Release` decrement of every count dropped before on
    // any thread: what they did with the task happens before what follows.
    fence(Ordering::Acquire);
    let raw = Arc::as_ptr(task).cast_mut();
    // SAFETY: `task` holds the only strong count and there is no `Weak`,
    // so no other reference exists or can be made: a new one is cloned
    // from an existing `Arc` (none other), or from a worker's `current`
    // (set only while the task's `live` entry, a count, exists); the
    // registry makes none (its readers only borrow a listed task under the
    // lock, and a spent task is done, so it left its shard).
    // The caller holds `task` for the whole call, so this `&mut` aliases
    // nothing; `Arc::as_ptr`'s pointer is the allocation's, so it may write.
    unsafe { (*raw).is_spent() }
}
