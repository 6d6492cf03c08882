//! An unstarted task's closure ([`Body`]), kept inside its task with its
//! type erased: in place when it fits in [`WORDS`] words, boxed otherwise,
//! so that spawning a task with a small closure allocates only the task.
//!
//! Owns the storage and its vtable. Only the holder of the task's token
//! (`unstarted::NotStarted`, or the `Launch` made of it) runs or drops the
//! closure. Uses the crate's closure store ([`Erased`], which keeps a
//! greenlet's closure too), and nothing of the hub: the closure's argument
//! is a type parameter (the task, in the task header that holds the body),
//! so that this file sits below the header.

use std::cell::UnsafeCell;
use std::ptr;

use crate::erased::Erased;

/// Words of closure kept in place (a closure capturing a few numbers,
/// handles or `Arc`s); each word more makes every task a word larger.
const WORDS: usize = 3;

type Storage = Erased<WORDS>;

struct Vtable<T> {
    /// Moves the closure out of the storage and calls it.
    call: unsafe fn(*mut Storage, &T),
    /// Drops the closure in the storage without calling it.
    drop: unsafe fn(*mut Storage),
}

/// # Safety
/// `storage` holds a `G` put there, which the call consumes.
unsafe fn call_stored<T, G: FnOnce(&T)>(storage: *mut Storage, task: &T) {
    // SAFETY: guaranteed by the caller; moved out exactly once, first.
    let g = unsafe { Storage::take::<G>(storage) };
    g(task);
}

struct Stored<T: 'static> {
    storage: Storage,
    /// How to call or drop what `storage` holds; `None`: it holds nothing.
    vtable: Option<&'static Vtable<T>>,
}

/// A task's closure until it starts (see the module doc), called with the
/// task, a `&T`.
pub(crate) struct Body<T: 'static> {
    cell: UnsafeCell<Stored<T>>,
}

// SAFETY: the storage is only reached through the task's `NotStarted`
// token, which is unique (made once, with the task, and consumed by
// running, dropping or giving up the closure), so never from two threads
// at once; a closure that is not `Send` is stored only by `Body::local`,
// whose token is not `Send` either and so runs or drops it on the thread
// that made it. Left unconsumed (a leaked token), the closure is leaked:
// `Body` has no destructor.
unsafe impl<T> Sync for Body<T> {}
// SAFETY: as for `Sync`.
unsafe impl<T> Send for Body<T> {}

impl<T> Body<T> {
    /// The body of a `Send` closure `g`, run on whichever thread starts it.
    pub(crate) fn new<G: FnOnce(&T) + Send + 'static>(g: G) -> Body<T> {
        Body::store(g)
    }

    /// The body of a closure that need not be `Send`.
    ///
    /// # Safety
    /// Its token is a [`LocalUnstarted`](super::unstarted::LocalUnstarted)
    /// (which stays on this thread).
    pub(crate) unsafe fn local<G: FnOnce(&T) + 'static>(g: G) -> Body<T> {
        Body::store(g)
    }

    fn store<G: FnOnce(&T) + 'static>(g: G) -> Body<T> {
        let mut storage = Storage::empty();
        storage.put(g);
        Body {
            cell: UnsafeCell::new(Stored {
                storage,
                vtable: Some(
                    const {
                        &Vtable {
                            call: call_stored::<T, G>,
                            drop: Storage::drop_value::<G>,
                        }
                    },
                ),
            }),
        }
    }

    /// Whether it holds no closure (run, dropped or given up). `&mut`: no
    /// token can be using it.
    pub(crate) fn is_empty(&mut self) -> bool {
        self.cell.get_mut().vtable.is_none()
    }

    /// Take the vtable, leaving nothing to run or drop.
    ///
    /// # Safety
    /// The caller holds the task's token; the storage is consumed with the
    /// vtable returned (called or dropped) before anything else reads it.
    unsafe fn take(&self) -> Option<(&'static Vtable<T>, *mut Storage)> {
        let stored = self.cell.get();
        // SAFETY: only the token's holder (the caller) reaches the cell.
        unsafe {
            let vtable = (*stored).vtable.take()?;
            Some((vtable, ptr::addr_of_mut!((*stored).storage)))
        }
    }

    /// Run the closure, if there is one, with `task` (its task).
    ///
    /// # Safety
    /// The caller consumed the task's token just now.
    pub(crate) unsafe fn run(&self, task: &T) {
        // SAFETY: the token was the only way to the body (the caller's
        // contract); its vtable and storage are used once, here.
        if let Some((vtable, storage)) = unsafe { self.take() } {
            // SAFETY: the storage holds what the vtable expects (set
            // together in `Body::store`); with the vtable taken it is
            // consumed exactly once.
            unsafe { (vtable.call)(storage, task) };
        }
    }

    /// Drop the closure, if there is one; whether there was.
    ///
    /// # Safety
    /// The caller holds the task's token, or consumed it just now.
    pub(crate) unsafe fn drop_closure(&self) -> bool {
        // SAFETY: guaranteed by the caller.
        match unsafe { self.take() } {
            Some((vtable, storage)) => {
                // SAFETY: as in `NotStarted::run`, dropped instead of called.
                unsafe { (vtable.drop)(storage) };
                true
            }
            None => false,
        }
    }
}
