//! Every green thread a runtime knows of, for [`dump`](super::dump) and the
//! watchdog: sharded by the worker that spawned it (one more shard for
//! spawns from outside), so spawns on different workers do not contend.
//!
//! Owns: [`Registry`]. Uses the task's `shard` and `registry_key`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;
use slab::Slab;

use super::task::Task;

/// The runtime's live tasks.
pub(crate) struct Registry {
    shards: Box<[Mutex<Slab<Arc<Task>>>]>,
}

impl Registry {
    pub(crate) fn new(shards: usize) -> Registry {
        Registry {
            shards: (0..shards).map(|_| Mutex::new(Slab::new())).collect(),
        }
    }

    pub(crate) fn insert(&self, task: &Arc<Task>) {
        let shard = task.shard.min(self.shards.len() - 1);
        let key = self.shards[shard].lock().insert(Arc::clone(task));
        task.registry_key.store(key, Ordering::Release);
    }

    pub(crate) fn remove(&self, task: &Task) {
        let shard = task.shard.min(self.shards.len() - 1);
        let key = task.registry_key.load(Ordering::Acquire);
        let removed = {
            let mut slab = self.shards[shard].lock();
            match slab.get(key) {
                Some(t) if t.id == task.id => Some(slab.remove(key)),
                _ => None,
            }
        };
        drop(removed);
    }

    /// Every registered task, shard by shard.
    pub(crate) fn snapshot(&self) -> Vec<Arc<Task>> {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            all.extend(shard.lock().iter().map(|(_, t)| Arc::clone(t)));
        }
        all.sort_by_key(|t| t.id);
        all
    }

    pub(crate) fn find(&self, id: u64) -> Option<Arc<Task>> {
        self.shards.iter().find_map(|shard| {
            shard
                .lock()
                .iter()
                .find(|(_, t)| t.id == id)
                .map(|(_, t)| Arc::clone(t))
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }
}
