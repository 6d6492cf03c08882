//! A worker's pool of spent tasks ([`TaskPool`]), whose allocations its
//! spawns reuse, and the proof that a task may be reused.
//!
//! Owns: [`TaskPool`], its two bounds ([`TaskPool::KEEP`] while the
//! worker is busy, [`TaskPool::KEEP_ASLEEP`] across its sleeps) and
//! [`Spent`]. Uses the task header's `is_spent` and `renew`.

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
/// and no drop of its header. At most [`TaskPool::KEEP`] are kept while
/// the worker is busy (a burst of that many spawns joined before the next
/// burst reuses them all), and at most [`TaskPool::KEEP_ASLEEP`] once it
/// goes to sleep in its poller ([`trim`](Self::trim)); each holds its
/// runtime's `Shared`, which is that worker's runtime (only tasks of it
/// are given back), so the pool lives and dies with the worker.
///
/// Its memory is bounded by [`TaskPool::KEEP`] allocations of a task
/// (at most [`TASK_BYTES`] each, with its name, if it had one, until the
/// allocation is reused) and their list (a pointer each): 8 MiB per
/// worker at most while busy, 32 KiB across a sleep.
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

/// Bytes of one task's allocation at most (its header, body and `Arc`
/// counts; the build fails when a task outgrows it), for the pool's bound.
pub(crate) const TASK_BYTES: usize = 512;

const _: () = assert!(
    2 * std::mem::size_of::<usize>() + std::mem::size_of::<Task>() <= TASK_BYTES,
    "a task outgrew TASK_BYTES: raise it and the bound TaskPool's doc states"
);

impl TaskPool {
    /// Spent tasks kept at most while the worker is busy. It trades
    /// memory (up to `KEEP` × [`TASK_BYTES`], 8 MiB, per worker until it
    /// next sleeps) for a `malloc` and a `free` per task of a burst:
    /// spawning a batch of N tasks and then joining them all allocates
    /// afresh the N - `KEEP` beyond it, each batch again (some 450
    /// instructions a task). Re-measure after changing it: instructions
    /// per task of `hub_hot_loops --op spawn-batch` under callgrind, and
    /// the `spawn-join-batch` row of `benches/peers/run.sh hub
    /// --callgrind` beside tokio.
    pub(crate) const KEEP: usize = 16_384;

    /// Spent tasks kept at most across a sleep of the worker: what a
    /// spawn + join one at a time, or a few at once, reuses after a pause.
    /// Larger keeps more memory (up to `KEEP_ASLEEP` × [`TASK_BYTES`]) in
    /// an idle runtime; smaller makes the first spawns after a pause
    /// allocate.
    pub(crate) const KEEP_ASLEEP: usize = 64;

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

    /// Drop the tasks kept beyond [`KEEP_ASLEEP`](Self::KEEP_ASLEEP): the
    /// worker is about to sleep. Called from the idle path only, never
    /// while a green thread runs (a task's drop runs no user code: spent,
    /// its value, closure and locals are gone).
    pub(crate) fn trim(&self) {
        let mut spent = self.spent.borrow_mut();
        if spent.len() <= Self::KEEP_ASLEEP {
            return;
        }
        let extra = spent.split_off(Self::KEEP_ASLEEP);
        spent.shrink_to(Self::KEEP_ASLEEP);
        drop(spent);
        drop(extra);
    }

    /// How many spent tasks are kept now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.spent.borrow().len()
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::TaskPool;
    use crate::hub::{self, worker, Runtime};

    /// A burst's spent tasks are kept (up to `KEEP`) for the next burst,
    /// and all but `KEEP_ASLEEP` go when the worker sleeps.
    #[test]
    fn a_burst_is_kept_until_the_worker_sleeps() {
        let rt = Runtime::builder()
            .worker_threads(1)
            .watchdog(None)
            .build()
            .expect("a runtime");
        rt.block_on(|| {
            let pool_len = || worker::current().expect("a worker").pool.len();
            let burst = 1_000;
            let handles: Vec<_> = (0..burst).map(|i| hub::spawn(move || i)).collect();
            for (i, h) in handles.into_iter().enumerate() {
                assert_eq!(h.join().unwrap(), i);
            }
            assert_eq!(pool_len(), burst, "every spent task of the burst is kept");
            // Made again in the kept allocations: the pool empties and
            // fills back.
            let again: Vec<_> = (0..burst).map(|i| hub::spawn(move || i * 2)).collect();
            assert_eq!(pool_len(), 0);
            for (i, h) in again.into_iter().enumerate() {
                assert_eq!(h.join().unwrap(), i * 2);
            }
            assert_eq!(pool_len(), burst);
            // The only green thread sleeps: the worker sleeps in its poller.
            hub::sleep(Duration::from_millis(50));
            assert!(pool_len() <= TaskPool::KEEP_ASLEEP, "{}", pool_len());
        })
        .unwrap();
    }
}
