//! What a runtime remembers of deadlocks: whether the builder asked to fail
//! the root `block_on` calls on one, the fingerprint of the last one
//! reported (so that a worker waking and sleeping again does not report
//! the same one twice), the root calls that may be failed, and the
//! deadlock that failed them.
//!
//! Owns: [`DeadlockLatch`]. Uses nothing of the hub but the [`Dump`] it
//! keeps for the failed calls (a root is its id and a closure that cancels
//! it).

use parking_lot::Mutex;

use super::stack_dump::Dump;

/// Cancels a root green thread (made by `Runtime::block_on`).
type Cancel = Box<dyn Fn() + Send + Sync>;

/// What a root call failed by a deadlock returns: the green threads of the
/// deadlock, as the dump shows them, and their stacks.
pub(crate) type Failed = (Vec<String>, Box<Dump>);

/// What a runtime remembers of deadlocks (see the module doc).
pub(crate) struct DeadlockLatch {
    /// `Builder::fail_on_deadlock`.
    pub(crate) fail: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    reported: Option<u64>,
    roots: Vec<(u64, Cancel)>,
    /// The ids of the root calls failed, the green threads named and
    /// their stacks.
    failed: Vec<(u64, Failed)>,
}

impl DeadlockLatch {
    pub(crate) fn new(fail: bool) -> DeadlockLatch {
        DeadlockLatch {
            fail,
            state: Mutex::new(State::default()),
        }
    }

    /// Whether a deadlock with `fingerprint` is new (not the last one
    /// reported); it is the last one reported from now on.
    pub(crate) fn is_new(&self, fingerprint: u64) -> bool {
        self.state.lock().reported.replace(fingerprint) != Some(fingerprint)
    }

    /// A root call (`Runtime::block_on`) waits for green thread `id`.
    pub(crate) fn add_root(&self, id: u64, cancel: Cancel) {
        self.state.lock().roots.push((id, cancel));
    }

    /// Whether a root call waits (a runtime driven only through handles
    /// from plain threads has none).
    pub(crate) fn has_roots(&self) -> bool {
        !self.state.lock().roots.is_empty()
    }

    /// The root call for `id` returned: the green threads of the deadlock
    /// that failed it and their stacks, if one did.
    pub(crate) fn remove_root(&self, id: u64) -> Option<Failed> {
        let mut st = self.state.lock();
        st.roots.retain(|(r, _)| *r != id);
        let at = st.failed.iter().position(|(r, _)| *r == id)?;
        Some(st.failed.swap_remove(at).1)
    }

    /// Fail the root calls whose green threads are among `ids` (every one
    /// of them parked in the deadlock), naming `green_threads`, with their
    /// `stacks`.
    pub(crate) fn fail_roots(&self, ids: &[u64], green_threads: &[String], stacks: &Dump) {
        let st = &mut *self.state.lock();
        for (id, cancel) in &st.roots {
            if ids.contains(id) {
                st.failed
                    .push((*id, (green_threads.to_vec(), Box::new(stacks.clone()))));
                cancel();
            }
        }
    }
}

impl std::fmt::Debug for DeadlockLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeadlockLatch")
            .field("fail", &self.fail)
            .finish_non_exhaustive()
    }
}
