//! A table of task-local values (see `task_local`): a green thread's, kept
//! in its task header, or a plain thread's; values made on first use, at
//! fixed addresses until the table is cleared.
//!
//! Owns: `Locals`. Knows no task and no worker: a building block below the
//! task header.

use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

use crate::diag::diag_error;

/// Rounds of drops when a table is cleared: a destructor that uses a key
/// makes a new value, dropped in the next round; values still made after
/// this many rounds (a destructor that recreates its own key) are leaked,
/// and logged.
const CLEAR_ROUNDS: usize = 8;

/// One value of a table: the pointer of a `Box<T>` and the function that
/// drops it as one.
struct Value {
    ptr: NonNull<()>,
    drop: unsafe fn(NonNull<()>),
}

/// Drop the `Box<T>` whose pointer is `p`.
///
/// # Safety
/// `p` came from `Box::<T>::into_raw` and is dropped once.
unsafe fn drop_boxed<T>(p: NonNull<()>) {
    // SAFETY: the caller's contract.
    drop(unsafe { Box::from_raw(p.cast::<T>().as_ptr()) });
}

/// A holder's values, by key index: null until its first value. Only its
/// holder's thread touches it (see the `Send`/`Sync` below), and a value,
/// once made, stays at its address until the table is cleared, so the
/// reference `with` hands out stays valid while the table grows.
/// Dropping the table without [`clear`](Locals::clear) leaks its values
/// (a green thread whose stack never finished unwinding may still point
/// at them).
pub(crate) struct Locals(UnsafeCell<Option<Box<Table>>>);

/// The values, by key index (boxed in `Locals`: a task that uses none
/// carries one pointer).
#[derive(Default)]
struct Table(Vec<Option<Value>>);

// SAFETY: a green thread's table is used only by that green thread, which
// never leaves the worker thread it started on, and cleared by its own
// body, on that thread, before the task finishes; another thread that
// holds the task (its handle, a waker) never reaches the table, and
// dropping it there frees only the table, never a value (see `Locals`).
// A plain thread's table is in a `thread_local!`.
unsafe impl Send for Locals {}
// SAFETY: as for `Send`: no two threads ever reach one table.
unsafe impl Sync for Locals {}

impl Locals {
    pub(crate) const fn new() -> Locals {
        Locals(UnsafeCell::new(None))
    }

    /// Whether it holds no value (and no table).
    pub(crate) fn is_empty(&mut self) -> bool {
        self.0.get_mut().is_none()
    }

    /// The value at `index`, made by `init` if there is none; `T` is the
    /// type of the key with that index.
    pub(crate) fn get_or_init<T: 'static>(&self, index: usize, init: fn() -> T) -> &T {
        if let Some(v) = self.get(index) {
            return v;
        }
        // Made with no reference into the table alive: `init` may use
        // other keys, or this one.
        let made = NonNull::from(Box::leak(Box::new(init()))).cast::<()>();
        let value = Value {
            ptr: made,
            drop: drop_boxed::<T>,
        };
        // SAFETY: only this thread reaches the table (see `Locals`), and no
        // reference into the vector is alive here (`get` returned, `init`
        // is done; the values' references point into their own boxes).
        let table = unsafe { &mut *self.0.get() }.get_or_insert_with(Box::default);
        let table = &mut table.0;
        if table.len() <= index {
            table.resize_with(index + 1, || None);
        }
        match &table[index] {
            // `init` used this key itself: the value it made stays.
            Some(first) => {
                let first = first.ptr;
                // SAFETY: `made` came from `Box::into_raw` (`leak`) of a
                // `T` just now and is in no table.
                unsafe { drop_boxed::<T>(made) };
                // SAFETY: the value at `index` is a `T` (one index per
                // key, one `T` per key), alive until the table is cleared,
                // which cannot happen while its holder runs this call.
                unsafe { first.cast::<T>().as_ref() }
            }
            None => {
                table[index] = Some(value);
                // SAFETY: as just above.
                unsafe { made.cast::<T>().as_ref() }
            }
        }
    }

    /// The value at `index`, if made.
    fn get<T: 'static>(&self, index: usize) -> Option<&T> {
        // SAFETY: only this thread reaches the table; the shared reference
        // ends with this statement (no `&mut` of it is alive: those live
        // only inside `get_or_init` and `clear`, which call nothing that
        // could get here meanwhile).
        let ptr = unsafe { &*self.0.get() }
            .as_ref()?
            .0
            .get(index)?
            .as_ref()?
            .ptr;
        // SAFETY: as in `get_or_init`.
        Some(unsafe { ptr.cast::<T>().as_ref() })
    }

    /// Drop every value, on its holder's thread, when nothing can use them
    /// any more (a green thread's closure returned or unwound; a plain
    /// thread's locals are destroyed). Free when it never held one.
    #[inline]
    pub(crate) fn clear(&self) {
        // SAFETY: only this thread reaches the table; a read of the
        // pointer, no reference kept.
        if unsafe { (*self.0.get()).is_some() } {
            self.clear_values();
        }
    }

    #[cold]
    #[inline(never)]
    fn clear_values(&self) {
        for _ in 0..CLEAR_ROUNDS {
            // SAFETY: only this thread reaches the table; no reference
            // into it is alive (the holder is done with its values).
            let Some(table) = (unsafe { &mut *self.0.get() }).take() else {
                return;
            };
            // The table is out: a destructor that uses a key makes a new
            // value in a new table, dropped in the next round.
            for value in table.0.into_iter().flatten() {
                // SAFETY: made by `get_or_init` from a `Box` of the type
                // `drop` was instantiated with, and dropped once (taken
                // out of the table).
                let dropped = catch_unwind(AssertUnwindSafe(|| unsafe { (value.drop)(value.ptr) }));
                if dropped.is_err() {
                    diag_error!(
                        "a task-local value's destructor panicked; the others are still dropped"
                    );
                }
            }
        }
        // SAFETY: as above.
        if unsafe { &mut *self.0.get() }.take().is_some() {
            diag_error!(
                "task-local destructors kept making new values after {CLEAR_ROUNDS} rounds; the last ones are leaked"
            );
        }
    }
}
