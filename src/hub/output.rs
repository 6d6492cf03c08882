//! [`Output`]: a finished green thread's value, kept inside its task with
//! its type erased: in place when it fits in [`WORDS`] words, boxed
//! otherwise, so that a task with a small result allocates nothing for it.
//!
//! Owns the storage and the handover between the task's body, which puts
//! the value, and its [`JoinHandle`](super::JoinHandle), which takes it, or
//! drops it when the handle goes first. Uses the crate's closure store
//! ([`Erased`], which keeps a greenlet's closure too) and nothing else;
//! the task holds one under its lock, and the typed `Slot<T>` token of
//! `task.rs` guarantees that every put and take of one output use one type.

use std::thread::{self, ThreadId};

use crate::erased::Erased;

/// Words of value kept in place (a number, a pair of them, an `Arc`; a
/// `String` is boxed); each word more makes every task a word larger.
const WORDS: usize = 2;

type Storage = Erased<WORDS>;

/// A task's value, once its body put it (see the module doc).
pub(crate) struct Output {
    storage: Storage,
    /// Drops what `storage` holds; `None`: it holds nothing.
    drop: Option<unsafe fn(*mut Storage)>,
    /// Whether its `JoinHandle` may still take the value: cleared when the
    /// handle goes, after which a value put is handed back to be dropped.
    wanted: bool,
    /// The thread a value that need not be `Send` (a `spawn_local` task's)
    /// was put on; only that thread may drop it.
    local_to: Option<ThreadId>,
}

// SAFETY: a value put with `put` is `Send` (the caller's contract). One put
// with `put_local` may not be, and is only ever reached on the thread that
// put it: its `JoinHandle` is not `Send` either (its `Slot<T>` token carries
// `T`'s auto traits) and stays there, taking the value or, when it goes,
// dropping it there; a value put after that is handed back to the putting
// thread; and `Drop` leaks rather than drops such a value on another thread
// (a handle that was leaked). The storage is otherwise plain memory.
unsafe impl Send for Output {}
// SAFETY: as for `Send`: shared access is through the task's lock, and the
// value is only read, taken or dropped under the rules above.
unsafe impl Sync for Output {}

impl Output {
    /// Nothing yet, wanted by its handle.
    pub(crate) const fn new() -> Output {
        Output {
            storage: Storage::empty(),
            drop: None,
            wanted: true,
            local_to: None,
        }
    }

    /// Whether it holds no value (none put, or taken).
    pub(crate) fn is_empty(&self) -> bool {
        self.drop.is_none()
    }

    /// Wanted again, for a new task in a spent one's allocation (it holds
    /// no value: see `Task::is_spent`).
    pub(crate) fn renew(&mut self) {
        debug_assert!(self.is_empty(), "a renewed task's output holds nothing");
        self.wanted = true;
        self.local_to = None;
    }

    /// Put the task's value (once, from its body); hands it back if its
    /// handle went already, for the caller to drop after the lock.
    ///
    /// # Safety
    /// Every put and take of this output use the same `T`.
    pub(crate) unsafe fn put<T: Send>(&mut self, value: T) -> Option<T> {
        // SAFETY: guaranteed by the caller.
        unsafe { self.store(value) }
    }

    /// [`put`](Self::put) for a value that need not be `Send`: only this
    /// thread will drop it.
    ///
    /// # Safety
    /// As for `put`, and the output's `JoinHandle` (which takes the value)
    /// is not `Send` unless `T` is.
    pub(crate) unsafe fn put_local<T>(&mut self, value: T) -> Option<T> {
        if !self.wanted {
            return Some(value);
        }
        self.local_to = Some(thread::current().id());
        // SAFETY: guaranteed by the caller.
        unsafe { self.store(value) }
    }

    /// # Safety
    /// As for [`put`](Self::put).
    unsafe fn store<T>(&mut self, value: T) -> Option<T> {
        if !self.wanted {
            return Some(value);
        }
        debug_assert!(self.drop.is_none(), "a task's value is put once");
        self.storage.put(value);
        self.drop = Some(Storage::drop_value::<T>);
        None
    }

    /// Take the value, if it was put and not taken yet.
    ///
    /// # Safety
    /// As for [`put`](Self::put).
    pub(crate) unsafe fn take<T>(&mut self) -> Option<T> {
        self.drop.take()?;
        self.local_to = None;
        // SAFETY: the storage holds a `T` (the caller's contract); with
        // `drop` cleared it is taken once.
        Some(unsafe { Storage::take::<T>(&mut self.storage) })
    }

    /// The handle goes: a value put later is handed back to its putter;
    /// one put already is returned, for the caller to drop after the lock.
    ///
    /// # Safety
    /// As for [`put`](Self::put).
    pub(crate) unsafe fn abandon<T>(&mut self) -> Option<T> {
        self.wanted = false;
        // SAFETY: guaranteed by the caller.
        unsafe { self.take() }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        let Some(drop) = self.drop.take() else {
            return;
        };
        if self
            .local_to
            .is_some_and(|owner| owner != thread::current().id())
        {
            // A value that need not be Send, whose handle was leaked: it
            // cannot be dropped on this thread, so it is leaked too.
            return;
        }
        // SAFETY: the storage holds what `drop` expects (set together in
        // `store`), not taken (taking clears `drop`).
        unsafe { drop(&mut self.storage) }
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;
    use std::sync::Arc;

    use super::*;

    #[test]
    fn small_values_in_place_large_ones_boxed_each_taken_once() {
        assert!(Storage::in_place::<(u64, u64)>() && !Storage::in_place::<[u64; 3]>());
        let mut small = Output::new();
        // SAFETY: one type per output, in each block below.
        unsafe {
            assert!(small.put((1u64, 2u64)).is_none());
            assert_eq!(small.take::<(u64, u64)>(), Some((1, 2)));
            assert_eq!(small.take::<(u64, u64)>(), None);
        }
        let mut large = Output::new();
        // SAFETY: as above.
        unsafe {
            assert!(large.put([7u64; 5]).is_none());
            assert_eq!(large.take::<[u64; 5]>(), Some([7; 5]));
        }
    }

    #[test]
    fn a_value_is_dropped_once_whoever_goes_first() {
        let drops = Arc::new(());
        // Never taken: dropped with the output.
        let mut kept = Output::new();
        // SAFETY: one type per output, in each block below.
        unsafe { assert!(kept.put(Arc::clone(&drops)).is_none()) };
        let mut boxed = Output::new();
        // SAFETY: as above.
        unsafe {
            assert!(boxed
                .put([Arc::clone(&drops), Arc::clone(&drops), Arc::clone(&drops)])
                .is_none())
        };
        assert_eq!(Arc::strong_count(&drops), 5);
        drop((kept, boxed));
        assert_eq!(Arc::strong_count(&drops), 1);
        // The handle goes first: the value put later comes back.
        let mut late = Output::new();
        // SAFETY: as above.
        unsafe {
            assert!(late.abandon::<Arc<()>>().is_none());
            let back = late.put(Arc::clone(&drops));
            assert!(back.is_some(), "nobody wants it: handed back");
        }
        assert_eq!(Arc::strong_count(&drops), 1);
        // The handle goes after the value was put: it gets it to drop.
        let mut early = Output::new();
        // SAFETY: as above.
        unsafe {
            assert!(early.put(Arc::clone(&drops)).is_none());
            assert!(early.abandon::<Arc<()>>().is_some());
        }
        drop(early);
        assert_eq!(Arc::strong_count(&drops), 1);
    }

    #[test]
    fn a_local_value_is_never_dropped_on_another_thread() {
        let rc = Rc::new(());
        let mut output = Output::new();
        // SAFETY: one type; the test plays the handle, kept on this thread.
        unsafe { assert!(output.put_local(Rc::clone(&rc)).is_none()) };
        // What a leaked handle leaves: the output dropped elsewhere.
        std::thread::spawn(move || drop(output)).join().unwrap();
        assert_eq!(Rc::strong_count(&rc), 2, "leaked, not dropped there");
        let mut here = Output::new();
        // SAFETY: as above.
        unsafe { assert!(here.put_local(Rc::clone(&rc)).is_none()) };
        drop(here);
        assert_eq!(Rc::strong_count(&rc), 2, "dropped on its own thread");
    }
}
